/* clock: the system's clocks or a test's; see clock.h. */
#include "service/core/clock.h"

#include <time.h>

static int64_t read_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_ms(const clock_src *c) {
    return c && c->mono_ms ? c->mono_ms(c->arg) : read_ms(CLOCK_MONOTONIC);
}

int64_t clock_wall_ms(const clock_src *c) {
    return c && c->wall_ms ? c->wall_ms(c->arg) : read_ms(CLOCK_REALTIME);
}
