/* cache_service: the cache tier (memory.v1.Cache, protos/memory/v1/
 * cache.proto) over L1 (cache_l1) and, when Redis is configured, L2
 * (cache_l2).
 *
 * Slots. A key names one slot per caller: a principal holding cache:write
 * (breadth :own) writes and deletes its private slot, one holding
 * cache:write:all the tenant's shared slot. Get looks in the caller's
 * private slot first, then in the shared slot; the read diode then applies
 * to what was found (label <= clr; the private slot is the caller's own by
 * construction, the shared slot is readable by the whole tenant). Another
 * principal's private entries are never reachable, not even with
 * cache:read:all: the cache has no way to enumerate them and a Get names
 * one key.
 *
 * Levels. Get answers from L1 when it can, else from L2 (one MGET for both
 * slots), keeping what L2 returned in L1 (with an absent marker for an
 * empty private slot, so the next lookup of a shared value stays in L1).
 * Set and DeleteKey write L2 and publish the invalidation in the same
 * Redis round trip, then update this replica's L1.
 *
 * Redis down. Get answers from L1 or a miss (never an error); Set and
 * DeleteKey act on this replica's L1 only and log it: other replicas, which
 * cannot hear invalidations either, drop their L1 when their subscription
 * comes back, so a value may be stale for at most the L1 TTL meanwhile.
 *
 * Values that are valid UTF-8 go through the PII policy (reject, or
 * redact; kept as written with pii:write). Cache entries do not record
 * pii_kinds.
 *
 * Other tiers' records. With --cache-entities the tier offers
 * GlobalMemory a record cache over the same L1 (cache_records.h) through
 * tier_env.entity_cache. */
#ifndef MEMORYD_CACHE_SERVICE_CACHE_SERVICE_H
#define MEMORYD_CACHE_SERVICE_CACHE_SERVICE_H

#include "service/tier/tier.h"

/* The tier: serves memory.v1.Cache (L1 answers without Redis) and the
 * health service memory.v1.Cache.L2 (SERVING while Redis is). Opened with
 * env->redis (may be NULL), env->pii and the --cache-* flags. Must come
 * before GlobalMemory in the tier table. */
extern const tier cache_tier;

#endif
