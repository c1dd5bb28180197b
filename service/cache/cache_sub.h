/* cache_sub: the invalidation subscriber. A thread holds its own Redis
 * connection SUBSCRIBEd to CACHE_INVALIDATE_CHANNEL and deletes each
 * announced key from this replica's L1 (skipping the replica's own
 * announcements: its L1 is already right).
 *
 * While the subscription is down this replica cannot hear invalidations,
 * so: every (re)subscription clears L1 first (whatever was missed is gone),
 * and cache_sub_live tells callers that must never serve a stale value
 * (GetEntity's cache-aside) to bypass L1 meanwhile. Reconnects back off
 * from 100 ms to 5 s. */
#ifndef MEMORYD_CACHE_CACHE_SUB_H
#define MEMORYD_CACHE_CACHE_SUB_H

#include "service/cache/cache_l1.h"
#include "service/store/redis_pool.h"

typedef struct cache_sub cache_sub;

/* Starts the thread; pool and l1 are borrowed and must outlive it; replica
 * is copied. NULL when out of memory or threads (like cache_l2_create and
 * cache_aside_create); stop it with cache_sub_stop. */
cache_sub *cache_sub_start(redis_pool *pool, cache_l1 *l1, const char *replica);
/* Stops and joins the thread (within ~200 ms); accepts NULL. */
void cache_sub_stop(cache_sub *s);
/* 1 while subscribed (invalidations are being heard), else 0. */
int cache_sub_live(const cache_sub *s);
/* Waits until live or deadline_ms (CLOCK_MONOTONIC); 0 when live. */
int cache_sub_wait_live(cache_sub *s, int64_t deadline_ms);

#endif
