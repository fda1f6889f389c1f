/* The framed, acknowledged link to the host (docs/protocol.md): COBS frames with a
 * CRC-16/CCITT-FALSE, stop-and-wait retransmission, each sequence number applied once. */
#ifndef SHUFFLER_LINK_H
#define SHUFFLER_LINK_H

#include <stdbool.h>
#include <stdint.h>

#define LINK_MAX_OUT 40      /* the longest payload the MCU sends */

/* whether a frame with a good CRC keeps its declaration (type, length, ranges) */
bool link_valid(uint8_t type, const uint8_t *payload, uint8_t len);
/* called for every valid frame from the host to apply (not ACKs, not repeats); the
 * payload may be overwritten (a plan is wiped once copied) */
void link_on_message(uint8_t type, uint8_t *payload, uint8_t len);

void link_rx(uint8_t byte, uint32_t now);
void link_poll(uint32_t now);
void link_send(uint8_t type, const uint8_t *payload, uint8_t len);   /* seq 0 */
bool link_queue(uint8_t type, const uint8_t *payload, uint8_t len);  /* acknowledged */
void link_restart(void);     /* a new session: the queue is forgotten, seq restarts */
uint32_t link_last_heard(void);
bool link_heard(void);       /* any valid frame since reset */
uint16_t link_errors(void);  /* frames dropped: bad COBS, length, CRC or payload */
uint16_t crc16(const uint8_t *data, uint16_t len);

#endif
