/* The shuffler's microcontroller: the serial protocol's MCU end (docs/protocol.md).
 *
 * Safety, as the MCU owns it: every output is driven safe in the first instructions
 * after reset; the hardware watchdog resets a chip that stops looping; the motor
 * stops and the pass ends (LINK_LOST, latched) when the host falls silent; a jam or
 * misfeed latches until CLEAR; nothing moves without a plan from the host. */
#include <avr/eeprom.h>
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
#include <avr/wdt.h>
#include <string.h>

#include "hw.h"
#include "link.h"
#include "pass.h"
#include "protocol.h"
#include "uart.h"

#define FIRMWARE "shuffler-avr 0.1"
#define BLINK_MS 300
#define TOUCH_LOCKOUT_MS 300
#define DEBOUNCE_MS 3

static uint16_t boot_id;
static uint8_t latched, latched_card_hi, latched_card_lo;
static uint8_t signal_now = SIGNAL_READY, signal_pile = PILE_NONE;
static uint8_t beeps;            /* half-periods of buzzer left */
static uint32_t beep_at;

/* a watchdog reset leaves the watchdog running: stop it before anything else */
void early(void) __attribute__((naked, used, section(".init3")));
void early(void)
{
    MCUSR = 0;
    wdt_disable();
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, (uint16_t)(v >> 16));
    put16(p + 2, (uint16_t)v);
}

/* -- the status LED and buzzer -------------------------------------------------------- */
static void show(uint8_t signal, uint8_t pile)
{
    signal_now = signal;
    signal_pile = pile;
    beeps = signal == SIGNAL_STACK ? 2 : (signal == SIGNAL_FAULT || signal == SIGNAL_LOW_BATTERY) ? 6 : 0;
    beep_at = hw_ms();
}

static void led_update(uint32_t now)
{
    bool on = (now / BLINK_MS) & 1;
    switch (signal_now) {
    case SIGNAL_READY: led_set(false, true, false); break;
    case SIGNAL_RUNNING: led_set(true, true, true); break;
    case SIGNAL_STACK: led_set(signal_pile == 1, false, true); break;  /* blue, magenta */
    case SIGNAL_LOW_BATTERY: led_set(on, on, false); break;          /* yellow, blinking */
    case SIGNAL_FAULT: led_set(on, false, false); break;             /* red, blinking */
    default: led_set(false, false, false); break;
    }
    if (beeps && (uint32_t)(now - beep_at) >= 100) {
        beep_at = now;
        beeps--;
        buzzer_set(beeps & 1);
    }
}

/* -- replies ------------------------------------------------------------------------------ */
static void hello_reply(void)
{
    uint8_t p[5 + sizeof FIRMWARE - 1];
    p[0] = PROTOCOL_MAJOR;
    p[1] = PROTOCOL_MINOR;
    p[2] = CAP_PILE_SENSORS | CAP_BATTERY | CAP_REVERSE;
    put16(p + 3, boot_id);
    memcpy(p + 5, FIRMWARE, sizeof FIRMWARE - 1);
    link_queue(MSG_HELLO_REPLY, p, sizeof p);
}

static void status_reply(void)
{
    uint8_t p[6] = {motor_speed() != 0, tray_loaded(), beam_blocked(), latched,
                    latched_card_hi, latched_card_lo};
    link_queue(MSG_STATUS_REPLY, p, sizeof p);
}

static void pass_done(uint8_t fault)  /* a refusal: nothing moved */
{
    struct pass_report r;
    memset(&r, 0, sizeof r);
    r.fault = fault;
    pass_on_done(&r);
}

void pass_on_card(uint16_t counted, uint16_t left, uint16_t right)
{
    uint8_t p[6];
    put16(p, counted);
    put16(p + 2, left);
    put16(p + 4, right);
    link_send(MSG_CARD, p, sizeof p);
}

void pass_on_done(const struct pass_report *r)
{
    uint8_t p[17];
    put16(p, r->counted);
    put16(p + 2, r->left);
    put16(p + 4, r->right);
    put32(p + 6, r->ms);
    put16(p + 10, r->min_mv);
    p[12] = r->tray_empty;
    p[13] = r->retries;
    p[14] = r->fault;
    put16(p + 15, r->fault_card);
    link_queue(MSG_PASS_DONE, p, sizeof p);
    if (r->fault == FAULT_JAM || r->fault == FAULT_MISFEED || r->fault == FAULT_LINK_LOST) {
        latched = r->fault;
        latched_card_hi = (uint8_t)(r->fault_card >> 8);
        latched_card_lo = (uint8_t)r->fault_card;
        show(SIGNAL_FAULT, PILE_NONE);
    }
}

/* -- requests ---------------------------------------------------------------------------- */
static void start_pass(const uint8_t *p, uint8_t len)
{
    if (len < 2) return pass_done(FAULT_BAD_REQUEST);
    uint16_t n = (uint16_t)p[0] << 8 | p[1];
    if (pass_running() || !n || n > MAX_CARDS || len != 2 + (n + 7u) / 8u)
        return pass_done(FAULT_BAD_REQUEST);
    if (latched) return pass_done(FAULT_LATCHED);
    show(SIGNAL_RUNNING, PILE_NONE);
    pass_start(p + 2, n, hw_ms());
}

void link_on_message(uint8_t type, const uint8_t *p, uint8_t len)
{
    uint32_t now = hw_ms();
    switch (type) {
    case MSG_HELLO:
        pass_end(FAULT_LINK_LOST, now);  /* a new session: the old pass is over */
        link_restart();
        hello_reply();
        break;
    case MSG_PASS:
        start_pass(p, len);
        break;
    case MSG_STOP:
        pass_end(FAULT_STOPPED, now);
        outputs_safe();
        break;
    case MSG_STATUS:
        status_reply();
        break;
    case MSG_BATTERY: {
        uint8_t b[3];
        put16(b, battery_mv());
        b[2] = motor_speed() != 0;
        link_queue(MSG_BATTERY_REPLY, b, sizeof b);
        break;
    }
    case MSG_CLEAR:
        if (latched && !pass_running() && !beam_blocked()) {
            latched = latched_card_hi = latched_card_lo = 0;
            show(SIGNAL_READY, PILE_NONE);
        }
        status_reply();
        break;
    case MSG_SIGNAL:
        if (len == 3 && p[0] <= SIGNAL_OFF && !latched) {
            /* STACK with no next pass: the hand is done, the pile order no longer matters */
            show(p[0] == SIGNAL_STACK && !p[2] ? SIGNAL_READY : p[0], p[1]);
        }
        break;
    default:
        break;  /* HEARTBEAT, and types from a newer host */
    }
}

/* -- the sensors the host hears about ------------------------------------------------------ */
struct input {
    bool level, stable;
    uint8_t count;
};

static struct input in_touch, in_tray, in_pile[2];
static uint32_t last_touch;

static bool changed(struct input *in, bool level)
{
    if (level != in->level) {
        in->level = level;
        in->count = 0;
        return false;
    }
    if (level == in->stable || ++in->count < DEBOUNCE_MS) return false;
    in->stable = level;
    return true;
}

static void event(uint8_t kind, uint8_t pile, uint32_t now)
{
    uint8_t p[6] = {kind, pile};
    put32(p + 2, now);
    link_queue(MSG_INPUT, p, sizeof p);
}

static void inputs(uint32_t now)
{
    if (changed(&in_touch, touched()) && in_touch.stable &&
        (uint32_t)(now - last_touch) >= TOUCH_LOCKOUT_MS) {
        last_touch = now;
        event(INPUT_TOUCH, PILE_NONE, now);
    }
    if (changed(&in_tray, tray_loaded()))
        event(in_tray.stable ? INPUT_TRAY_LOADED : INPUT_TRAY_EMPTY, PILE_NONE, now);
    for (uint8_t i = 0; i < 2; i++)
        if (changed(&in_pile[i], pile_covered(i)) && !in_pile[i].stable)
            event(INPUT_PILE_LIFTED, i, now);
}

static void inputs_init(void)
{
    in_touch.level = in_touch.stable = touched();
    in_tray.level = in_tray.stable = tray_loaded();
    for (uint8_t i = 0; i < 2; i++) in_pile[i].level = in_pile[i].stable = pile_covered(i);
}

/* -- boot and the loop ------------------------------------------------------------------ */
static uint16_t new_boot_id(void)
{
    uint16_t *counter = (uint16_t *)0;  /* EEPROM: boots since the chip was programmed */
    uint16_t boots = eeprom_read_word(counter) + 1;
    eeprom_update_word(counter, boots);
    uint8_t seed[4];
    put16(seed, boots);
    put16(seed + 2, noise_seed());
    return crc16(seed, sizeof seed);
}

int main(void)
{
    hw_init();
    outputs_safe();
    uart_init();
    boot_id = new_boot_id();
    wdt_enable(WDTO_250MS);
    sei();
    inputs_init();
    show(SIGNAL_READY, PILE_NONE);
    hello_reply();  /* unasked: a host that hears a new boot id knows we restarted */
    uint32_t last = hw_ms();
    for (;;) {
        wdt_reset();
        uint8_t byte;
        uint32_t now = hw_ms();
        while (uart_get(&byte)) link_rx(byte, now);
        if (now != last) {
            last = now;
            if (pass_running() && (uint32_t)(now - link_last_heard()) > SILENCE_MS)
                pass_end(FAULT_LINK_LOST, now);  /* the host fell silent */
            pass_tick(now);
            inputs(now);
            led_update(now);
        }
        link_poll(now);
        /* idle until the next interrupt: the tick or a byte */
        cli();
        if (!uart_pending()) {
            sleep_enable();
            sei();
            sleep_cpu();
            sleep_disable();
        }
        sei();
    }
}
