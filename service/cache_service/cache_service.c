/* cache_service: the cache tier and memory.v1.Cache; see cache_service.h. */
#include "service/cache_service/cache_service.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memory/v1/cache.pb-c.h"
#include "memory/v1/entries.pb-c.h"
#include "service/audit/audit.h"
#include "service/auth/authn.h"
#include "service/cache/cache_codec.h"
#include "service/cache/cache_metrics.h"
#include "service/cache/cache_records.h"
#include "service/cache/cache_sub.h"
#include "service/cache_service/cache_erase.h"
#include "service/cache_service/cache_service_internal.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/metrics/metrics.h"
#include "service/pii/pii_policy.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_meta.h"
#include "service/tier/tier_sql.h"

grpc_status_code cache_check_key(rpc_call *call, const char *field, const char *key) {
    size_t n = strlen(key);
    if (n == 0) return rpc_call_invalid(call, "%s: required (1 to %d bytes)", field, KEY_MAX);
    if (n > KEY_MAX) return rpc_call_invalid(call, "%s: %zu bytes; at most %d", field, n, KEY_MAX);
    if (text_name_chars(key) < 0)
        return rpc_call_invalid(call,
                                "%s: \"%s\" is not valid UTF-8 or contains a control character",
                                field, text_quote(rpc_call_arena(call), key));
    return GRPC_STATUS_OK;
}

int cache_make_slots(arena *a, const principal *p, const char *key, slots *s) {
    s->key = key;
    s->own =
        cache_key_slot(a, principal_tenant(p), principal_sub(p), key, strlen(key), &s->own_len);
    s->shared = cache_key_slot(a, principal_tenant(p), NULL, key, strlen(key), &s->shared_len);
    return s->own && s->shared ? 0 : -1;
}

int cache_write_slot(rpc_call *call, const principal *p, const char *key, const char **k,
                     size_t *klen) {
    arena *a = rpc_call_arena(call);
    slots s;
    if (cache_make_slots(a, p, key, &s) != 0) return -1;
    int shared = principal_scope(p, "cache:write") == PRINCIPAL_ALL;
    *k = shared ? s.shared : s.own;
    *klen = shared ? s.shared_len : s.own_len;
    audit_add_target(call, arena_printf(a, "cache:%s", key));
    return 0;
}

int cache_readable(const principal *p, const cache_item *it) {
    return it && !it->absent && it->label >= 1 && it->label <= (int)principal_clr(p);
}

/* ------------------------------------------------------------ the tier */

static void cache_free(void *state) {
    cache_service *svc = state;
    if (!svc) return;
    cache_records_free(svc->entities);
    cache_records_free(svc->entries);
    cache_aside_free(svc->aside);
    cache_sub_stop(svc->sub);
    cache_l2_free(svc->l2);
    if (svc->l1) {
        cache_l1_stats st;
        cache_l1_get_stats(svc->l1, &st);
        log_fields(LOG_INFO, "cache L1 totals", LOG_F_INT, "hits", (int64_t)st.hits, LOG_F_INT,
                   "misses", (int64_t)st.misses, LOG_F_INT, "evictions", (int64_t)st.evictions,
                   LOG_F_INT, "expirations", (int64_t)st.expirations, LOG_F_INT, "invalidations",
                   (int64_t)st.invalidations, LOG_F_END);
    }
    cache_l1_free(svc->l1);
    free(svc);
}

static int erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    cache_service *svc = state;
    return cache_erase(svc->l1, svc->redis, svc->replica, c, sel, count);
}

/* L1 always (unless sized 0), L2 and the invalidation subscriber when
 * Redis is configured. Replicas tell their own invalidations apart by a
 * random id. */
static int cache_open(tier_env *env, void **state, char *err, size_t errlen) {
    const config *c = env->cfg;
    cache_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    unsigned char rnd[CACHE_REPLICA_ID_LEN / 2];
    char replica[CACHE_REPLICA_ID_LEN + 1];
    if (!svc) return -1;
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return snprintf(err, errlen, "no randomness for the replica id"), -1;
    for (size_t i = 0; i < sizeof rnd; i++) snprintf(replica + 2 * i, 3, "%02x", rnd[i]);
    svc->pii = env->pii;
    svc->store = tier_store_on(env->pg, env->pga, 0);
    svc->audit = env->audit;
    cache_l1_options lo = {(size_t)c->cache_l1_max_entries, (size_t)c->cache_l1_max_bytes,
                           c->cache_l1_ttl_ms, NULL};
    if (!(svc->l1 = cache_l1_create(&lo)) ||
        (env->redis && (!(svc->l2 = cache_l2_create(env->redis_async, replica)) ||
                        !(svc->sub = cache_sub_start(env->redis, svc->l1, replica)))) ||
        !(svc->aside = cache_aside_create(svc->l1, svc->sub)) ||
        !(svc->entries = cache_records_create(svc->aside, svc->l2, 'n',
                                              &memory__v1__entry__descriptor, ENTRY_L2_TTL_MS)) ||
        (c->cache_entities && !(svc->entities = cache_records_create(
                                    svc->aside, svc->l2, 'e', &memory__v1__entity__descriptor, 0))))
        return snprintf(err, errlen, "cannot start the cache (out of memory or threads)"), -1;
    /* Serve with invalidations heard when Redis is there: until then the
     * entity cache bypasses L1. A Redis that is down does not hold us up. */
    if (svc->sub) cache_sub_wait_live(svc->sub, rpc_now_ms() + 2000);
    env->entity_cache = svc->entities;
    env->entry_cache = svc->entries;
    /* Scraped only when memoryd serves /metrics (main resets the registry
     * before the tiers are freed). */
    svc->metrics = (cache_metrics_src){svc->l1, svc->l2};
    if (c->metrics_listen && c->metrics_listen[0] &&
        metrics_add_collector(cache_metrics_collect, &svc->metrics) != 0)
        return snprintf(err, errlen, "cannot register the cache's metrics"), -1;
    svc->redis = env->redis;
    memcpy(svc->replica, replica, sizeof replica);
    log_fields(LOG_INFO, "cache tier", LOG_F_STR, "replica", replica, LOG_F_INT, "l1_max_entries",
               (int64_t)c->cache_l1_max_entries, LOG_F_INT, "l1_max_bytes",
               (int64_t)c->cache_l1_max_bytes, LOG_F_STR, "l2", svc->l2 ? "redis" : "none",
               LOG_F_STR, "entities", svc->entities ? "cached" : "not cached", LOG_F_END);
    return 0;
}

#define SVC "memory.v1.Cache"
static const rpc_method methods[] = {
    RPC_METHOD_UNARY(SVC, "Get", memory__v1__cache_get, "cache:read", cache_do_get),
    RPC_METHOD_UNARY(SVC, "Set", memory__v1__cache_set, "cache:write", cache_do_set),
    RPC_METHOD_UNARY(SVC, "DeleteKey", memory__v1__cache_delete_key, "cache:write",
                     cache_do_delete),
    RPC_METHOD_UNARY(SVC, "MultiGet", memory__v1__cache_multi_get, "cache:read",
                     cache_do_multi_get),
};

static const tier_service services[] = {
    {SVC, 0}, /* L1 answers without Redis */
    /* The shared level: NOT_SERVING = Cache degraded to this replica's L1
     * (Redis down or not configured, or Redis back but this replica not yet
     * hearing invalidations again, so its L1 is not yet shared-safe). */
    {SVC ".L2", HEALTH_NEEDS_REDIS | HEALTH_NEEDS_PROBE},
};

/* 0 while the invalidation subscription is live (it clears L1 each time it
 * comes back). */
static int cache_probe(void *state) {
    const cache_service *svc = state;
    return svc->sub && cache_sub_live(svc->sub) ? 0 : -1;
}

/* Counts go under L2 when Redis is configured (the shared level holds
 * the values), else under this replica's L1. */
static int counts_tier(const void *state) {
    const cache_service *svc = state;
    return svc->redis ? MEMORY__V1__TIER__TIER_CACHE_L2 : MEMORY__V1__TIER__TIER_CACHE_L1;
}

static const tier_records records = {
    .tier_of = counts_tier, .order = TIER_ORDER_COPIES, .erase = erase};

const tier cache_tier = {
    TIER_FIELDS("cache", services, methods, cache_open, cache_free),
    .probe = cache_probe,
    .probe_backend = "cache invalidation subscription",
    .records = &records,
};
