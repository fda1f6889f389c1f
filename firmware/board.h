/* The Arduino Nano (ATmega328P, 16 MHz) pin map of the shuffler: docs/firmware.md.
 *
 * Inputs read low when something covers their sensor (the beam receiver, the tray
 * and pile reflective sensors), with the chip's pull-ups on; the touch module
 * drives its pin high while touched. The motor driver's inputs and the diverter
 * servo are outputs driven low from the first instructions after reset. */
#ifndef SHUFFLER_BOARD_H
#define SHUFFLER_BOARD_H

#include <avr/io.h>

/* PORTD */
#define PIN_BEAM        PD2   /* D2: IR beam receiver at the gate, low = blocked */
#define PIN_TOUCH       PD3   /* D3: capacitive touch module, high = touched */
#define PIN_TRAY        PD4   /* D4: tray presence sensor, low = cards in the tray */
#define PIN_MOTOR_FWD   PD5   /* D5 (OC0B): motor driver IN1, PWM forward */
#define PIN_MOTOR_REV   PD6   /* D6 (OC0A): motor driver IN2, PWM backward */
#define PIN_PILE_LEFT   PD7   /* D7: left output pile sensor, low = cards on it */
/* PORTB */
#define PIN_PILE_RIGHT  PB0   /* D8: right output pile sensor, low = cards on it */
#define PIN_DIVERTER    PB1   /* D9 (OC1A): diverter servo signal, 50 Hz */
#define PIN_LED_RED     PB2   /* D10 */
#define PIN_LED_GREEN   PB3   /* D11 */
#define PIN_LED_BLUE    PB4   /* D12 */
#define PIN_MOTOR_LED   PB5   /* D13: the Nano's own LED, lit while the motor is driven */
/* PORTC */
#define ADC_BATTERY     0     /* A0 (ADC0): battery through a 20k over 10k divider */
#define PIN_BUZZER      PC1   /* A1: active buzzer (BZ1) through a transistor (Q2) */

#define PORTD_INPUTS  (_BV(PIN_BEAM) | _BV(PIN_TOUCH) | _BV(PIN_TRAY) | _BV(PIN_PILE_LEFT))
#define PORTD_PULLUPS (_BV(PIN_BEAM) | _BV(PIN_TRAY) | _BV(PIN_PILE_LEFT))
#define PORTD_OUTPUTS (_BV(PIN_MOTOR_FWD) | _BV(PIN_MOTOR_REV))
#define PORTB_OUTPUTS (_BV(PIN_DIVERTER) | _BV(PIN_LED_RED) | _BV(PIN_LED_GREEN) | \
                       _BV(PIN_LED_BLUE) | _BV(PIN_MOTOR_LED))

/* The battery divider: (R_top + R_bottom) / R_bottom. The ADC reads A0 against AVcc (the
 * Nano's 5 V: 4.4 to 5.25 V from USB), which is measured before every battery reading
 * against the chip's 1.1 V bandgap (ADMUX 0x4E), so the reading does not depend on it.
 * The bandgap is 1.0 to 1.2 V from chip to chip (the datasheet's spread): for better than
 * that, measure A0's volts with a meter once and build with BANDGAP_MV set to 1100 times
 * the meter's reading over the firmware's (docs/firmware.md, "The battery reading"). */
#define DIVIDER_NUM        3u
/* `make BANDGAP_MV=1093` builds a calibrated firmware: its HELLO_REPLY says so
 * ("shuffler-avr 0.3 bg=1093"), and the host then takes the reading as it is; without it
 * (1100, the nominal) the host counts the reading as up to 1200 / 1100 low, the bandgap's
 * spread, when it checks the driver's limit (shuffler.limits.over_voltage) */
#ifdef BANDGAP_MV
#define BANDGAP_CALIBRATED 1
#else
#define BANDGAP_MV         1100u
#define BANDGAP_CALIBRATED 0
#endif
/* the datasheet's least bandgap: a reading below what it gives at 5.6 V is no AVcc */
#define BANDGAP_MIN_MV     1000u
/* after the bandgap is selected: its start-up (70 us at most) and the sample-and-hold
 * charging from it, with a wide margin; the first conversion after it is discarded too */
#define BANDGAP_SETTLE_US  1000u

/* Servo pulses (timer 1 counts half-microseconds): left 1.0 ms, right 2.0 ms. */
#define SERVO_FRAME     40000u
#define SERVO_LEFT      2000u
#define SERVO_RIGHT     4000u

#endif
