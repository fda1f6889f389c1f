/* The chip's peripherals: outputs, sensors, the battery ADC and the millisecond tick. */
#ifndef SHUFFLER_HW_H
#define SHUFFLER_HW_H

#include <stdbool.h>
#include <stdint.h>

void hw_init(void);
uint32_t hw_ms(void);             /* milliseconds since reset (wraps after 49 days) */
uint32_t hw_us(void);             /* microseconds since reset, 4 us steps (wraps: 71 min) */

/* the beam's edges, timestamped in the pin-change interrupt: the oldest first */
bool beam_edge(uint32_t *us, bool *blocked);
void beam_edges_clear(void);

void motor_set(int16_t speed);    /* -255..255: forward > 0, backward < 0, 0 off */
int16_t motor_speed(void);
void diverter_set(uint8_t pile);  /* 0 left (parked), 1 right */
void outputs_safe(void);          /* motor off, diverter parked, buzzer off */

void led_set(bool red, bool green, bool blue);
void buzzer_set(bool on);

bool beam_blocked(void);
bool tray_loaded(void);
bool pile_covered(uint8_t pile);
bool touched(void);

uint16_t battery_mv(void);        /* one conversion, about 0.1 ms */
uint16_t noise_seed(void);        /* a few bits of ADC noise for the boot id */

#endif
