/* pass_shim: firmware/pass.c compiled for the host, its peripherals replaced by a
 * recorder, so tests/test_pass_differential.py can drive the chip's pass rules and the
 * host's pass engine (shuffler/engine.py) with the same event scripts and compare what
 * they command. Built by `make -C firmware shim` (build/libpass_shim.so). */
#include <stdint.h>
#include <string.h>

#include "../hw.h"
#include "../pass.h"
#include "../protocol_gen.h"

enum { LOG_MOTOR = 1, LOG_DIVERT, LOG_CARD, LOG_DONE, LOG_BATTERY };
#define LOG_MAX 4096
#define EDGE_MAX 4096

struct entry { int32_t kind, a, b, c, d, e, f, g, h, i; };

static struct entry log_[LOG_MAX];
static int log_n;
static int16_t speed;
static bool tray = true, beam;
static uint16_t mv = 9000;
static uint32_t edge_at[EDGE_MAX];
static bool edge_lv[EDGE_MAX];
static int edge_head, edge_tail;

static void put(struct entry e) { if (log_n < LOG_MAX) log_[log_n++] = e; }

/* -- what the test calls ------------------------------------------------------------- */
int shim_log(struct entry *out, int most)
{
    int n = log_n < most ? log_n : most;
    memcpy(out, log_, sizeof(struct entry) * (size_t)n);
    log_n = 0;
    return n;
}

void shim_reset(void)
{
    log_n = 0;
    speed = 0;
    tray = true;
    beam = false;
    mv = 9000;
    edge_head = edge_tail = 0;
}

void shim_limits(uint16_t jam_ms, uint16_t misfeed_ms, uint8_t retries, uint16_t reverse_ms,
                 uint32_t max_pass_ms, uint16_t min_blocked_us, uint16_t min_gap_us,
                 uint16_t stall_mv, uint16_t soft_start_ms)
{
    memset(&limits, 0, sizeof limits);
    limits.jam_ms = jam_ms;
    limits.misfeed_ms = misfeed_ms;
    limits.retries = retries;
    limits.reverse_ms = reverse_ms;
    limits.max_pass_ms = max_pass_ms;
    limits.min_blocked_us = min_blocked_us;
    limits.min_gap_us = min_gap_us;
    limits.stall_mv = stall_mv;
    limits.soft_start_ms = soft_start_ms;
}

void shim_edge(uint32_t us, int blocked)
{
    if (edge_head - edge_tail >= EDGE_MAX) return;
    edge_at[edge_head % EDGE_MAX] = us;
    edge_lv[edge_head % EDGE_MAX] = blocked;
    edge_head++;
    beam = blocked;
}

void shim_tray(int loaded) { tray = loaded; }
void shim_mv(uint16_t value) { mv = value; }

/* -- the peripherals pass.c uses ------------------------------------------------------ */
bool beam_edge(uint32_t *us, bool *blocked, uint32_t until)
{
    if (edge_tail == edge_head) return false;
    uint32_t at = edge_at[edge_tail % EDGE_MAX];
    if ((int32_t)(until - at) < 0) return false;
    *us = at;
    *blocked = edge_lv[edge_tail % EDGE_MAX];
    edge_tail++;
    return true;
}

void beam_edges_clear(void) { edge_tail = edge_head; }

void motor_set(int16_t s)
{
    if (s == speed) return;  /* as the engine: a command only when the speed changes */
    speed = s;
    put((struct entry){LOG_MOTOR, s, 0, 0, 0, 0, 0, 0, 0, 0});
}

int16_t motor_speed(void) { return speed; }
uint8_t motor_top(void) { return 255; }  /* the engine's speeds are of full duty */
void diverter_set(uint8_t pile) { put((struct entry){LOG_DIVERT, pile, 0, 0, 0, 0, 0, 0, 0, 0}); }
void outputs_safe(void) { motor_set(0); }  /* the park is not a command the engine gives */
bool beam_blocked(void) { return beam; }
bool tray_loaded(void) { return tray; }

uint16_t battery_mv(void)
{
    put((struct entry){LOG_BATTERY, mv, 0, 0, 0, 0, 0, 0, 0, 0});
    return mv;
}

/* -- what the pass tells the firmware -------------------------------------------------- */
void pass_on_card(uint16_t id, uint16_t counted, uint16_t left, uint16_t right)
{
    (void)id;
    put((struct entry){LOG_CARD, counted, left, right, 0, 0, 0, 0, 0, 0});
}

void pass_on_done(const struct pass_report *r)
{
    put((struct entry){LOG_DONE, r->counted, r->left, r->right, (int32_t)r->ms, r->min_mv,
                       r->tray_empty, r->retries, r->fault, r->fault_card});
}
