/* cache_l1: the in-process cache level, a TTL-LRU of cache_items keyed by
 * byte strings. Sharded by key hash so worker threads rarely meet on one
 * lock; bounded by entry count and by bytes (each shard holds its share of
 * both, so an item larger than a shard's byte share is never kept); every
 * entry lives at most ttl_ms and never past its item's expire_ms.
 *
 * Invalidation marks close the race between loading a value and an
 * invalidation of it: take cache_l1_mark before reading the source, pass it
 * to cache_l1_put, and the put is dropped if any key of that shard was
 * deleted (or the cache cleared) in between.
 *
 * Thread-safe. Items handed out carry a reference the caller releases. */
#ifndef MEMORYD_CACHE_CACHE_L1_H
#define MEMORYD_CACHE_CACHE_L1_H

#include <stddef.h>
#include <stdint.h>

#include "service/cache/cache_item.h"
#include "service/core/clock.h"

typedef struct cache_l1 cache_l1;

typedef struct cache_l1_options {
    size_t max_entries;     /* 0: L1 disabled (every get misses, puts are dropped) */
    size_t max_bytes;       /* 0: no byte bound */
    int ttl_ms;             /* longest an entry is kept, > 0 */
    const clock_src *clock; /* NULL: the system's clocks (tests move their own) */
} cache_l1_options;

typedef struct cache_l1_stats {
    uint64_t hits, misses;
    uint64_t evictions;     /* dropped to honour a bound */
    uint64_t expirations;   /* found past their time */
    uint64_t invalidations; /* removed by cache_l1_delete */
    size_t entries, bytes;
} cache_l1_stats;

#define CACHE_L1_UNCONDITIONAL UINT64_MAX /* a mark that every put honours */

/* NULL when out of memory. */
cache_l1 *cache_l1_create(const cache_l1_options *o);
void cache_l1_free(cache_l1 *l1); /* accepts NULL */
int cache_l1_enabled(const cache_l1 *l1);

/* The live item under key with a new reference (release it with
 * cache_item_unref), or NULL. Absent markers are returned too. */
cache_item *cache_l1_get(cache_l1 *l1, const void *key, size_t klen);
/* The key's invalidation mark, to pass to a later cache_l1_put. */
uint64_t cache_l1_mark(cache_l1 *l1, const void *key, size_t klen);
/* Stores it under key (taking its own reference), replacing what was
 * there. Returns 1 when stored, 0 when dropped: disabled, the mark is
 * stale, the item is already expired or too large, or out of memory. */
int cache_l1_put(cache_l1 *l1, const void *key, size_t klen, cache_item *it, uint64_t mark);
/* Removes key; 1 if an entry (live or not) was there. Stales the shard's
 * marks either way. */
int cache_l1_delete(cache_l1 *l1, const void *key, size_t klen);
/* Removes every value whose key starts with prefix[0..plen) and, when
 * owner is not NULL, whose item that principal owns (an erasure, and the
 * cross-replica prefix invalidation); stales every mark. Returns how many
 * values it removed. With dry_run it removes nothing and counts them. */
size_t cache_l1_erase(cache_l1 *l1, const void *prefix, size_t plen, const char *owner,
                      int dry_run);
/* Removes everything and stales every mark (after missed invalidations). */
void cache_l1_clear(cache_l1 *l1);
void cache_l1_get_stats(cache_l1 *l1, cache_l1_stats *out);

#endif
