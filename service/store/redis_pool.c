/* redis_pool: slots under one mutex; connecting happens outside it. */
#include "service/store/redis_pool.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/core/log.h"
#include "service/store/redis_url.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

typedef struct {
    redisContext *ctx;
    int busy;
} slot;

struct redis_pool {
    redis_url url;
    struct timeval timeout;
    int size;
    slot *slots;
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int64_t next_attempt_ms;
    int backoff_ms;
    int down_logged;
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs a command expecting a status reply ("OK"/"PONG"); 0 on success. */
static int simple_command(redisContext *c, char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!r) {
        snprintf(err, errlen, "Redis unavailable: %s", c->errstr);
        return -1;
    }
    int ok = r->type == REDIS_REPLY_STATUS;
    if (!ok) snprintf(err, errlen, "Redis refused: %.*s", (int)r->len, r->str ? r->str : "");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

static redisContext *connect_one(redis_pool *p, char *err, size_t errlen) {
    redisContext *c = redisConnectWithTimeout(p->url.host, p->url.port, p->timeout);
    if (!c || c->err) {
        snprintf(err, errlen, "Redis unavailable at %s:%d: %s", p->url.host, p->url.port,
                 c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, p->timeout);
    if ((p->url.password[0] && simple_command(c, err, errlen, "AUTH %s", p->url.password) != 0) ||
        (p->url.db && simple_command(c, err, errlen, "SELECT %d", p->url.db) != 0)) {
        redisFree(c);
        return NULL;
    }
    return c;
}

int redis_pool_create(const char *url, int size, int timeout_ms, redis_pool **out, char *err,
                      size_t errlen) {
    redis_pool *p = calloc(1, sizeof *p);
    if (!p) return snprintf(err, errlen, "out of memory"), -1;
    if (redis_url_parse(url, &p->url, err, errlen) != 0) {
        free(p);
        return -1;
    }
    p->slots = calloc((size_t)size, sizeof *p->slots);
    if (!p->slots) {
        free(p);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    p->size = size;
    p->timeout.tv_sec = timeout_ms / 1000;
    p->timeout.tv_usec = (timeout_ms % 1000) * 1000;
    p->backoff_ms = BACKOFF_MIN_MS;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->freed, NULL);
    *out = p;
    p->slots[0].ctx = connect_one(p, err, errlen);
    if (!p->slots[0].ctx) {
        p->next_attempt_ms = now_ms() + p->backoff_ms;
        p->down_logged = 1;
        return 1;
    }
    return 0;
}

void redis_pool_free(redis_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->size; i++) redisFree(p->slots[i].ctx);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->freed);
    free(p->slots);
    free(p);
}

redisContext *redis_pool_acquire(redis_pool *p, int64_t deadline_ms, char *err, size_t errlen) {
    pthread_mutex_lock(&p->lock);
    for (;;) {
        int idle = -1, empty = -1;
        for (int i = 0; i < p->size; i++) {
            if (p->slots[i].busy) continue;
            if (p->slots[i].ctx && idle < 0) idle = i;
            if (!p->slots[i].ctx && empty < 0) empty = i;
        }
        if (idle >= 0) {
            p->slots[idle].busy = 1;
            pthread_mutex_unlock(&p->lock);
            return p->slots[idle].ctx;
        }
        if (empty >= 0) {
            if (now_ms() < p->next_attempt_ms) {
                pthread_mutex_unlock(&p->lock);
                snprintf(err, errlen, "Redis unavailable (reconnecting)");
                return NULL;
            }
            p->slots[empty].busy = 1;
            pthread_mutex_unlock(&p->lock);
            redisContext *c = connect_one(p, err, errlen);
            pthread_mutex_lock(&p->lock);
            p->slots[empty].ctx = c;
            if (!c) {
                p->slots[empty].busy = 0;
                p->next_attempt_ms = now_ms() + p->backoff_ms;
                p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                                   : p->backoff_ms * 2;
                if (!p->down_logged) {
                    p->down_logged = 1;
                    log_fields(LOG_WARN, "redis connection failed", LOG_F_STR, "error", err,
                               LOG_F_END);
                }
                pthread_mutex_unlock(&p->lock);
                return NULL;
            }
            if (p->down_logged) log_msg(LOG_INFO, "redis connection restored");
            p->down_logged = 0;
            p->backoff_ms = BACKOFF_MIN_MS;
            pthread_mutex_unlock(&p->lock);
            return c;
        }
        int64_t left = deadline_ms - now_ms();
        if (left <= 0) {
            pthread_mutex_unlock(&p->lock);
            snprintf(err, errlen, "no Redis connection free before the deadline");
            return NULL;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        if (left > 1000) left = 1000;
        ts.tv_nsec += left * 1000000;
        ts.tv_sec += ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&p->freed, &p->lock, &ts);
    }
}

void redis_pool_release(redis_pool *p, redisContext *c, int broken) {
    if (!c) return;
    if (c->err) broken = 1;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->size; i++) {
        if (p->slots[i].ctx != c) continue;
        if (broken) {
            redisFree(c);
            p->slots[i].ctx = NULL;
        }
        p->slots[i].busy = 0;
        break;
    }
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}

int redis_pool_ping(redis_pool *p, int64_t deadline_ms) {
    char err[256];
    redisContext *c = redis_pool_acquire(p, deadline_ms, err, sizeof err);
    if (!c) return -1;
    int rc = simple_command(c, err, sizeof err, "PING");
    redis_pool_release(p, c, rc != 0);
    return rc;
}
