/* cache_aside: get-or-load over L1 for tiers whose records live elsewhere
 * (GlobalMemory.GetEntity over PostgreSQL), with single flight: when many
 * calls miss the same key at once, one of them loads it and the others
 * wait for that result instead of sending the same query.
 *
 * A load that fails for a reason of its own (its deadline, a backend
 * error) does not fail the waiters: they retry, one of them loading anew.
 * A loaded item is kept in L1 only if no invalidation of its shard came in
 * while loading (cache_l1_mark) and only while the invalidation subscriber
 * is live (see cache_sub.h): otherwise another replica's write could leave
 * a stale record here. */
#ifndef MEMORYD_CACHE_CACHE_ASIDE_H
#define MEMORYD_CACHE_CACHE_ASIDE_H

#include <stddef.h>
#include <stdint.h>

#include "service/cache/cache_l1.h"
#include "service/cache/cache_sub.h"
#include "service/core/status.h"

typedef struct cache_aside cache_aside;

/* Loads key's record: STATUS_OK with *out (one reference, passed on) or
 * STATUS_ENOTFOUND, both shared with the waiters; any other code is the
 * loader's own failure (its deadline, its backend) and is returned to
 * this caller only, the waiters trying again. */
typedef int (*cache_aside_load_fn)(void *arg, cache_item **out);

/* l1 and sub are borrowed (sub may be NULL: no Redis, so no other replica
 * to hear from and L1 is always safe). NULL when out of memory. */
cache_aside *cache_aside_create(cache_l1 *l1, cache_sub *sub);
void cache_aside_free(cache_aside *ca); /* no call may be in flight; accepts NULL */

/* The record under key when L1 holds it (and may be trusted): a
 * reference the caller releases; NULL otherwise. Never waits. */
cache_item *cache_aside_peek(cache_aside *ca, const char *key, size_t klen);

/* The record under key: from L1 (*from_l1 = 1) or loaded by this call or a
 * concurrent one (*from_l1 = 0). Returns STATUS_OK with *out (a
 * reference the caller releases), STATUS_ENOTFOUND, STATUS_ETIMEOUT,
 * STATUS_ENOMEM or the loader's negative code. deadline_ms is CLOCK_MONOTONIC. */
int cache_aside_get(cache_aside *ca, const char *key, size_t klen, int64_t deadline_ms,
                    cache_aside_load_fn load, void *arg, cache_item **out, int *from_l1);
/* Drops key from this replica's L1 (a write; others hear of it by pub/sub). */
void cache_aside_invalidate(cache_aside *ca, const char *key, size_t klen);
/* Drops everything from this replica's L1 (when a key could not be built). */
void cache_aside_invalidate_all(cache_aside *ca);
/* How many loads ran (for tests of single flight). */
uint64_t cache_aside_loads(cache_aside *ca);

#endif
