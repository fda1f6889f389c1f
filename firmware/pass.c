#include "pass.h"

#include <string.h>

#include "hw.h"
#include "protocol_gen.h"

#define PLAN_BYTES (MAX_CARDS / 8)
#define RAMP_STEPS 5
#define REVERSE_TENTHS 6           /* backwards at 60 % of the duty cap (motor_top) */
#define BRAKE_MS 20                /* motor off this long before it reverses */
#define BATTERY_EVERY_US 10000u    /* the protocol asks for at least every 50 ms */
#define US(ms) ((uint32_t)(ms) * 1000u)

/* HOLD: a retry waits, the motor off, for a host silent past REDRIVE_QUIET_MS */
enum state { IDLE, RAMP, FEED, REVERSE, HOLD };

struct limits limits;

static uint8_t plan[PLAN_BYTES];
static uint16_t expected;
static enum state state;
static struct pass_report r;
/* every time here is hw_us(), compared only as unsigned differences (wrap-safe) */
static uint32_t started, phase_at, last_card, blocked_at, cleared_at, battery_at;
static bool blocked;               /* a card in the beam that may count (blocked_at) */
static bool cleared;               /* that card has left the beam (cleared_at) */
static bool level;                 /* the beam's last level seen */
static bool have_mv;               /* a battery reading under load this pass */
static bool braking;               /* in REVERSE: the motor still off for BRAKE_MS */
static bool quiet;                 /* the host silent past the heartbeat rule (main.c) */
static enum state held;            /* in HOLD: what starts once it is heard (REVERSE, RAMP) */
static uint8_t retries_here, ramp_step;
static uint16_t latest_mv;

static uint8_t label(uint16_t i) { return (uint8_t)((plan[i >> 3] >> (i & 7)) & 1); }
static bool due(uint32_t now, uint32_t since, uint32_t wait) { return now - since >= wait; }

bool pass_running(void) { return state != IDLE; }
uint16_t pass_id(void) { return state != IDLE ? r.pass_id : 0; }
void pass_host_quiet(bool host_quiet) { quiet = host_quiet; }

/* a retry's next move waits, the motor off, until the host is heard again */
static void hold(enum state next)
{
    motor_set(0);
    state = HOLD;
    held = next;
}

/* from off to the duty cap in RAMP_STEPS equal steps over soft_start_ms; then feeding */
static void ramp_step_due(uint32_t now)
{
    if (!limits.soft_start_ms && ramp_step < RAMP_STEPS) ramp_step = RAMP_STEPS - 1;  /* at once */
    while (ramp_step < RAMP_STEPS &&
           (now - phase_at) * RAMP_STEPS >= US(limits.soft_start_ms) * ramp_step) {
        ramp_step++;
        motor_set((int16_t)(motor_top() * ramp_step / RAMP_STEPS));
    }
    if (ramp_step == RAMP_STEPS) {
        state = FEED;
        last_card = now;  /* the misfeed timer runs from full speed */
    }
}

static void ramp(uint32_t now)
{
    if (quiet) {
        hold(RAMP);
        return;
    }
    state = RAMP;
    ramp_step = 0;
    phase_at = now;
    ramp_step_due(now);
}

void pass_start(uint16_t id, const uint8_t *labels, uint16_t cards, uint32_t now)
{
    memset(&r, 0, sizeof r);
    r.pass_id = id;
    memcpy(plan, labels, (cards + 7u) / 8u);
    expected = cards;
    started = battery_at = now;
    blocked = cleared = have_mv = false;
    level = beam_blocked();
    beam_edges_clear();
    retries_here = 0;
    latest_mv = 0;
    quiet = false;  /* the PASS was just heard */
    diverter_set(label(0));
    ramp(now);
}

/* STOP means stop: whatever runs ends STOPPED, whichever id the STOP names (0, this
 * pass's, another's); main.c remembers the id so that its PASS, if it comes later,
 * never runs */
void pass_stop(uint16_t id, uint32_t now)
{
    (void)id;
    pass_end(FAULT_STOPPED, now);
}

void pass_end(uint8_t fault, uint32_t now)
{
    if (state == IDLE) return;
    outputs_safe();
    state = IDLE;
    memset(plan, 0, sizeof plan);  /* nobody reads a plan after its pass */
    r.ms = (now - started) / 1000u;
    r.tray_empty = !tray_loaded();
    r.fault = fault;
    if (fault != FAULT_NONE) r.fault_card = (uint16_t)(r.counted + 1);
    pass_on_done(&r);
}

static void measure(uint32_t now)  /* the battery under load: while the motor runs forward */
{
    if (motor_speed() <= 0 || !due(now, battery_at, BATTERY_EVERY_US)) return;
    battery_at = now;
    latest_mv = battery_mv();
    if (!have_mv || latest_mv < r.min_mv) r.min_mv = latest_mv;
    have_mv = true;
}

static void back_out(uint32_t now)
{
    state = REVERSE;
    phase_at = now;
    braking = true;  /* the H-bridge reverses only after the brake interval */
}

static void reversing(uint32_t now)
{
    if (braking && due(now, phase_at, US(BRAKE_MS))) {
        if (quiet) {
            hold(REVERSE);
            return;
        }
        braking = false;
        motor_set((int16_t)-(motor_top() * REVERSE_TENTHS / 10));
    }
    if (!braking && due(now, phase_at, US(BRAKE_MS) + US(limits.reverse_ms))) {
        motor_set(0);
        ramp(now);
    }
}

/* a jam or a misfeed: give up on this card, or back it out and feed again */
static void give_up_or_retry(uint8_t fault, uint32_t now)
{
    motor_set(0);  /* at once */
    if (fault == FAULT_MISFEED && have_mv && latest_mv < limits.stall_mv) {
        pass_end(FAULT_LOW_BATTERY, now);  /* the motor stalled */
    } else if (retries_here >= limits.retries) {
        pass_end(fault, now);
    } else {
        retries_here++;
        if (r.retries < 255) r.retries++;  /* saturates */
        blocked = cleared = false;  /* the next cleared edge is the card backing out */
        if (limits.reverse_ms) back_out(now);
        else ramp(now);
    }
}

/* the card in the beam left it and the gap after it held: count it, or drop a glitch */
static void count(uint32_t now)
{
    bool long_enough = blocked && cleared && cleared_at - blocked_at >= limits.min_blocked_us;
    blocked = cleared = false;
    if (!long_enough) return;
    if (label(r.counted)) r.right++;
    else r.left++;
    r.counted++;
    retries_here = 0;
    last_card = now;  /* the misfeed timer restarts on a counted card only */
    pass_on_card(r.pass_id, r.counted, r.left, r.right);
    if (r.counted >= expected) {
        pass_end(FAULT_NONE, now);
        return;
    }
    diverter_set(label(r.counted));
    if (!tray_loaded()) pass_end(FAULT_NONE, now);  /* two cards went through as one */
}

/* everything that is due by ``now``: the same checks, in the same order, as the
 * engine's _advance (the differential test holds them together) */
static void check(uint32_t now)
{
    if (due(now, started, US(limits.max_pass_ms))) {
        pass_end(FAULT_TIMEOUT, now);
        return;
    }
    switch (state) {
    case RAMP:
        ramp_step_due(now);
        break;
    case REVERSE:
        reversing(now);
        break;
    case HOLD:  /* heard again: the retry goes on where it waited (a new brake first) */
        if (quiet) break;
        if (held == RAMP) ramp(now);
        else back_out(now);
        break;
    case FEED:
        if (cleared) {
            if (due(now, cleared_at, limits.min_gap_us)) count(now);
        } else if (blocked) {
            if (due(now, blocked_at, US(limits.jam_ms))) give_up_or_retry(FAULT_JAM, now);
        } else if (due(now, last_card, US(limits.misfeed_ms))) {
            if (!tray_loaded()) pass_end(FAULT_NONE, now);  /* fewer cards than planned */
            else give_up_or_retry(FAULT_MISFEED, now);
        }
        break;
    default:
        break;
    }
}

static void edge(bool now_blocked, uint32_t us)
{
    if (now_blocked == level) return;
    level = now_blocked;
    if (state != FEED) {  /* ramping or reversing: never a card */
        blocked = cleared = false;
        check(us);
        return;
    }
    check(us);  /* a card whose gap has held counts before this edge */
    if (state != FEED) return;
    if (now_blocked) {
        if (cleared) {
            cleared = false;  /* a drop-out inside the card: the same card */
        } else {
            blocked = true;
            blocked_at = us;
        }
        return;
    }
    if (!blocked || cleared) return;
    cleared = true;
    cleared_at = us;
    check(us);
}

void pass_tick(uint32_t now)
{
    uint32_t us;
    bool b;
    while (state != IDLE && beam_edge(&us, &b, now)) edge(b, us);
    if (state == IDLE) return;
    measure(now);
    check(now);
}
