/* The pass, run on the chip by the rules of docs/protocol.md ("A pass"), which are
 * the host's pass engine (shuffler/engine.py): count cards at the beam's cleared edge
 * and set the diverter for the next; a beam blocked for jam_ms is a jam, no edge for
 * misfeed_ms a misfeed (or low battery, when the battery sags under stall_mv); each
 * is retried (reverse, ramp again) up to ``retries`` times per card, then ends the
 * pass. A STOP, whatever id it names, ends the pass.
 *
 * Time: one clock, microseconds (hw_us(), wrapping at 2^32 us = 71.6 min), and only
 * differences of it (unsigned subtraction): a pass may span any wrap. The longest
 * interval measured is max_pass_ms (at most 3,600 s < 2^32 us). */
#ifndef SHUFFLER_PASS_H
#define SHUFFLER_PASS_H

#include <stdbool.h>
#include <stdint.h>

struct limits {  /* from CONFIG */
    uint16_t jam_ms, misfeed_ms, reverse_ms, settle_ms, card_interval_ms, min_blocked_us,
        min_gap_us, stall_mv, soft_start_ms;
    uint8_t retries;
    uint32_t max_pass_ms;
};

struct pass_report {
    uint16_t pass_id, counted, left, right, min_mv, fault_card;
    uint32_t ms;
    uint8_t tray_empty, retries, fault;
};

extern struct limits limits;

/* labels: one bit per card, LSB first; copied, and wiped when the pass ends.
 * ``now`` is hw_us() at the call. */
void pass_start(uint16_t pass_id, const uint8_t *labels, uint16_t cards, uint32_t now);
void pass_tick(uint32_t now);
void pass_end(uint8_t fault, uint32_t now);   /* silence, a new session */
void pass_stop(uint16_t stop_id, uint32_t now); /* any STOP: whatever runs ends STOPPED */
/* the host silent past REDRIVE_QUIET_MS (main.c, every tick): a retry's reverse or ramp
 * waits, the motor off, until it is heard again (or the silence rule ends the pass) */
void pass_host_quiet(bool quiet);
bool pass_running(void);
uint16_t pass_id(void);                       /* 0 when none runs */

/* what the pass tells the rest of the firmware */
void pass_on_card(uint16_t pass_id, uint16_t counted, uint16_t left, uint16_t right);
void pass_on_done(const struct pass_report *report);

#endif
