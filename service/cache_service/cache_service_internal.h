/* cache_service_internal: what the Cache tier's files share (the tier's
 * state, a key's slots, the checks); see cache_service.h. The tier's open
 * and method table are cache_service.c, Get and MultiGet cache_rpc_read.c,
 * Set and DeleteKey cache_rpc_write.c. */
#ifndef MEMORYD_CACHE_SERVICE_CACHE_SERVICE_INTERNAL_H
#define MEMORYD_CACHE_SERVICE_CACHE_SERVICE_INTERNAL_H

#include "memory/v1/cache.pb-c.h"
#include "service/audit/audit.h"
#include "service/cache/cache_aside.h"
#include "service/cache/cache_codec.h"
#include "service/cache/cache_l1.h"
#include "service/cache/cache_l2.h"
#include "service/cache/cache_metrics.h"
#include "service/cache/cache_records.h"
#include "service/cache/cache_sub.h"
#include "service/pii/pii_policy.h"
#include "service/rpc/rpc.h"
#include "service/tier/tier_sql.h"

#define KEY_MAX 512
#define VALUE_MAX (1024 * 1024)
#define KEYS_MAX 1000
#define TTL_MIN_MS 1000
#define TTL_MAX_MS 3600000
/* How long L1 may remember that a slot is empty (L1's TTL caps it too). */
#define ABSENT_MS 3600000

/* How long an entry cached for the router stays in L2 at most: also how
 * long a copy may outlive a change whose announcement Redis missed. */
#define ENTRY_L2_TTL_MS 60000

/* The cache tier: this replica's L1, and with Redis the L2, the
 * invalidation subscriber, the record caches it offers: GlobalMemory's
 * entities (with --cache-entities), and the entries the router looks up
 * (RecentLookupQuery). */
typedef struct cache_service {
    cache_l1 *l1;
    cache_l2 *l2;              /* NULL: no Redis configured */
    cache_metrics_src metrics; /* what /metrics reports of l1 and l2 */
    cache_sub *sub;            /* with l2 */
    cache_aside *aside;
    cache_records *entities; /* with --cache-entities */
    cache_records *entries;
    pii_policy pii;
    tier_store store; /* PostgreSQL, for the audit rows of writes */
    audit *audit;
    redis_pool *redis; /* the eraser's (blocking) Redis; NULL: none */
    char replica[CACHE_REPLICA_ID_LEN + 1];
} cache_service;

/* The two slots a key names for the caller. */
typedef struct {
    const char *key;
    char *own, *shared;
    size_t own_len, shared_len;
} slots;

/* key as a request's field names it: 1 to KEY_MAX bytes of UTF-8
 * without control characters; INVALID_ARGUMENT naming field otherwise. */
grpc_status_code cache_check_key(rpc_call *call, const char *field, const char *key);
/* The two slots of key for p, in arena a: 0, or -1 when out of memory. */
int cache_make_slots(arena *a, const principal *p, const char *key, slots *s);
/* The slot a Set or DeleteKey of key writes (shared with cache:write:all),
 * named as the call's audit target. -1 when out of memory. */
int cache_write_slot(rpc_call *call, const principal *p, const char *key, const char **k,
                     size_t *klen);
/* The read diode on what a slot holds (the tenant is in the key). */
int cache_readable(const principal *p, const cache_item *it);

/* The metadata of a cached value as Get and Set answer it (in a: the
 * owner is copied, the item's reference may go before the answer is
 * sent); NULL when out of memory. */
Memory__V1__RecordMeta *cache_render_meta(arena *a, const principal *p, const cache_item *it);

/* The handlers. */
RPC_UNARY_FN(cache_do_get);
RPC_UNARY_FN(cache_do_multi_get);
RPC_UNARY_FN(cache_do_set);
RPC_UNARY_FN(cache_do_delete);

#endif
