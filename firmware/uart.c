#include "uart.h"

#include <avr/interrupt.h>
#include <avr/io.h>

#define BAUD 115200UL
#define UBRR_VALUE ((F_CPU + 4 * BAUD) / (8 * BAUD) - 1) /* double speed: 16 -> 2.1 % */
#define RX_SIZE 128u  /* powers of two */
#define TX_SIZE 128u

static volatile uint8_t rx_buf[RX_SIZE], tx_buf[TX_SIZE];
static volatile uint8_t rx_head, rx_tail, tx_head, tx_tail, overruns;  /* overruns saturate */

void uart_init(void)
{
    UBRR0 = UBRR_VALUE;
    UCSR0A = _BV(U2X0);
    UCSR0C = _BV(UCSZ01) | _BV(UCSZ00);
    UCSR0B = _BV(RXEN0) | _BV(TXEN0) | _BV(RXCIE0);
}

ISR(USART_RX_vect)
{
    uint8_t byte = UDR0;
    uint8_t next = (uint8_t)((rx_head + 1) & (RX_SIZE - 1));
    if (next == rx_tail) {
        if (overruns < 255) overruns++;  /* dropped: the frame's CRC fails and the host repeats it */
        return;
    }
    rx_buf[rx_head] = byte;
    rx_head = next;
}

ISR(USART_UDRE_vect)
{
    if (tx_head == tx_tail) {
        UCSR0B &= (uint8_t)~_BV(UDRIE0);
        return;
    }
    UDR0 = tx_buf[tx_tail];
    tx_tail = (uint8_t)((tx_tail + 1) & (TX_SIZE - 1));
}

bool uart_get(uint8_t *byte)
{
    if (rx_head == rx_tail) return false;
    *byte = rx_buf[rx_tail];
    rx_buf[rx_tail] = 0;  /* read bytes do not linger (a plan travels through here) */
    rx_tail = (uint8_t)((rx_tail + 1) & (RX_SIZE - 1));
    return true;
}

uint8_t uart_room(void)
{
    return (uint8_t)((tx_tail - tx_head - 1) & (TX_SIZE - 1));
}

/* the caller has checked uart_room(): a full buffer drops the byte, never waits */
void uart_put(uint8_t byte)
{
    uint8_t next = (uint8_t)((tx_head + 1) & (TX_SIZE - 1));
    if (next == tx_tail) return;
    tx_buf[tx_head] = byte;
    tx_head = next;
    UCSR0B |= _BV(UDRIE0);
}

uint8_t uart_overruns(void) { return overruns; }

bool uart_pending(void) { return rx_head != rx_tail; }
