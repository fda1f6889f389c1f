/* USART0 at 115200 baud 8N1, interrupt-driven ring buffers. */
#ifndef SHUFFLER_UART_H
#define SHUFFLER_UART_H

#include <stdbool.h>
#include <stdint.h>

void uart_init(void);
bool uart_get(uint8_t *byte);          /* false when nothing is waiting */
void uart_put(uint8_t byte);           /* waits while the buffer is full */
uint8_t uart_overruns(void);
bool uart_pending(void);                /* bytes waiting to be read */           /* bytes lost: the receive buffer was full */

#endif
