/* entries_rpc_write: the Entries handlers that write: Write, DeleteEntry,
 * Append, Replace and PurgeExpired. Every write runs the PII policy on
 * what it would store and records its audit row in its transaction. */
#include <stdio.h>
#include <string.h>

#include "service/auth/authn.h"
#include "service/core/clock.h"
#include "service/entries/entries_service_internal.h"
#include "service/pb/pbtime.h"
#include "service/tier/tier_check.h"

#define METADATA_MAX (64 * 1024)
#define FIND_MAX (64 * 1024)
#define DEFAULT_CONTENT_TYPE "application/octet-stream"
#define MAX_TIMESTAMP_US 253402300799999999LL /* 9999-12-31T23:59:59.999999Z */

static grpc_status_code check_value(rpc_call *call, const char *field, size_t len) {
    if (len > ENTRIES_VALUE_MAX)
        return rpc_call_invalid(call, "%s: %zu bytes; at most %d (1 MiB)", field, len,
                                ENTRIES_VALUE_MAX);
    return GRPC_STATUS_OK;
}

/* The expiry a Write asks for: an absolute time in the future, or a TTL
 * from the database's now. */
static grpc_status_code check_expiry(rpc_call *call, const Memory__V1__EntriesWriteRequest *req,
                                     entries_write_in *in) {
    if (req->expiration_case == MEMORY__V1__ENTRIES_WRITE_REQUEST__EXPIRATION_EXPIRE_TIME) {
        RPC_CHECK(tier_check_time(call, "expire_time", req->expire_time, &in->expire_us));
        if (in->expire_us <= clock_wall_us())
            return rpc_call_invalid(call, "expire_time: must be in the future");
        in->has_expire = 1;
    } else if (req->expiration_case == MEMORY__V1__ENTRIES_WRITE_REQUEST__EXPIRATION_TTL) {
        if (!req->ttl || pbtime_duration_us(req->ttl, &in->ttl_us) != 0 || in->ttl_us <= 0)
            return rpc_call_invalid(call, "ttl: must be a positive duration");
        if (in->ttl_us > MAX_TIMESTAMP_US - clock_wall_us())
            return rpc_call_invalid(call, "ttl: would expire after 9999-12-31");
        in->has_ttl = 1;
    }
    return GRPC_STATUS_OK;
}

/* The PII policy over what a Write stores: key (it names the entry),
 * value, tags and metadata. */
static grpc_status_code write_pii(rpc_call *call, const entries_service *svc,
                                  const Memory__V1__EntriesWriteRequest *req, entries_write_in *in,
                                  const Google__Protobuf__Struct **meta) {
    arena *a = rpc_call_arena(call);
    const char *key = req->key, *value = (const char *)req->value.data;
    size_t value_len = req->value.len;
    pii_field f[2 + ENTRIES_TAGS_MAX + 1] = {
        PII_NAME("key", &key),
        PII_BYTES("value", &value, &value_len),
    };
    size_t n = 2;
    /* "tags[" + any size_t + "]" */
    char(*paths)[32] = arena_alloc(a, (in->ntags ? in->ntags : 1) * sizeof *paths);
    const char **tags = arena_alloc(a, (in->ntags ? in->ntags : 1) * sizeof *tags);
    if (!paths || !tags) return rpc_call_oom(call);
    for (size_t i = 0; i < in->ntags; i++) {
        tags[i] = in->tags[i];
        snprintf(paths[i], sizeof paths[i], "tags[%zu]", i);
        f[n++] = (pii_field)PII_TEXT(paths[i], &tags[i]);
    }
    f[n++] = (pii_field)PII_STRUCT("metadata", meta);
    char why[512];
    int rc = pii_policy_apply(a, pii_policy_mode(svc->env->pii, authn_principal(call)), f, n,
                              (const char ***)&in->pii_kinds, &in->npii, why, sizeof why);
    if (rc == STATUS_EINVALID) return rpc_call_invalid(call, "%s", why);
    if (rc != STATUS_OK) return rpc_call_oom(call);
    if (value_len > ENTRIES_VALUE_MAX)
        return rpc_call_invalid(call, "value: %zu bytes once redacted; at most %d (1 MiB)",
                                value_len, ENTRIES_VALUE_MAX);
    in->value = (const uint8_t *)value;
    in->value_len = value_len;
    in->tags = tags;
    return GRPC_STATUS_OK;
}

/* What Write answers with, until the loop thread renders it. */
typedef struct {
    entries_record rec;
    int created;
    const char *ns, *key; /* the request's */
} written;

static grpc_status_code render_write(tier_pending_call *pc) {
    const written *w = pc->out;
    Memory__V1__EntriesWriteResponse *resp = (Memory__V1__EntriesWriteResponse *)pc->resp;
    entries_changed(pc->arg, pc->c, w->ns, w->key);
    if (!(resp->meta = tier_meta_render(pc->c->ar, &w->rec.meta))) return rpc_call_oom(pc->call);
    resp->created = w->created;
    return GRPC_STATUS_OK;
}

/* On the event loop: a transaction of three round trips (the store). */
RPC_UNARY_HANDLER(entries_do_write, entries_service, Memory__V1__EntriesWriteRequest,
                  Memory__V1__EntriesWriteResponse) {
    const principal *p = authn_principal(call);
    entries_write_in in = {0};
    RPC_CHECK(entries_check_address(call, req->namespace_, req->key));
    RPC_CHECK(check_value(call, "value", req->value.len));
    RPC_CHECK(
        tier_check_name(call, "content_type", req->content_type, ENTRIES_CONTENT_TYPE_MAX, 0));
    RPC_CHECK(tier_check_tags(call, "tags", req->tags, req->n_tags, ENTRIES_TAGS_MAX,
                              ENTRIES_TAG_MAX_CHARS, (const char ***)&in.tags, &in.ntags));
    RPC_CHECK(tier_check_label(call, "label", (int)req->label));
    RPC_CHECK(check_expiry(call, req, &in));
    RPC_CHECK(TIER_CHECK_PRECONDITION(call, req, MEMORY__V1__ENTRIES_WRITE_REQUEST,
                                      TIER_EXPECT_CREATE_OK, &in.has_expected,
                                      &in.expected_version));
    RPC_CHECK(entries_check_ns_allowed(call, p, req->namespace_));
    in.ns = req->namespace_;
    in.key = req->key;
    in.content_type = req->content_type[0] ? req->content_type : DEFAULT_CONTENT_TYPE;
    in.label = (int)req->label;
    const Google__Protobuf__Struct *meta = req->metadata;
    RPC_CHECK(write_pii(call, svc, req, &in, &meta));
    RPC_CHECK(tier_check_struct(call, "metadata", meta, METADATA_MAX, &in.metadata_json));
    entries_target(call, in.ns, in.key);
    tier_pending_call *pc = tier_pending_new(call, "entries", svc->env->audit, sizeof(written),
                                             render_write, &resp->base);
    written *w = pc ? pc->out : NULL;
    if (w) pc->arg = svc, w->ns = in.ns, w->key = in.key;
    tier_async *op = w ? entries_store_write_async(&svc->store, pc->c, &in, &w->rec, &w->created,
                                                   tier_pending_done, pc)
                       : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

/* Delete answers nothing; the router's copies of the entry go. */
static grpc_status_code render_delete(tier_pending_call *pc) {
    const char *const *addr = pc->out;
    entries_changed(pc->arg, pc->c, addr[0], addr[1]);
    return GRPC_STATUS_OK;
}

/* On the event loop, as Write. */
RPC_UNARY_HANDLER(entries_do_delete, entries_service, Memory__V1__EntriesDeleteEntryRequest,
                  Memory__V1__EntriesDeleteEntryResponse) {
    int has_expected = TIER_HAS_EXPECTED(req, MEMORY__V1__ENTRIES_DELETE_ENTRY_REQUEST);
    RPC_CHECK(entries_check_address(call, req->namespace_, req->key));
    if (has_expected) RPC_CHECK(tier_check_expected(call, req->expected_version, TIER_EXPECT_ANY));
    RPC_CHECK(entries_check_ns_allowed(call, authn_principal(call), req->namespace_));
    entries_target(call, req->namespace_, req->key);
    tier_pending_call *pc = tier_pending_new(call, "entries", svc->env->audit,
                                             2 * sizeof(const char *), render_delete, &resp->base);
    if (pc) {
        pc->arg = svc;
        const char **addr = pc->out;
        addr[0] = req->namespace_;
        addr[1] = req->key;
    }
    tier_async *op =
        pc ? entries_store_delete_async(&svc->store, pc->c, req->namespace_, req->key, has_expected,
                                        req->expected_version, tier_pending_done, pc)
           : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

/* ------------------------------------------------------------ Append / Replace */

typedef struct {
    arena *a;
    pii_mode mode;
    const ProtobufCBinaryData *append;             /* Append */
    const ProtobufCBinaryData *find, *replacement; /* Replace */
    int32_t max_replacements;
    int64_t count; /* occurrences replaced */
} edit_ctx;

/* Runs the PII policy over a new value; fills out. */
static int edit_pii(edit_ctx *e, const uint8_t *v, size_t n, entries_edit_out *out, char *err,
                    size_t errlen) {
    const char *value = (const char *)v;
    pii_field f[] = {PII_BYTES("value", &value, &n)};
    int rc = pii_policy_apply(e->a, e->mode, f, 1, (const char ***)&out->pii_kinds, &out->npii, err,
                              errlen);
    if (rc != STATUS_OK) return rc;
    out->changed = 1;
    out->value = (const uint8_t *)value;
    out->value_len = n;
    return STATUS_OK;
}

static int too_big(size_t total, char *err, size_t errlen) {
    snprintf(err, errlen, "the value would grow to %zu bytes; at most %d (1 MiB)", total,
             ENTRIES_VALUE_MAX);
    return STATUS_ETOOBIG;
}

static int edit_append(void *arg, const uint8_t *v, size_t n, entries_edit_out *out, char *err,
                       size_t errlen) {
    edit_ctx *e = arg;
    size_t total = n + e->append->len;
    if (total > ENTRIES_VALUE_MAX) return too_big(total, err, errlen);
    uint8_t *buf = arena_alloc(e->a, total ? total : 1);
    if (!buf) return STATUS_ENOMEM;
    if (n) memcpy(buf, v, n);
    if (e->append->len) memcpy(buf + n, e->append->data, e->append->len);
    return edit_pii(e, buf, total, out, err, errlen);
}

static int edit_replace(void *arg, const uint8_t *v, size_t n, entries_edit_out *out, char *err,
                        size_t errlen) {
    edit_ctx *e = arg;
    const uint8_t *f = e->find->data;
    size_t fl = e->find->len, rl = e->replacement->len;
    int64_t count = 0;
    for (size_t i = 0; i + fl <= n;) {
        if (memcmp(v + i, f, fl) == 0) {
            count++;
            if (e->max_replacements && count == e->max_replacements) break;
            i += fl;
        } else {
            i++;
        }
    }
    e->count = count;
    if (count == 0) return STATUS_OK; /* out->changed stays 0 */
    size_t total = n - (size_t)count * fl + (size_t)count * rl;
    if (total > ENTRIES_VALUE_MAX) return too_big(total, err, errlen);
    uint8_t *buf = arena_alloc(e->a, total ? total : 1), *w = buf;
    if (!buf) return STATUS_ENOMEM;
    int64_t done = 0;
    size_t i = 0;
    while (i < n) {
        if (done < count && i + fl <= n && memcmp(v + i, f, fl) == 0) {
            if (rl) memcpy(w, e->replacement->data, rl);
            w += rl;
            i += fl;
            done++;
        } else {
            *w++ = v[i++];
        }
    }
    return edit_pii(e, buf, total, out, err, errlen);
}

/* Append's or Replace's answer until the loop thread renders it: the edit
 * (which counts what it replaced), the record after it, and where the
 * response takes them. */
typedef struct {
    edit_ctx e;
    entries_record rec;
    Memory__V1__RecordMeta **meta;
    int64_t *size_bytes;        /* Append's, or NULL */
    int64_t *replacement_count; /* Replace's, or NULL */
    const char *ns, *key;       /* the request's */
} modify_pending;

static grpc_status_code render_modify(tier_pending_call *pc) {
    modify_pending *m = pc->out;
    entries_changed(pc->arg, pc->c, m->ns, m->key);
    if (!(*m->meta = tier_meta_render(pc->c->ar, &m->rec.meta))) return rpc_call_oom(pc->call);
    if (m->size_bytes) *m->size_bytes = m->rec.size_bytes;
    if (m->replacement_count) *m->replacement_count = m->e.count;
    return GRPC_STATUS_OK;
}

/* The checks Append and Replace share, then the edit in the store, on the
 * event loop (a transaction of up to three round trips); the answer goes
 * to the fields of m's template. */
static grpc_status_code modify(rpc_call *call, entries_service *svc, ProtobufCMessage *resp,
                               const char *ns, const char *key, int has_expected, int64_t expected,
                               entries_edit_fn edit, const modify_pending *tmpl) {
    const principal *p = authn_principal(call);
    if (has_expected) RPC_CHECK(tier_check_expected(call, expected, TIER_EXPECT_ANY));
    RPC_CHECK(entries_check_ns_allowed(call, p, ns));
    entries_target(call, ns, key);
    tier_pending_call *pc = tier_pending_new(call, "entries", svc->env->audit,
                                             sizeof(modify_pending), render_modify, resp);
    if (!pc) return rpc_call_oom(call);
    modify_pending *m = pc->out;
    pc->arg = svc;
    *m = *tmpl;
    m->ns = ns;
    m->key = key;
    m->e.a = rpc_call_arena(call);
    m->e.mode = pii_policy_mode(svc->env->pii, p);
    entries_modify_in in = {ns, key, has_expected, expected, edit, &m->e};
    tier_async *op =
        entries_store_modify_async(&svc->store, pc->c, &in, &m->rec, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

RPC_UNARY_HANDLER(entries_do_append, entries_service, Memory__V1__EntriesAppendRequest,
                  Memory__V1__EntriesAppendResponse) {
    RPC_CHECK(entries_check_address(call, req->namespace_, req->key));
    RPC_CHECK(check_value(call, "value", req->value.len));
    modify_pending m = {0};
    m.e.append = &req->value;
    m.meta = &resp->meta;
    m.size_bytes = &resp->size_bytes;
    return modify(call, svc, &resp->base, req->namespace_, req->key,
                  TIER_HAS_EXPECTED(req, MEMORY__V1__ENTRIES_APPEND_REQUEST), req->expected_version,
                  edit_append, &m);
}

RPC_UNARY_HANDLER(entries_do_replace, entries_service, Memory__V1__EntriesReplaceRequest,
                  Memory__V1__EntriesReplaceResponse) {
    RPC_CHECK(entries_check_address(call, req->namespace_, req->key));
    if (req->find.len == 0) return rpc_call_invalid(call, "find: required (1 byte to 64 KiB)");
    if (req->find.len > FIND_MAX)
        return rpc_call_invalid(call, "find: %zu bytes; at most %d (64 KiB)", req->find.len,
                                FIND_MAX);
    RPC_CHECK(check_value(call, "replacement", req->replacement.len));
    if (req->max_replacements < 0)
        return rpc_call_invalid(call, "max_replacements: %d; must not be negative (0 = all)",
                                req->max_replacements);
    modify_pending m = {0};
    m.e.find = &req->find;
    m.e.replacement = &req->replacement;
    m.e.max_replacements = req->max_replacements;
    m.meta = &resp->meta;
    m.replacement_count = &resp->replacement_count;
    return modify(call, svc, &resp->base, req->namespace_, req->key,
                  TIER_HAS_EXPECTED(req, MEMORY__V1__ENTRIES_REPLACE_REQUEST),
                  req->expected_version, edit_replace, &m);
}

static grpc_status_code render_purge(tier_pending_call *pc) {
    ((Memory__V1__EntriesPurgeExpiredResponse *)pc->resp)->purged_count = *(int64_t *)pc->out;
    return GRPC_STATUS_OK;
}

/* On the event loop, as Write. */
RPC_UNARY_HANDLER(entries_do_purge, entries_service, Memory__V1__EntriesPurgeExpiredRequest,
                  Memory__V1__EntriesPurgeExpiredResponse) {
    const char *pat = req->namespace_pattern;
    RPC_CHECK(entries_check_ns_pattern(call, "namespace_pattern", &pat));
    tier_pending_call *pc = tier_pending_new(call, "entries", svc->env->audit, sizeof(int64_t),
                                             render_purge, &resp->base);
    tier_async *op =
        pc ? entries_store_purge_async(&svc->store, pc->c, pat, pc->out, tier_pending_done, pc)
           : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}
