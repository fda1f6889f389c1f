/* The framed, acknowledged link to the host (docs/protocol.md): COBS frames with a
 * CRC-16/CCITT-FALSE, stop-and-wait retransmission, each sequence number applied once.
 *
 * Nothing here waits: a frame goes out only when the transmit buffer has room for all
 * of it (else an ACK or a CARD is skipped, the host repeats or does not need it, and a
 * queued message waits for the next turn). */
#ifndef SHUFFLER_LINK_H
#define SHUFFLER_LINK_H

#include <stdbool.h>
#include <stdint.h>

#define LINK_MAX_OUT 40      /* the longest payload the MCU sends */

/* whether a frame with a good CRC keeps its declaration (type, length, ranges) */
bool link_valid(uint8_t type, const uint8_t *payload, uint8_t len);
/* whether a request of ``type`` is answered through the queue (needs a free slot) */
bool link_answers(uint8_t type);
/* called for every valid frame from the host to apply (not ACKs, not repeats); the
 * payload may be overwritten (a plan is wiped once copied) */
void link_on_message(uint8_t type, uint8_t *payload, uint8_t len);

void link_rx(uint8_t byte, uint32_t now);
void link_poll(uint32_t now);
void link_send(uint8_t type, const uint8_t *payload, uint8_t len);   /* seq 0, may be skipped */
bool link_queue(uint8_t type, const uint8_t *payload, uint8_t len);  /* acknowledged */
/* the PASS_DONE of the pass that ran: its own slot, sent before anything queued and
 * repeated until acknowledged; link_result_free() says the slot is empty */
void link_result(const uint8_t *payload, uint8_t len);
bool link_result_free(void);
void link_restart(void);     /* a new session: the queue is forgotten, seq restarts */
uint32_t link_last_heard(void);
bool link_heard(void);       /* any valid frame since reset */
uint16_t link_errors(void);  /* frames dropped: bad COBS, length, CRC, payload or seq (saturates) */
uint16_t crc16(const uint8_t *data, uint16_t len);

#endif
