/* pg_pool: a fixed-size pool of libpq connections with reconnection and
 * backoff (conn_pool.h): a broken connection is dropped and re-opened on a
 * later acquire, so a Postgres outage costs callers a quick "unavailable"
 * instead of a connect timeout each. */
#ifndef MEMORYD_STORE_PG_POOL_H
#define MEMORYD_STORE_PG_POOL_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "service/metrics/backend_metrics.h"

typedef struct pg_pool pg_pool;

/* Creates a pool of size connections to url (a libpq URI or key=value
 * string). One connection is opened now so bad configuration fails at
 * start-up: on failure returns -1 with libpq's reason in err and *out
 * untouched. Free with pg_pool_free. */
int pg_pool_create(const char *url, int size, int connect_timeout_s, pg_pool **out, char *err,
                   size_t errlen);
/* Closes every connection; all must have been released. Accepts NULL. */
void pg_pool_free(pg_pool *p);

/* A healthy connection, waiting for a free one until deadline_ms
 * (CLOCK_MONOTONIC ms, INT64_MAX = no limit). Returns NULL with the reason
 * in err when the deadline passes or Postgres cannot be reached. The
 * caller owns the connection until pg_pool_release. */
PGconn *pg_pool_acquire(pg_pool *p, int64_t deadline_ms, char *err, size_t errlen);
/* Returns conn to the pool. Pass broken=1 after a connection-level error
 * (the pool also checks PQstatus itself) so it is re-opened. */
void pg_pool_release(pg_pool *p, PGconn *conn, int broken);

/* Bounds conn's blocking libpq calls by deadline_ms until it is released:
 * a call still waiting shortly after it returns with the connection lost
 * (pg_watchdog.h). */
void pg_pool_watch(pg_pool *p, PGconn *conn, int64_t deadline_ms);
/* Has the watchdog cut watched conn at once (a client's cancel); any
 * thread. */
void pg_pool_cut_now(pg_pool *p, const PGconn *conn);
/* 1 when the watchdog cut conn (its deadline passed, or pg_pool_cut_now). */
int pg_pool_cut(pg_pool *p, const PGconn *conn);

/* Runs "SELECT 1" on a pooled connection; 0 when Postgres answers. */
int pg_pool_ping(pg_pool *p, int64_t deadline_ms);

/* The pool's metrics (conn_pool_stats, conn_pool_gauges). */
const backend_stats *pg_pool_stats(const pg_pool *p);
void pg_pool_gauges(void *p, backend_gauges *out);

#endif
