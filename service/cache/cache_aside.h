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

typedef struct cache_aside cache_aside;

#define CACHE_ASIDE_FOUND 0
#define CACHE_ASIDE_NOT_FOUND 1 /* the loader found nothing: shared with waiters, not cached */
/* Codes of the cache-aside itself, far from any loader's own codes. */
#define CACHE_ASIDE_TIMEOUT (-1000) /* the caller's deadline passed waiting for another's load */
#define CACHE_ASIDE_NOMEM (-1001)

/* Loads key's record: CACHE_ASIDE_FOUND with *out (one reference, passed
 * on), CACHE_ASIDE_NOT_FOUND, or a negative code of the loader's own that
 * is returned to this caller only. */
typedef int (*cache_aside_load_fn)(void *arg, cache_item **out);

/* l1 and sub are borrowed (sub may be NULL: no Redis, so no other replica
 * to hear from and L1 is always safe). NULL when out of memory. */
cache_aside *cache_aside_create(cache_l1 *l1, cache_sub *sub);
void cache_aside_free(cache_aside *ca); /* no call may be in flight; accepts NULL */

/* The record under key: from L1 (*from_l1 = 1) or loaded by this call or a
 * concurrent one (*from_l1 = 0). Returns CACHE_ASIDE_FOUND with *out (a
 * reference the caller releases), CACHE_ASIDE_NOT_FOUND, CACHE_ASIDE_TIMEOUT,
 * CACHE_ASIDE_NOMEM or the loader's negative code. deadline_ms is CLOCK_MONOTONIC. */
int cache_aside_get(cache_aside *ca, const char *key, size_t klen, int64_t deadline_ms,
                    cache_aside_load_fn load, void *arg, cache_item **out, int *from_l1);
/* Drops key from this replica's L1 (a write; others hear of it by pub/sub). */
void cache_aside_invalidate(cache_aside *ca, const char *key, size_t klen);
/* How many loads ran (for tests of single flight). */
uint64_t cache_aside_loads(cache_aside *ca);

#endif
