/* pg_pool: slots guarded by one mutex; connecting happens outside it. */
#include "service/store/pg_pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/core/log.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

typedef struct {
    PGconn *conn; /* NULL: not connected */
    int busy;
} slot;

struct pg_pool {
    char *url;
    char timeout[16];
    int size;
    slot *slots;
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int64_t next_attempt_ms; /* backoff: no connect before this */
    int backoff_ms;
    int down_logged;
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Opens a connection; returns NULL with the reason in err. */
static PGconn *connect_one(pg_pool *p, char *err, size_t errlen) {
    const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
    const char *vals[] = {p->url, p->timeout, "memoryd", NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (c && PQstatus(c) == CONNECTION_OK) return c;
    const char *why = c ? PQerrorMessage(c) : "out of memory";
    snprintf(err, errlen, "PostgreSQL unavailable: %.*s", (int)strcspn(why, "\n"), why);
    PQfinish(c);
    return NULL;
}

int pg_pool_create(const char *url, int size, int connect_timeout_s, pg_pool **out, char *err,
                   size_t errlen) {
    pg_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->url = strdup(url)) || !(p->slots = calloc((size_t)size, sizeof *p->slots))) {
        if (p) free(p->url);
        free(p);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    p->size = size;
    snprintf(p->timeout, sizeof p->timeout, "%d", connect_timeout_s);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->freed, NULL);
    p->backoff_ms = BACKOFF_MIN_MS;
    p->slots[0].conn = connect_one(p, err, errlen);
    if (!p->slots[0].conn) {
        pg_pool_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void pg_pool_free(pg_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->size; i++) PQfinish(p->slots[i].conn);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->freed);
    free(p->slots);
    free(p->url);
    free(p);
}

static void wait_until(pg_pool *p, int64_t deadline_ms) {
    if (deadline_ms == INT64_MAX) {
        pthread_cond_wait(&p->freed, &p->lock);
        return;
    }
    int64_t left = deadline_ms - now_ms();
    if (left <= 0) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&p->freed, &p->lock, &ts);
}

PGconn *pg_pool_acquire(pg_pool *p, int64_t deadline_ms, char *err, size_t errlen) {
    pthread_mutex_lock(&p->lock);
    for (;;) {
        int idle = -1, empty = -1;
        for (int i = 0; i < p->size; i++) {
            if (p->slots[i].busy) continue;
            if (p->slots[i].conn && idle < 0) idle = i;
            if (!p->slots[i].conn && empty < 0) empty = i;
        }
        if (idle >= 0) {
            p->slots[idle].busy = 1;
            PGconn *c = p->slots[idle].conn;
            pthread_mutex_unlock(&p->lock);
            return c;
        }
        if (empty >= 0) {
            if (now_ms() < p->next_attempt_ms) {
                pthread_mutex_unlock(&p->lock);
                snprintf(err, errlen, "PostgreSQL unavailable (reconnecting)");
                return NULL;
            }
            p->slots[empty].busy = 1;
            pthread_mutex_unlock(&p->lock);
            PGconn *c = connect_one(p, err, errlen);
            pthread_mutex_lock(&p->lock);
            p->slots[empty].conn = c;
            if (!c) {
                p->slots[empty].busy = 0;
                p->next_attempt_ms = now_ms() + p->backoff_ms;
                p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                                   : p->backoff_ms * 2;
                if (!p->down_logged) {
                    p->down_logged = 1;
                    log_fields(LOG_WARN, "postgres connection failed", LOG_F_STR, "error", err,
                               LOG_F_END);
                }
                pthread_cond_signal(&p->freed);
                pthread_mutex_unlock(&p->lock);
                return NULL;
            }
            if (p->down_logged) log_msg(LOG_INFO, "postgres connection restored");
            p->down_logged = 0;
            p->backoff_ms = BACKOFF_MIN_MS;
            p->next_attempt_ms = 0;
            pthread_mutex_unlock(&p->lock);
            return c;
        }
        if (now_ms() >= deadline_ms) {
            pthread_mutex_unlock(&p->lock);
            snprintf(err, errlen, "no PostgreSQL connection free before the deadline");
            return NULL;
        }
        wait_until(p, deadline_ms);
    }
}

void pg_pool_release(pg_pool *p, PGconn *conn, int broken) {
    if (!conn) return;
    /* A connection left inside a transaction or broken must not be reused. */
    if (!broken && (PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE))
        broken = 1;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->size; i++) {
        if (p->slots[i].conn != conn) continue;
        if (broken) {
            PQfinish(conn);
            p->slots[i].conn = NULL;
        }
        p->slots[i].busy = 0;
        break;
    }
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

int pg_pool_ping(pg_pool *p, int64_t deadline_ms) {
    char err[256];
    PGconn *c = pg_pool_acquire(p, deadline_ms, err, sizeof err);
    if (!c) return -1;
    PGresult *r = PQexec(c, "SELECT 1");
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    pg_pool_release(p, c, !ok);
    return ok ? 0 : -1;
}
