/* USART0 at 115200 baud 8N1, interrupt-driven ring buffers. */
#ifndef SHUFFLER_UART_H
#define SHUFFLER_UART_H

#include <stdbool.h>
#include <stdint.h>

void uart_init(void);
bool uart_get(uint8_t *byte);          /* false when nothing is waiting */
void uart_put(uint8_t byte);           /* never waits: check uart_room() first */
uint8_t uart_room(void);               /* bytes the transmit buffer can take now */
uint8_t uart_overruns(void);           /* bytes lost: the receive buffer was full */
bool uart_pending(void);               /* bytes waiting to be read */

#endif
