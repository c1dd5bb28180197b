/* health_probe: a background thread that pings the backends and turns
 * their state into per-service health statuses: a service is NOT_SERVING
 * while a backend it needs is down. Which service needs what comes from
 * the caller (the tier descriptors, tier.h); the server as a whole ("")
 * needs PostgreSQL and grpc.health.v1.Health needs nothing. */
#ifndef MEMORYD_HEALTH_HEALTH_PROBE_H
#define MEMORYD_HEALTH_HEALTH_PROBE_H

#include <stddef.h>

#include "service/health/health.h"
#include "service/store/apg.h"
#include "service/store/aredis.h"

#define HEALTH_NEEDS_PG (1u << 0)    /* reads or writes PostgreSQL */
#define HEALTH_NEEDS_REDIS (1u << 1) /* cannot work without Redis */
#define HEALTH_NEEDS_PROBE (1u << 2) /* a backend of its own, asked through probe */

/* One service's dependencies. */
typedef struct health_dep {
    const char *service;     /* "memory.v1.Entries" (borrowed; outlives the probe) */
    unsigned needs;          /* HEALTH_NEEDS_* */
    const char *backend;     /* with HEALTH_NEEDS_PROBE: its name in logs ("qdrant") */
    int (*probe)(void *arg); /* with HEALTH_NEEDS_PROBE: 0 when the backend answers */
    void *probe_arg;
} health_dep;

typedef struct health_probe health_probe;

/* Probes once synchronously (so statuses are right before serving), then
 * every interval_ms on its own thread. PostgreSQL and Redis are asked
 * through the event loop's clients (the ones calls use) with a deadline of
 * their own (the interval, at least 1 s), so a server that stops answering
 * reads as down rather than stalling the probe. redis may be NULL (not configured: services needing
 * it are NOT_SERVING). deps[0..n) is copied; the pools, probe arguments and h must outlive the
 * probe. Returns 0 or -1. */
int health_probe_start(health *h, apg *pg, aredis *redis, const health_dep *deps, size_t n,
                       int interval_ms, health_probe **out);
/* Stops and joins the thread; accepts NULL. */
void health_probe_stop(health_probe *p);

#endif
