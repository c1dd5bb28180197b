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
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/metrics/metrics.h"
#include "service/pii/pii_policy.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_meta.h"
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

static grpc_status_code check_key(rpc_call *call, const char *field, const char *key) {
    size_t n = strlen(key);
    if (n == 0) return rpc_call_invalid(call, "%s: required (1 to %d bytes)", field, KEY_MAX);
    if (n > KEY_MAX) return rpc_call_invalid(call, "%s: %zu bytes; at most %d", field, n, KEY_MAX);
    if (text_name_chars(key) < 0)
        return rpc_call_invalid(call,
                                "%s: \"%s\" is not valid UTF-8 or contains a control character",
                                field, text_quote(rpc_call_arena(call), key));
    return GRPC_STATUS_OK;
}

/* The two slots a key names for the caller. */
typedef struct {
    const char *key;
    char *own, *shared;
    size_t own_len, shared_len;
} slots;

static int make_slots(arena *a, const principal *p, const char *key, slots *s) {
    s->key = key;
    s->own =
        cache_key_slot(a, principal_tenant(p), principal_sub(p), key, strlen(key), &s->own_len);
    s->shared = cache_key_slot(a, principal_tenant(p), NULL, key, strlen(key), &s->shared_len);
    return s->own && s->shared ? 0 : -1;
}

/* The slot Set and DeleteKey address: shared for cache:write:all. */
/* The slot a Set or DeleteKey of key writes (shared with cache:write:all),
 * named as the call's audit target. -1 when out of memory. */
static int write_slot(rpc_call *call, const principal *p, const char *key, const char **k,
                      size_t *klen) {
    arena *a = rpc_call_arena(call);
    slots s;
    if (make_slots(a, p, key, &s) != 0) return -1;
    int shared = principal_scope(p, "cache:write") == PRINCIPAL_ALL;
    *k = shared ? s.shared : s.own;
    *klen = shared ? s.shared_len : s.own_len;
    audit_add_target(call, arena_printf(a, "cache:%s", key));
    return 0;
}

/* The read diode on what a slot holds (the tenant is in the key). */
static int readable(const principal *p, const cache_item *it) {
    return it && !it->absent && it->label >= 1 && it->label <= (int)principal_clr(p);
}

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
    if (readable(p, own)) {
        k->found = own;
        k->lookup = MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_HIT_L1;
        return;
    }
    int own_known = own != NULL;
    cache_item_unref(own);
    cache_item *sh = cache_l1_get(svc->l1, k->s.shared, k->s.shared_len);
    if (own_known && sh) {
        if (readable(p, sh)) {
            k->found = sh;
            k->lookup = MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_HIT_L1;
        } else {
            cache_item_unref(sh);
            k->lookup = MEMORY__V1__CACHE_LOOKUP__CACHE_LOOKUP_MISS;
        }
        return;
    }
    if (readable(p, sh)) k->l1_shared = sh; /* the answer if L2 cannot be asked */
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
        if (readable(p, own)) {
            k->found = own;
            own = NULL;
        } else if (readable(p, sh)) {
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
static Memory__V1__RecordMeta *render_meta(arena *a, const principal *p, const cache_item *it) {
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
        if (!ci->value.data || !(ci->meta = render_meta(a, p, k->found))) return NULL;
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

static RPC_UNARY_HANDLER(do_get, cache_service, Memory__V1__CacheGetRequest,
                         Memory__V1__CacheGetResponse) {
    RPC_CHECK(check_key(call, "key", req->key));
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    lookup *k = arena_zalloc(a, sizeof *k);
    if (!k || make_slots(a, p, req->key, &k->s) != 0) return rpc_call_oom(call);
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

static RPC_UNARY_HANDLER(do_multi_get, cache_service, Memory__V1__CacheMultiGetRequest,
                         Memory__V1__CacheMultiGetResponse) {
    if (req->n_keys == 0) return rpc_call_invalid(call, "keys: required (1 to %d keys)", KEYS_MAX);
    if (req->n_keys > KEYS_MAX)
        return rpc_call_invalid(call, "keys: %zu keys; at most %d", req->n_keys, KEYS_MAX);
    arena *a = rpc_call_arena(call);
    for (size_t i = 0; i < req->n_keys; i++) {
        const char *field = arena_printf(a, "keys[%zu]", i);
        RPC_CHECK(check_key(call, field ? field : "keys", req->keys[i]));
    }
    const principal *p = authn_principal(call);
    lookup *ks = arena_zalloc(a, req->n_keys * sizeof *ks);
    resp->items = arena_alloc(a, req->n_keys * sizeof *resp->items);
    if (!ks || !resp->items) return rpc_call_oom(call);
    for (size_t i = 0; i < req->n_keys; i++)
        if (make_slots(a, p, req->keys[i], &ks[i].s) != 0) return rpc_call_oom(call);
    return lookup_and_answer(call, svc, p, &req->base, &resp->base, ks, req->n_keys,
                             answer_multi_get);
}

/* The PII policy over a value that is text (binary values are not
 * scanned). Cache entries do not record pii_kinds. */
static grpc_status_code value_pii(rpc_call *call, const cache_service *svc, const principal *p,
                                  ProtobufCBinaryData *v) {
    pii_mode mode = pii_policy_mode(svc->pii, p);
    if (mode == PII_MODE_ALLOW || !text_utf8_valid(v->data, v->len)) return GRPC_STATUS_OK;
    const char *text = (const char *)v->data;
    size_t len = v->len;
    pii_field f[] = {PII_BYTES("value", &text, &len)};
    char why[512];
    int rc = pii_policy_apply(rpc_call_arena(call), mode, f, 1, NULL, NULL, why, sizeof why);
    if (rc == STATUS_EINVALID) return rpc_call_invalid(call, "%s", why);
    if (rc != STATUS_OK) return rpc_call_oom(call);
    v->data = (uint8_t *)text;
    v->len = len;
    return GRPC_STATUS_OK;
}

static grpc_status_code denied(rpc_call *call, const char *key) {
    rpc_call_set_error(call,
                       "key \"%s\" holds an entry labelled above your clearance; it may "
                       "not be modified",
                       text_quote(rpc_call_arena(call), key));
    return GRPC_STATUS_PERMISSION_DENIED;
}

/* Set and DeleteKey: the Redis script on the event loop, then L1 and the
 * answer (from the loop thread, or here without Redis). Without an answer
 * from Redis, L1 alone decides with the same diode as the script. */
typedef struct {
    cache_l2_write w; /* first: the write's done finds the rest */
    const cache_service *svc;
    rpc_call *call;
    const char *key; /* the request's, for messages */
    const char *k;   /* the slot */
    size_t klen;
    ProtobufCMessage *resp;
    cache_item *it; /* Set: the value (our reference) */
    uint64_t mark;  /* Set: L1's mark from before the write */
    int is_delete;
} pending_write;

static grpc_status_code set_settled(pending_write *pw, int rc) {
    const cache_service *svc = pw->svc;
    rpc_call *call = pw->call;
    const principal *p = authn_principal(call);
    uint64_t mark = pw->mark;
    if (rc == STATUS_EUNAVAILABLE || rc == STATUS_ETIMEOUT) {
        /* L1 alone decides; the same diode as the Redis script, and the
         * same stamp: never below the label of what it replaces. */
        cache_item *old = cache_l1_get(svc->l1, pw->k, pw->klen);
        int present = old && !old->absent;
        rc = present && old->label > (int)principal_clr(p) ? STATUS_EDENIED : STATUS_OK;
        if (present && old->label > pw->it->label) pw->it->label = old->label;
        cache_item_unref(old);
        mark = CACHE_L1_UNCONDITIONAL;
        rpc_call_no_consistency_token(call); /* Redis does not have it */
    } else if (rc == STATUS_OK && pw->w.stored_label > pw->it->label) {
        pw->it->label = pw->w.stored_label; /* the item is still ours alone */
    }
    grpc_status_code st;
    if (rc == STATUS_EDENIED) {
        st = denied(call, pw->key);
    } else if (rc != STATUS_OK) {
        /* Cancelled, or out of memory: whether Redis has the value is
         * unknown, so this replica's L1 must not keep the old one. */
        cache_l1_delete(svc->l1, pw->k, pw->klen);
        st = rpc_call_fail(call, rc, pw->w.cmd.err[0] ? pw->w.cmd.err : "out of memory");
    } else {
        /* The put is dropped when an invalidation came since the mark (of
         * any key of its shard): the slot's older copy must not outlive
         * the write then. */
        if (!cache_l1_put(svc->l1, pw->k, pw->klen, pw->it, mark))
            cache_l1_delete(svc->l1, pw->k, pw->klen);
        Memory__V1__CacheSetResponse *resp = (Memory__V1__CacheSetResponse *)pw->resp;
        resp->meta = render_meta(rpc_call_arena(call), p, pw->it);
        st = resp->meta ? GRPC_STATUS_OK : rpc_call_oom(call);
    }
    cache_item_unref(pw->it);
    return st;
}

static grpc_status_code delete_settled(pending_write *pw, int rc) {
    const cache_service *svc = pw->svc;
    rpc_call *call = pw->call;
    const principal *p = authn_principal(call);
    if (rc == STATUS_EUNAVAILABLE || rc == STATUS_ETIMEOUT) {
        cache_item *old = cache_l1_get(svc->l1, pw->k, pw->klen);
        int present = old && !old->absent;
        if (present && old->label > (int)principal_clr(p)) rc = STATUS_EDENIED;
        else rc = present ? STATUS_OK : STATUS_ENOTFOUND;
        cache_item_unref(old);
        rpc_call_no_consistency_token(call); /* Redis may still have it */
    }
    if (rc == STATUS_EDENIED) return denied(call, pw->key);
    cache_l1_delete(svc->l1, pw->k, pw->klen);
    if (rc != STATUS_OK && rc != STATUS_ENOTFOUND)
        return rpc_call_fail(call, rc, pw->w.cmd.err[0] ? pw->w.cmd.err : "out of memory");
    ((Memory__V1__CacheDeleteKeyResponse *)pw->resp)->deleted = rc == STATUS_OK;
    return GRPC_STATUS_OK;
}

/* A write that succeeded is answered once its audit row is stored (in
 * PostgreSQL: Redis keeps no history); st is the settled status. */
static grpc_status_code audited(pending_write *pw, grpc_status_code st) {
    if (st != GRPC_STATUS_OK) return st;
    return tier_pending_audit_row(pw->call, &pw->svc->store, pw->svc->audit, pw->resp);
}

/* On the loop thread, once Redis answered (or did not). */
static void l2_written(cache_l2_write *w, int status) {
    pending_write *pw = (pending_write *)w;
    if (status == STATUS_EUNAVAILABLE || status == STATUS_ETIMEOUT)
        log_fields(LOG_WARN,
                   pw->is_delete ? "cache: L2 delete failed; deleted from this replica's L1 only"
                                 : "cache: L2 write failed; value kept in this replica's L1 only",
                   LOG_F_STR, "reason", w->cmd.err, LOG_F_END);
    grpc_status_code st =
        audited(pw, pw->is_delete ? delete_settled(pw, status) : set_settled(pw, status));
    if (st != RPC_PENDING) rpc_call_complete(pw->call, st);
}

static void cancel_write(rpc_call *call, void *arg) {
    (void)call;
    pending_write *pw = arg;
    cache_l2_write_cancel(pw->svc->l2, &pw->w);
}

/* Readies pw's write for the loop: its done, and the client's cancel
 * (registered before the start: once started, the call may complete on
 * the loop thread at any moment). -1 when the client is gone already. */
static int arm_write(pending_write *pw) {
    pw->w.done = l2_written;
    if (rpc_call_on_cancel(pw->call, cancel_write, pw) == 0) return 0;
    cache_item_unref(pw->it);
    return -1;
}

/* The handler's answer once cache_l2_*_start returned started. */
static grpc_status_code write_l2(pending_write *pw, int started) {
    if (started != 0)
        return pw->is_delete ? delete_settled(pw, STATUS_ENOMEM) : set_settled(pw, STATUS_ENOMEM);
    return RPC_PENDING;
}

static RPC_UNARY_HANDLER(do_set, cache_service, Memory__V1__CacheSetRequest,
                         Memory__V1__CacheSetResponse) {
    RPC_CHECK(check_key(call, "key", req->key));
    if (req->value.len > VALUE_MAX)
        return rpc_call_invalid(call, "value: %zu bytes; at most %d", req->value.len, VALUE_MAX);
    int64_t ttl_ms;
    if (!req->ttl) return rpc_call_invalid(call, "ttl: required (1 s to 3600 s)");
    RPC_CHECK(tier_check_duration(call, "ttl", req->ttl, TTL_MIN_MS, TTL_MAX_MS, "1 s to 3600 s",
                                  &ttl_ms));
    RPC_CHECK(tier_check_label(call, "label", (int)req->label));
    const principal *p = authn_principal(call);
    ProtobufCBinaryData value = req->value;
    RPC_CHECK(value_pii(call, svc, p, &value));

    arena *a = rpc_call_arena(call);
    pending_write *pw = arena_zalloc(a, sizeof *pw);
    if (!pw || write_slot(call, p, req->key, &pw->k, &pw->klen) != 0) return rpc_call_oom(call);
    int64_t now = clock_wall_ms(NULL);
    pw->it = cache_item_create(principal_sub(p), strlen(principal_sub(p)), value.data, value.len,
                               principal_stamp_label(p, req->label, 0), now, now + ttl_ms);
    if (!pw->it) return rpc_call_oom(call);
    pw->svc = svc;
    pw->call = call;
    pw->key = req->key;
    pw->resp = &resp->base;
    pw->mark = cache_l1_mark(svc->l1, pw->k, pw->klen);
    if (!svc->l2) return audited(pw, set_settled(pw, STATUS_EUNAVAILABLE));
    size_t blen;
    uint8_t *blob = cache_blob_encode(a, pw->it, &blen);
    if (!blob) return set_settled(pw, STATUS_ENOMEM);
    if (arm_write(pw) != 0) return GRPC_STATUS_CANCELLED;
    return write_l2(pw, cache_l2_set_start(svc->l2, &pw->w, a, pw->k, pw->klen, blob, blen, ttl_ms,
                                           (int)principal_clr(p), rpc_call_deadline_ms(call)));
}

static RPC_UNARY_HANDLER(do_delete, cache_service, Memory__V1__CacheDeleteKeyRequest,
                         Memory__V1__CacheDeleteKeyResponse) {
    RPC_CHECK(check_key(call, "key", req->key));
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    pending_write *pw = arena_zalloc(a, sizeof *pw);
    if (!pw || write_slot(call, p, req->key, &pw->k, &pw->klen) != 0) return rpc_call_oom(call);
    pw->svc = svc;
    pw->call = call;
    pw->key = req->key;
    pw->resp = &resp->base;
    pw->is_delete = 1;
    if (!svc->l2) return audited(pw, delete_settled(pw, STATUS_EUNAVAILABLE));
    if (arm_write(pw) != 0) return GRPC_STATUS_CANCELLED;
    return write_l2(pw, cache_l2_delete_start(svc->l2, &pw->w, a, pw->k, pw->klen,
                                              (int)principal_clr(p), rpc_call_deadline_ms(call)));
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
    RPC_METHOD_UNARY(SVC, "Get", memory__v1__cache_get, "cache:read", do_get),
    RPC_METHOD_UNARY(SVC, "Set", memory__v1__cache_set, "cache:write", do_set),
    RPC_METHOD_UNARY(SVC, "DeleteKey", memory__v1__cache_delete_key, "cache:write", do_delete),
    RPC_METHOD_UNARY(SVC, "MultiGet", memory__v1__cache_multi_get, "cache:read", do_multi_get),
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
