/* The chip's peripherals: outputs, sensors, the battery ADC and the millisecond tick. */
#ifndef SHUFFLER_HW_H
#define SHUFFLER_HW_H

#include <stdbool.h>
#include <stdint.h>

void hw_init(void);
/* One clock, the 1 kHz tick: hw_ms() counts it (wraps after 49.7 days), hw_us() is the
 * same count in microseconds with the timer's 4 us steps (wraps after 71.6 min, in step
 * with hw_ms: hw_us() == hw_ms() * 1000 + part, modulo 2^32). Only differences of either
 * are ever compared (unsigned subtraction), so everything works across both wraps. */
uint32_t hw_ms(void);
uint32_t hw_us(void);

/* the beam's oldest edge not later than ``until`` (hw_us), timestamped in the
 * pin-change interrupt; false when there is none */
bool beam_edge(uint32_t *us, bool *blocked, uint32_t until);
void beam_edges_clear(void);

/* -255..255: forward > 0, backward < 0, 0 off; clamped to +-motor_top() whatever asks */
void motor_set(int16_t speed);
int16_t motor_speed(void);
/* the duty cap (CONFIG's max_duty_pct, 10..100): the largest compare value whose duty,
 * (top + 1) / 256, is not above it. Until a CONFIG sets it: CONFIG_MAX_DUTY_PCT_ABSENT */
void motor_cap(uint8_t percent);
uint8_t motor_top(void);
void diverter_set(uint8_t pile);  /* 0 left (parked), 1 right */
void outputs_safe(void);          /* motor off, diverter parked, buzzer off */

void led_set(bool red, bool green, bool blue);
void buzzer_set(bool on);

bool beam_blocked(void);
bool tray_loaded(void);
bool pile_covered(uint8_t pile);
bool touched(void);

/* AVcc against the 1.1 V bandgap, then A0 against AVcc, scaled by it: about 1.4 ms */
uint16_t battery_mv(void);
uint16_t noise_seed(void);        /* a few bits of ADC noise for the boot id */

#endif
