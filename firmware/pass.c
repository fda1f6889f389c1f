#include "pass.h"

#include <string.h>

#include "hw.h"
#include "protocol_gen.h"

#define PLAN_BYTES (MAX_CARDS / 8)
#define RAMP_STEPS 5
#define REVERSE_SPEED (-153)       /* 60 % backwards */
#define BATTERY_EVERY_MS 10        /* the protocol asks for at least every 50 */

enum state { IDLE, SETTLE, RAMP, FEED, REVERSE };

struct limits limits;

static uint8_t plan[PLAN_BYTES];
static uint16_t expected;
static enum state state;
static struct pass_report r;
static uint32_t started, phase_at, watch_from, blocked_at, battery_at, blocked_at_us;
static bool blocked, level, stuck;
static uint8_t retries_here, ramp_step;
static uint16_t latest_mv;

static uint8_t label(uint16_t i) { return (uint8_t)((plan[i >> 3] >> (i & 7)) & 1); }

bool pass_running(void) { return state != IDLE; }
uint16_t pass_id(void) { return state != IDLE ? r.pass_id : 0; }

/* the motor starts (ramping up): the misfeed timer runs from here */
static void motor_start(uint32_t now)
{
    state = RAMP;
    ramp_step = 1;
    phase_at = watch_from = now;
    motor_set(limits.soft_start_ms ? 255 / RAMP_STEPS : 255);
    if (!limits.soft_start_ms) state = FEED;
}

void pass_start(uint16_t id, const uint8_t *labels, uint16_t cards, uint32_t now)
{
    memset(&r, 0, sizeof r);
    r.pass_id = id;
    memcpy(plan, labels, (cards + 7u) / 8u);
    expected = cards;
    started = battery_at = phase_at = now;
    blocked = stuck = false;
    level = beam_blocked();
    beam_edges_clear();
    retries_here = 0;
    latest_mv = 0;
    diverter_set(label(0));
    state = SETTLE;
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

static void retry(uint32_t now)
{
    retries_here++;
    r.retries++;
    /* a card the reverse did not free: its cleared edge, when it comes, is no card */
    stuck = blocked;
    blocked = false;
    motor_start(now);
}

static void timed_out(uint32_t now)
{
    motor_set(0);  /* at once */
    if (blocked) {
        if (retries_here >= limits.retries) {
            pass_end(FAULT_JAM, now);
        } else {
            motor_set(REVERSE_SPEED);  /* an H-bridge; without one this only waits */
            state = REVERSE;
            phase_at = now;
        }
        return;
    }
    if (latest_mv && latest_mv < limits.stall_mv) pass_end(FAULT_LOW_BATTERY, now);
    else if (retries_here >= limits.retries) pass_end(FAULT_MISFEED, now);
    else retry(now);
}

static void counted(uint32_t now)
{
    watch_from = now;
    retries_here = 0;
    if (label(r.counted)) r.right++;
    else r.left++;
    r.counted++;
    if (r.counted < expected) diverter_set(label(r.counted));
    pass_on_card(r.pass_id, r.counted, r.left, r.right);
    if (r.counted >= expected) pass_end(FAULT_NONE, now);
    else if (!tray_loaded()) pass_end(FAULT_NONE, now);  /* a double feed emptied it */
}

static void edge(bool now_blocked, uint32_t us)
{
    uint32_t ms = us / 1000u;
    if (now_blocked == level) return;
    level = now_blocked;
    if (state == REVERSE) {
        if (!now_blocked) blocked = false;  /* the jammed card backed out */
        return;
    }
    if (now_blocked) {
        blocked = true;
        blocked_at = ms;
        blocked_at_us = us;
        return;
    }
    if (!blocked) {  /* a card still in the beam after its jam's reverse, leaving */
        if (stuck) watch_from = ms;
        stuck = false;
        return;
    }
    blocked = false;
    if ((uint32_t)(us - blocked_at_us) < limits.min_blocked_us) return;  /* a glitch */
    if (stuck) {
        stuck = false;  /* the card of the last jam leaving: not a card */
        watch_from = ms;
        return;
    }
    counted(ms);
}

void pass_tick(uint32_t now)
{
    uint32_t us;
    bool b;
    while (state != IDLE && beam_edge(&us, &b)) edge(b, us);
    if (state == IDLE) return;
    measure(now);
    if ((uint32_t)(now - started) >= limits.max_pass_ms) {
        pass_end(FAULT_TIMEOUT, now);
        return;
    }
    if ((state == RAMP || state == FEED) &&
        (blocked ? (uint32_t)(now - blocked_at) >= limits.jam_ms
                 : (uint32_t)(now - watch_from) >= limits.misfeed_ms)) {
        if (!blocked && !tray_loaded()) pass_end(FAULT_NONE, now);  /* the cards ran out */
        else timed_out(now);
        return;
    }
    switch (state) {
    case SETTLE:
        if ((uint32_t)(now - phase_at) >= limits.settle_ms) motor_start(now);
        break;
    case RAMP:
        if ((uint32_t)(now - phase_at) * RAMP_STEPS < (uint32_t)limits.soft_start_ms * ramp_step)
            break;
        if (++ramp_step < RAMP_STEPS) motor_set((int16_t)(255 * ramp_step / RAMP_STEPS));
        else {
            motor_set(255);
            state = FEED;
        }
        break;
    case REVERSE:
        if ((uint32_t)(now - phase_at) >= limits.reverse_ms) {
            motor_set(0);
            retry(now);
        }
        break;
    default:
        break;
    }
}
