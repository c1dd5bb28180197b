/* clock: the clocks memoryd reads. Time-dependent logic (TTLs) reads them
 * through a source that tests can replace, so it is tested by moving a
 * clock, not by sleeping; a NULL source is the system's clocks. The rest
 * reads the system's clocks here rather than calling clock_gettime itself,
 * and times its condition waits on CLOCK_MONOTONIC (clock_cond_init), so a
 * step of the wall clock neither cuts a wait short nor stretches it. */
#ifndef MEMORYD_CORE_CLOCK_H
#define MEMORYD_CORE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

typedef struct clock_src {
    int64_t (*mono_ms)(void *arg); /* CLOCK_MONOTONIC, ms */
    int64_t (*wall_ms)(void *arg); /* CLOCK_REALTIME, Unix ms */
    void *arg;
} clock_src;

int64_t clock_mono_ms(const clock_src *c);
int64_t clock_wall_ms(const clock_src *c);

/* The system's clocks in microseconds: durations, and timestamps. */
int64_t clock_mono_us(void);
int64_t clock_wall_us(void);

/* Initializes a condition variable whose timed waits run on
 * CLOCK_MONOTONIC; 0 or an errno. */
int clock_cond_init(pthread_cond_t *cond);
/* The absolute time pthread_cond_timedwait takes, for such a condition,
 * to wait until mono_ms (a clock_mono_ms value). */
struct timespec clock_cond_deadline(int64_t mono_ms);

#endif
