/* clock: the two clocks memoryd reads, behind a source that tests can
 * replace, so time-dependent logic (TTLs) is tested by moving a clock, not
 * by sleeping. A NULL source is the system's clocks. */
#ifndef MEMORYD_CORE_CLOCK_H
#define MEMORYD_CORE_CLOCK_H

#include <stdint.h>

typedef struct clock_src {
    int64_t (*mono_ms)(void *arg); /* CLOCK_MONOTONIC, ms */
    int64_t (*wall_ms)(void *arg); /* CLOCK_REALTIME, Unix ms */
    void *arg;
} clock_src;

int64_t clock_mono_ms(const clock_src *c);
int64_t clock_wall_ms(const clock_src *c);

#endif
