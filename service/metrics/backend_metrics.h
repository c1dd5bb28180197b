/* backend_metrics: the figures every backend client keeps (PostgreSQL's
 * and Redis's connection pools, the Qdrant client), rendered together as
 * the memoryd_backend_* families, labelled by backend ("postgres",
 * "redis", "qdrant") and pool ("loop": the event loop's asynchronous
 * client, "blocking": a pool threads wait on, "http": libcurl handles).
 *
 * A client embeds a backend_stats and counts into it (relaxed atomic
 * adds, nothing else); whoever serves /metrics registers the client once
 * with backend_metrics_add. Registration is process-wide, at start-up;
 * metrics_reset_collectors forgets it too. */
#ifndef MEMORYD_METRICS_BACKEND_METRICS_H
#define MEMORYD_METRICS_BACKEND_METRICS_H

#include <stdint.h>

#include "service/core/status.h"
#include "service/metrics/metrics.h"

/* How a request to a backend ended. refused: the backend answered and
 * said no (a constraint, a missing collection, a bad request): the caller's
 * business, not the backend's health. error: anything else gone wrong
 * (credentials refused, an answer memoryd cannot read, out of memory). */
typedef enum backend_outcome {
    BACKEND_OK = 0,
    BACKEND_REFUSED,
    BACKEND_TIMEOUT,
    BACKEND_UNAVAILABLE,
    BACKEND_BUSY,
    BACKEND_CANCELLED,
    BACKEND_ERROR,
    BACKEND_OUTCOMES
} backend_outcome;

typedef struct backend_stats {
    metrics_counter outcome[BACKEND_OUTCOMES];
    metrics_histogram wait;     /* time a request waited for a connection */
    metrics_histogram duration; /* submit to answer, waiting included */
} backend_stats;

static inline backend_outcome backend_outcome_of(int status) {
    switch (status) {
    case STATUS_OK: return BACKEND_OK;
    case STATUS_ETIMEOUT: return BACKEND_TIMEOUT;
    case STATUS_EUNAVAILABLE: return BACKEND_UNAVAILABLE;
    case STATUS_EBUSY: return BACKEND_BUSY;
    case STATUS_ECANCELLED: return BACKEND_CANCELLED;
    case STATUS_ENOTFOUND:
    case STATUS_ECONFLICT:
    case STATUS_EEXISTS:
    case STATUS_EINVALID:
    case STATUS_EDENIED:
    case STATUS_EPRECONDITION:
    case STATUS_ETOOBIG: return BACKEND_REFUSED;
    default: return BACKEND_ERROR;
    }
}

/* One request ended with status (a STATUS_* code). */
static inline void backend_stats_count(backend_stats *s, int status) {
    metrics_inc(&s->outcome[backend_outcome_of(status)]);
}

/* A pool's state now, read when /metrics is scraped. -1: not known. */
typedef struct backend_gauges {
    int64_t size;    /* connections it may open */
    int64_t open;    /* connected now */
    int64_t in_use;  /* running a request now */
    int64_t waiting; /* requests waiting for a connection */
} backend_gauges;
typedef void (*backend_gauges_fn)(void *client, backend_gauges *out);

/* What a client measures: which of the histograms mean something. */
enum { BACKEND_HAS_WAIT = 1, BACKEND_HAS_DURATION = 2 };

/* Registers a client under its labels (static strings). gauges (NULL:
 * none) is called with client from the scraping thread and must be
 * thread-safe. 0, or -1 when the registry is full or /metrics cannot take
 * another collector. */
int backend_metrics_add(const char *backend, const char *pool, const backend_stats *st,
                        int measures, backend_gauges_fn gauges, void *client);

#endif
