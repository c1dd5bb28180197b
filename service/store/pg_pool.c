/* pg_pool: libpq connections on top of conn_pool. */
#include "service/store/pg_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/store/conn_pool.h"

struct pg_pool {
    conn_pool *pool;
    char *url;
    char timeout[16];
};

static void *pg_connect(void *ctx, char *err, size_t errlen) {
    pg_pool *p = ctx;
    const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
    const char *vals[] = {p->url, p->timeout, "memoryd", NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (c && PQstatus(c) == CONNECTION_OK) return c;
    const char *why = c ? PQerrorMessage(c) : "out of memory";
    snprintf(err, errlen, "PostgreSQL unavailable: %.*s", (int)strcspn(why, "\n"), why);
    PQfinish(c);
    return NULL;
}

static void pg_close(void *conn) { PQfinish(conn); }

static const conn_pool_ops pg_ops = {"postgres", pg_connect, pg_close};

int pg_pool_create(const char *url, int size, int connect_timeout_s, pg_pool **out, char *err,
                   size_t errlen) {
    pg_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->url = strdup(url)) || !(p->pool = conn_pool_create(size, &pg_ops, p))) {
        pg_pool_free(p);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    snprintf(p->timeout, sizeof p->timeout, "%d", connect_timeout_s);
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
    free(p->url);
    free(p);
}

PGconn *pg_pool_acquire(pg_pool *p, int64_t deadline_ms, char *err, size_t errlen) {
    return conn_pool_acquire(p->pool, deadline_ms, err, errlen);
}

void pg_pool_release(pg_pool *p, PGconn *conn, int broken) {
    if (!conn) return;
    /* A connection left inside a transaction or broken must not be reused. */
    if (PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE) broken = 1;
    conn_pool_release(p->pool, conn, broken);
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
