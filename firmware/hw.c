/* Timer 0: fast PWM on OC0A/OC0B for the motor driver (976 Hz). Timer 1: 50 Hz servo
 * frame on OC1A. Timer 2: the 1 kHz tick. The ADC reads the battery against AVcc, and
 * AVcc against the bandgap. */
#include "hw.h"

#include <avr/interrupt.h>
#include <util/atomic.h>
#include <util/delay.h>

#include "board.h"
#include "protocol_gen.h"

/* the clock; "used" and external: the simavr harness sets it to run as if the chip
 * had been powered for --uptime seconds (docs/firmware.md) */
volatile uint32_t hw_ticks __attribute__((used));
#define ticks hw_ticks
static int16_t speed_now;
/* the duty cap as a compare value; "used" and external: the simavr harness reads it to
 * know when the roller runs at its rated speed (never to measure the duty: that is the
 * pin's own timing) */
volatile uint8_t hw_motor_top __attribute__((used));

#define EDGES 16u  /* a power of two */
static volatile uint32_t edge_us[EDGES];
static volatile uint8_t edge_level[EDGES], edge_head, edge_tail;

ISR(TIMER2_COMPA_vect) { ticks++; }

static uint32_t us_now(void)  /* with interrupts off */
{
    uint8_t count = TCNT2;
    uint32_t ms = ticks;
    if ((TIFR2 & _BV(OCF2A)) && count < 125) ms++;  /* the tick is due, not yet counted */
    return ms * 1000u + (uint32_t)count * 4u;
}

uint32_t hw_us(void)
{
    uint32_t now;
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE) { now = us_now(); }
    return now;
}

ISR(INT0_vect)
{
    uint8_t next = (uint8_t)((edge_head + 1) & (EDGES - 1));
    if (next == edge_tail) return;  /* cannot happen below 8 kHz of edges */
    edge_us[edge_head] = us_now();
    edge_level[edge_head] = beam_blocked();
    edge_head = next;
}

bool beam_edge(uint32_t *us, bool *blocked, uint32_t until)
{
    if (edge_tail == edge_head) return false;
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE) {
        *us = edge_us[edge_tail];
        *blocked = edge_level[edge_tail];
    }
    if ((int32_t)(until - *us) < 0) return false;  /* after ``until``: the next tick's */
    edge_tail = (uint8_t)((edge_tail + 1) & (EDGES - 1));
    return true;
}

void beam_edges_clear(void) { edge_tail = edge_head; }

uint32_t hw_ms(void)
{
    uint32_t now;
    ATOMIC_BLOCK(ATOMIC_RESTORESTATE) { now = ticks; }
    return now;
}

void outputs_safe(void)
{
    motor_set(0);
    OCR1A = SERVO_LEFT;  /* a servo already driven parks left; one never driven stays off */
    buzzer_set(false);
}

void hw_init(void)
{
    /* outputs first, all low: the motor driver sees both inputs low (coast) */
    PORTD = PORTD_PULLUPS;
    DDRD = PORTD_OUTPUTS;
    PORTB = _BV(PIN_PILE_RIGHT);
    DDRB = PORTB_OUTPUTS;
    PORTC = 0;
    DDRC = _BV(PIN_BUZZER);
    TCCR0A = _BV(WGM01) | _BV(WGM00);           /* fast PWM, outputs disconnected */
    TCCR0B = _BV(CS01) | _BV(CS00);             /* 16 MHz / 64 / 256 = 976 Hz */
    ICR1 = SERVO_FRAME - 1;                     /* TOP before the clock starts */
    TCCR1A = _BV(WGM11);                        /* fast PWM, TOP = ICR1, OC1A off: no
                                                 * servo pulse until a pass moves the
                                                 * flap (diverter_set), so a block the
                                                 * host refuses never parks it */
    TCCR1B = _BV(WGM13) | _BV(WGM12) | _BV(CS11); /* 0.5 us per count */
    OCR1A = SERVO_LEFT;                         /* double-buffered: taken at TOP */
    TCCR2A = _BV(WGM21);                        /* CTC */
    TCCR2B = _BV(CS22);                         /* 16 MHz / 64 = 250 kHz */
    OCR2A = 249;                                /* 1 kHz */
    TIMSK2 = _BV(OCIE2A);
    EICRA = _BV(ISC00);                         /* INT0 (the beam): any change */
    EIFR = _BV(INTF0);
    EIMSK = _BV(INT0);
    ADMUX = _BV(REFS0) | ADC_BATTERY;           /* AVcc reference */
    ADCSRA = _BV(ADEN) | _BV(ADPS2) | _BV(ADPS1) | _BV(ADPS0); /* 125 kHz */
    DIDR0 = _BV(ADC_BATTERY);
    motor_cap(CONFIG_MAX_DUTY_PCT_ABSENT);
}

void motor_cap(uint8_t percent)
{
    if (percent < CONFIG_MAX_DUTY_PCT_MIN || percent > CONFIG_MAX_DUTY_PCT_MAX)
        percent = CONFIG_MAX_DUTY_PCT_ABSENT;  /* never: link_valid checked the range */
    /* fast PWM drives the pin high for OCR + 1 counts of 256 */
    hw_motor_top = (uint8_t)((uint16_t)percent * 256u / 100u - 1u);
    if (speed_now) motor_set(speed_now);  /* a lower cap holds at once */
}

uint8_t motor_top(void) { return hw_motor_top; }

void motor_set(int16_t speed)
{
    int16_t top = hw_motor_top;
    if (speed > top) speed = top;
    if (speed < -top) speed = -top;
    speed_now = speed;
    /* a pin leaves the timer before the other one joins: never both driven */
    TCCR0A &= (uint8_t)~(_BV(COM0A1) | _BV(COM0B1));
    PORTD &= (uint8_t)~(_BV(PIN_MOTOR_FWD) | _BV(PIN_MOTOR_REV));
    if (speed > 0) {
        OCR0B = (uint8_t)speed;
        TCCR0A |= _BV(COM0B1);
    } else if (speed < 0) {
        OCR0A = (uint8_t)(-speed);
        TCCR0A |= _BV(COM0A1);
    }
    if (speed) PORTB |= _BV(PIN_MOTOR_LED);
    else PORTB &= (uint8_t)~_BV(PIN_MOTOR_LED);
}

int16_t motor_speed(void) { return speed_now; }

/* the first call (a pass's start) connects OC1A: pulses from the next frame (enabled
 * mid-frame the pin stays low until BOTTOM, so the first pulse is a whole one) */
void diverter_set(uint8_t pile)
{
    OCR1A = pile ? SERVO_RIGHT : SERVO_LEFT;
    TCCR1A |= _BV(COM1A1);
}

void led_set(bool red, bool green, bool blue)
{
    uint8_t v = PORTB & (uint8_t)~(_BV(PIN_LED_RED) | _BV(PIN_LED_GREEN) | _BV(PIN_LED_BLUE));
    if (red) v |= _BV(PIN_LED_RED);
    if (green) v |= _BV(PIN_LED_GREEN);
    if (blue) v |= _BV(PIN_LED_BLUE);
    PORTB = v;
}

void buzzer_set(bool on)
{
    if (on) PORTC |= _BV(PIN_BUZZER);
    else PORTC &= (uint8_t)~_BV(PIN_BUZZER);
}

bool beam_blocked(void) { return !(PIND & _BV(PIN_BEAM)); }
bool tray_loaded(void) { return !(PIND & _BV(PIN_TRAY)); }
bool touched(void) { return PIND & _BV(PIN_TOUCH); }

bool pile_covered(uint8_t pile)
{
    return pile ? !(PINB & _BV(PIN_PILE_RIGHT)) : !(PIND & _BV(PIN_PILE_LEFT));
}

static uint16_t adc_convert(void)
{
    ADCSRA |= _BV(ADSC);
    while (ADCSRA & _BV(ADSC)) {
    }
    return ADC;
}

static uint16_t adc_read(uint8_t channel)
{
    ADMUX = _BV(REFS0) | channel;
    return adc_convert();
}

#define ADC_BANDGAP 0x0E  /* the 1.1 V bandgap as the input: ADMUX 0x4E with REFS0 */

/* the bandgap against AVcc: 1023 * BANDGAP_MV / AVcc (214 at 5.25 V, 256 at 4.4 V) */
static uint16_t bandgap_read(void)
{
    ADMUX = _BV(REFS0) | ADC_BANDGAP;
    _delay_us(BANDGAP_SETTLE_US);
    adc_convert();  /* the first conversion after the switch: discarded */
    return adc_convert();
}

/* A0 * AVcc / 1023 * DIVIDER_NUM, with AVcc = 1023 * BANDGAP_MV / bandgap: the 1023s
 * cancel. A bandgap reading no AVcc gives (AVcc above 5.6 V even for the lowest bandgap
 * a chip may have, BANDGAP_MIN_MV, or no reading at all; in long arithmetic: the chip's
 * int is 16 bits, and 1023 * 1000 is not) is
 * reported as 65535 mV, which every host refuses as over-voltage: nothing moves. So is
 * an A0 at full scale: the block is DIVIDER_NUM times AVcc or more, which is all it says
 * (a 12 V block on a sagging 3.3 V AVcc would read 9.9 V, under the driver's limit). */
uint16_t battery_mv(void)
{
    uint16_t bandgap = bandgap_read();
    adc_read(ADC_BATTERY);  /* the first after the switch back: discarded */
    uint32_t a0 = adc_convert();
    if (bandgap < 1023UL * BANDGAP_MIN_MV / 5600u || a0 >= 1023u) return 0xFFFFu;
    uint32_t mv = a0 * BANDGAP_MV * DIVIDER_NUM / bandgap;
    return mv > 0xFFFFu ? 0xFFFFu : (uint16_t)mv;
}

uint16_t noise_seed(void)
{
    uint16_t seed = 0;
    for (uint8_t i = 0; i < 16; i++)
        seed = (uint16_t)((seed << 1) ^ adc_read(ADC_BANDGAP) ^ TCNT0);
    return seed;
}
