/* redis_pool: hiredis connections on top of conn_pool. */
#include "service/store/redis_pool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/core/clock.h"
#include "service/store/conn_pool.h"
#include "service/store/redis_url.h"

struct redis_pool {
    conn_pool *pool;
    redis_url url;
    struct timeval timeout;
};

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

static redisContext *open_url(const redis_url *u, struct timeval timeout, char *err,
                              size_t errlen) {
    redisContext *c = redisConnectWithTimeout(u->host, u->port, timeout);
    if (!c || c->err) {
        snprintf(err, errlen, "Redis unavailable at %s:%d: %s", u->host, u->port,
                 c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, timeout);
    if ((u->password[0] && simple_command(c, err, errlen, "AUTH %s", u->password) != 0) ||
        (u->db && simple_command(c, err, errlen, "SELECT %d", u->db) != 0)) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static void *redis_connect(void *ctx, int64_t deadline_ms, char *err, size_t errlen) {
    (void)deadline_ms; /* its own connect timeout is short already */
    redis_pool *p = ctx;
    return open_url(&p->url, p->timeout, err, errlen);
}

redisContext *redis_pool_open(redis_pool *p, char *err, size_t errlen) {
    return open_url(&p->url, p->timeout, err, errlen);
}

static void redis_close(void *conn) { redisFree(conn); }

static const conn_pool_ops redis_ops = {"redis", redis_connect, redis_close};

int redis_pool_create(const char *url, int size, int timeout_ms, redis_pool **out, char *err,
                      size_t errlen) {
    redis_pool *p = calloc(1, sizeof *p);
    if (!p) return snprintf(err, errlen, "out of memory"), -1;
    if (redis_url_parse(url, &p->url, err, errlen) != 0) {
        free(p);
        return -1;
    }
    if (!(p->pool = conn_pool_create(size, &redis_ops, p))) {
        free(p);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    p->timeout.tv_sec = timeout_ms / 1000;
    p->timeout.tv_usec = (timeout_ms % 1000) * 1000;
    *out = p;
    /* Redis is optional: the pool exists either way and reconnects later. */
    return conn_pool_prime(p->pool, err, errlen) == 0 ? 0 : 1;
}

void redis_pool_free(redis_pool *p) {
    if (!p) return;
    conn_pool_free(p->pool);
    free(p);
}

redisContext *redis_pool_acquire(redis_pool *p, int64_t deadline_ms, char *err, size_t errlen) {
    redisContext *c = conn_pool_acquire(p->pool, deadline_ms, err, errlen);
    if (!c) return NULL;
    /* Commands on this context may take until the deadline, never longer
     * than the pool's own timeout: a call never blocks past its deadline. */
    struct timeval tv = p->timeout;
    if (deadline_ms != INT64_MAX) {
        int64_t left = deadline_ms - clock_mono_ms(NULL);
        if (left < 1) left = 1;
        if (left < (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000) {
            tv.tv_sec = left / 1000;
            tv.tv_usec = (left % 1000) * 1000;
        }
    }
    redisSetTimeout(c, tv);
    return c;
}

void redis_pool_release(redis_pool *p, redisContext *c, int broken) {
    if (!c) return;
    conn_pool_release(p->pool, c, broken || c->err);
}

int redis_pool_ping(redis_pool *p, int64_t deadline_ms) {
    char err[256];
    redisContext *c = redis_pool_acquire(p, deadline_ms, err, sizeof err);
    if (!c) return -1;
    int rc = simple_command(c, err, sizeof err, "PING");
    redis_pool_release(p, c, rc != 0);
    return rc;
}

size_t redis_glob_escape(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '*' || s[i] == '?' || s[i] == '[' || s[i] == ']' || s[i] == '\\')
            out[o++] = '\\';
        out[o++] = s[i];
    }
    return o;
}
