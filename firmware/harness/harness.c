/* simavr-harness: the shuffler's firmware on a simulated ATmega328P, in a simulated
 * machine. docs/firmware.md.
 *
 *   simavr-harness [options] build/shuffler.elf
 *
 * It loads the same ELF that would be flashed, bridges USART0 to a pseudo-terminal
 * (the first line on stdout is "pty PATH"), and plays the mechanism on the chip's
 * pins: while the motor pin drives forward, cards leave the tray at the card rate,
 * block the beam and land on the pile the diverter servo points to when they meet
 * it; the battery divider reaches the ADC. A simulated dealer watches the status
 * LED: STACK means lift the piles (the pile sensors see which first), restack and
 * touch; FAULT means gather every card back into the tray.
 *
 * Time: simulated time is the chip's cycle count at 16 MHz. The harness holds it to
 * wall time: every 500 us of simulated time it waits until the wall clock has
 * caught up. When the computer cannot keep up, simulated time falls behind and is
 * never hurried to catch up (that would squeeze the host's heartbeats together):
 * the lag is dropped and counted as "slip_ms" in the state line.
 *
 * The motor's duty is measured on the driver's pins themselves: every edge of D5 and D6
 * is timed to the cycle, and each PWM period's high time over its length is the duty
 * ("pwm forward|reverse duty=D t=MS" whenever it changes by more than 0.001; a pin that
 * stays at one level for two periods has duty 0 or 1). The roller runs at the card rate
 * while the forward duty is at the firmware's cap (hw_motor_top, read from the ELF as
 * hw_ticks is), as the config's motor volts over a fresh block make the motor's rating.
 *
 * --avcc MV sets the chip's AVcc (and VCC, AREF: one supply on a Nano), which the ADC
 * reads A0 and the bandgap against (simavr's vcc/avcc/aref); "avcc MV" on stdin changes
 * it while the chip runs (a USB supply that sags). --bandgap MV (1000..1200, the
 * datasheet's spread; 1100) is the chip's own 1.1 V reference: simavr's is fixed at
 * 1100 mV, so the harness gives simavr an AVcc and an A0 both scaled by 1100 / MV, which
 * makes the very counts a chip with that bandgap converts.
 *
 * --uptime SECONDS starts the chip's clock (the firmware's hw_ticks, found in the ELF
 * with avr-nm) as if the chip had been powered that long: set 1 ms after the first
 * boot, before the firmware enables interrupts, and checked until it holds. A reset
 * restarts the clock at 0, as on the real chip.
 *
 * The diverter: the servo takes a new pulse width only at the end of its 20 ms frame
 * (timer 1 double-buffers OCR1A), and then swings for --flap-travel seconds; a card
 * lands on the pile the flap points to when it meets the flap, so the harness shows
 * the flap's real latency. --frame-scale F (at most 1) shortens the modelled frame in
 * step with a quickened card rate (the sim-avr backend's --sim-speed).
 *
 * Commands on stdin, one a line: "state" (answers a "state ..." line), "touch" (held
 * 50 ms), "taps N MS" (N touches MS apart in the chip's time; "taps done" after the
 * last), "press" and "release" (held as long as between them), "chatter N US" (the
 * touch line flips 2N+1 times, US µs apart: a press, or a release, that bounces N
 * times; "chatter done" after the last), "avcc MV",
 * "gather" (every card back in the tray), "ram" (answers "ram HEX", the SRAM), "reset"
 * (reboot the chip), "freeze" (the chip hangs for good: nothing in or out, as if its
 * watchdog had failed), "quit". End of stdin also quits. Lines on stdout:
 * "pty PATH", "motor forward|reverse|off ...", "pwm forward|reverse duty=D t=MS",
 * "servo pulse us=W t=MS" (a pulse on D9's pin, with OCR1A's width: the first, and every
 * change of width), "state ...",
 * "reset ...", "crashed ...". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <math.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "avr_adc.h"
#include "avr_extint.h"
#include "avr_ioport.h"
#include "avr_uart.h"
#include "sim_avr.h"
#include "sim_elf.h"
#include "sim_time.h"

/* ATmega328P data-space addresses (the datasheet's register summary) */
enum {
    R_PINB = 0x23, R_DDRB = 0x24, R_PORTB = 0x25,
    R_PIND = 0x29, R_DDRD = 0x2A, R_PORTD = 0x2B,
    R_TCCR0A = 0x44, R_OCR0A = 0x47, R_OCR0B = 0x48,
    R_WDTCSR = 0x60, R_TCCR1A = 0x80, R_OCR1AL = 0x88, R_OCR1AH = 0x89,
};
/* the pins of firmware/board.h */
enum { D_BEAM = 2, D_TOUCH = 3, D_TRAY = 4, D_FWD = 5, D_REV = 6, D_PILE_L = 7 };
enum { B_PILE_R = 0, B_SERVO = 1, B_RED = 2, B_GREEN = 3, B_BLUE = 4 };
#define COM0A1 0x80
#define COM0B1 0x20
#define COM1A1 0x80

#define TICK_US 500
#define MAX_CARDS 1024
#define MAX_FAULTS 16
#define SLIP_LIMIT_US 20000

enum habit { INSTRUCTED, OTHER, BOTH };
enum transit { T_IDLE, T_GAP, T_BLOCKED, T_JAM_GAP, T_JAMMED, T_FREEING, T_WAIT_STOP };

struct fault { int card, frees; };  /* frees: retries after which it frees, -1 never */

static struct {
    /* options */
    int cards;
    double card_rate, spinup, duty, lift_gap;
    bool feed_bottom;
    enum habit habit;
    double rest_volts, noise;
    struct fault jams[MAX_FAULTS], misfeeds[MAX_FAULTS];
    int njams, nmisfeeds, doubles[MAX_FAULTS], ndoubles;
    double dropout_us;  /* --fault dropout:MS: the beam clears this long inside every card */
    /* cards: index 0 is the top */
    int tray[MAX_CARDS], ntray;
    int pile[2][MAX_CARDS], npile[2];
    int stuck, nstuck;
    int fed, retries_at_card;
    bool retrying, was_forward, retry_after_stop;
    /* the card in flight */
    enum transit state;
    uint64_t until, half, dropout_at;
    unsigned card_gen;  /* bumped as a card enters the beam: its drop-out's timers name it */
    int moving, land_pile;
    /* the dealer */
    bool restacked;
    int dealer_step, on_top, lift_action;
    uint64_t dealer_at;
    uint64_t touch_until;
    int taps_left;               /* "taps N MS": touches still to come, MS apart */
    uint64_t tap_period, next_tap;
    int flips_left;              /* "chatter N US": flips of the touch line still to come */
    uint64_t flip_period, next_flip;
    /* the battery */
    double drained;
} m;

static avr_t *avr;
static int pty_fd = -1;
static bool xon = true, quit, want_reset, frozen;
static void (*core_reset)(avr_t *);
static uint64_t last_rx_us, start_ns, slip_us;
static int motor_class = -1;
static avr_irq_t *uart_in;
static avr_irq_t *adc_in;
static uint32_t last_adc_mv;
static unsigned long long rng_state = 1;
static double uptime_s;
static uint16_t clock_addr;   /* hw_ticks in data space; 0: not found */
static uint16_t top_addr;     /* hw_motor_top (the duty cap's compare value); 0: not found */
static uint32_t avcc_mv = 5000, bandgap_mv = 1100;
static uint32_t clock_want;   /* the value set, while it is being checked */
static int clock_checks;
static bool first_boot = true;
/* the flap: the pulse width latched at the last frame, and when it was latched */
static int flap_target, flap_from;
static uint64_t flap_at, next_frame;
static double flap_travel = 0.1, frame_scale = 1.0;

static uint64_t now_us(void) { return avr_cycles_to_usec(avr, avr->cycle); }

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / (double)(1ull << 53);
}

/* -- the chip's pins ------------------------------------------------------------------- */
static uint8_t reg(int addr) { return avr->data[addr]; }

static double duty(int com_bit, int ocr, int pin)
{
    if (!(reg(R_DDRD) & (1 << pin))) return 0.0;
    if (reg(R_TCCR0A) & com_bit) return (reg(ocr) + 1) / 256.0;  /* fast PWM */
    return (reg(R_PORTD) >> pin) & 1;
}

static double forward_duty(void) { return duty(COM0B1, R_OCR0B, D_FWD); }
static double reverse_duty(void) { return duty(COM0A1, R_OCR0A, D_REV); }
/* the roller at its rated speed: the forward duty at the firmware's cap (a firmware
 * without one: full duty) */
static bool forward(void)
{
    double top = top_addr ? (avr->data[top_addr] + 1) / 256.0 : 1.0;
    return forward_duty() > 0.9 * top;
}
static bool backward(void) { return reverse_duty() > 0.05; }

/* -- the duty measured on the pins ------------------------------------------------------ */
struct pwm {
    const char *name;
    int level;
    uint64_t rise, fall, edge;  /* cycles of the last rising, falling, any edge */
    double shown;               /* the duty last printed; -1: none yet */
};
static struct pwm pwm_pins[2] = {{"forward", 0, 0, 0, 0, -1}, {"reverse", 0, 0, 0, 0, -1}};
#define PWM_PERIOD_CYCLES (64u * 256u)  /* timer 0: 16 MHz / 64 / 256 */

static void pwm_show(struct pwm *p, double d)
{
    if (p->shown >= 0 && fabs(d - p->shown) <= 0.001) return;
    p->shown = d;
    printf("pwm %s duty=%.4f t=%.3f\n", p->name, d, now_us() / 1000.0);
    fflush(stdout);
}

static void pwm_edge(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    struct pwm *p = param;
    uint64_t c = avr->cycle;
    int level = value != 0;
    if (level == p->level) return;
    p->level = level;
    p->edge = c;
    if (level) {  /* a period ends: high from the last rise to the fall, over rise to rise */
        if (p->rise && p->fall > p->rise && c > p->rise)
            pwm_show(p, (double)(p->fall - p->rise) / (double)(c - p->rise));
        p->rise = c;
    } else {
        p->fall = c;
    }
}

/* a pin that has not moved for two periods: its duty is its level. simavr (1.6) gets
 * one case wrong: with OCR0x at TOP (255) the compare match and the overflow coincide and
 * it leaves the pin low, where the chip holds it high (the datasheet's fast PWM: "OCR0x
 * equal to MAX: a constantly high output") */
static void pwm_still(void)
{
    static const struct { int com, ocr; } timer[2] = {{COM0B1, R_OCR0B}, {COM0A1, R_OCR0A}};
    for (int i = 0; i < 2; i++)
        if (avr->cycle - pwm_pins[i].edge > 2u * PWM_PERIOD_CYCLES) {
            bool full = (reg(R_TCCR0A) & timer[i].com) && reg(timer[i].ocr) == 0xFF;
            pwm_pins[i].rise = 0;  /* the next period is measured from its own rise */
            pwm_show(&pwm_pins[i], full ? 1.0 : pwm_pins[i].level);
        }
}

static int servo_register(void)  /* servo: 1-2 ms pulses, centre 1.5 ms (3000 counts) */
{
    if (!(reg(R_TCCR1A) & COM1A1)) return 0;
    return (reg(R_OCR1AH) << 8 | reg(R_OCR1AL)) > 3000;
}

/* the servo pin's own pulses: each rising edge of D9 is a pulse. "servo pulse us=W t=MS"
 * at the first and whenever the width changes by more than 5 us; W is OCR1A's (half-
 * microsecond counts), not the pin's fall: simavr 1.6 clears OC1A a timer count after
 * TOP in fast PWM with ICR1 (a simulator bug), while the chip holds it high to OCR1A.
 * A flap never driven shows no such line */
static int servo_shown = -1;

static void servo_edge(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    (void)param;
    if (!value) return;
    int width = (reg(R_OCR1AH) << 8 | reg(R_OCR1AL)) / 2;
    if (servo_shown >= 0 && abs(width - servo_shown) <= 5) return;
    servo_shown = width;
    printf("servo pulse us=%d t=%.3f\n", width, now_us() / 1000.0);
    fflush(stdout);
}

/* the servo's 20 ms frame: a new pulse width is taken at the frame's end, then the flap
 * swings for flap_travel; until it is past the middle it still points where it was */
static void servo_frame(uint64_t t)
{
    if (t < next_frame) return;
    uint64_t frame = (uint64_t)(20000 * frame_scale);
    next_frame = frame ? t - t % frame + frame : t;
    int want = servo_register();
    if (want != flap_target) {
        flap_from = flap_target;
        flap_target = want;
        flap_at = t;
    }
}

static int diverter_pile(void)
{
    uint64_t t = now_us();
    return t - flap_at >= (uint64_t)(flap_travel * 1e6 / 2) ? flap_target : flap_from;
}

/* --uptime: the firmware's clock set once the C runtime has cleared RAM (1 ms after the
 * first boot: the firmware is still drawing its boot id, interrupts off); re-set if the
 * tick interrupt wrote over it, then left alone */
static void clock_uptime(uint64_t t)
{
    if (!clock_addr || uptime_s <= 0 || clock_checks >= 20 || t < 1000) return;
    uint8_t *p = avr->data + clock_addr;
    uint32_t now = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                   (uint32_t)p[3] << 24;
    if (!clock_checks) {
        clock_want = now + (uint32_t)(uint64_t)(uptime_s * 1000.0);
    } else if (now - clock_want < 1000u) {
        clock_checks++;
        return;
    }
    if (!clock_checks || now - clock_want >= 1000u) {
        for (int i = 0; i < 4; i++) p[i] = (uint8_t)(clock_want >> (8 * i));
    }
    clock_checks++;
}

static uint16_t find_symbol(const char *elf, const char *symbol)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "avr-nm '%s' 2>/dev/null", elf);
    FILE *nm = popen(cmd, "r");
    if (!nm) return 0;
    char line[256];
    unsigned long addr = 0;
    while (fgets(line, sizeof line, nm)) {
        unsigned long a;
        char kind, name[200];
        if (sscanf(line, "%lx %c %199s", &a, &kind, name) == 3 && !strcmp(name, symbol))
            addr = a & 0xFFFF;  /* data space: 0x800000 + address */
    }
    pclose(nm);
    return (uint16_t)addr;
}

static bool led(int bit) { return (reg(R_DDRB) & reg(R_PORTB)) & (1 << bit); }

static uint8_t port_d = 0xFF, port_b = 0xFF;

static void drive(char port, int pin, bool high)
{
    uint8_t *level = port == 'D' ? &port_d : &port_b;
    uint8_t mask = port == 'D' ? (1 << D_BEAM | 1 << D_TOUCH | 1 << D_TRAY | 1 << D_PILE_L)
                               : (1 << B_PILE_R);
    *level = (uint8_t)((*level & ~(1 << pin)) | (high << pin));
    avr_ioport_external_t ext = {.name = port, .mask = mask, .value = *level & mask};
    avr_ioctl(avr, AVR_IOCTL_IOPORT_SET_EXTERNAL(port), &ext);
    avr_raise_irq(avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ(port), pin), high);
}

/* a reset zeroes the PIN registers, but simavr only passes on a level that changed */
static void redrive(void)
{
    static const struct { char port; int pin; } inputs[] = {
        {'D', D_BEAM}, {'D', D_TOUCH}, {'D', D_TRAY}, {'D', D_PILE_L}, {'B', B_PILE_R}};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        bool high = ((inputs[i].port == 'D' ? port_d : port_b) >> inputs[i].pin) & 1;
        drive(inputs[i].port, inputs[i].pin, !high);
        drive(inputs[i].port, inputs[i].pin, high);
    }
}

static void sensors(void)
{
    drive('D', D_TRAY, m.ntray == 0);         /* covered: low */
    drive('D', D_PILE_L, m.npile[0] == 0);
    drive('B', B_PILE_R, m.npile[1] == 0);
}

/* -- the battery ----------------------------------------------------------------------- */
static double battery_volts(bool load)
{
    double rest = m.rest_volts - m.drained;
    if (!load) return rest;
    return rest - (0.8 + 0.32 * (9.5 - rest) / 3.5);  /* sags more as it empties */
}

static double speed(double load_volts)  /* of the full card rate; 0 = stalled */
{
    if (load_volts < 5.4) return 0.0;
    double s = 0.3 + 0.7 * (load_volts - 5.4) / 0.3;
    return s > 1.0 ? 1.0 : s;
}

static void adc_update(bool load)
{
    uint32_t mv = (uint32_t)(battery_volts(load) / 3.0 * 1000.0 * 1100.0 / bandgap_mv);
    if (mv != last_adc_mv) {
        last_adc_mv = mv;
        avr_raise_irq(adc_in, mv);
    }
}

/* the chip's AVcc, as simavr sees it beside its fixed 1100 mV bandgap (--bandgap) */
static void set_avcc(uint32_t mv)
{
    avcc_mv = mv;
    avr->vcc = avr->avcc = avr->aref = mv * 1100u / bandgap_mv;
}

/* -- the mechanism ---------------------------------------------------------------------- */
static int take(void)
{
    int card;
    if (m.feed_bottom) return m.tray[--m.ntray];
    card = m.tray[0];
    memmove(m.tray, m.tray + 1, sizeof(int) * (size_t)--m.ntray);
    return card;
}

static void put_back(int card)
{
    if (m.feed_bottom) {
        m.tray[m.ntray++] = card;
        return;
    }
    memmove(m.tray + 1, m.tray, sizeof(int) * (size_t)m.ntray++);
    m.tray[0] = card;
}

static bool fires(struct fault *table, int *n, int card)
{
    for (int i = 0; i < *n; i++) {
        if (table[i].card != card) continue;
        if (table[i].frees >= 0 && m.retries_at_card >= table[i].frees) {
            table[i] = table[--*n];
            return false;
        }
        return true;
    }
    return false;
}

static void drop_fault(struct fault *table, int *n, int card)
{
    for (int i = 0; i < *n; i++)
        if (table[i].card == card) table[i--] = table[--*n];
}

static void retry(void)
{
    m.retries_at_card++;
    m.retrying = true;
    if (m.nstuck) {
        put_back(m.stuck);
        m.nstuck = 0;
    }
    drive('D', D_BEAM, true);
}

static void next_transit(bool first, uint64_t t)
{
    double load = battery_volts(true);
    int card_no = m.fed + 1;
    if (m.nstuck) {
        m.state = T_JAMMED;
        return;
    }
    if (!m.ntray || speed(load) == 0.0) {
        m.state = T_WAIT_STOP;  /* nothing reaches the beam */
        return;
    }
    if (fires(m.misfeeds, &m.nmisfeeds, card_no)) {
        m.state = T_WAIT_STOP;
        m.retry_after_stop = true;  /* the roller slipped: feeding again may work */
        return;
    }
    double interval = 1e6 / (m.card_rate * speed(load));
    uint64_t gap = (uint64_t)(interval * (1 - m.duty) + (first ? m.spinup * 1e6 : 0));
    m.until = t + gap;
    if (fires(m.jams, &m.njams, card_no)) {
        m.state = T_JAM_GAP;
        return;
    }
    m.moving = 1;
    for (int i = 0; i < m.ndoubles; i++)
        if (m.doubles[i] == card_no && m.ntray >= 2) {
            m.doubles[i] = m.doubles[--m.ndoubles];
            m.moving = 2;
        }
    double blocked = interval * m.duty;
    if (m.dropout_us > 0 && blocked < m.dropout_us + blocked / 5)
        blocked = m.dropout_us + blocked / 5;  /* a tenth of the card either side of it */
    m.half = (uint64_t)(blocked / 2);
    m.dropout_at = (uint64_t)((blocked - m.dropout_us) / 2);
    m.state = T_GAP;
}

/* a drop-out's edge, on a cycle timer of its own (exact, not on the 500 us tick); param:
 * the card's generation, times two, plus 1 for the beam clearing */
static avr_cycle_count_t dropout_edge(avr_t *a, avr_cycle_count_t when, void *param)
{
    (void)a;
    (void)when;
    uintptr_t p = (uintptr_t)param;
    if (m.state == T_BLOCKED && (unsigned)(p >> 1) == m.card_gen) drive('D', D_BEAM, p & 1);
    return 0;
}

static void card_enters(uint64_t t)
{
    drive('D', D_BEAM, false);
    m.until = t + m.half;
    m.state = T_BLOCKED;
    m.land_pile = -1;
    m.card_gen++;
    if (m.dropout_us > 0) {
        uintptr_t gen = (uintptr_t)m.card_gen << 1;
        avr_cycle_timer_register_usec(avr, (uint32_t)m.dropout_at, dropout_edge,
                                      (void *)(gen | 1));
        avr_cycle_timer_register_usec(avr, (uint32_t)(m.dropout_at + m.dropout_us),
                                      dropout_edge, (void *)gen);
    }
}

static void land(void)
{
    for (int i = 0; i < m.moving; i++) {
        int p = m.land_pile;
        memmove(m.pile[p] + 1, m.pile[p], sizeof(int) * (size_t)m.npile[p]++);
        m.pile[p][0] = take();
    }
    m.fed++;
    m.retries_at_card = 0;
    m.retrying = false;
    drive('D', D_BEAM, true);
    sensors();
}

static void mechanism(uint64_t t)
{
    bool fwd = forward();
    if (fwd || backward()) m.drained += 0.0004 * TICK_US / 1e6;  /* about 1 V an hour */
    adc_update(fwd || backward());
    switch (m.state) {
    case T_IDLE:
        if (!fwd) {
            m.was_forward = false;
            return;
        }
        if (!m.was_forward && !m.npile[0] && !m.npile[1] && !m.retrying) {
            m.fed = 0;  /* the motor starts on a full tray: a new pass */
            m.retries_at_card = 0;
        }
        next_transit(!m.was_forward, t);
        m.was_forward = true;
        return;
    case T_GAP:
        if (!fwd) {
            m.state = T_IDLE;  /* stopped before the card reached the beam */
            m.was_forward = false;
        } else if (t >= m.until) {
            card_enters(t);
        }
        return;
    case T_BLOCKED:  /* a card in the beam finishes its way, motor or not */
        if (t < m.until) return;
        if (m.land_pile < 0) {
            m.land_pile = diverter_pile();  /* the card meets the diverter */
            m.until = t + m.half;
            return;
        }
        land();
        m.state = T_IDLE;
        return;
    case T_JAM_GAP:
        if (!fwd) {
            m.state = T_IDLE;
            m.was_forward = false;
        } else if (t >= m.until) {
            m.stuck = take();
            m.nstuck = 1;
            drive('D', D_BEAM, false);  /* stuck in the throat */
            m.state = T_JAMMED;
        }
        return;
    case T_JAMMED:
        if (fwd) return;
        m.state = T_FREEING;
        return;
    case T_FREEING:  /* reversing (or a fresh start) frees the card; else the dealer must */
        if (backward() || fwd) {
            retry();
            m.state = T_IDLE;
            m.was_forward = false;
        }
        return;
    case T_WAIT_STOP:
        if (fwd) return;
        if (m.retry_after_stop) retry();
        m.retry_after_stop = false;
        m.state = T_IDLE;
        m.was_forward = false;
        return;
    }
}

/* -- the dealer --------------------------------------------------------------------------- */
static void gather(void)
{
    int card_no = m.fed + 1, tray[MAX_CARDS], n = 0;
    drop_fault(m.jams, &m.njams, card_no);
    drop_fault(m.misfeeds, &m.nmisfeeds, card_no);
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < m.npile[p]; i++) tray[n++] = m.pile[p][i];
    if (m.nstuck) tray[n++] = m.stuck;
    for (int i = 0; i < m.ntray; i++) tray[n++] = m.tray[i];
    memcpy(m.tray, tray, sizeof(int) * (size_t)n);
    m.ntray = n;
    m.npile[0] = m.npile[1] = m.nstuck = 0;
    m.retrying = false;
    if (m.state == T_FREEING) m.state = T_IDLE;  /* the throat is free */
    drive('D', D_BEAM, true);
}

static void restack(int on_top)
{
    int tray[MAX_CARDS], n = 0, under = 1 - on_top;
    for (int i = 0; i < m.npile[on_top]; i++) tray[n++] = m.pile[on_top][i];
    for (int i = 0; i < m.npile[under]; i++) tray[n++] = m.pile[under][i];
    for (int i = 0; i < m.ntray; i++) tray[n++] = m.tray[i];
    memcpy(m.tray, tray, sizeof(int) * (size_t)n);
    m.ntray = n;
    m.npile[0] = m.npile[1] = 0;
}

static void touch(uint64_t t)
{
    drive('D', D_TOUCH, true);
    m.touch_until = t + 50000;
}

static int choose(int instructed)
{
    if (m.habit == INSTRUCTED) return instructed;
    if (m.habit == OTHER) return 1 - instructed;
    return rnd() < 0.5;
}

/* lift one pile, then the other, then square the pack in the tray (and touch) */
static void dealer_start(int on_top, int action, uint64_t t)
{
    m.restacked = true;
    m.on_top = on_top;
    m.lift_action = action;  /* 1 restack and touch, 2 gather */
    m.dealer_step = 1;
    m.dealer_at = t;
    drive(on_top ? 'B' : 'D', on_top ? B_PILE_R : D_PILE_L, true);
}

static void dealer(uint64_t t)
{
    if (m.taps_left && t >= m.next_tap) {
        touch(t);
        m.next_tap += m.tap_period;
        if (!--m.taps_left) {
            printf("taps done t=%.1f\n", t / 1000.0);
            fflush(stdout);
        }
    }
    if (m.flips_left && t >= m.next_flip) {
        drive('D', D_TOUCH, !(port_d & (1 << D_TOUCH)));  /* the line flips */
        m.next_flip += m.flip_period;
        if (!--m.flips_left) {
            printf("chatter done t=%.1f\n", t / 1000.0);
            fflush(stdout);
        }
    }
    if (m.touch_until && t >= m.touch_until) {
        drive('D', D_TOUCH, false);
        m.touch_until = 0;
    }
    if (m.dealer_step == 1) {
        uint64_t gap = (uint64_t)((m.habit == BOTH ? 0.02 : m.lift_gap) * 1e6);
        if (t < m.dealer_at + gap) return;
        int other = 1 - m.on_top;
        drive(other ? 'B' : 'D', other ? B_PILE_R : D_PILE_L, true);
        if (m.lift_action == 2) gather();
        else restack(m.on_top);
        sensors();
        m.dealer_step = m.lift_action == 1 ? 2 : 0;
        m.dealer_at = t;
        return;
    }
    if (m.dealer_step == 2) {
        if (t < m.dealer_at + 10000) return;
        touch(t);
        m.dealer_step = 0;
        return;
    }
    if (forward() || (m.state != T_IDLE && m.state != T_FREEING)) return;
    if (!m.npile[0] && !m.npile[1] && !m.nstuck) {
        m.restacked = false;
        return;
    }
    if (m.restacked) return;
    bool r = led(B_RED), g = led(B_GREEN), b = led(B_BLUE);
    if (r && !g && !b) {  /* FAULT: free the throat, gather every card */
        m.restacked = true;
        gather();
        sensors();
    } else if (!g && b) {  /* STACK: blue left, magenta right */
        dealer_start(choose(r ? 1 : 0), 1, t);
    } else if (!r && g && !b) {  /* READY: the hand is over, gather */
        dealer_start(choose(0), 2, t);
    }
}

/* -- the serial line and the controls ------------------------------------------------------ */
/* line noise on request: a byte's bits flipped at random, either way */
static uint8_t noisy(uint8_t byte)
{
    if (m.noise > 0 && rnd() < m.noise) byte ^= (uint8_t)(1 + rnd() * 255);
    return byte;
}

static void uart_out(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    (void)param;
    uint8_t byte = noisy((uint8_t)value);
    if (write(pty_fd, &byte, 1) < 0 && errno != EAGAIN && errno != EIO) perror("pty");
}

static void uart_xon(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    (void)param;
    if (value) xon = true;
}

static void uart_xoff(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    (void)param;
    xon = !value;
}

static void print_list(const char *name, const int *cards, int n)
{
    printf(" %s=", name);
    for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", cards[i]);
}

static void state_line(void)
{
    printf("state t=%.1f motor=%.2f reverse=%.2f diverter=%d beam=%d led=%d%d%d wdtcsr=%02x "
           "last_rx=%.1f slip_ms=%.0f settled=%d battery=%.4f avcc=%u",
           now_us() / 1000.0, forward_duty(), reverse_duty(), diverter_pile(),
           !((port_d >> D_BEAM) & 1), led(B_RED), led(B_GREEN), led(B_BLUE), reg(R_WDTCSR),
           last_rx_us / 1000.0, slip_us / 1000.0,
           !m.npile[0] && !m.npile[1] && !m.nstuck && !m.dealer_step && m.state == T_IDLE &&
               !forward(),
           battery_volts(false), (unsigned)avcc_mv);
    if (clock_addr) {  /* the firmware's own clock, hw_ticks (ms) */
        uint8_t *c = avr->data + clock_addr;
        printf(" clock_ms=%u", (unsigned)((uint32_t)c[0] | (uint32_t)c[1] << 8 |
                                          (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24));
    }
    print_list("tray", m.tray, m.ntray);
    print_list("left", m.pile[0], m.npile[0]);
    print_list("right", m.pile[1], m.npile[1]);
    print_list("stuck", &m.stuck, m.nstuck);
    printf("\n");
    fflush(stdout);
}

/* the chip's SRAM in hex: tests look for what must not be there (a plan after its pass) */
static void ram_line(void)
{
    printf("ram ");
    for (int a = 0x100; a <= avr->ramend; a++) printf("%02x", avr->data[a]);
    printf("\n");
    fflush(stdout);
}

static void command(const char *line, uint64_t t)
{
    int n, ms;
    if (!strcmp(line, "state")) state_line();
    else if (!strcmp(line, "touch")) touch(t);
    else if (sscanf(line, "taps %d %d", &n, &ms) == 2 && n > 0 && ms >= 60) {
        m.taps_left = n;  /* paced in the chip's time, whatever the host's load */
        m.tap_period = (uint64_t)ms * 1000u;
        m.next_tap = t;
    } else if (sscanf(line, "chatter %d %d", &n, &ms) == 2 && n >= 0 && ms > 0) {
        m.touch_until = 0;  /* ms: here µs between flips */
        m.flips_left = 2 * n + 1;
        m.flip_period = (uint64_t)ms;
        m.next_flip = t;
    } else if (!strcmp(line, "press")) {  /* a finger held on the sensor until "release" */
        m.touch_until = 0;
        drive('D', D_TOUCH, true);
    } else if (!strcmp(line, "release")) drive('D', D_TOUCH, false);
    else if (!strcmp(line, "reset")) want_reset = true;  /* not from inside a timer */
    else if (!strcmp(line, "gather")) {  /* the dealer gathers every card into the tray */
        gather();
        sensors();
    }
    else if (!strcmp(line, "ram")) ram_line();
    else if (!strncmp(line, "avcc ", 5) && atoi(line + 5) >= 1800 && atoi(line + 5) <= 5500)
        set_avcc((uint32_t)atoi(line + 5));
    else if (!strcmp(line, "freeze")) frozen = true;  /* the chip hangs: no byte in or out */
    else if (!strcmp(line, "quit")) quit = true;
    else fprintf(stderr, "simavr-harness: unknown command %s\n", line);
}

static char cmd[256];
static size_t cmd_len;
static void io_commands_at(uint64_t t);
static void io_commands(void) { io_commands_at(now_us()); }

static void io(uint64_t t)
{
    static uint8_t buf[64];
    static size_t have, at;
    while (xon) {  /* host bytes into the chip's receive FIFO, while it has room */
        if (at == have) {
            ssize_t n = read(pty_fd, buf, sizeof buf);
            if (n <= 0) break;
            have = (size_t)n;
            at = 0;
        }
        if (!buf[at]) last_rx_us = t;  /* a frame's delimiter */
        avr_raise_irq(uart_in, noisy(buf[at++]));
    }
    io_commands_at(t);
}

static void io_commands_at(uint64_t t)
{
    char c;
    ssize_t n;
    while ((n = read(STDIN_FILENO, &c, 1)) == 1) {
        if (c == '\n') {
            cmd[cmd_len] = 0;
            cmd_len = 0;
            command(cmd, t);
        } else if (cmd_len < sizeof cmd - 1) {
            cmd[cmd_len++] = c;
        }
    }
    if (n == 0) quit = true;  /* whoever started us has gone */
}

static void motor_watch(uint64_t t)
{
    int now = forward_duty() > 0 ? 1 : reverse_duty() > 0 ? 2 : 0;
    if (now == motor_class) return;
    motor_class = now;
    static const char *names[] = {"off", "forward", "reverse"};
    printf("motor %s t=%.1f last_rx=%.1f\n", names[now], t / 1000.0, last_rx_us / 1000.0);
    fflush(stdout);
}

/* hold simulated time to wall time; wait for bytes or commands meanwhile */
static void pace(uint64_t t)
{
    uint64_t sim_ns = (t + slip_us) * 1000ull, wall = wall_ns() - start_ns;
    if (wall > sim_ns + SLIP_LIMIT_US * 1000ull) {
        slip_us += (wall - sim_ns) / 1000ull;  /* fell behind: do not rush to catch up */
        return;
    }
    if (sim_ns <= wall) return;
    struct pollfd fds[2] = {{pty_fd, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    struct timespec wait = {0, (long)(sim_ns - wall)};
    ppoll(xon ? fds : fds + 1, xon ? 2 : 1, &wait, NULL);  /* full FIFO: host bytes wait */
}

static avr_cycle_count_t tick(avr_t *a, avr_cycle_count_t when, void *param)
{
    (void)a;
    (void)param;
    uint64_t t = now_us();
    if (first_boot) clock_uptime(t);
    servo_frame(t);
    io(t);
    mechanism(t);
    dealer(t);
    motor_watch(t);
    pwm_still();
    pace(t);
    return when + avr_usec_to_cycles(avr, TICK_US);
}

static avr_cycle_count_t after_reset(avr_t *a, avr_cycle_count_t when, void *param)
{
    (void)a;
    (void)when;
    (void)param;
    redrive();
    last_adc_mv = 0;
    motor_class = -1;
    printf("reset t=%.1f\n", now_us() / 1000.0);
    fflush(stdout);
    return 0;  /* once */
}

/* a reset (ours or the watchdog's) forgets the cycle timers: start ours again, and
 * restore the input levels once the ports have reset */
static void on_reset(avr_t *a)
{
    if (core_reset) core_reset(a);
    first_boot = false;  /* the clock starts again at 0, as on the chip */
    servo_shown = -1;    /* the next pulse after a reset is shown again */
    next_frame = 0;
    avr_cycle_timer_register(a, 1, after_reset, NULL);
    avr_cycle_timer_register_usec(a, TICK_US, tick, NULL);
}

static void no_sleep(avr_t *a, avr_cycle_count_t how_long)
{
    (void)a;
    (void)how_long;  /* the tick paces simulated time instead */
}

/* -- setup ------------------------------------------------------------------------------------ */
static int open_pty(void)
{
    int fd = posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 || grantpt(fd) || unlockpt(fd)) return -1;
    /* keep the other end open ourselves: no EIO while the host has not opened it */
    int slave = open(ptsname(fd), O_RDWR | O_NOCTTY);
    if (slave < 0) return -1;
    struct termios tio;
    tcgetattr(slave, &tio);
    cfmakeraw(&tio);
    tcsetattr(slave, TCSANOW, &tio);
    return fd;
}

static void parse_fault(const char *spec)
{
    int card = 0, frees = -1;
    double volts;
    if (sscanf(spec, "jam:%d:%d", &card, &frees) >= 1 && card > 0 && m.njams < MAX_FAULTS) {
        m.jams[m.njams++] = (struct fault){card, frees};
    } else if (sscanf(spec, "misfeed:%d:%d", &card, &frees) >= 1 && card > 0 &&
               m.nmisfeeds < MAX_FAULTS) {
        m.misfeeds[m.nmisfeeds++] = (struct fault){card, frees};
    } else if (sscanf(spec, "double:%d", &card) == 1 && card > 0 && m.ndoubles < MAX_FAULTS) {
        m.doubles[m.ndoubles++] = card;
    } else if (sscanf(spec, "battery:%lf", &volts) == 1 && volts > 0 && volts <= 15) {
        m.rest_volts = volts;
    } else if (sscanf(spec, "dropout:%lf", &volts) == 1 && volts > 0 && volts <= 1000) {
        m.dropout_us = volts * 1000;  /* milliseconds */
    } else {
        fprintf(stderr, "simavr-harness: bad --fault %s: expected jam:CARD[:FREES_AFTER], "
                "misfeed:CARD[:FREES_AFTER], double:CARD, battery:VOLTS or dropout:MS\n",
                spec);
        exit(2);
    }
}

/* simavr's messages go to stderr: stdout is the harness's own protocol */
static void logger(avr_t *a, const int level, const char *format, va_list ap)
{
    if (level > (a ? a->log : LOG_WARNING) || level > LOG_WARNING) return;
    vfprintf(stderr, format, ap);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: simavr-harness [--cards N] [--card-rate PER_S] [--spinup S] [--feed top|bottom]\n"
            "       [--dealer instructed|other|both] [--lift-gap S] [--seed N] [--noise P]\n"
            "       [--uptime SECONDS] [--flap-travel S] [--frame-scale F] [--avcc MV] [--bandgap MV]\n"
            "       [--fault jam:CARD[:FREES]|misfeed:CARD[:FREES]|double:CARD|battery:VOLTS|\n"
            "                dropout:MS]...\n"
            "       FIRMWARE.elf\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cards", 1, 0, 'n'}, {"card-rate", 1, 0, 'r'}, {"spinup", 1, 0, 's'},
        {"feed", 1, 0, 'f'}, {"dealer", 1, 0, 'd'}, {"lift-gap", 1, 0, 'g'},
        {"seed", 1, 0, 'S'}, {"fault", 1, 0, 'F'}, {"noise", 1, 0, 'N'},
        {"uptime", 1, 0, 'U'}, {"flap-travel", 1, 0, 'T'}, {"frame-scale", 1, 0, 'X'},
        {"avcc", 1, 0, 'A'}, {"bandgap", 1, 0, 'B'}, {0, 0, 0, 0}};
    m.cards = 52;
    m.card_rate = 5.0;
    m.spinup = 0.2;
    m.duty = 0.4;
    m.lift_gap = 0.6;
    m.rest_volts = 9.5;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n': m.cards = atoi(optarg); break;
        case 'r': m.card_rate = atof(optarg); break;
        case 's': m.spinup = atof(optarg); break;
        case 'f': m.feed_bottom = !strcmp(optarg, "bottom"); break;
        case 'd':
            m.habit = !strcmp(optarg, "other") ? OTHER : !strcmp(optarg, "both") ? BOTH
                                                                                 : INSTRUCTED;
            break;
        case 'g': m.lift_gap = atof(optarg); break;
        case 'S': rng_state = strtoull(optarg, NULL, 10) * 2 + 1; break;
        case 'F': parse_fault(optarg); break;
        case 'N': m.noise = atof(optarg); break;
        case 'U': uptime_s = atof(optarg); break;
        case 'T': flap_travel = atof(optarg); break;
        case 'X': frame_scale = atof(optarg); break;
        case 'A': avcc_mv = (uint32_t)atoi(optarg); break;
        case 'B': bandgap_mv = (uint32_t)atoi(optarg); break;
        default: usage();
        }
    }
    if (optind != argc - 1 || m.cards < 1 || m.cards > MAX_CARDS || !(m.card_rate > 0) ||
        !(uptime_s >= 0 && uptime_s < 4e9) || !(flap_travel >= 0 && flap_travel < 2) ||
        !(frame_scale >= 0 && frame_scale <= 1) || avcc_mv < 1800 || avcc_mv > 5500 ||
        bandgap_mv < 1000 || bandgap_mv > 1200)
        usage();
    clock_addr = find_symbol(argv[optind], "hw_ticks");
    top_addr = find_symbol(argv[optind], "hw_motor_top");
    if (uptime_s > 0 && !clock_addr) {
        fprintf(stderr, "simavr-harness: --uptime: no hw_ticks in %s (avr-nm)\n", argv[optind]);
        return 2;
    }
    for (int i = 0; i < m.cards; i++) m.tray[i] = i;
    m.ntray = m.cards;

    avr_global_logger_set(logger);
    elf_firmware_t fw;
    memset(&fw, 0, sizeof fw);
    if (elf_read_firmware(argv[optind], &fw)) {
        fprintf(stderr, "simavr-harness: cannot read %s\n", argv[optind]);
        return 2;
    }
    avr = avr_make_mcu_by_name("atmega328p");
    if (!avr || avr_init(avr)) return 3;
    fw.frequency = 16000000;
    avr_load_firmware(avr, &fw);
    avr->frequency = 16000000;
    set_avcc(avcc_mv);
    avr->sleep = no_sleep;
    core_reset = avr->reset;
    avr->reset = on_reset;
    avr->log = LOG_WARNING;

    pty_fd = open_pty();
    if (pty_fd < 0) {
        perror("simavr-harness: pseudo-terminal");
        return 3;
    }
    fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);

    uint32_t flags = 0;
    avr_ioctl(avr, AVR_IOCTL_UART_GET_FLAGS('0'), &flags);
    flags &= ~AVR_UART_FLAG_STDIO;
    avr_ioctl(avr, AVR_IOCTL_UART_SET_FLAGS('0'), &flags);
    uart_in = avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_INPUT);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_OUTPUT),
                            uart_out, NULL);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_OUT_XON),
                            uart_xon, NULL);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_OUT_XOFF),
                            uart_xoff, NULL);
    adc_in = avr_io_getirq(avr, AVR_IOCTL_ADC_GETIRQ, ADC_IRQ_ADC0);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('D'), D_FWD), pwm_edge,
                            &pwm_pins[0]);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('D'), D_REV), pwm_edge,
                            &pwm_pins[1]);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('B'), B_SERVO),
                            servo_edge, NULL);

    /* the beam and touch pins are INT0/INT1, low-level triggered at reset: simavr would
     * poll them every cycle while low, though the firmware never enables them */
    avr_extint_set_strict_lvl_trig(avr, 0, 0);
    avr_extint_set_strict_lvl_trig(avr, 1, 0);
    drive('D', D_BEAM, true);
    drive('D', D_TOUCH, false);
    sensors();
    adc_update(false);
    avr_cycle_timer_register_usec(avr, TICK_US, tick, NULL);

    printf("pty %s\n", ptsname(pty_fd));
    fflush(stdout);
    start_ns = wall_ns();
    while (!quit) {
        if (frozen) {  /* a hung chip (a test's "freeze"): only stdin is still read */
            struct pollfd in = {STDIN_FILENO, POLLIN, 0};
            poll(&in, 1, 50);
            io_commands();
            continue;
        }
        if (want_reset) {
            want_reset = false;
            avr_reset(avr);
        }
        int state = avr_run(avr);
        if (state == cpu_Done || state == cpu_Crashed) {
            printf("crashed state=%d t=%.1f\n", state, now_us() / 1000.0);
            fflush(stdout);
            return 3;
        }
    }
    avr_terminate(avr);
    return 0;
}
