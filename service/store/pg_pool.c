/* pg_pool: libpq connections on top of conn_pool. */
#include "service/store/pg_pool.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/store/conn_pool.h"
#include "service/store/pg_params.h"
#include "service/store/pg_watchdog.h"

/* How long past its deadline a round trip may still be waiting before the
 * watchdog cuts its connection: the server's own statement_timeout (the
 * same deadline) normally answers first. */
#define WATCHDOG_GRACE_MS 20

struct pg_pool {
    conn_pool *pool;
    pg_watchdog *watchdog;
    pg_params params; /* the URL's, with memoryd's settings */
    int connect_timeout_s;
};

/* A non-blocking connect polled until the connect timeout or the caller's
 * deadline, whichever comes first: a server that accepts TCP and never
 * answers (frozen) costs the caller no more than its deadline. */
static void *pg_connect(void *ctx, int64_t deadline_ms, char *err, size_t errlen) {
    pg_pool *p = ctx;
    int64_t until = clock_mono_ms(NULL) + (int64_t)p->connect_timeout_s * 1000;
    if (deadline_ms < until) until = deadline_ms;
    PGconn *c = PQconnectStartParams(p->params.kw, p->params.vals, 0);
    const char *why = NULL;
    PostgresPollingStatusType st = PGRES_POLLING_WRITING; /* libpq: start as if WRITING */
    while (c && PQstatus(c) != CONNECTION_BAD && st != PGRES_POLLING_OK &&
           st != PGRES_POLLING_FAILED) {
        int64_t left = until - clock_mono_ms(NULL);
        struct pollfd pfd = {PQsocket(c), st == PGRES_POLLING_READING ? POLLIN : POLLOUT, 0};
        int n = left > 0 ? poll(&pfd, 1, (int)(left < INT32_MAX ? left : INT32_MAX)) : 0;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            why = until == deadline_ms ? "no answer by the call's deadline"
                                       : "no answer within --pg-connect-timeout";
            break;
        }
        st = PQconnectPoll(c);
    }
    if (c && !why && PQstatus(c) == CONNECTION_OK) return c;
    if (!why) why = c ? PQerrorMessage(c) : "out of memory";
    snprintf(err, errlen, "PostgreSQL unavailable: %.*s", (int)strcspn(why, "\n"), why);
    PQfinish(c);
    return NULL;
}

static void pg_close(void *conn) { PQfinish(conn); }

static const conn_pool_ops pg_ops = {"postgres", pg_connect, pg_close};

int pg_pool_create(const char *url, int size, int connect_timeout_s, pg_pool **out, char *err,
                   size_t errlen) {
    pg_pool *p = calloc(1, sizeof *p);
    if (!p) return snprintf(err, errlen, "out of memory"), -1;
    if (pg_params_init(&p->params, url, err, errlen) != 0) {
        free(p);
        return -1;
    }
    if (!(p->pool = conn_pool_create(size, &pg_ops, p)) ||
        pg_watchdog_create(size, WATCHDOG_GRACE_MS, &p->watchdog) != 0) {
        pg_pool_free(p);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    p->connect_timeout_s = connect_timeout_s;
    if (conn_pool_prime(p->pool, err, errlen) != 0) {
        pg_pool_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void pg_pool_free(pg_pool *p) {
    if (!p) return;
    conn_pool_free(p->pool);
    pg_watchdog_free(p->watchdog);
    pg_params_free(&p->params);
    free(p);
}

PGconn *pg_pool_acquire(pg_pool *p, int64_t deadline_ms, char *err, size_t errlen) {
    return conn_pool_acquire(p->pool, deadline_ms, err, errlen);
}

void pg_pool_release(pg_pool *p, PGconn *conn, int broken) {
    if (!conn) return;
    if (pg_watchdog_disarm(p->watchdog, conn)) broken = 1;
    /* A connection left inside a transaction or broken must not be reused. */
    if (PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE) broken = 1;
    conn_pool_release(p->pool, conn, broken);
}

void pg_pool_watch(pg_pool *p, PGconn *conn, int64_t deadline_ms) {
    pg_watchdog_arm(p->watchdog, conn, deadline_ms);
}

void pg_pool_cut_now(pg_pool *p, const PGconn *conn) { pg_watchdog_expire(p->watchdog, conn); }

int pg_pool_cut(pg_pool *p, const PGconn *conn) { return pg_watchdog_cut(p->watchdog, conn); }

const backend_stats *pg_pool_stats(const pg_pool *p) { return conn_pool_stats(p->pool); }

void pg_pool_gauges(void *p, backend_gauges *out) { conn_pool_gauges(((pg_pool *)p)->pool, out); }

int pg_pool_ping(pg_pool *p, int64_t deadline_ms) {
    char err[256];
    PGconn *c = pg_pool_acquire(p, deadline_ms, err, sizeof err);
    if (!c) return -1;
    pg_pool_watch(p, c, deadline_ms); /* a frozen server must not hold the prober */
    PGresult *r = PQexec(c, "SELECT 1");
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    pg_pool_release(p, c, !ok);
    return ok ? 0 : -1;
}
