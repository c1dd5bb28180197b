/* cache_rpc_read: Cache.Get and Cache.MultiGet: the caller's slots in L1,
 * then in L2 (one MGET), the read diode on what was found; see
 * cache_service.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/authn.h"
#include "service/cache_service/cache_service_internal.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/metrics/metrics.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_meta.h"

/* ------------------------------------------------------------ lookups */

/* One key's lookup state across the levels. */
typedef struct {
    slots s;
    cache_item *found; /* the answer (a reference) */
    int lookup;        /* MEMORY__V1__CACHE_LOOKUP__* */
    int need_l2;
    int fresh;             /* read-your-writes: L2 answers, L1 is neither read nor filled */
    cache_item *l1_shared; /* a readable shared value L1 had, if own was unknown */
    uint64_t mark_own, mark_shared;
} lookup;

static void lookup_release(lookup *k) {
    cache_item_unref(k->found);
    cache_item_unref(k->l1_shared);
}

/* L1 first: the caller's own slot, then, once own is known to be empty or
 * hidden, the shared one. Leaves need_l2 when L1 cannot tell. */
static void lookup_l1(const cache_service *svc, const principal *p, lookup *k) {
    cache_item *own = cache_l1_get(svc->l1, k->s.own, k->s.own_len);
    if (cache_readable(p, own)) {
        k->found = own;
        k->lookup = MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_HIT_L1;
        return;
    }
    int own_known = own != NULL;
    cache_item_unref(own);
    cache_item *sh = cache_l1_get(svc->l1, k->s.shared, k->s.shared_len);
    if (own_known && sh) {
        if (cache_readable(p, sh)) {
            k->found = sh;
            k->lookup = MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_HIT_L1;
        } else {
            cache_item_unref(sh);
            k->lookup = MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_MISS;
        }
        return;
    }
    if (cache_readable(p, sh)) k->l1_shared = sh; /* the answer if L2 cannot be asked */
    else cache_item_unref(sh);
    k->need_l2 = 1;
    k->mark_own = cache_l1_mark(svc->l1, k->s.own, k->s.own_len);
    k->mark_shared = cache_l1_mark(svc->l1, k->s.shared, k->s.shared_len);
}

/* Remembers what L2 said about a slot in L1: the value, or that it is empty. */
static void promote(const cache_service *svc, const char *key, size_t klen, cache_item *it,
                    uint64_t mark) {
    if (it) {
        cache_l1_put(svc->l1, key, klen, it, mark);
        return;
    }
    cache_item *absent = cache_item_absent(clock_wall_ms(NULL) + ABSENT_MS);
    if (absent) cache_l1_put(svc->l1, key, klen, absent, mark);
    cache_item_unref(absent);
}

/* Without L2 (none configured, or down): what L1 had, else a miss. */
static void settle_without_l2(lookup *k) {
    k->need_l2 = 0;
    if (k->l1_shared) {
        k->found = k->l1_shared;
        k->l1_shared = NULL;
        k->lookup = MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_HIT_L1;
    } else {
        k->lookup = MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_MISS;
    }
}

/* Looks up n keys in L1 (never waits): how many L2 must answer (none
 * without Redis: those are settled from L1 here). */
static size_t lookup_all_l1(const cache_service *svc, const principal *p, lookup *ks, size_t n,
                            int fresh) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        /* A read that must see a recent write skips this replica's copies:
         * one may predate the write (its invalidation still on its way). */
        if (fresh && svc->l2) ks[i].need_l2 = ks[i].fresh = 1;
        else lookup_l1(svc, p, &ks[i]);
        if (ks[i].need_l2) m++;
    }
    if (m == 0 || svc->l2) return m;
    for (size_t i = 0; i < n; i++)
        if (ks[i].need_l2) settle_without_l2(&ks[i]);
    return 0;
}

/* What L2 said (got: own, shared per key that needed it; rc and why) into
 * the lookups, and into L1. Without an answer, L1's is used. */
static void apply_l2(const cache_service *svc, const principal *p, lookup *ks, size_t n,
                     cache_item **got, int rc, const char *why) {
    if (rc != STATUS_OK) {
        log_fields(LOG_WARN, "cache: L2 lookup failed; answering from L1", LOG_F_STR, "reason", why,
                   LOG_F_END);
        for (size_t i = 0; i < n; i++)
            if (ks[i].need_l2) settle_without_l2(&ks[i]);
        return;
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        lookup *k = &ks[i];
        if (!k->need_l2) continue;
        cache_item *own = got[j++], *sh = got[j++];
        if (!k->fresh) { /* (a fresh lookup took no invalidation mark) */
            promote(svc, k->s.own, k->s.own_len, own, k->mark_own);
            promote(svc, k->s.shared, k->s.shared_len, sh, k->mark_shared);
        }
        k->need_l2 = 0;
        if (cache_readable(p, own)) {
            k->found = own;
            own = NULL;
        } else if (cache_readable(p, sh)) {
            k->found = sh;
            sh = NULL;
        }
        k->lookup = k->found ? MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_HIT_L2
                             : MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_MISS;
        cache_item_unref(own);
        cache_item_unref(sh);
    }
}

/* ------------------------------------------------------------ rendering */

/* The metadata of a cached value: a cache entry has no version and is
 * never updated in place. The owner is copied: the item's reference is
 * dropped before the answer is sent. */
Memory__V1__RecordMeta *cache_render_meta(arena *a, const principal *p, const cache_item *it) {
    tier_meta m = {.tenant = principal_tenant(p),
                   .owner = arena_strdup(a, it->owner),
                   .label = it->label,
                   .create_us = it->created_ms * 1000,
                   .update_us = it->created_ms * 1000,
                   .has_expire = 1,
                   .expire_us = it->expire_ms * 1000};
    return m.owner ? tier_meta_render(a, &m) : NULL;
}

static Memory__V1__CacheItem *render_item(arena *a, const principal *p, const lookup *k) {
    Memory__V1__CacheItem *ci = arena_message(a, &memory__v1__cache_item__descriptor);
    if (!ci) return NULL;
    ci->key = (char *)k->s.key;
    ci->lookup = (Memory__V1__CacheLookup)k->lookup;
    if (k->found) {
        /* Copied: the item's reference is dropped before the answer is sent. */
        ci->value.len = k->found->value_len;
        ci->value.data = arena_alloc(a, k->found->value_len ? k->found->value_len : 1);
        if (!ci->value.data || !(ci->meta = cache_render_meta(a, p, k->found))) return NULL;
        if (k->found->value_len) memcpy(ci->value.data, k->found->value, k->found->value_len);
    }
    return ci;
}

/* ------------------------------------------------------------ handlers */

/* Get and MultiGet look in L1 on the completion-queue thread; keys L1
 * cannot answer go to Redis in one MGET on the event loop (rpc.h's
 * execution model), which answers the call. */
typedef grpc_status_code (*lookup_answer_fn)(rpc_call *call, const principal *p,
                                             const ProtobufCMessage *req, ProtobufCMessage *resp,
                                             lookup *ks);
typedef struct {
    cache_l2_lookup lk; /* first: the lookup's done finds the rest */
    const cache_service *svc;
    rpc_call *call;
    const ProtobufCMessage *req;
    ProtobufCMessage *resp;
    lookup *ks;
    size_t n;
    cache_item **got;
    lookup_answer_fn answer;
} pending_lookup;

/* On the loop thread, once Redis answered (or did not). */
static void l2_answered(cache_l2_lookup *lk, int status) {
    pending_lookup *pl = (pending_lookup *)lk;
    const principal *p = authn_principal(pl->call);
    if (status != STATUS_OK && pl->ks[0].fresh) { /* L1 cannot stand in for it */
        for (size_t i = 0; i < pl->n; i++) lookup_release(&pl->ks[i]);
        if (status == STATUS_ECANCELLED) {
            rpc_call_set_error(pl->call, "the client cancelled the call");
            rpc_call_complete(pl->call, GRPC_STATUS_CANCELLED);
            return;
        }
        rpc_call_set_error(pl->call,
                           "the read carries a recent memoryd-consistency token and Redis could "
                           "not answer it (%s); retry it",
                           lk->cmd.err);
        rpc_call_complete(pl->call, status == STATUS_ETIMEOUT ? GRPC_STATUS_DEADLINE_EXCEEDED
                                                              : GRPC_STATUS_UNAVAILABLE);
        return;
    }
    apply_l2(pl->svc, p, pl->ks, pl->n, pl->got, status, lk->cmd.err);
    rpc_call_complete(pl->call, pl->answer(pl->call, p, pl->req, pl->resp, pl->ks));
}

static void cancel_lookup(rpc_call *call, void *arg) {
    (void)call;
    pending_lookup *pl = arg;
    cache_l2_mget_cancel(pl->svc->l2, &pl->lk);
}

/* Looks up ks and answers: from L1 here, or from Redis on the loop. */
static grpc_status_code lookup_and_answer(rpc_call *call, const cache_service *svc,
                                          const principal *p, const ProtobufCMessage *req,
                                          ProtobufCMessage *resp, lookup *ks, size_t n,
                                          lookup_answer_fn answer) {
    size_t m = lookup_all_l1(svc, p, ks, n, rpc_call_wants_fresh(call));
    if (m == 0) return answer(call, p, req, resp, ks);
    arena *a = rpc_call_arena(call);
    pending_lookup *pl = arena_zalloc(a, sizeof *pl);
    const char **keys = arena_alloc(a, 2 * m * sizeof *keys);
    size_t *klens = arena_alloc(a, 2 * m * sizeof *klens);
    cache_item **got = arena_alloc(a, 2 * m * sizeof *got);
    if (!pl || !keys || !klens || !got) {
        for (size_t i = 0; i < n; i++) lookup_release(&ks[i]);
        return rpc_call_oom(call);
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ks[i].need_l2) continue;
        keys[j] = ks[i].s.own, klens[j++] = ks[i].s.own_len;
        keys[j] = ks[i].s.shared, klens[j++] = ks[i].s.shared_len;
    }
    *pl = (pending_lookup){.svc = svc,
                           .call = call,
                           .req = req,
                           .resp = resp,
                           .ks = ks,
                           .n = n,
                           .got = got,
                           .answer = answer};
    pl->lk.done = l2_answered;
    /* Registered before the start: once started, the call may complete on
     * the loop thread at any moment. */
    if (rpc_call_on_cancel(call, cancel_lookup, pl) != 0) {
        for (size_t i = 0; i < n; i++) lookup_release(&ks[i]);
        return GRPC_STATUS_CANCELLED;
    }
    if (cache_l2_mget_start(svc->l2, &pl->lk, a, keys, klens, 2 * m, rpc_call_deadline_ms(call),
                            got) != 0) {
        for (size_t i = 0; i < n; i++) lookup_release(&ks[i]);
        return rpc_call_oom(call);
    }
    return RPC_PENDING;
}

static grpc_status_code answer_get(rpc_call *call, const principal *p, const ProtobufCMessage *req_,
                                   ProtobufCMessage *resp_, lookup *k) {
    const Memory__V1__CacheGetRequest *req = (const Memory__V1__CacheGetRequest *)req_;
    Memory__V1__CacheGetResponse *resp = (Memory__V1__CacheGetResponse *)resp_;
    arena *a = rpc_call_arena(call);
    if (k->found) audit_add_target(call, arena_printf(a, "cache:%s", req->key));
    resp->item = render_item(a, p, k);
    lookup_release(k);
    return resp->item ? GRPC_STATUS_OK : rpc_call_oom(call);
}

RPC_UNARY_HANDLER(cache_do_get, cache_service, Memory__V1__CacheGetRequest,
                  Memory__V1__CacheGetResponse) {
    RPC_CHECK(cache_check_key(call, "key", req->key));
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    lookup *k = arena_zalloc(a, sizeof *k);
    if (!k || cache_make_slots(a, p, req->key, &k->s) != 0) return rpc_call_oom(call);
    return lookup_and_answer(call, svc, p, &req->base, &resp->base, k, 1, answer_get);
}

static grpc_status_code answer_multi_get(rpc_call *call, const principal *p,
                                         const ProtobufCMessage *req_, ProtobufCMessage *resp_,
                                         lookup *ks) {
    const Memory__V1__CacheMultiGetRequest *req = (const Memory__V1__CacheMultiGetRequest *)req_;
    Memory__V1__CacheMultiGetResponse *resp = (Memory__V1__CacheMultiGetResponse *)resp_;
    arena *a = rpc_call_arena(call);
    int oom = 0;
    for (size_t i = 0; i < req->n_keys; i++) {
        if (!oom && !(resp->items[i] = render_item(a, p, &ks[i]))) oom = 1;
        if (!oom && ks[i].found) audit_add_target(call, arena_printf(a, "cache:%s", req->keys[i]));
        lookup_release(&ks[i]);
    }
    if (oom) return rpc_call_oom(call);
    resp->n_items = req->n_keys;
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(cache_do_multi_get, cache_service, Memory__V1__CacheMultiGetRequest,
                  Memory__V1__CacheMultiGetResponse) {
    if (req->n_keys == 0) return rpc_call_invalid(call, "keys: required (1 to %d keys)", KEYS_MAX);
    if (req->n_keys > KEYS_MAX)
        return rpc_call_invalid(call, "keys: %zu keys; at most %d", req->n_keys, KEYS_MAX);
    arena *a = rpc_call_arena(call);
    for (size_t i = 0; i < req->n_keys; i++) {
        const char *field = arena_printf(a, "keys[%zu]", i);
        RPC_CHECK(cache_check_key(call, field ? field : "keys", req->keys[i]));
    }
    const principal *p = authn_principal(call);
    lookup *ks = arena_zalloc(a, req->n_keys * sizeof *ks);
    resp->items = arena_alloc(a, req->n_keys * sizeof *resp->items);
    if (!ks || !resp->items) return rpc_call_oom(call);
    for (size_t i = 0; i < req->n_keys; i++)
        if (cache_make_slots(a, p, req->keys[i], &ks[i].s) != 0) return rpc_call_oom(call);
    return lookup_and_answer(call, svc, p, &req->base, &resp->base, ks, req->n_keys,
                             answer_multi_get);
}
