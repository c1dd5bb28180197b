/* worker: a background thread and its stop request; see worker.h. */
#include "service/core/worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "service/core/clock.h"

struct worker {
    worker_fn fn;
    void *arg;
    pthread_t thread;
    pthread_mutex_t lock; /* with cond: the nap */
    pthread_cond_t cond;  /* CLOCK_MONOTONIC; signalled by worker_stop */
    atomic_int stop;
};

static void *run(void *p) {
    worker *w = p;
    w->fn(w, w->arg);
    return NULL;
}

static void destroy(worker *w) {
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

int worker_start(worker_fn fn, void *arg, worker **out) {
    worker *w = calloc(1, sizeof *w);
    if (!w) return -1;
    w->fn = fn;
    w->arg = arg;
    atomic_init(&w->stop, 0);
    pthread_mutex_init(&w->lock, NULL);
    if (clock_cond_init(&w->cond) != 0) {
        pthread_mutex_destroy(&w->lock);
        free(w);
        return -1;
    }
    if (pthread_create(&w->thread, NULL, run, w) != 0) {
        destroy(w);
        return -1;
    }
    *out = w;
    return 0;
}

void worker_stop(worker *w, void (*interrupt)(void *arg)) {
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    atomic_store(&w->stop, 1);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    if (interrupt) interrupt(w->arg);
    pthread_join(w->thread, NULL);
    destroy(w);
}

int worker_stopping(worker *w) { return atomic_load(&w->stop); }

int worker_nap(worker *w, int64_t ms) {
    struct timespec until = clock_cond_deadline(clock_mono_ms(NULL) + ms);
    pthread_mutex_lock(&w->lock);
    while (!atomic_load(&w->stop) && pthread_cond_timedwait(&w->cond, &w->lock, &until) == 0) {}
    pthread_mutex_unlock(&w->lock);
    return worker_stopping(w);
}
