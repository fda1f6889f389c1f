#include "link.h"

#include <string.h>

#include "protocol_gen.h"
#include "uart.h"

#define MAX_FRAME (2 + MAX_PAYLOAD + 2)
#define MAX_ENCODED (MAX_FRAME + MAX_FRAME / 254 + 2)
#define QUEUE 6
#define INPUT_SLOTS (QUEUE - 2)  /* INPUT events leave room for two answers */
#define HISTORY 4                /* sequence numbers applied lately: a copy is not applied */

struct pending {
    uint8_t type, len;
    uint8_t payload[LINK_MAX_OUT];
};

static uint8_t rx[MAX_ENCODED + 1];
static uint16_t rx_len;
static bool rx_overflow;
static uint8_t applied[HISTORY]; /* the last sequence numbers applied, 0 = none */
static uint8_t applied_at;
static uint32_t last_heard;
static bool heard;
static uint16_t errors;

static struct pending queue[QUEUE];
static struct pending result;            /* the pass's PASS_DONE, when result_full */
static bool result_full, sending_result; /* sending_result: in flight is the result */
static uint8_t q_head, q_count;
static uint8_t out_seq, in_flight_seq;  /* in_flight_seq 0: nothing sent yet */
static uint16_t wait_ms;
static uint32_t sent_at;

uint16_t crc16(const uint8_t *data, uint16_t len)
{
    uint16_t crc = CRC16_INIT;
    while (len--) {
        crc ^= (uint16_t)(*data++) << 8;
        for (uint8_t i = 0; i < 8; i++)
            crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ CRC16_POLY) : (uint16_t)(crc << 1);
    }
    return crc;
}

static void count_error(void)
{
    if (errors < UINT16_MAX) errors++;
}

/* COBS-encode ``len`` bytes straight into the UART, then the delimiter (the caller
 * made sure of the room: at most len + 2 + 1 bytes for len < 254) */
static void put_cobs(const uint8_t *data, uint8_t len)
{
    uint8_t start = 0;
    for (;;) {
        uint8_t end = start;
        while (end < len && data[end] && end - start < 254) end++;
        uart_put((uint8_t)(end - start + 1));
        for (uint8_t i = start; i < end; i++) uart_put(data[i]);
        if (end - start == 254) {
            start = end;  /* a full block: no zero to skip */
            continue;
        }
        if (end == len) break;
        start = (uint8_t)(end + 1);
    }
    uart_put(0);
}

/* false, and nothing written, when the transmit buffer has no room for the frame */
static bool write_frame(uint8_t seq, uint8_t type, const uint8_t *payload, uint8_t len)
{
    uint8_t body[2 + LINK_MAX_OUT + 2];
    if (uart_room() < (uint8_t)(len + 4 + 2)) return false;
    body[0] = seq;
    body[1] = type;
    memcpy(body + 2, payload, len);
    uint16_t crc = crc16(body, (uint16_t)(len + 2));
    body[len + 2] = (uint8_t)(crc >> 8);
    body[len + 3] = (uint8_t)crc;
    put_cobs(body, (uint8_t)(len + 4));
    return true;
}

void link_send(uint8_t type, const uint8_t *payload, uint8_t len)
{
    (void)write_frame(0, type, payload, len);  /* skipped when the line is busy */
}

bool link_queue(uint8_t type, const uint8_t *payload, uint8_t len)
{
    if (len > LINK_MAX_OUT || q_count >= (type == MSG_INPUT ? INPUT_SLOTS : QUEUE)) return false;
    struct pending *p = &queue[(uint8_t)(q_head + q_count) % QUEUE];
    p->type = type;
    p->len = len;
    memcpy(p->payload, payload, len);
    q_count++;
    return true;
}

void link_result(const uint8_t *payload, uint8_t len)
{
    result.type = MSG_PASS_DONE;
    result.len = len;
    memcpy(result.payload, payload, len);
    result_full = true;
}

bool link_result_free(void) { return !result_full; }

void link_restart(void)
{
    q_count = 0;
    result_full = sending_result = false;
    in_flight_seq = 0;
    out_seq = 0;
}

static void pop(void)
{
    if (sending_result) {
        result_full = sending_result = false;
    } else {
        q_head = (uint8_t)((q_head + 1) % QUEUE);
        q_count--;
    }
    in_flight_seq = 0;
}

void link_poll(uint32_t now)
{
    if (!in_flight_seq) {
        if (!result_full && !q_count) return;
        sending_result = result_full;  /* the result goes first */
        out_seq = (uint8_t)(out_seq % 255 + 1);
        in_flight_seq = out_seq;
        wait_ms = 0;  /* not sent yet */
    } else if ((uint32_t)(now - sent_at) < wait_ms) {
        return;
    }
    struct pending *p = sending_result ? &result : &queue[q_head];
    if (!write_frame(in_flight_seq, p->type, p->payload, p->len)) return;  /* next turn */
    /* never given up: repeated every ACK_MAX_MS until the ACK, a HELLO or a reset */
    wait_ms = !wait_ms ? ACK_FIRST_MS
              : wait_ms * 2 > ACK_MAX_MS ? ACK_MAX_MS : (uint16_t)(wait_ms * 2);
    sent_at = now;
}

static int16_t cobs_decode(uint8_t *buf, uint16_t len)
{
    uint16_t in = 0, out = 0;
    while (in < len) {
        uint8_t code = buf[in];
        if (!code || in + code > len) return -1;
        for (uint8_t i = 1; i < code; i++) {
            uint8_t b = buf[in + i];
            if (!b) return -1;
            buf[out++] = b;
        }
        in += code;
        if (code < 0xFF && in < len) buf[out++] = 0;
    }
    return (int16_t)out;
}

static void frame(uint32_t now)
{
    int16_t n = cobs_decode(rx, rx_len);
    if (n < 4 || n > MAX_FRAME) {
        count_error();
        return;
    }
    uint16_t crc = (uint16_t)rx[n - 2] << 8 | rx[n - 1];
    if (crc16(rx, (uint16_t)(n - 2)) != crc) {
        count_error();
        return;
    }
    uint8_t seq = rx[0], type = rx[1], len = (uint8_t)(n - 4);
    uint8_t *payload = rx + 2;
    bool reliable = type != MSG_ACK && type != MSG_HEARTBEAT;
    /* dropped unacknowledged (the host repeats): a bad payload, or a sequence number
     * that breaks the protocol (0 on a request that must be acknowledged, or not 0 on
     * one that must not) */
    if (!link_valid(type, payload, len) || (seq != 0) != reliable) {
        count_error();
        return;
    }
    if (type == MSG_ACK) {
        if (in_flight_seq && payload[0] == in_flight_seq) pop();
        return;
    }
    last_heard = now;  /* a sign of life: any valid frame but an ACK */
    heard = true;
    if (!reliable) {
        link_on_message(type, payload, len);
        return;
    }
    bool repeat = false;
    for (uint8_t i = 0; i < HISTORY; i++) repeat |= applied[i] == seq;
    if (type == MSG_HELLO) {
        memset(applied, 0, sizeof applied);  /* a new session: always applied */
        repeat = false;
    } else if (!repeat && ((link_answers(type) && q_count >= QUEUE) ||
                           (type == MSG_PASS && result_full))) {
        /* no room to answer (or the last PASS_DONE not yet acknowledged: its ACK may be
         * on the way): not acknowledged, the host repeats it a little later */
        return;
    }
    uint8_t ack = seq;
    (void)write_frame(0, MSG_ACK, &ack, 1);  /* every copy: our last ACK may have been lost */
    if (repeat) return;  /* a copy of one applied: acknowledged again, never run twice */
    applied[applied_at] = seq;
    applied_at = (uint8_t)((applied_at + 1) % HISTORY);
    link_on_message(type, payload, len);
}

void link_rx(uint8_t byte, uint32_t now)
{
    if (byte) {
        if (rx_len < sizeof rx) rx[rx_len++] = byte;
        else rx_overflow = true;
        return;
    }
    if (rx_overflow) count_error();
    else if (rx_len) frame(now);
    memset(rx, 0, rx_len);  /* a frame leaves nothing behind once handled */
    rx_len = 0;
    rx_overflow = false;
}

uint32_t link_last_heard(void) { return last_heard; }
bool link_heard(void) { return heard; }
uint16_t link_errors(void) { return errors; }
