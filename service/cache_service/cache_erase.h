/* cache_erase: the cache tier's eraser (tier/tier_erase.h): a data
 * subject's values leave L2 (Redis) and every replica's L1.
 *
 * What goes. An owner's values: its private slot entries and the
 * shared-slot entries it wrote (the owner in the value). Erasure by subject
 * id: cache values are opaque bytes, so every value the selection reaches
 * goes (the tenant's, or its owner's when it has one). Every erasure also
 * flushes the tenant's copies of entities and entries the tier keeps for
 * GlobalMemory and the router (not counted: their records are counted by
 * their own tiers); Forget runs the cache's eraser after theirs.
 * Counts are L2's entries, or L1's when no Redis is configured.
 *
 * How. L2 is walked with SCAN on the key prefix (bounded batches: Redis is
 * never blocked for long), each batch checked and unlinked by one script;
 * then one prefix invalidation (cache_codec.h) tells every replica to drop
 * its L1 entries under the prefix, and this replica drops its own. A value
 * written meanwhile may survive (as the proto says of every tier). */
#ifndef MEMORYD_CACHE_SERVICE_CACHE_ERASE_H
#define MEMORYD_CACHE_SERVICE_CACHE_ERASE_H

#include "service/cache/cache_l1.h"
#include "service/store/redis_pool.h"
#include "service/tier/tier_erase.h"

/* l1 and redis (NULL: no Redis) are borrowed; replica is this replica's id
 * (its own announcements are skipped by its subscriber). Blocks until
 * c->deadline_ms at most: STATUS_OK with *count, STATUS_EUNAVAILABLE /
 * STATUS_ETIMEOUT with c->err when Redis fails (then nothing was announced:
 * run it again). */
int cache_erase(cache_l1 *l1, redis_pool *redis, const char *replica, tier_ctx *c,
                const tier_erase_sel *sel, int64_t *count);

#endif
