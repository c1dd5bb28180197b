/* clock: the system's clocks or a test's; see clock.h. */
#include "service/core/clock.h"

static int64_t read_us(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t clock_mono_ms(const clock_src *c) {
    return c && c->mono_ms ? c->mono_ms(c->arg) : read_us(CLOCK_MONOTONIC) / 1000;
}

int64_t clock_wall_ms(const clock_src *c) {
    return c && c->wall_ms ? c->wall_ms(c->arg) : read_us(CLOCK_REALTIME) / 1000;
}

int64_t clock_mono_us(void) { return read_us(CLOCK_MONOTONIC); }
int64_t clock_wall_us(void) { return read_us(CLOCK_REALTIME); }

int clock_cond_init(pthread_cond_t *cond) {
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc == 0) rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

struct timespec clock_cond_deadline(int64_t mono_ms) {
    if (mono_ms < 0) mono_ms = 0;
    struct timespec ts = {.tv_sec = mono_ms / 1000, .tv_nsec = (long)(mono_ms % 1000) * 1000000};
    return ts;
}
