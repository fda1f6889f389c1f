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

#include "board.h"
#include "hw.h"
#include "link.h"
#include "pass.h"
#include "protocol_gen.h"
#include "uart.h"

#define STR_(x) #x
#define STR(x) STR_(x)
/* a calibrated build names its bandgap (board.h): the host then drops the spread's margin */
#if BANDGAP_CALIBRATED
#define FIRMWARE "shuffler-avr 0.3 bg=" STR(BANDGAP_MV)
#else
#define FIRMWARE "shuffler-avr 0.3"
#endif
#define BLINK_MS 300
#define DEBOUNCE_MS 3
/* A touch is continuous contact (issue 46). Each press after a release of at least
 * TOUCH_REARM_MS is one INPUT TOUCH, sent at its debounced press edge; a release shorter
 * than that (a finger sliding on the pad's edge, a TTP223's flicker at its threshold)
 * continues the same touch, as the Pi build's [gpio] touch_debounce_s (0.02 s) does.
 * This replaces a 300 ms lock-out from the last touch, which was there against chatter
 * (docs/firmware.md): it swallowed every other tap at 5 a second. Bounces shorter than
 * DEBOUNCE_MS never reach it; a TTP223 debounces its pad itself, and what a second touch
 * means (during a pass, just after one, a double tap) is the host's policy
 * (shuffler/control/touch.py), never the chip's. */
#define TOUCH_REARM_MS 20
#define RX_PER_TURN 32           /* about 3 ms of bytes at 115200 baud */

static uint16_t boot_id;
static uint8_t latched;          /* the latched fault: JAM, MISFEED or LINK_LOST */
static uint16_t latched_card;
static bool configured;
static uint8_t signal_now = SIGNAL_OFF, signal_pile = PILE_NONE;
static uint8_t beeps;            /* half-periods of buzzer left */
static uint32_t beep_at;
static uint16_t stopped_id;      /* the pass a STOP named: a PASS with it never runs */
/* MCUSR at reset, saved before the C runtime clears RAM (.noinit) */
static uint8_t reset_flags __attribute__((section(".noinit")));

/* before the C runtime: the motor driver's inputs and the servo pin driven low (the
 * pins float at reset; pull-downs hold the driver off until here), and the watchdog
 * a watchdog reset leaves running stopped until main() starts it afresh */
void early(void) __attribute__((naked, used, section(".init3")));
void early(void)
{
    PORTD = 0;
    DDRD = _BV(PIN_MOTOR_FWD) | _BV(PIN_MOTOR_REV);
    PORTB = 0;
    DDRB = _BV(PIN_DIVERTER);
    reset_flags = MCUSR;
    MCUSR = 0;
    wdt_disable();
}

/* -- the status LED and buzzer -------------------------------------------------------- */
static void show(uint8_t signal, uint8_t pile)
{
    signal_now = signal;
    signal_pile = pile;
    /* half-periods of 100 ms: one beep to stack, three for a fault or a low battery */
    beeps = signal == SIGNAL_STACK                                    ? 2
            : signal == SIGNAL_FAULT || signal == SIGNAL_LOW_BATTERY ? 6
                                                                      : 0;
    beep_at = hw_ms();
}

static void led_update(uint32_t now)
{
    bool on = (now / BLINK_MS) & 1;
    switch (signal_now) {
    case SIGNAL_READY: led_set(false, true, false); break;
    case SIGNAL_RUNNING: led_set(true, true, true); break;
    case SIGNAL_STACK: led_set(signal_pile == PILE_RIGHT, false, true); break; /* blue, magenta */
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

/* the last reset's cause, from MCUSR: the watchdog's bit wins (it also follows a
 * brown-out that did not clear); a DTR pulse on a Nano is the reset pin (EXTRF) */
static uint8_t reset_cause(void)
{
    return reset_flags & _BV(WDRF)    ? RESET_WATCHDOG
           : reset_flags & _BV(BORF)  ? RESET_BROWN_OUT
           : reset_flags & _BV(EXTRF) ? RESET_PIN
           : reset_flags & _BV(PORF)  ? RESET_POWER_ON
                                      : RESET_UNKNOWN;
}

/* -- replies ------------------------------------------------------------------------------ */
static void hello_reply(void)
{
    uint8_t p[MSG_HELLO_REPLY_LEN + sizeof FIRMWARE - 1];
    p[HELLO_REPLY_MAJOR_AT] = PROTOCOL_MAJOR;
    p[HELLO_REPLY_MINOR_AT] = PROTOCOL_MINOR;
    p[HELLO_REPLY_CAPABILITIES_AT] = CAP_PILE_SENSORS | CAP_BATTERY | CAP_REVERSE;
    proto_put_u16(p + HELLO_REPLY_BOOT_ID_AT, boot_id);
    p[HELLO_REPLY_RESET_CAUSE_AT] = reset_cause();
    memcpy(p + HELLO_REPLY_FIRMWARE_AT, FIRMWARE, sizeof FIRMWARE - 1);
    link_queue(MSG_HELLO_REPLY, p, sizeof p);
}

static void status_reply(void)
{
    uint8_t p[MSG_STATUS_REPLY_LEN];
    p[STATUS_REPLY_MOTOR_ON_AT] = motor_speed() != 0;
    p[STATUS_REPLY_TRAY_LOADED_AT] = tray_loaded();
    p[STATUS_REPLY_BEAM_BLOCKED_AT] = beam_blocked();
    p[STATUS_REPLY_FAULT_AT] = latched;
    proto_put_u16(p + STATUS_REPLY_FAULT_CARD_AT, latched_card);
    p[STATUS_REPLY_CONFIGURED_AT] = configured;
    proto_put_u16(p + STATUS_REPLY_PASS_ID_AT, pass_id());
    link_queue(MSG_STATUS_REPLY, p, sizeof p);
}

void pass_on_card(uint16_t id, uint16_t counted, uint16_t left, uint16_t right)
{
    uint8_t p[MSG_CARD_LEN];
    proto_put_u16(p + CARD_PASS_ID_AT, id);
    proto_put_u16(p + CARD_COUNTED_AT, counted);
    proto_put_u16(p + CARD_LEFT_AT, left);
    proto_put_u16(p + CARD_RIGHT_AT, right);
    link_send(MSG_CARD, p, sizeof p);
}

static void pass_done_payload(uint8_t *p, const struct pass_report *r)
{
    proto_put_u16(p + PASS_DONE_PASS_ID_AT, r->pass_id);
    proto_put_u16(p + PASS_DONE_COUNTED_AT, r->counted);
    proto_put_u16(p + PASS_DONE_LEFT_AT, r->left);
    proto_put_u16(p + PASS_DONE_RIGHT_AT, r->right);
    proto_put_u32(p + PASS_DONE_MS_AT, r->ms);
    proto_put_u16(p + PASS_DONE_MIN_MV_AT, r->min_mv);
    p[PASS_DONE_TRAY_EMPTY_AT] = r->tray_empty;
    p[PASS_DONE_RETRIES_AT] = r->retries;
    p[PASS_DONE_FAULT_AT] = r->fault;
    proto_put_u16(p + PASS_DONE_FAULT_CARD_AT, r->fault_card);
}

/* a refused PASS: answered through the ordinary queue (frame() made room before the
 * PASS was acknowledged); the result slot stays for the pass that runs */
static void refuse(const struct pass_report *r)
{
    uint8_t p[MSG_PASS_DONE_LEN];
    pass_done_payload(p, r);
    link_queue(MSG_PASS_DONE, p, sizeof p);
}

void pass_on_done(const struct pass_report *r)
{
    uint8_t p[MSG_PASS_DONE_LEN];
    pass_done_payload(p, r);
    link_result(p, sizeof p);  /* its own slot: never dropped, repeated until acknowledged */
    if (r->fault == FAULT_JAM || r->fault == FAULT_MISFEED || r->fault == FAULT_LINK_LOST) {
        latched = r->fault;
        latched_card = r->fault_card;
        show(SIGNAL_FAULT, PILE_NONE);
    }
}

/* -- requests ---------------------------------------------------------------------------- */
static bool in_range(const uint8_t *p, uint8_t at, uint8_t size, uint32_t lo, uint32_t hi)
{
    uint32_t v = size == 1 ? p[at] : size == 2 ? proto_get_u16(p + at) : proto_get_u32(p + at);
    return v >= lo && v <= hi;
}

#define RANGE(msg, field, size) \
    in_range(p, msg##_##field##_AT, size, msg##_##field##_MIN, msg##_##field##_MAX)

/* every payload from the host against its declaration (firmware/protocol_gen.h) */
bool link_valid(uint8_t type, const uint8_t *p, uint8_t len)
{
    switch (type) {
    case MSG_ACK:
        return len == MSG_ACK_LEN && RANGE(ACK, SEQ, 1);
    case MSG_HELLO:
        return len == MSG_HELLO_LEN;
    case MSG_STOP:
        return len == MSG_STOP_LEN;
    case MSG_HEARTBEAT:
    case MSG_STATUS:
    case MSG_BATTERY:
    case MSG_CLEAR:
        return len == 0;
    case MSG_CONFIG:  /* a 2.1 host's has no max_duty_pct */
        return (len == MSG_CONFIG_LEN_2_1 || (len == MSG_CONFIG_LEN &&
                                               RANGE(CONFIG, MAX_DUTY_PCT, 1))) &&
               RANGE(CONFIG, JAM_MS, 2) &&
               RANGE(CONFIG, MISFEED_MS, 2) && RANGE(CONFIG, RETRIES, 1) &&
               RANGE(CONFIG, REVERSE_MS, 2) && RANGE(CONFIG, MAX_PASS_MS, 4) &&
               RANGE(CONFIG, SETTLE_MS, 2) && RANGE(CONFIG, CARD_INTERVAL_MS, 2) &&
               RANGE(CONFIG, MIN_BLOCKED_US, 2) && RANGE(CONFIG, STALL_MV, 2) &&
               RANGE(CONFIG, SOFT_START_MS, 2) && RANGE(CONFIG, MIN_GAP_US, 2) &&
               proto_get_u16(p + CONFIG_SETTLE_MS_AT) < proto_get_u16(p + CONFIG_CARD_INTERVAL_MS_AT);
    case MSG_PASS: {
        if (len < MSG_PASS_LEN || !RANGE(PASS, PASS_ID, 2) || !RANGE(PASS, CARDS, 2)) return false;
        uint16_t n = proto_get_u16(p + PASS_CARDS_AT);
        if (len != PASS_LABELS_AT + (n + 7u) / 8u) return false;
        return !(n % 8) || !(p[len - 1] >> (n % 8));  /* no label bits past the last card */
    }
    case MSG_SIGNAL:
        return len == MSG_SIGNAL_LEN && p[SIGNAL_SIGNAL_AT] <= SIGNAL_OFF &&
               (p[SIGNAL_PILE_AT] <= PILE_RIGHT || p[SIGNAL_PILE_AT] == PILE_NONE);
    default:
        return false;  /* a type this firmware does not know */
    }
}

static void take_config(const uint8_t *p, uint8_t len)
{
    if (pass_running()) return;  /* not taken: STATUS_REPLY shows the pass running */
    motor_cap(len == MSG_CONFIG_LEN ? p[CONFIG_MAX_DUTY_PCT_AT] : CONFIG_MAX_DUTY_PCT_ABSENT);
    limits.jam_ms = proto_get_u16(p + CONFIG_JAM_MS_AT);
    limits.misfeed_ms = proto_get_u16(p + CONFIG_MISFEED_MS_AT);
    limits.retries = p[CONFIG_RETRIES_AT];
    limits.reverse_ms = proto_get_u16(p + CONFIG_REVERSE_MS_AT);
    limits.max_pass_ms = proto_get_u32(p + CONFIG_MAX_PASS_MS_AT);
    limits.settle_ms = proto_get_u16(p + CONFIG_SETTLE_MS_AT);
    limits.card_interval_ms = proto_get_u16(p + CONFIG_CARD_INTERVAL_MS_AT);
    limits.min_blocked_us = proto_get_u16(p + CONFIG_MIN_BLOCKED_US_AT);
    limits.stall_mv = proto_get_u16(p + CONFIG_STALL_MV_AT);
    limits.soft_start_ms = proto_get_u16(p + CONFIG_SOFT_START_MS_AT);
    limits.min_gap_us = proto_get_u16(p + CONFIG_MIN_GAP_US_AT);
    configured = true;
}

static void start_pass(uint8_t *p, uint8_t len)
{
    uint16_t id = proto_get_u16(p + PASS_PASS_ID_AT), n = proto_get_u16(p + PASS_CARDS_AT);
    uint8_t refused = id == stopped_id ? FAULT_STOPPED  /* stopped before it came */
                      : pass_running() || !link_result_free() ? FAULT_BUSY
                      : latched      ? FAULT_LATCHED
                      : !configured  ? FAULT_NOT_CONFIGURED
                      : n > MAX_CARDS ? FAULT_BAD_REQUEST
                                      : FAULT_NONE;
    if (refused) {
        struct pass_report r;
        memset(&r, 0, sizeof r);
        r.pass_id = id;
        r.fault = refused;
        refuse(&r);
    } else {
        show(SIGNAL_RUNNING, PILE_NONE);
        pass_start(id, p + PASS_LABELS_AT, n, hw_us());
    }
    memset(p + PASS_LABELS_AT, 0, (size_t)(len - PASS_LABELS_AT));  /* the plan's copy */
}

/* whether a request needs room in the queue for its answer (frame() does not
 * acknowledge one it could not answer: the host repeats it once the queue drains) */
bool link_answers(uint8_t type)
{
    return type == MSG_CONFIG || type == MSG_PASS || type == MSG_STATUS ||
           type == MSG_BATTERY || type == MSG_CLEAR;
}

void link_on_message(uint8_t type, uint8_t *p, uint8_t len)
{
    uint32_t now = hw_us();
    switch (type) {
    case MSG_HELLO:
        /* a new session: the old pass ends (its PASS_DONE goes with the old queue) */
        pass_end(FAULT_LINK_LOST, now);
        link_restart();
        configured = false;
        motor_cap(CONFIG_MAX_DUTY_PCT_ABSENT);  /* the CONFIG's cap goes with it */
        stopped_id = 0;
        hello_reply();
        break;
    case MSG_CONFIG:
        take_config(p, len);
        status_reply();
        break;
    case MSG_PASS:
        start_pass(p, len);
        break;
    case MSG_STOP: {
        /* whatever runs ends, whichever id this names; the pass named, if it has not
         * come yet, never runs */
        uint16_t id = proto_get_u16(p + STOP_PASS_ID_AT);
        pass_stop(id, now);
        stopped_id = id;
        outputs_safe();
        break;
    }
    case MSG_STATUS:
        status_reply();
        break;
    case MSG_BATTERY: {
        uint8_t b[MSG_BATTERY_REPLY_LEN];
        proto_put_u16(b + BATTERY_REPLY_MV_AT, battery_mv());
        b[BATTERY_REPLY_UNDER_LOAD_AT] = motor_speed() != 0;
        link_queue(MSG_BATTERY_REPLY, b, sizeof b);
        break;
    }
    case MSG_CLEAR:
        if (latched && !pass_running() && !beam_blocked()) {
            latched = FAULT_NONE;
            latched_card = 0;
            show(SIGNAL_READY, PILE_NONE);
        }
        status_reply();
        break;
    case MSG_SIGNAL:
        if (!latched) {
            /* STACK with no next pass (the hand's last stack, since 2.3) shows its pile
             * too: the hand is finished only once the stack is seen to match it */
            show(p[SIGNAL_SIGNAL_AT], p[SIGNAL_PILE_AT]);
        }
        break;
    default:
        break;  /* HEARTBEAT */
    }
}

/* -- the sensors the host hears about ------------------------------------------------------ */
struct input {
    bool level, stable;
    uint8_t count;
};

static struct input in_touch, in_tray, in_pile[2];
static uint32_t touch_released;  /* when the touch line's debounced release began */

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
    uint8_t p[MSG_INPUT_LEN];
    p[INPUT_KIND_AT] = kind;
    p[INPUT_PILE_AT] = pile;
    proto_put_u32(p + INPUT_MS_AT, now);
    link_queue(MSG_INPUT, p, sizeof p);
}

static void inputs(uint32_t now)
{
    if (changed(&in_touch, touched())) {
        if (!in_touch.stable) touch_released = now;  /* the touch may yet go on */
        else if ((uint32_t)(now - touch_released) >= TOUCH_REARM_MS)
            event(INPUT_TOUCH, PILE_NONE, now);  /* a new contact, not the last one's bounce */
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
    /* a time, not 0: the clock may be anywhere */
    touch_released = hw_ms() - TOUCH_REARM_MS;
}

/* -- boot and the loop ------------------------------------------------------------------ */
static uint16_t new_boot_id(void)
{
    uint16_t *counter = (uint16_t *)0;  /* EEPROM: boots since the chip was programmed */
    uint16_t boots = eeprom_read_word(counter) + 1;
    eeprom_update_word(counter, boots);
    uint8_t seed[4];
    proto_put_u16(seed, boots);
    proto_put_u16(seed + 2, noise_seed());
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
    hello_reply();  /* unasked: a host that hears a new boot id knows we restarted */
    uint32_t last = hw_ms();
    for (;;) {
        uint8_t byte;
        uint32_t now = hw_ms();
        /* at most RX_PER_TURN bytes a turn: a flood of frames cannot starve the tick */
        for (uint8_t n = 0; n < RX_PER_TURN && uart_get(&byte); n++) link_rx(byte, now);
        if (now != last) {
            last = now;
            uint32_t silent = now - link_last_heard();
            if (pass_running() && silent > SILENCE_MS)
                pass_end(FAULT_LINK_LOST, hw_us());  /* the host fell silent */
            pass_host_quiet(silent > REDRIVE_QUIET_MS);  /* no retry moves meanwhile */
            pass_tick(hw_us());
            inputs(now);
            led_update(now);
            wdt_reset();  /* fed only once the 1 kHz work has run */
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
