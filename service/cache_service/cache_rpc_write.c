/* cache_rpc_write: Cache.Set and Cache.DeleteKey: the PII policy, the
 * Redis script that writes L2 and announces the change, then L1 and the
 * audit row; see cache_service.h. */
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
        resp->meta = cache_render_meta(rpc_call_arena(call), p, pw->it);
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

RPC_UNARY_HANDLER(cache_do_set, cache_service, Memory__V1__CacheSetRequest,
                  Memory__V1__CacheSetResponse) {
    RPC_CHECK(cache_check_key(call, "key", req->key));
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
    if (!pw || cache_write_slot(call, p, req->key, &pw->k, &pw->klen) != 0)
        return rpc_call_oom(call);
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

RPC_UNARY_HANDLER(cache_do_delete, cache_service, Memory__V1__CacheDeleteKeyRequest,
                  Memory__V1__CacheDeleteKeyResponse) {
    RPC_CHECK(cache_check_key(call, "key", req->key));
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    pending_write *pw = arena_zalloc(a, sizeof *pw);
    if (!pw || cache_write_slot(call, p, req->key, &pw->k, &pw->klen) != 0)
        return rpc_call_oom(call);
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
