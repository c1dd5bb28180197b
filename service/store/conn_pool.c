/* conn_pool: slots under one mutex; connecting happens outside it so one
 * slow connect does not stall callers that could use an idle slot. */
#include "service/store/conn_pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "service/core/clock.h"
#include "service/core/log.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 1000

typedef struct {
    void *conn; /* NULL: not connected */
    int busy;
} slot;

struct conn_pool {
    const conn_pool_ops *ops;
    void *ctx;
    int size;
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int64_t next_attempt_ms; /* backoff: no connect before this */
    int backoff_ms;
    int down_logged;
    int waiting; /* threads in acquire without a connection yet */
    backend_stats stats;
    slot slots[]; /* size entries */
};

conn_pool *conn_pool_create(int size, const conn_pool_ops *ops, void *ctx) {
    conn_pool *p = calloc(1, sizeof *p + (size_t)size * sizeof(slot));
    if (!p) return NULL;
    p->ops = ops;
    p->ctx = ctx;
    p->size = size;
    p->backoff_ms = BACKOFF_MIN_MS;
    pthread_mutex_init(&p->lock, NULL);
    if (clock_cond_init(&p->freed) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    return p;
}

void conn_pool_free(conn_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->size; i++)
        if (p->slots[i].conn) p->ops->close(p->slots[i].conn);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->freed);
    free(p);
}

/* Caller holds the lock. Records a connect outcome for the backoff. */
static void note_connect_locked(conn_pool *p, int ok, const char *err) {
    if (ok) {
        if (p->down_logged)
            log_fields(LOG_INFO, "backend connection restored", LOG_F_STR, "backend",
                       p->ops->backend, LOG_F_END);
        p->down_logged = 0;
        p->backoff_ms = BACKOFF_MIN_MS;
        p->next_attempt_ms = 0;
        return;
    }
    p->next_attempt_ms = clock_mono_ms(NULL) + p->backoff_ms;
    p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
    if (!p->down_logged) {
        p->down_logged = 1;
        log_fields(LOG_WARN, "backend connection failed", LOG_F_STR, "backend", p->ops->backend,
                   LOG_F_STR, "error", err, LOG_F_END);
    }
}

int conn_pool_prime(conn_pool *p, char *err, size_t errlen) {
    void *c = p->ops->connect(p->ctx, INT64_MAX, err, errlen);
    pthread_mutex_lock(&p->lock);
    note_connect_locked(p, c != NULL, err);
    if (c) p->slots[0].conn = c;
    pthread_mutex_unlock(&p->lock);
    return c ? 0 : -1;
}

/* Sleeps on the condition until deadline_ms, at most a second at a time. */
static void wait_locked(conn_pool *p, int64_t deadline_ms) {
    int64_t left = deadline_ms == INT64_MAX ? 1000 : deadline_ms - clock_mono_ms(NULL);
    if (left <= 0) return;
    if (left > 1000) left = 1000;
    struct timespec until = clock_cond_deadline(clock_mono_ms(NULL) + left);
    pthread_cond_timedwait(&p->freed, &p->lock, &until);
}

/* Caller holds the lock. One acquire ends, its wait timed; a failure is
 * the request's outcome (a success's is counted at release). */
static void *acquired_locked(conn_pool *p, int64_t start_us, void *conn, int status) {
    p->waiting--;
    if (status != STATUS_OK) backend_stats_count(&p->stats, status);
    metrics_observe_us(&p->stats.wait, (uint64_t)(clock_mono_us() - start_us));
    pthread_mutex_unlock(&p->lock);
    return conn;
}

void *conn_pool_acquire(conn_pool *p, int64_t deadline_ms, char *err, size_t errlen) {
    int64_t start_us = clock_mono_us();
    pthread_mutex_lock(&p->lock);
    p->waiting++;
    for (;;) {
        int idle = -1, empty = -1;
        for (int i = 0; i < p->size; i++) {
            if (p->slots[i].busy) continue;
            if (p->slots[i].conn && idle < 0) idle = i;
            if (!p->slots[i].conn && empty < 0) empty = i;
        }
        if (idle >= 0) {
            p->slots[idle].busy = 1;
            return acquired_locked(p, start_us, p->slots[idle].conn, STATUS_OK);
        }
        if (empty >= 0) {
            if (clock_mono_ms(NULL) < p->next_attempt_ms) {
                snprintf(err, errlen, "%s unavailable (reconnecting)", p->ops->backend);
                return acquired_locked(p, start_us, NULL, STATUS_EUNAVAILABLE);
            }
            p->slots[empty].busy = 1;
            pthread_mutex_unlock(&p->lock);
            void *c = p->ops->connect(p->ctx, deadline_ms, err, errlen);
            pthread_mutex_lock(&p->lock);
            note_connect_locked(p, c != NULL, err);
            p->slots[empty].conn = c;
            if (!c) {
                p->slots[empty].busy = 0;
                pthread_cond_signal(&p->freed);
            }
            return acquired_locked(p, start_us, c, c ? STATUS_OK : STATUS_EUNAVAILABLE);
        }
        if (clock_mono_ms(NULL) >= deadline_ms) {
            snprintf(err, errlen, "no %s connection free before the deadline", p->ops->backend);
            return acquired_locked(p, start_us, NULL, STATUS_ETIMEOUT);
        }
        wait_locked(p, deadline_ms);
    }
}

void conn_pool_release(conn_pool *p, void *conn, int broken) {
    if (!conn) return;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->size; i++) {
        if (p->slots[i].conn != conn) continue;
        backend_stats_count(&p->stats, broken ? STATUS_EUNAVAILABLE : STATUS_OK);
        if (broken) {
            p->ops->close(conn);
            p->slots[i].conn = NULL;
        }
        p->slots[i].busy = 0;
        break;
    }
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

const backend_stats *conn_pool_stats(const conn_pool *p) { return &p->stats; }

void conn_pool_gauges(void *pool, backend_gauges *out) {
    conn_pool *p = pool;
    pthread_mutex_lock(&p->lock);
    out->size = p->size;
    out->open = out->in_use = 0;
    for (int i = 0; i < p->size; i++) {
        out->open += p->slots[i].conn != NULL;
        out->in_use += p->slots[i].conn != NULL && p->slots[i].busy;
    }
    out->waiting = p->waiting;
    pthread_mutex_unlock(&p->lock);
}
