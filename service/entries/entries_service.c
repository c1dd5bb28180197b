/* entries_service: the Entries gRPC service; see entries_service.h. */
#include "service/entries/entries_service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/v1/entries.pb-c.h"
#include "service/auth/authn.h"
#include "service/auth/nsglob.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/store/pgq.h"
#include "service/pb/pbjson.h"
#include "service/entries/entries_pii.h"
#include "service/entries/entries_store.h"
#include "service/entries/entries_token.h"
#include "service/pb/pbtime.h"

#define CONTENT_TYPE_MAX 128 /* characters */
#define METADATA_MAX (64 * 1024)
#define TAGS_MAX 32
#define TAG_MAX_CHARS 64
#define TERM_MAX_CHARS 256
#define CREATED_BY_MAX 256
#define LIMIT_MAX 1000
#define DEFAULT_CONTENT_TYPE "application/octet-stream"
#define MAX_TIMESTAMP_US 253402300799999999LL /* 9999-12-31T23:59:59.999999Z */

struct entries_service {
    pg_pool *pg;
    audit *aud;
    entries_store *store;
    entries_options o;
};

int entries_pii_policy_parse(const char *name, entries_pii_policy *out) {
    if (strcmp(name, "reject") == 0) *out = ENTRIES_PII_REJECT;
    else if (strcmp(name, "redact") == 0) *out = ENTRIES_PII_REDACT;
    else return -1;
    return 0;
}

/* ------------------------------------------------------------ status */

static grpc_status_code store_status(rpc_call *call, int rc, const entries_ctx *c) {
    return rpc_call_fail(call, rc, c->err);
}

/* ------------------------------------------------------------ validation */

/* nsglob's reasons may start with what they checked ("namespace: ...");
 * our messages name the request field instead. */
static const char *reason(const char *why) {
    const char *p = why;
    while ((*p >= 'a' && *p <= 'z') || *p == ' ') p++;
    return p != why && p[0] == ':' && p[1] == ' ' ? p + 2 : why;
}

static grpc_status_code check_namespace(rpc_call *call, const char *field, const char *ns) {
    char why[256];
    if (!ns[0]) return rpc_call_invalid(call, "%s: required (agent:workflow:node)", field);
    if (nsglob_check_namespace(ns, strlen(ns), why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s: \"%s\" is not a namespace: %s", field,
                       text_quote(rpc_call_arena(call), ns), reason(why));
    return GRPC_STATUS_OK;
}

static grpc_status_code check_key(rpc_call *call, const char *key) {
    char why[256];
    if (!key[0]) return rpc_call_invalid(call, "key: required");
    if (nsglob_check_key(key, strlen(key), why, sizeof why) != 0)
        return rpc_call_invalid(call, "key: \"%s\" is not a key: %s", text_quote(rpc_call_arena(call), key),
                       reason(why));
    return GRPC_STATUS_OK;
}

/* An empty pattern means "everything". */
static grpc_status_code check_ns_pattern(rpc_call *call, const char *field, const char **pat) {
    char why[256];
    if (!(*pat)[0]) *pat = "*:*:*";
    if (nsglob_check_pattern(*pat, strlen(*pat), why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s: \"%s\" is not a namespace pattern: %s", field,
                       text_quote(rpc_call_arena(call), *pat), reason(why));
    return GRPC_STATUS_OK;
}

static grpc_status_code check_key_pattern(rpc_call *call, const char **pat) {
    char why[256];
    if (!(*pat)[0]) *pat = "*";
    if (nsglob_check_key_pattern(*pat, strlen(*pat), why, sizeof why) != 0)
        return rpc_call_invalid(call, "key_pattern: \"%s\" is not a key pattern: %s",
                       text_quote(rpc_call_arena(call), *pat), reason(why));
    return GRPC_STATUS_OK;
}

static grpc_status_code check_ns_allowed(rpc_call *call, const principal *p, const char *ns) {
    if (principal_ns_allows(p, ns)) return GRPC_STATUS_OK;
    rpc_call_set_error(call, "namespace \"%s\" is outside the token's ns claim", ns);
    return GRPC_STATUS_PERMISSION_DENIED;
}

/* A tag (write or search filter): 1..64 characters, UTF-8, no controls. */
static grpc_status_code check_tag(rpc_call *call, const char *field, size_t i, const char *t) {
    long n = text_name_chars(t);
    if (n < 0)
        return rpc_call_invalid(call, "%s[%zu]: not valid UTF-8 or contains a control character", field,
                       i);
    if (n < 1 || n > TAG_MAX_CHARS)
        return rpc_call_invalid(call, "%s[%zu]: %ld characters; a tag has 1 to %d", field, i, n,
                       TAG_MAX_CHARS);
    return GRPC_STATUS_OK;
}

/* Validated, de-duplicated tags (first occurrence kept) in the arena. */
static grpc_status_code check_tags(rpc_call *call, const char *field, char **tags, size_t n,
                                   const char ***out, size_t *nout) {
    arena *a = rpc_call_arena(call);
    const char **v = arena_alloc(a, (n ? n : 1) * sizeof *v);
    if (!v) return rpc_call_oom(call);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        grpc_status_code st = check_tag(call, field, i, tags[i]);
        if (st != GRPC_STATUS_OK) return st;
        int dup = 0;
        for (size_t j = 0; j < k && !dup; j++) dup = strcmp(v[j], tags[i]) == 0;
        if (!dup) v[k++] = tags[i];
    }
    if (k > TAGS_MAX)
        return rpc_call_invalid(call, "%s: %zu distinct tags; at most %d", field, k, TAGS_MAX);
    *out = v;
    *nout = k;
    return GRPC_STATUS_OK;
}

static grpc_status_code check_content_type(rpc_call *call, const char *ct) {
    long n = text_name_chars(ct);
    if (n < 0)
        return rpc_call_invalid(call, "content_type: not valid UTF-8 or contains a control character");
    if (n > CONTENT_TYPE_MAX)
        return rpc_call_invalid(call, "content_type: %ld characters; at most %d", n, CONTENT_TYPE_MAX);
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ rendering */

static Memory__V1__RecordMeta *render_meta(arena *a, const entries_record *r) {
    Memory__V1__RecordMeta *m = arena_alloc(a, sizeof *m);
    if (!m) return NULL;
    memory__v1__record_meta__init(m);
    m->tenant = (char *)r->tenant;
    m->owner = (char *)r->owner;
    m->label = (Memory__V1__Label)r->label;
    m->version = r->version;
    m->create_time = pbtime_timestamp(a, r->create_us);
    m->update_time = pbtime_timestamp(a, r->update_us);
    if (!m->create_time || !m->update_time) return NULL;
    if (r->has_expire && !(m->expire_time = pbtime_timestamp(a, r->expire_us))) return NULL;
    m->n_pii_kinds = r->npii;
    m->pii_kinds = (char **)r->pii_kinds;
    return m;
}

static Memory__V1__Entry *render_entry(arena *a, const entries_record *r) {
    Memory__V1__Entry *e = arena_alloc(a, sizeof *e);
    if (!e) return NULL;
    memory__v1__entry__init(e);
    e->namespace_ = (char *)r->ns;
    e->key = (char *)r->key;
    if (r->has_value) {
        e->value.data = (uint8_t *)r->value;
        e->value.len = r->value_len;
    }
    e->content_type = (char *)r->content_type;
    if (pbjson_to_struct(a, r->metadata_json, strlen(r->metadata_json), &e->metadata) != 0)
        return NULL;
    e->n_tags = r->ntags;
    e->tags = (char **)r->tags;
    e->size_bytes = r->size_bytes;
    if (!(e->meta = render_meta(a, r))) return NULL;
    return e;
}

static const char *target_of(arena *a, const char *ns, const char *key) {
    return arena_printf(a, "%s/%s", ns, key);
}

static void add_target(rpc_call *call, const char *ns, const char *key) {
    const char *t = target_of(rpc_call_arena(call), ns, key);
    if (t) audit_add_target(call, t);
}

/* with_audit: writes record their audit row in the data's transaction. */
static void init_ctx(entries_ctx *c, rpc_call *call, const principal *p,
                     const entries_service *svc, int with_audit) {
    memset(c, 0, sizeof *c);
    c->p = p;
    c->deadline_ms = rpc_call_deadline_ms(call);
    c->ar = rpc_call_arena(call);
    if (with_audit && svc->aud) {
        c->before_commit = audit_hook_before_commit;
        c->after_commit = audit_hook_after_commit;
        c->hook_arg = call;
    }
}

static entries_pii_mode pii_mode(const entries_service *svc, const principal *p) {
    if (principal_has(p, "pii:write")) return ENTRIES_PII_MODE_ALLOW;
    return svc->o.pii_policy == ENTRIES_PII_REDACT ? ENTRIES_PII_MODE_REDACT
                                                   : ENTRIES_PII_MODE_REJECT;
}

/* ------------------------------------------------------------ Write */

static grpc_status_code do_write(rpc_call *call, const ProtobufCMessage *reqm,
                                 ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesWriteRequest *req = (const Memory__V1__EntriesWriteRequest *)reqm;
    Memory__V1__EntriesWriteResponse *resp = (Memory__V1__EntriesWriteResponse *)respm;
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    grpc_status_code st;

    if ((st = check_namespace(call, "namespace", req->namespace_)) != GRPC_STATUS_OK ||
        (st = check_key(call, req->key)) != GRPC_STATUS_OK)
        return st;
    if (req->value.len > ENTRIES_VALUE_MAX)
        return rpc_call_invalid(call, "value: %zu bytes; at most %d (1 MiB)", req->value.len,
                       ENTRIES_VALUE_MAX);
    if ((st = check_content_type(call, req->content_type)) != GRPC_STATUS_OK) return st;
    entries_write_in in = {0};
    if ((st = check_tags(call, "tags", req->tags, req->n_tags, (const char ***)&in.tags,
                         &in.ntags)) != GRPC_STATUS_OK)
        return st;
    if ((int)req->label < 0 || (int)req->label > MEMORY__V1__LABEL__LABEL_SECRET)
        return rpc_call_invalid(call, "label: %d is not a memory.v1.Label", (int)req->label);
    if (req->expiration_case == MEMORY__V1__ENTRIES_WRITE_REQUEST__EXPIRATION_EXPIRE_TIME) {
        if (!req->expire_time || pbtime_timestamp_us(req->expire_time, &in.expire_us) != 0)
            return rpc_call_invalid(call, "expire_time: not a valid timestamp");
        if (in.expire_us <= pbtime_now_us())
            return rpc_call_invalid(call, "expire_time: must be in the future");
        in.has_expire = 1;
    } else if (req->expiration_case == MEMORY__V1__ENTRIES_WRITE_REQUEST__EXPIRATION_TTL) {
        if (!req->ttl || pbtime_duration_us(req->ttl, &in.ttl_us) != 0 || in.ttl_us <= 0)
            return rpc_call_invalid(call, "ttl: must be a positive duration");
        if (in.ttl_us > MAX_TIMESTAMP_US - pbtime_now_us())
            return rpc_call_invalid(call, "ttl: would expire after 9999-12-31");
        in.has_ttl = 1;
    }
    if (req->precondition_case ==
        MEMORY__V1__ENTRIES_WRITE_REQUEST__PRECONDITION_EXPECTED_VERSION) {
        if (req->expected_version < 0)
            return rpc_call_invalid(call, "expected_version: %lld; must be 0 (must not exist) or a "
                           "version >= 1", (long long)req->expected_version);
        in.has_expected = 1;
        in.expected_version = req->expected_version;
    }
    if ((st = check_ns_allowed(call, p, req->namespace_)) != GRPC_STATUS_OK) return st;

    in.ns = req->namespace_;
    in.key = req->key;
    in.value = req->value.data;
    in.value_len = req->value.len;
    in.content_type = req->content_type[0] ? req->content_type : DEFAULT_CONTENT_TYPE;
    in.label = (int)req->label;

    /* PII: scanned on what would be stored; the policy decides. */
    entries_pii_input pin = {req->key, req->value.data, req->value.len, in.tags, in.ntags,
                             req->metadata};
    entries_pii_result pr;
    char why[512];
    int prc = entries_pii_apply(a, &pin, pii_mode(svc, p), &pr, why, sizeof why);
    if (prc == ENTRIES_PII_EFOUND) return rpc_call_invalid(call, "%s", why);
    if (prc != 0) return rpc_call_oom(call);
    if (pr.value_len > ENTRIES_VALUE_MAX)
        return rpc_call_invalid(call, "value: %zu bytes once redacted; at most %d (1 MiB)", pr.value_len,
                       ENTRIES_VALUE_MAX);
    in.value = pr.value;
    in.value_len = pr.value_len;
    in.tags = pr.tags;
    in.pii_kinds = pr.kinds;
    in.npii = pr.nkinds;

    char *meta_json = NULL;
    size_t meta_len = 0;
    if (pbjson_from_struct(pr.metadata, "metadata", &meta_json, &meta_len, why,
                                 sizeof why) != 0)
        return rpc_call_invalid(call, "%s", why);
    if (meta_len > METADATA_MAX) {
        free(meta_json);
        return rpc_call_invalid(call, "metadata: %zu bytes encoded as JSON; at most %d (64 KiB)",
                       meta_len, METADATA_MAX);
    }
    in.metadata_json = arena_strndup(a, meta_json, meta_len);
    free(meta_json);
    if (!in.metadata_json) return rpc_call_oom(call);

    add_target(call, in.ns, in.key);
    entries_ctx c;
    init_ctx(&c, call, p, svc, 1);
    entries_record rec;
    int created = 0;
    int rc = entries_store_write(svc->store, &c, &in, &rec, &created);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    if (!(resp->meta = render_meta(a, &rec))) return rpc_call_oom(call);
    resp->created = created;
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ Read */

static grpc_status_code do_read(rpc_call *call, const ProtobufCMessage *reqm,
                                ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesReadRequest *req = (const Memory__V1__EntriesReadRequest *)reqm;
    Memory__V1__EntriesReadResponse *resp = (Memory__V1__EntriesReadResponse *)respm;
    const principal *p = authn_principal(call);
    grpc_status_code st;
    if ((st = check_namespace(call, "namespace", req->namespace_)) != GRPC_STATUS_OK ||
        (st = check_key(call, req->key)) != GRPC_STATUS_OK ||
        (st = check_ns_allowed(call, p, req->namespace_)) != GRPC_STATUS_OK)
        return st;
    entries_ctx c;
    init_ctx(&c, call, p, svc, 0);
    entries_record rec;
    int rc = entries_store_read(svc->store, &c, req->namespace_, req->key, &rec);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    add_target(call, rec.ns, rec.key);
    if (!(resp->entry = render_entry(rpc_call_arena(call), &rec))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ List */

/* Renders entries until the answer would pass max_response_bytes (the
 * first entry always goes); *cut is set when some were left out. Only
 * entries actually returned are named in the audit trail. */
static grpc_status_code render_entries(rpc_call *call, const entries_service *svc,
                                       const entries_record *recs, size_t n,
                                       Memory__V1__Entry ***out, size_t *nout, int *cut) {
    arena *a = rpc_call_arena(call);
    Memory__V1__Entry **v = arena_alloc(a, (n ? n : 1) * sizeof *v);
    if (!v) return rpc_call_oom(call);
    size_t total = 0, i = 0;
    *cut = 0;
    for (; i < n; i++) {
        if (!(v[i] = render_entry(a, &recs[i]))) return rpc_call_oom(call);
        total += protobuf_c_message_get_packed_size(&v[i]->base) + 8;
        if (i > 0 && total > svc->o.max_response_bytes) {
            *cut = 1;
            break;
        }
        add_target(call, recs[i].ns, recs[i].key);
    }
    *out = v;
    *nout = i;
    return GRPC_STATUS_OK;
}

static grpc_status_code do_list(rpc_call *call, const ProtobufCMessage *reqm,
                                ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesListRequest *req = (const Memory__V1__EntriesListRequest *)reqm;
    Memory__V1__EntriesListResponse *resp = (Memory__V1__EntriesListResponse *)respm;
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    grpc_status_code st;
    entries_list_in in = {0};
    in.ns_pattern = req->namespace_pattern;
    in.key_pattern = req->key_pattern;
    if ((st = check_ns_pattern(call, "namespace_pattern", &in.ns_pattern)) != GRPC_STATUS_OK ||
        (st = check_key_pattern(call, &in.key_pattern)) != GRPC_STATUS_OK)
        return st;
    if (req->page_size < 0)
        return rpc_call_invalid(call, "page_size: %d; must not be negative", req->page_size);
    in.limit = req->page_size == 0 ? svc->o.default_page_size : req->page_size;
    if (in.limit > svc->o.max_page_size) in.limit = svc->o.max_page_size;
    in.with_values = req->with_values;
    entries_token_binding b = {principal_tenant(p), principal_sub(p), in.ns_pattern,
                               in.key_pattern};
    if (req->page_token[0] &&
        entries_token_decode(a, &b, req->page_token, &in.after_ns, &in.after_key) != 0)
        return rpc_call_invalid(call, "page_token: not a token from a previous List with this caller "
                       "and these patterns");
    entries_ctx c;
    init_ctx(&c, call, p, svc, 0);
    entries_record *recs;
    size_t n;
    int more;
    int rc = entries_store_list(svc->store, &c, &in, &recs, &n, &more);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    int cut;
    if ((st = render_entries(call, svc, recs, n, &resp->entries, &resp->n_entries, &cut)) !=
        GRPC_STATUS_OK)
        return st;
    size_t last = resp->n_entries;
    if ((more || cut) && last > 0 &&
        !(resp->next_page_token =
              entries_token_encode(a, &b, recs[last - 1].ns, recs[last - 1].key)))
        return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ Search */

static grpc_status_code do_search(rpc_call *call, const ProtobufCMessage *reqm,
                                  ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesSearchRequest *req = (const Memory__V1__EntriesSearchRequest *)reqm;
    Memory__V1__EntriesSearchResponse *resp = (Memory__V1__EntriesSearchResponse *)respm;
    const principal *p = authn_principal(call);
    grpc_status_code st;
    entries_search_in in = {0};
    in.ns_pattern = req->namespace_pattern;
    if ((st = check_ns_pattern(call, "namespace_pattern", &in.ns_pattern)) != GRPC_STATUS_OK)
        return st;
    long tn = text_utf8_chars(req->term);
    if (tn < 0) return rpc_call_invalid(call, "term: not valid UTF-8");
    if (tn > TERM_MAX_CHARS)
        return rpc_call_invalid(call, "term: %ld characters; at most %d", tn, TERM_MAX_CHARS);
    in.term = req->term;
    if (req->n_tags > TAGS_MAX)
        return rpc_call_invalid(call, "tags: %zu tags; at most %d", req->n_tags, TAGS_MAX);
    if ((st = check_tags(call, "tags", req->tags, req->n_tags, (const char ***)&in.tags,
                         &in.ntags)) != GRPC_STATUS_OK ||
        (st = check_content_type(call, req->content_type)) != GRPC_STATUS_OK)
        return st;
    in.content_type = req->content_type;
    long cb = text_name_chars(req->created_by);
    if (cb < 0 || cb > CREATED_BY_MAX)
        return rpc_call_invalid(call, "created_by: at most %d characters of UTF-8 without control "
                       "characters", CREATED_BY_MAX);
    in.created_by = req->created_by;
    if (req->time_range) {
        const Memory__V1__TimeRange *tr = req->time_range;
        if (tr->start_time) {
            if (pbtime_timestamp_us(tr->start_time, &in.start_us) != 0)
                return rpc_call_invalid(call, "time_range.start_time: not a valid timestamp");
            in.has_start = 1;
        }
        if (tr->end_time) {
            if (pbtime_timestamp_us(tr->end_time, &in.end_us) != 0)
                return rpc_call_invalid(call, "time_range.end_time: not a valid timestamp");
            in.has_end = 1;
        }
        if (in.has_start && in.has_end && in.start_us > in.end_us)
            return rpc_call_invalid(call, "time_range: start_time is after end_time");
    }
    if (req->limit < 0 || req->limit > LIMIT_MAX)
        return rpc_call_invalid(call, "limit: %d; must be 1 to %d (0 = %d)", req->limit, LIMIT_MAX,
                       svc->o.default_page_size);
    in.limit = req->limit ? req->limit : svc->o.default_page_size;
    in.with_values = req->with_values;
    entries_ctx c;
    init_ctx(&c, call, p, svc, 0);
    entries_record *recs;
    size_t n;
    int rc = entries_store_search(svc->store, &c, &in, &recs, &n);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    int cut;
    return render_entries(call, svc, recs, n, &resp->entries, &resp->n_entries, &cut);
}

/* ------------------------------------------------------------ DeleteEntry */

static grpc_status_code do_delete(rpc_call *call, const ProtobufCMessage *reqm,
                                  ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesDeleteEntryRequest *req =
        (const Memory__V1__EntriesDeleteEntryRequest *)reqm;
    (void)respm;
    const principal *p = authn_principal(call);
    grpc_status_code st;
    if ((st = check_namespace(call, "namespace", req->namespace_)) != GRPC_STATUS_OK ||
        (st = check_key(call, req->key)) != GRPC_STATUS_OK)
        return st;
    int has_expected = req->precondition_case ==
                       MEMORY__V1__ENTRIES_DELETE_ENTRY_REQUEST__PRECONDITION_EXPECTED_VERSION;
    if (has_expected && req->expected_version < 0)
        return rpc_call_invalid(call, "expected_version: %lld; must not be negative",
                       (long long)req->expected_version);
    if ((st = check_ns_allowed(call, p, req->namespace_)) != GRPC_STATUS_OK) return st;
    add_target(call, req->namespace_, req->key);
    entries_ctx c;
    init_ctx(&c, call, p, svc, 1);
    int rc = entries_store_delete(svc->store, &c, req->namespace_, req->key, has_expected,
                                  req->expected_version);
    return store_status(call, rc, &c);
}

/* ------------------------------------------------------------ Stats */

static grpc_status_code do_stats(rpc_call *call, const ProtobufCMessage *reqm,
                                 ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesStatsRequest *req = (const Memory__V1__EntriesStatsRequest *)reqm;
    Memory__V1__EntriesStatsResponse *resp = (Memory__V1__EntriesStatsResponse *)respm;
    const principal *p = authn_principal(call);
    const char *pat = req->namespace_pattern;
    grpc_status_code st = check_ns_pattern(call, "namespace_pattern", &pat);
    if (st != GRPC_STATUS_OK) return st;
    entries_ctx c;
    init_ctx(&c, call, p, svc, 0);
    entries_stats s;
    int rc = entries_store_stats(svc->store, &c, pat, &s);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    resp->entry_count = s.entry_count;
    resp->namespace_count = s.namespace_count;
    resp->value_bytes = s.value_bytes;
    resp->stored_bytes = s.stored_bytes;
    resp->compressed_count = s.compressed_count;
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ Append / Replace */

#define FIND_MAX (64 * 1024)
#define EDIT_PII_FOUND 100 /* edit callback code: PII rejected (positive: ours) */

typedef struct {
    arena *a;
    entries_pii_mode mode;
    /* Append */
    const ProtobufCBinaryData *append;
    /* Replace */
    const ProtobufCBinaryData *find, *replacement;
    int32_t max_replacements;
    int64_t count; /* occurrences replaced */
} edit_ctx;

/* Runs the PII policy over a new value; fills out. */
static int edit_pii(edit_ctx *e, const uint8_t *v, size_t n, entries_edit_out *out, char *err,
                    size_t errlen) {
    entries_pii_input pin = {NULL, v, n, NULL, 0, NULL};
    entries_pii_result pr;
    int rc = entries_pii_apply(e->a, &pin, e->mode, &pr, err, errlen);
    if (rc == ENTRIES_PII_EFOUND) return EDIT_PII_FOUND;
    if (rc != 0) return STATUS_ENOMEM;
    out->changed = 1;
    out->value = pr.value;
    out->value_len = pr.value_len;
    out->pii_kinds = pr.kinds;
    out->npii = pr.nkinds;
    return STATUS_OK;
}

static int edit_append(void *arg, const uint8_t *v, size_t n, entries_edit_out *out, char *err,
                       size_t errlen) {
    edit_ctx *e = arg;
    size_t total = n + e->append->len;
    if (total > ENTRIES_VALUE_MAX) {
        snprintf(err, errlen, "the value would grow to %zu bytes; at most %d (1 MiB)", total,
                 ENTRIES_VALUE_MAX);
        return STATUS_ETOOBIG;
    }
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
    if (total > ENTRIES_VALUE_MAX) {
        snprintf(err, errlen, "the value would grow to %zu bytes; at most %d (1 MiB)", total,
                 ENTRIES_VALUE_MAX);
        return STATUS_ETOOBIG;
    }
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

static grpc_status_code modify_status(rpc_call *call, int rc, const entries_ctx *c) {
    if (rc == EDIT_PII_FOUND) return rpc_call_invalid(call, "%s", c->err);
    return store_status(call, rc, c);
}

static grpc_status_code do_append(rpc_call *call, const ProtobufCMessage *reqm,
                                  ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesAppendRequest *req = (const Memory__V1__EntriesAppendRequest *)reqm;
    Memory__V1__EntriesAppendResponse *resp = (Memory__V1__EntriesAppendResponse *)respm;
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    grpc_status_code st;
    if ((st = check_namespace(call, "namespace", req->namespace_)) != GRPC_STATUS_OK ||
        (st = check_key(call, req->key)) != GRPC_STATUS_OK)
        return st;
    if (req->value.len > ENTRIES_VALUE_MAX)
        return rpc_call_invalid(call, "value: %zu bytes; at most %d (1 MiB)", req->value.len,
                       ENTRIES_VALUE_MAX);
    int has_expected =
        req->precondition_case == MEMORY__V1__ENTRIES_APPEND_REQUEST__PRECONDITION_EXPECTED_VERSION;
    if (has_expected && req->expected_version < 0)
        return rpc_call_invalid(call, "expected_version: %lld; must not be negative",
                       (long long)req->expected_version);
    if ((st = check_ns_allowed(call, p, req->namespace_)) != GRPC_STATUS_OK) return st;
    add_target(call, req->namespace_, req->key);
    edit_ctx e = {0};
    e.a = a;
    e.mode = pii_mode(svc, p);
    e.append = &req->value;
    entries_modify_in in = {req->namespace_, req->key, has_expected, req->expected_version,
                            edit_append, &e};
    entries_ctx c;
    init_ctx(&c, call, p, svc, 1);
    entries_record rec;
    int rc = entries_store_modify(svc->store, &c, &in, &rec);
    if (rc != STATUS_OK) return modify_status(call, rc, &c);
    if (!(resp->meta = render_meta(a, &rec))) return rpc_call_oom(call);
    resp->size_bytes = rec.size_bytes;
    return GRPC_STATUS_OK;
}

static grpc_status_code do_replace(rpc_call *call, const ProtobufCMessage *reqm,
                                   ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesReplaceRequest *req =
        (const Memory__V1__EntriesReplaceRequest *)reqm;
    Memory__V1__EntriesReplaceResponse *resp = (Memory__V1__EntriesReplaceResponse *)respm;
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    grpc_status_code st;
    if ((st = check_namespace(call, "namespace", req->namespace_)) != GRPC_STATUS_OK ||
        (st = check_key(call, req->key)) != GRPC_STATUS_OK)
        return st;
    if (req->find.len == 0) return rpc_call_invalid(call, "find: required (1 byte to 64 KiB)");
    if (req->find.len > FIND_MAX)
        return rpc_call_invalid(call, "find: %zu bytes; at most %d (64 KiB)", req->find.len, FIND_MAX);
    if (req->replacement.len > ENTRIES_VALUE_MAX)
        return rpc_call_invalid(call, "replacement: %zu bytes; at most %d (1 MiB)", req->replacement.len,
                       ENTRIES_VALUE_MAX);
    if (req->max_replacements < 0)
        return rpc_call_invalid(call, "max_replacements: %d; must not be negative (0 = all)",
                       req->max_replacements);
    int has_expected = req->precondition_case ==
                       MEMORY__V1__ENTRIES_REPLACE_REQUEST__PRECONDITION_EXPECTED_VERSION;
    if (has_expected && req->expected_version < 0)
        return rpc_call_invalid(call, "expected_version: %lld; must not be negative",
                       (long long)req->expected_version);
    if ((st = check_ns_allowed(call, p, req->namespace_)) != GRPC_STATUS_OK) return st;
    add_target(call, req->namespace_, req->key);
    edit_ctx e = {0};
    e.a = a;
    e.mode = pii_mode(svc, p);
    e.find = &req->find;
    e.replacement = &req->replacement;
    e.max_replacements = req->max_replacements;
    entries_modify_in in = {req->namespace_, req->key, has_expected, req->expected_version,
                            edit_replace, &e};
    entries_ctx c;
    init_ctx(&c, call, p, svc, 1);
    entries_record rec;
    int rc = entries_store_modify(svc->store, &c, &in, &rec);
    if (rc != STATUS_OK) return modify_status(call, rc, &c);
    if (!(resp->meta = render_meta(a, &rec))) return rpc_call_oom(call);
    resp->replacement_count = e.count;
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ PurgeExpired */

static grpc_status_code do_purge(rpc_call *call, const ProtobufCMessage *reqm,
                                 ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesPurgeExpiredRequest *req =
        (const Memory__V1__EntriesPurgeExpiredRequest *)reqm;
    Memory__V1__EntriesPurgeExpiredResponse *resp =
        (Memory__V1__EntriesPurgeExpiredResponse *)respm;
    const principal *p = authn_principal(call);
    const char *pat = req->namespace_pattern;
    grpc_status_code st = check_ns_pattern(call, "namespace_pattern", &pat);
    if (st != GRPC_STATUS_OK) return st;
    entries_ctx c;
    init_ctx(&c, call, p, svc, 1);
    int64_t n = 0;
    int rc = entries_store_purge(svc->store, &c, pat, &n);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    resp->purged_count = n;
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ registration */

int entries_register(rpc_server *srv, pg_pool *pg, audit *aud, const entries_options *o,
                     entries_service **out) {
    entries_service *svc = calloc(1, sizeof *svc);
    if (!svc) return -1;
    svc->pg = pg;
    svc->aud = aud;
    if (o) svc->o = *o;
    if (svc->o.max_page_size <= 0 || svc->o.max_page_size > LIMIT_MAX)
        svc->o.max_page_size = LIMIT_MAX;
    if (svc->o.default_page_size <= 0) svc->o.default_page_size = 50;
    if (svc->o.default_page_size > svc->o.max_page_size)
        svc->o.default_page_size = svc->o.max_page_size;
    if (svc->o.max_response_bytes == 0) svc->o.max_response_bytes = 3u << 20;
    entries_store_options so = {svc->o.max_statement_ms, svc->o.max_response_bytes, 0};
    if (entries_store_create(pg, &so, &svc->store) != 0) {
        free(svc);
        return -1;
    }
    static const rpc_unary_def methods[] = {
        {"/memory.v1.Entries/Write", &memory__v1__entries_write_request__descriptor,
         &memory__v1__entries_write_response__descriptor, "entries:write", do_write},
        {"/memory.v1.Entries/Read", &memory__v1__entries_read_request__descriptor,
         &memory__v1__entries_read_response__descriptor, "entries:read", do_read},
        {"/memory.v1.Entries/List", &memory__v1__entries_list_request__descriptor,
         &memory__v1__entries_list_response__descriptor, "entries:read", do_list},
        {"/memory.v1.Entries/Search", &memory__v1__entries_search_request__descriptor,
         &memory__v1__entries_search_response__descriptor, "entries:read", do_search},
        {"/memory.v1.Entries/DeleteEntry", &memory__v1__entries_delete_entry_request__descriptor,
         &memory__v1__entries_delete_entry_response__descriptor, "entries:write", do_delete},
        {"/memory.v1.Entries/Stats", &memory__v1__entries_stats_request__descriptor,
         &memory__v1__entries_stats_response__descriptor, "entries:read", do_stats},
        {"/memory.v1.Entries/Append", &memory__v1__entries_append_request__descriptor,
         &memory__v1__entries_append_response__descriptor, "entries:write", do_append},
        {"/memory.v1.Entries/Replace", &memory__v1__entries_replace_request__descriptor,
         &memory__v1__entries_replace_response__descriptor, "entries:write", do_replace},
        {"/memory.v1.Entries/PurgeExpired", &memory__v1__entries_purge_expired_request__descriptor,
         &memory__v1__entries_purge_expired_response__descriptor, "admin", do_purge},
    };
    if (rpc_server_add_unary_methods(srv, methods, sizeof methods / sizeof methods[0], svc) != 0) {
        entries_service_free(svc);
        return -1;
    }
    *out = svc;
    return 0;
}

void entries_service_free(entries_service *s) {
    if (!s) return;
    entries_store_free(s->store);
    free(s);
}
