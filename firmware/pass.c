#include "pass.h"

#include <string.h>

#include "hw.h"
#include "protocol.h"

#define PLAN_BYTES (MAX_CARDS / 8)
#define RAMP_STEPS 5
#define REVERSE_SPEED (-153)       /* 60 % backwards */
#define BATTERY_EVERY_MS 10

enum state { IDLE, RAMP, FEED, REVERSE };

struct limits limits = {
    .jam_ms = 500, .misfeed_ms = 1000, .reverse_ms = 300, .stall_mv = 5600,
    .soft_start_ms = 100, .settle_ms = 0, .retries = 2, .max_pass_ms = 90000,
};

static uint8_t plan[PLAN_BYTES];
static uint16_t expected;
static enum state state;
static struct pass_report r;
static uint32_t started, phase_at, last_edge, blocked_at, battery_at;
static bool blocked, was_blocked, stuck;
static uint8_t retries_here, ramp_step;
static uint16_t latest_mv;

static uint8_t label(uint16_t i) { return (uint8_t)((plan[i >> 3] >> (i & 7)) & 1); }

bool pass_running(void) { return state != IDLE; }
uint16_t pass_latest_mv(void) { return latest_mv; }

static void ramp(uint32_t now)
{
    state = RAMP;
    ramp_step = 1;
    phase_at = now;
    motor_set(255 / RAMP_STEPS);
}

void pass_start(const uint8_t *labels, uint16_t cards, uint32_t now)
{
    memset(&r, 0, sizeof r);
    memcpy(plan, labels, (cards + 7u) / 8u);
    expected = cards;
    started = battery_at = now;
    blocked = was_blocked = stuck = false;
    retries_here = 0;
    latest_mv = 0;
    diverter_set(label(0));
    ramp(now);
}

void pass_end(uint8_t fault, uint32_t now)
{
    if (state == IDLE) return;
    outputs_safe();
    state = IDLE;
    memset(plan, 0, sizeof plan);  /* nobody reads a plan after its pass */
    r.ms = now - started;
    r.tray_empty = !tray_loaded();
    r.fault = fault;
    if (fault != FAULT_NONE) r.fault_card = (uint16_t)(r.counted + 1);
    pass_on_done(&r);
}

static void measure(uint32_t now)
{
    if (!motor_speed() || (uint32_t)(now - battery_at) < BATTERY_EVERY_MS) return;
    battery_at = now;
    latest_mv = battery_mv();
    if (!r.min_mv || latest_mv < r.min_mv) r.min_mv = latest_mv;
}

/* nothing came in time: give up on this card, or back it out and feed again */
static void retry_or_fail(uint8_t fault, uint32_t now)
{
    if (retries_here >= limits.retries) {
        pass_end(fault, now);
        return;
    }
    retries_here++;
    r.retries++;
    /* a card the reverse did not free: its trailing edge, when it comes, is no card */
    stuck = fault == FAULT_JAM && beam_blocked();
    blocked = false;
    ramp(now);
}

static void timed_out(uint32_t now)
{
    if (!blocked && !tray_loaded()) {  /* the tray ran out: fewer cards than planned */
        pass_end(FAULT_NONE, now);
        return;
    }
    motor_set(0);  /* at once */
    if (!blocked && latest_mv && latest_mv < limits.stall_mv) {
        pass_end(FAULT_LOW_BATTERY, now);
        return;
    }
    if (blocked && limits.reverse_ms) {
        motor_set(REVERSE_SPEED);
        state = REVERSE;
        phase_at = now;
        return;
    }
    retry_or_fail(blocked ? FAULT_JAM : FAULT_MISFEED, now);
}

static void edge(bool now_blocked, uint32_t now)
{
    if (now_blocked) {
        blocked = true;
        blocked_at = now;
        return;
    }
    if (!blocked || stuck) {  /* not a card: the jammed one leaving backwards */
        blocked = stuck = false;
        last_edge = now;
        return;
    }
    blocked = false;
    last_edge = now;
    retries_here = 0;
    if (label(r.counted)) r.right++;
    else r.left++;
    r.counted++;
    if (r.counted < expected) diverter_set(label(r.counted));
    pass_on_card(r.counted, r.left, r.right);
    if (r.counted >= expected) pass_end(FAULT_NONE, now);
    else if (!tray_loaded()) pass_end(FAULT_NONE, now);  /* a double feed emptied it */
}

void pass_tick(uint32_t now)
{
    if (state == IDLE) return;
    bool b = beam_blocked();
    if (b != was_blocked) {
        was_blocked = b;
        if (state == REVERSE) {
            if (!b) blocked = false;  /* the jammed card backed out of the beam */
        } else {
            edge(b, now);
            if (state == IDLE) return;
        }
    }
    measure(now);
    if ((uint32_t)(now - started) > limits.max_pass_ms) {
        pass_end(FAULT_TIMEOUT, now);
        return;
    }
    switch (state) {
    case RAMP:
        if ((uint32_t)(now - phase_at) * RAMP_STEPS < (uint32_t)limits.soft_start_ms * ramp_step)
            break;
        if (++ramp_step < RAMP_STEPS) {
            motor_set((int16_t)(255 * ramp_step / RAMP_STEPS));
            break;
        }
        motor_set(255);  /* full speed: from here the beam is watched */
        state = FEED;
        last_edge = now;
        break;
    case FEED:
        if (blocked ? (uint32_t)(now - blocked_at) > limits.jam_ms
                    : (uint32_t)(now - last_edge) > limits.misfeed_ms)
            timed_out(now);
        break;
    case REVERSE:
        if ((uint32_t)(now - phase_at) >= limits.reverse_ms) {
            motor_set(0);
            retry_or_fail(FAULT_JAM, now);
        }
        break;
    case IDLE:
        break;
    }
}
