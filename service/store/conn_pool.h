/* conn_pool: a fixed-size pool of backend connections with reconnection,
 * shared by pg_pool (libpq) and redis_pool (hiredis).
 *
 * Slots start empty and are connected on demand. A failed connect starts an
 * exponential backoff (100 ms doubling to 1 s, so a backend that comes back is in use
 * again within a second or so) during which acquiring an
 * empty slot fails at once: a backend outage costs callers a quick
 * "unavailable" instead of a connect timeout each. Thread-safe. */
#ifndef MEMORYD_STORE_CONN_POOL_H
#define MEMORYD_STORE_CONN_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "service/metrics/backend_metrics.h"

typedef struct conn_pool conn_pool;

/* How the pool talks to its backend. connect returns a new connection or
 * NULL with the reason in err, giving up by deadline_ms (CLOCK_MONOTONIC;
 * INT64_MAX: its own timeout only); close frees one (never called with
 * NULL). */
typedef struct conn_pool_ops {
    const char *backend; /* "postgres", "redis": for log lines */
    void *(*connect)(void *ctx, int64_t deadline_ms, char *err, size_t errlen);
    void (*close)(void *conn);
} conn_pool_ops;

/* A pool of size slots, all empty; ops and ctx must outlive it. NULL when
 * out of memory. Free with conn_pool_free. */
conn_pool *conn_pool_create(int size, const conn_pool_ops *ops, void *ctx);
/* Closes every connection (all must have been released); accepts NULL. */
void conn_pool_free(conn_pool *p);

/* Connects slot 0 now (for start-up checks). Returns 0, or -1 with the
 * reason in err, the backoff started. */
int conn_pool_prime(conn_pool *p, char *err, size_t errlen);

/* A connection, waiting for a free one until deadline_ms (CLOCK_MONOTONIC
 * ms; INT64_MAX = no limit). NULL with the reason in err when the deadline
 * passes or the backend cannot be reached. Owned by the caller until
 * conn_pool_release. */
void *conn_pool_acquire(conn_pool *p, int64_t deadline_ms, char *err, size_t errlen);
/* Returns conn; broken=1 closes it so its slot reconnects later. */
void conn_pool_release(conn_pool *p, void *conn, int broken);

/* The metrics (backend_metrics.h). A request is one checkout: acquired
 * and released whole (ok), released broken (unavailable), or not acquired
 * (timeout, unavailable); wait is the time acquire took. conn_pool_gauges
 * takes the pool's lock. */
const backend_stats *conn_pool_stats(const conn_pool *p);
void conn_pool_gauges(void *p, backend_gauges *out);

#endif
