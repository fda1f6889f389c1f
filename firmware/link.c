#include "link.h"

#include <string.h>

#include "protocol_gen.h"
#include "uart.h"

#define MAX_FRAME (2 + MAX_PAYLOAD + 2)
#define MAX_ENCODED (MAX_FRAME + MAX_FRAME / 254 + 2)
#define QUEUE 6

struct pending {
    uint8_t type, len;
    uint8_t payload[LINK_MAX_OUT];
};

static uint8_t rx[MAX_ENCODED + 1];
static uint16_t rx_len;
static bool rx_overflow;
static uint8_t last_in;         /* the last sequence number applied, 0 = none */
static uint32_t last_heard;
static bool heard;
static uint16_t errors;

static struct pending queue[QUEUE];
static uint8_t q_head, q_count;
static uint8_t out_seq, in_flight_seq;  /* in_flight_seq 0: the head is not sent yet */
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

/* COBS-encode ``len`` bytes straight into the UART, then the delimiter */
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

static void write_frame(uint8_t seq, uint8_t type, const uint8_t *payload, uint8_t len)
{
    uint8_t body[2 + LINK_MAX_OUT + 2];
    body[0] = seq;
    body[1] = type;
    memcpy(body + 2, payload, len);
    uint16_t crc = crc16(body, (uint16_t)(len + 2));
    body[len + 2] = (uint8_t)(crc >> 8);
    body[len + 3] = (uint8_t)crc;
    put_cobs(body, (uint8_t)(len + 4));
}

void link_send(uint8_t type, const uint8_t *payload, uint8_t len)
{
    write_frame(0, type, payload, len);
}

/* make room by dropping the newest INPUT event not yet sent; false if there is none */
static bool drop_an_input(void)
{
    for (uint8_t i = q_count; i-- > (in_flight_seq ? 1 : 0);) {
        struct pending *p = &queue[(uint8_t)(q_head + i) % QUEUE];
        if (p->type != MSG_INPUT) continue;
        for (uint8_t j = i; j + 1 < q_count; j++)
            queue[(uint8_t)(q_head + j) % QUEUE] = queue[(uint8_t)(q_head + j + 1) % QUEUE];
        q_count--;
        return true;
    }
    return false;
}

bool link_queue(uint8_t type, const uint8_t *payload, uint8_t len)
{
    if (len > LINK_MAX_OUT) return false;
    if (q_count == QUEUE && (type == MSG_INPUT || !drop_an_input())) return false;
    struct pending *p = &queue[(uint8_t)(q_head + q_count) % QUEUE];
    p->type = type;
    p->len = len;
    memcpy(p->payload, payload, len);
    q_count++;
    return true;
}

void link_restart(void)
{
    q_count = 0;
    in_flight_seq = 0;
    out_seq = 0;
}

static void pop(void)
{
    q_head = (uint8_t)((q_head + 1) % QUEUE);
    q_count--;
    in_flight_seq = 0;
}

void link_poll(uint32_t now)
{
    if (!q_count) return;
    struct pending *p = &queue[q_head];
    if (!in_flight_seq) {
        out_seq = (uint8_t)(out_seq % 255 + 1);
        in_flight_seq = out_seq;
        wait_ms = ACK_FIRST_MS;
    } else if ((uint32_t)(now - sent_at) < wait_ms) {
        return;
    } else {
        /* never given up: repeated every ACK_MAX_MS until the ACK, a HELLO or a reset */
        wait_ms = wait_ms * 2 > ACK_MAX_MS ? ACK_MAX_MS : (uint16_t)(wait_ms * 2);
    }
    write_frame(in_flight_seq, p->type, p->payload, p->len);
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
        errors++;
        return;
    }
    uint16_t crc = (uint16_t)rx[n - 2] << 8 | rx[n - 1];
    if (crc16(rx, (uint16_t)(n - 2)) != crc) {
        errors++;
        return;
    }
    uint8_t seq = rx[0], type = rx[1], len = (uint8_t)(n - 4);
    uint8_t *payload = rx + 2;
    if (!link_valid(type, payload, len)) {  /* dropped unacknowledged: the host repeats */
        errors++;
        return;
    }
    if (type == MSG_ACK) {
        if (in_flight_seq && payload[0] == in_flight_seq) pop();
        return;
    }
    last_heard = now;  /* a sign of life: any valid frame but an ACK */
    heard = true;
    if (seq) {
        uint8_t ack = seq;
        write_frame(0, MSG_ACK, &ack, 1);  /* every copy: our last ACK may have been lost */
        if (seq == last_in && type != MSG_HELLO) return;
        last_in = seq;
    }
    link_on_message(type, payload, len);
}

void link_rx(uint8_t byte, uint32_t now)
{
    if (byte) {
        if (rx_len < sizeof rx) rx[rx_len++] = byte;
        else rx_overflow = true;
        return;
    }
    if (rx_overflow) errors++;
    else if (rx_len) frame(now);
    memset(rx, 0, rx_len);  /* a frame leaves nothing behind once handled */
    rx_len = 0;
    rx_overflow = false;
}

uint32_t link_last_heard(void) { return last_heard; }
bool link_heard(void) { return heard; }
uint16_t link_errors(void) { return errors; }
