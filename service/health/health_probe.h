/* health_probe: a background thread that pings the backends and turns
 * their state into per-service health statuses (a service is NOT_SERVING
 * while a backend it needs is down). */
#ifndef MEMORYD_HEALTH_HEALTH_PROBE_H
#define MEMORYD_HEALTH_HEALTH_PROBE_H

#include "service/health/health.h"
#include "service/store/pg_pool.h"
#include "service/store/redis_pool.h"

typedef struct health_probe health_probe;

/* A backend of one tier probed besides PostgreSQL and Redis (the episodic
 * tier's vector store when it is Qdrant): 0 when it answers. */
typedef int (*health_probe_fn)(void *arg);

/* Probes once synchronously (so statuses are right before serving), then
 * every interval_ms on its own thread. redis may be NULL (not configured);
 * vectors may be NULL (EpisodicMemory then needs PostgreSQL only). The
 * pools, vectors_arg and h must outlive the probe. Returns 0 or -1. */
int health_probe_start(health *h, pg_pool *pg, redis_pool *redis, health_probe_fn vectors,
                       void *vectors_arg, int interval_ms, health_probe **out);
/* Stops and joins the thread; accepts NULL. */
void health_probe_stop(health_probe *p);

#endif
