/* global_service: the GlobalMemory gRPC service; see global_service.h. */
#include "service/global/global_service.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/v1/global_memory.pb-c.h"
#include "service/auth/authn.h"
#include "service/auth/jwt.h"
#include "service/privacy/pii.h"
#include "service/privacy/pii_struct.h"
#include "service/cache/cache_codec.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/global/global_store.h"
#include "service/pb/page_token.h"
#include "service/pb/pbjson.h"
#include "service/pb/pbtime.h"

#define ID_MAX 256
#define TYPE_MAX 128
#define NAME_MAX_CHARS 1024
#define DESCRIPTION_MAX 4096
#define PROPERTIES_MAX (1024 * 1024)
#define REL_PROPERTIES_MAX (64 * 1024)
#define TASK_JSON_MAX (1024 * 1024)
#define ENTITY_IDS_MAX 1000
#define PREDICATES_MAX 32
#define TEXT_QUERY_MAX 1024
#define REL_TYPES_MAX 64
#define PAGE_MAX 1000
#define LIMIT_MAX 1000
#define DEFAULT_DEPTH 2
#define DEFAULT_LIMIT 100

struct global_service {
    audit *aud;
    global_store *store;
    global_options o;
};

/* ------------------------------------------------------------ status */

static grpc_status_code store_status(rpc_call *call, int rc, const global_ctx *c) {
    return rpc_call_fail(call, rc, c->err);
}

/* ------------------------------------------------------------ validation */

/* An id: 1..256 characters of UTF-8 without control characters. An empty
 * one is replaced by a fresh UUID when generate is set. */
static grpc_status_code check_id(rpc_call *call, const char *field, const char **id,
                                 int generate) {
    if (!(*id)[0]) {
        if (!generate) return rpc_call_invalid(call, "%s: required", field);
        char *uuid = arena_alloc(rpc_call_arena(call), 37);
        if (!uuid) return rpc_call_oom(call);
        jwt_new_id(uuid);
        *id = uuid;
        return GRPC_STATUS_OK;
    }
    long n = text_name_chars(*id);
    if (n < 0)
        return rpc_call_invalid(call, "%s: \"%s\" is not valid UTF-8 or contains a control character",
                       field, text_quote(rpc_call_arena(call), *id));
    if (n > ID_MAX) return rpc_call_invalid(call, "%s: %ld characters; at most %d", field, n, ID_MAX);
    return GRPC_STATUS_OK;
}

/* A type: required unless optional, at most 128 characters, no controls. */
static grpc_status_code check_type(rpc_call *call, const char *field, const char *t,
                                   int optional) {
    long n = text_name_chars(t);
    if (n < 0)
        return rpc_call_invalid(call, "%s: not valid UTF-8 or contains a control character", field);
    if (n == 0 && !optional) return rpc_call_invalid(call, "%s: required (1 to %d characters)", field,
                                            TYPE_MAX);
    if (n > TYPE_MAX) return rpc_call_invalid(call, "%s: %ld characters; at most %d", field, n, TYPE_MAX);
    return GRPC_STATUS_OK;
}

/* Free text: valid UTF-8, at most max characters. */
static grpc_status_code check_text(rpc_call *call, const char *field, const char *s, long max) {
    long n = text_utf8_chars(s);
    if (n < 0) return rpc_call_invalid(call, "%s: not valid UTF-8", field);
    if (n > max) return rpc_call_invalid(call, "%s: %ld characters; at most %ld", field, n, max);
    return GRPC_STATUS_OK;
}

static grpc_status_code check_label(rpc_call *call, int label) {
    if (label < 0 || label > MEMORY__V1__LABEL__LABEL_SECRET)
        return rpc_call_invalid(call, "label: %d is not a memory.v1.Label", label);
    return GRPC_STATUS_OK;
}

static grpc_status_code check_expected(rpc_call *call, int64_t v, int zero_ok) {
    if (v < 0 || (v == 0 && !zero_ok))
        return rpc_call_invalid(call, "expected_version: %lld; must be %s", (long long)v,
                       zero_ok ? "0 (must not exist) or a version >= 1" : "a version >= 1");
    return GRPC_STATUS_OK;
}

/* st as JSON text in the arena ("{}" when NULL), at most max bytes. */
static grpc_status_code struct_json(rpc_call *call, const char *field,
                                    const Google__Protobuf__Struct *st, size_t max,
                                    const char **out) {
    char *json = NULL, why[300];
    size_t len = 0;
    if (pbjson_from_struct(st, field, &json, &len, why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s", why);
    if (len > max) {
        free(json);
        return rpc_call_invalid(call, "%s: %zu bytes encoded as JSON; at most %zu", field, len, max);
    }
    *out = arena_strndup(rpc_call_arena(call), json, len);
    free(json);
    return *out ? GRPC_STATUS_OK : rpc_call_oom(call);
}

/* ------------------------------------------------------------ PII */

typedef struct {
    const char *path;
    const char **text; /* replaced by a redacted copy under the redact policy */
} pii_text;

typedef struct {
    const char *path;
    Google__Protobuf__Struct **st; /* replaced by a redacted copy */
} pii_json;

/* The write diode's PII rule over what a write stores: with `pii:write`
 * the kinds found are returned for RecordMeta.pii_kinds; otherwise PII is
 * refused (INVALID_ARGUMENT naming kinds and paths) or, under the redact
 * policy, replaced — except in the id (id_path), which names the record. */
static grpc_status_code apply_pii(rpc_call *call, const global_service *svc, const principal *p,
                                  const char *id_path, const char *id, pii_text *texts,
                                  size_t nt, pii_json *js, size_t nj, const char ***kinds,
                                  size_t *nkinds) {
    arena *a = rpc_call_arena(call);
    *kinds = NULL;
    *nkinds = 0;
    pii_findings f;
    pii_findings_init(&f);
    char found[400];
    if (id_path) pii_scan_field(&f, id_path, id, strlen(id));
    int allow = principal_has(p, "pii:write");
    if (f.kinds && !allow && svc->o.redact_pii) {
        pii_findings_format(&f, found, sizeof found);
        return rpc_call_invalid(call, "PII found (%s); an id cannot be redacted, nothing was written",
                       found);
    }
    for (size_t i = 0; i < nt; i++)
        pii_scan_field(&f, texts[i].path, *texts[i].text, strlen(*texts[i].text));
    for (size_t i = 0; i < nj; i++)
        if (*js[i].st && pii_scan_struct(&f, js[i].path, *js[i].st) != 0)
            return rpc_call_invalid(call, "%s: nests deeper than %d levels", js[i].path, PII_MAX_DEPTH);
    if (!f.kinds) return GRPC_STATUS_OK;
    if (allow) {
        const char *names[PII_KIND_COUNT];
        size_t n = pii_kind_names(f.kinds, names, PII_KIND_COUNT);
        const char **v = arena_alloc(a, (n ? n : 1) * sizeof *v);
        if (!v) return rpc_call_oom(call);
        memcpy(v, names, n * sizeof *v);
        *kinds = v;
        *nkinds = n;
        return GRPC_STATUS_OK;
    }
    if (!svc->o.redact_pii) {
        pii_findings_format(&f, found, sizeof found);
        return rpc_call_invalid(call, "PII found (%s); nothing was written", found);
    }
    for (size_t i = 0; i < nt; i++) {
        size_t n;
        const char *r = pii_redact_arena(a, *texts[i].text, strlen(*texts[i].text), &n);
        if (!r) return rpc_call_oom(call);
        *texts[i].text = r;
    }
    for (size_t i = 0; i < nj; i++) {
        if (!*js[i].st) continue;
        Google__Protobuf__Struct *c = pbjson_struct_copy(a, *js[i].st);
        if (!c || pii_redact_struct(a, c) != 0) return rpc_call_oom(call);
        *js[i].st = c;
    }
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ rendering */

static Memory__V1__RecordMeta *render_meta(arena *a, const global_meta *r) {
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
    m->n_pii_kinds = r->npii;
    m->pii_kinds = (char **)r->pii_kinds;
    return m;
}

static Google__Protobuf__Struct *render_json(arena *a, const char *json) {
    Google__Protobuf__Struct *s = NULL;
    return pbjson_to_struct(a, json, strlen(json), &s) == 0 ? s : NULL;
}

static Memory__V1__Entity *render_entity(arena *a, const global_entity *e) {
    Memory__V1__Entity *m = arena_alloc(a, sizeof *m);
    if (!m) return NULL;
    memory__v1__entity__init(m);
    m->id = (char *)e->id;
    m->type = (char *)e->type;
    m->name = (char *)e->name;
    if (!(m->properties = render_json(a, e->properties_json)) ||
        !(m->meta = render_meta(a, &e->meta)))
        return NULL;
    return m;
}

static Memory__V1__Relationship *render_rel(arena *a, const global_rel *r) {
    Memory__V1__Relationship *m = arena_alloc(a, sizeof *m);
    if (!m) return NULL;
    memory__v1__relationship__init(m);
    m->source_id = (char *)r->source_id;
    m->type = (char *)r->type;
    m->target_id = (char *)r->target_id;
    if (!(m->properties = render_json(a, r->properties_json)) ||
        !(m->meta = render_meta(a, &r->meta)))
        return NULL;
    return m;
}

static Memory__V1__Task *render_task(arena *a, const global_task *t) {
    Memory__V1__Task *m = arena_alloc(a, sizeof *m);
    if (!m) return NULL;
    memory__v1__task__init(m);
    m->id = (char *)t->id;
    m->type = (char *)t->type;
    m->description = (char *)t->description;
    m->status = (Memory__V1__TaskStatus)t->status;
    if (t->provenance_json && !(m->provenance = render_json(a, t->provenance_json))) return NULL;
    if (t->result_json && !(m->result = render_json(a, t->result_json))) return NULL;
    m->n_entity_ids = t->nentity_ids;
    m->entity_ids = (char **)t->entity_ids;
    if (!(m->start_time = pbtime_timestamp(a, t->start_us))) return NULL;
    if (t->has_end && !(m->end_time = pbtime_timestamp(a, t->end_us))) return NULL;
    if (!(m->meta = render_meta(a, &t->meta))) return NULL;
    return m;
}

/* ------------------------------------------------------------ audit + ctx */

static void target(rpc_call *call, const char *kind, const char *id) {
    const char *t = arena_printf(rpc_call_arena(call), "%s:%s", kind, id);
    if (t) audit_add_target(call, t);
}

static void rel_target(rpc_call *call, const char *src, const char *type, const char *dst) {
    const char *t = arena_printf(rpc_call_arena(call), "relationship:%s/%s/%s", src, type, dst);
    if (t) audit_add_target(call, t);
}

/* with_audit: writes record their audit row in the data's transaction. */
static void init_ctx(global_ctx *c, rpc_call *call, const principal *p,
                     const global_service *svc, int with_audit) {
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

/* ------------------------------------------------------------ page tokens */

/* Hex SHA-256 of msg packed, after the caller blanked its page fields:
 * what a page token is bound to besides the caller. */
static const char *filters_digest(arena *a, const ProtobufCMessage *msg) {
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = arena_alloc(a, n ? n : 1);
    char *hex = arena_alloc(a, 65);
    if (!buf || !hex) return NULL;
    protobuf_c_message_pack(msg, buf);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    if (EVP_Digest(buf, n, d, &dl, EVP_sha256(), NULL) != 1 || dl != 32) return NULL;
    for (unsigned i = 0; i < 32; i++) sprintf(hex + 2 * i, "%02x", d[i]);
    return hex;
}

static int page_size(const global_service *svc, int32_t asked) {
    if (asked == 0) return svc->o.default_page_size;
    return asked > PAGE_MAX ? PAGE_MAX : asked;
}

/* ------------------------------------------------------------ entity cache */

/* After a write committed: this replica's L1 forgets the entity now, the
 * others when the announcement reaches them. */
static void entity_changed(const global_service *svc, rpc_call *call, const principal *p,
                           const char *id) {
    if (!svc->o.entity_cache) return;
    size_t klen;
    const char *key = cache_key_entity(rpc_call_arena(call), principal_tenant(p), id, &klen);
    if (!key) return;
    cache_aside_invalidate(svc->o.entity_cache, key, klen);
    char err[256] = "";
    if (svc->o.entity_l2 &&
        cache_l2_publish(svc->o.entity_l2, key, klen, rpc_call_deadline_ms(call), err,
                         sizeof err) != STATUS_OK)
        log_fields(LOG_WARN, "entity invalidation not announced; other replicas drop their L1 "
                   "when their subscription recovers", LOG_F_STR, "id", id, LOG_F_STR, "reason",
                   err, LOG_F_END);
}

typedef struct {
    global_service *svc;
    global_ctx *c;
    const char *id;
} entity_load;

/* cache_aside_load_fn: the entity, tenant-wide, packed as memory.v1.Entity. */
static int load_entity(void *arg, cache_item **out) {
    entity_load *l = arg;
    global_entity e;
    int rc = global_load_entity(l->svc->store, l->c, l->id, &e);
    if (rc == STATUS_ENOTFOUND) return STATUS_ENOTFOUND;
    if (rc != STATUS_OK) return rc < 0 ? rc : -1;
    Memory__V1__Entity *m = render_entity(l->c->ar, &e);
    if (!m) return STATUS_ENOMEM;
    size_t n = protobuf_c_message_get_packed_size(&m->base);
    uint8_t *buf = arena_alloc(l->c->ar, n ? n : 1);
    if (!buf) return STATUS_ENOMEM;
    protobuf_c_message_pack(&m->base, buf);
    *out = cache_item_create(e.meta.owner, strlen(e.meta.owner), buf, n, e.meta.label,
                             e.meta.update_us / 1000, pbtime_now_us() / 1000 + 3600 * 1000);
    return *out ? STATUS_OK : STATUS_ENOMEM;
}

static grpc_status_code get_entity_cached(global_service *svc, rpc_call *call, global_ctx *c,
                                          const char *id, Memory__V1__GetEntityResponse *resp) {
    arena *a = rpc_call_arena(call);
    size_t klen;
    const char *key = cache_key_entity(a, principal_tenant(c->p), id, &klen);
    if (!key) return rpc_call_oom(call);
    entity_load l = {svc, c, id};
    cache_item *it = NULL;
    int from_l1;
    int rc = cache_aside_get(svc->o.entity_cache, key, klen, c->deadline_ms, load_entity, &l, &it,
                             &from_l1);
    if (rc == STATUS_ETIMEOUT) rc = STATUS_ETIMEOUT;
    if (rc == STATUS_ENOMEM) rc = STATUS_ENOMEM;
    int visible = rc == STATUS_OK &&
                  principal_may_read(c->p, principal_scope(c->p, "global:read"),
                                     principal_tenant(c->p), it->owner, it->label);
    if (rc == STATUS_OK && visible)
        resp->entity = (Memory__V1__Entity *)protobuf_c_message_unpack(
            &memory__v1__entity__descriptor, arena_protobuf_allocator(a), it->value_len,
            it->value);
    cache_item_unref(it);
    if (rc == STATUS_ENOTFOUND || (rc == STATUS_OK && !visible)) {
        rpc_call_set_error(call, "entity %s not found", id);
        return GRPC_STATUS_NOT_FOUND;
    }
    if (rc != STATUS_OK) return store_status(call, rc, c);
    if (!resp->entity) return rpc_call_oom(call);
    target(call, "entity", id);
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ PutEntity */

static grpc_status_code do_put_entity(rpc_call *call, const ProtobufCMessage *reqm,
                                      ProtobufCMessage *respm, void *arg) {
    global_service *svc = arg;
    const Memory__V1__PutEntityRequest *req = (const Memory__V1__PutEntityRequest *)reqm;
    Memory__V1__PutEntityResponse *resp = (Memory__V1__PutEntityResponse *)respm;
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    grpc_status_code st;
    global_entity_in in = {0};
    in.id = req->id;
    in.name = req->name;
    if ((st = check_id(call, "id", &in.id, 1)) != GRPC_STATUS_OK ||
        (st = check_type(call, "type", req->type, 0)) != GRPC_STATUS_OK ||
        (st = check_text(call, "name", req->name, NAME_MAX_CHARS)) != GRPC_STATUS_OK ||
        (st = check_label(call, (int)req->label)) != GRPC_STATUS_OK)
        return st;
    if (req->precondition_case ==
        MEMORY__V1__PUT_ENTITY_REQUEST__PRECONDITION_EXPECTED_VERSION) {
        if ((st = check_expected(call, req->expected_version, 1)) != GRPC_STATUS_OK) return st;
        in.has_expected = 1;
        in.expected_version = req->expected_version;
    }
    Google__Protobuf__Struct *props = req->properties;
    pii_text texts[] = {{"name", &in.name}};
    pii_json js[] = {{"properties", &props}};
    if ((st = apply_pii(call, svc, p, "id", in.id, texts, 1, js, 1,
                        (const char ***)&in.pii_kinds, &in.npii)) != GRPC_STATUS_OK ||
        (st = struct_json(call, "properties", props, PROPERTIES_MAX, &in.properties_json)) !=
            GRPC_STATUS_OK)
        return st;
    in.type = req->type;
    in.label = (int)req->label;
    target(call, "entity", in.id);
    global_ctx c;
    init_ctx(&c, call, p, svc, 1);
    global_entity e;
    int created = 0;
    int rc = global_put_entity(svc->store, &c, &in, &e, &created);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    entity_changed(svc, call, p, in.id);
    if (!(resp->entity = render_entity(a, &e))) return rpc_call_oom(call);
    resp->created = created;
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ GetEntity */

static grpc_status_code do_get_entity(rpc_call *call, const ProtobufCMessage *reqm,
                                      ProtobufCMessage *respm, void *arg) {
    global_service *svc = arg;
    const Memory__V1__GetEntityRequest *req = (const Memory__V1__GetEntityRequest *)reqm;
    Memory__V1__GetEntityResponse *resp = (Memory__V1__GetEntityResponse *)respm;
    const char *id = req->id;
    grpc_status_code st = check_id(call, "id", &id, 0);
    if (st != GRPC_STATUS_OK) return st;
    global_ctx c;
    init_ctx(&c, call, authn_principal(call), svc, 0);
    if (svc->o.entity_cache) return get_entity_cached(svc, call, &c, id, resp);
    global_entity e;
    int rc = global_get_entity(svc->store, &c, id, &e);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    target(call, "entity", id);
    if (!(resp->entity = render_entity(rpc_call_arena(call), &e))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ DeleteEntity */

static grpc_status_code do_delete_entity(rpc_call *call, const ProtobufCMessage *reqm,
                                         ProtobufCMessage *respm, void *arg) {
    global_service *svc = arg;
    const Memory__V1__DeleteEntityRequest *req = (const Memory__V1__DeleteEntityRequest *)reqm;
    (void)respm;
    const char *id = req->id;
    grpc_status_code st = check_id(call, "id", &id, 0);
    if (st != GRPC_STATUS_OK) return st;
    int has_expected = req->precondition_case ==
                       MEMORY__V1__DELETE_ENTITY_REQUEST__PRECONDITION_EXPECTED_VERSION;
    if (has_expected && (st = check_expected(call, req->expected_version, 0)) != GRPC_STATUS_OK)
        return st;
    target(call, "entity", id);
    global_ctx c;
    init_ctx(&c, call, authn_principal(call), svc, 1);
    int rc = global_delete_entity(svc->store, &c, id, has_expected, req->expected_version);
    if (rc == STATUS_OK) entity_changed(svc, call, c.p, id);
    return store_status(call, rc, &c);
}

/* ------------------------------------------------------------ QueryEntities */

static global_kind value_kind(const Google__Protobuf__Value *v) {
    if (!v) return GLOBAL_KIND_NONE;
    switch (v->kind_case) {
    case GOOGLE__PROTOBUF__VALUE__KIND_NULL_VALUE: return GLOBAL_KIND_NULL;
    case GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE: return GLOBAL_KIND_NUMBER;
    case GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE: return GLOBAL_KIND_STRING;
    case GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE: return GLOBAL_KIND_BOOL;
    case GOOGLE__PROTOBUF__VALUE__KIND_STRUCT_VALUE: return GLOBAL_KIND_OBJECT;
    case GOOGLE__PROTOBUF__VALUE__KIND_LIST_VALUE: return GLOBAL_KIND_LIST;
    default: return GLOBAL_KIND_NONE;
    }
}

static grpc_status_code do_query_entities(rpc_call *call, const ProtobufCMessage *reqm,
                                          ProtobufCMessage *respm, void *arg) {
    global_service *svc = arg;
    const Memory__V1__QueryEntitiesRequest *req = (const Memory__V1__QueryEntitiesRequest *)reqm;
    Memory__V1__QueryEntitiesResponse *resp = (Memory__V1__QueryEntitiesResponse *)respm;
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    grpc_status_code st;
    if ((st = check_type(call, "type", req->type, 1)) != GRPC_STATUS_OK ||
        (st = check_text(call, "text_query", req->text_query, TEXT_QUERY_MAX)) != GRPC_STATUS_OK)
        return st;
    if (req->n_predicates > PREDICATES_MAX)
        return rpc_call_invalid(call, "predicates: %zu; at most %d", req->n_predicates, PREDICATES_MAX);
    if (req->page_size < 0)
        return rpc_call_invalid(call, "page_size: %d; must not be negative", req->page_size);
    global_query_in in = {0};
    in.type = req->type;
    in.text_query = req->text_query;
    int order = (int)req->order_by;
    if (order == MEMORY__V1__ENTITY_ORDER_BY__ENTITY_ORDER_BY_UNSPECIFIED)
        order = req->text_query[0] ? GLOBAL_ORDER_RELEVANCE : GLOBAL_ORDER_ID;
    if (order < GLOBAL_ORDER_ID || order > GLOBAL_ORDER_RELEVANCE)
        return rpc_call_invalid(call, "order_by: %d is not a memory.v1.EntityOrderBy", (int)req->order_by);
    if (order == GLOBAL_ORDER_RELEVANCE && !req->text_query[0])
        return rpc_call_invalid(call, "order_by: ENTITY_ORDER_BY_RELEVANCE needs a text_query");
    in.order = (global_order)order;
    /* Relevance is best-first by default; everything else ascending. */
    in.descending = order == GLOBAL_ORDER_RELEVANCE ? !req->descending : req->descending;
    in.limit = page_size(svc, req->page_size);
    global_pred *preds = arena_alloc(a, (req->n_predicates + 1) * sizeof *preds);
    if (!preds) return rpc_call_oom(call);
    for (size_t i = 0; i < req->n_predicates; i++) {
        const Memory__V1__PropertyPredicate *pp = req->predicates[i];
        char field[48];
        snprintf(field, sizeof field, "predicates[%zu].path", i);
        if ((st = check_text(call, field, pp->path, 1024)) != GRPC_STATUS_OK) return st;
        preds[i].path = pp->path;
        preds[i].op = (int)pp->op;
        preds[i].kind = value_kind(pp->value);
        if (pp->value && pp->op != MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EXISTS) {
            char *json = NULL, why[300];
            size_t len = 0;
            snprintf(field, sizeof field, "predicates[%zu].value", i);
            if (pbjson_from_value(pp->value, field, &json, &len, why, sizeof why) != 0)
                return rpc_call_invalid(call, "%s", why);
            preds[i].value_json = arena_strndup(a, json, len);
            free(json);
            if (!preds[i].value_json) return rpc_call_oom(call);
        }
    }
    in.preds = preds;
    in.npreds = req->n_predicates;

    Memory__V1__QueryEntitiesRequest blank = *req;
    blank.page_token = (char *)"";
    blank.page_size = 0;
    const char *digest = filters_digest(a, &blank.base);
    if (!digest) return rpc_call_oom(call);
    const char *bind[] = {principal_tenant(p), principal_sub(p), digest};
    if (req->page_token[0]) {
        const char *cur[2];
        if (page_token_decode(a, "memoryd QueryEntities v1", bind, 3, req->page_token, cur, 2) !=
            0)
            return rpc_call_invalid(call, "page_token: not a token from a previous QueryEntities with "
                           "this caller and these criteria");
        in.after_key = cur[0];
        in.after_id = cur[1];
    }
    global_ctx c;
    init_ctx(&c, call, p, svc, 0);
    global_entity *ents;
    const char **keys;
    size_t n;
    int more;
    int rc = global_query_entities(svc->store, &c, &in, &ents, &keys, &n, &more);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    resp->entities = arena_alloc(a, (n ? n : 1) * sizeof *resp->entities);
    if (!resp->entities) return rpc_call_oom(call);
    size_t bytes = 0, i = 0;
    for (; i < n; i++) {
        if (!(resp->entities[i] = render_entity(a, &ents[i]))) return rpc_call_oom(call);
        bytes += protobuf_c_message_get_packed_size(&resp->entities[i]->base) + 8;
        if (i > 0 && bytes > svc->o.max_response_bytes) {
            more = 1;
            break;
        }
        target(call, "entity", ents[i].id);
    }
    resp->n_entities = i;
    if (more && i > 0) {
        const char *cur[2] = {keys[i - 1], ents[i - 1].id};
        if (!(resp->next_page_token =
                  page_token_encode(a, "memoryd QueryEntities v1", bind, 3, cur, 2)))
            return rpc_call_oom(call);
    }
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ relationships */

static grpc_status_code check_rel_key(rpc_call *call, const char **src, const char *type,
                                      const char **dst) {
    grpc_status_code st;
    if ((st = check_id(call, "source_id", src, 0)) != GRPC_STATUS_OK ||
        (st = check_type(call, "type", type, 0)) != GRPC_STATUS_OK ||
        (st = check_id(call, "target_id", dst, 0)) != GRPC_STATUS_OK)
        return st;
    return GRPC_STATUS_OK;
}

static grpc_status_code do_put_rel(rpc_call *call, const ProtobufCMessage *reqm,
                                   ProtobufCMessage *respm, void *arg) {
    global_service *svc = arg;
    const Memory__V1__PutRelationshipRequest *req =
        (const Memory__V1__PutRelationshipRequest *)reqm;
    Memory__V1__PutRelationshipResponse *resp = (Memory__V1__PutRelationshipResponse *)respm;
    const principal *p = authn_principal(call);
    grpc_status_code st;
    global_rel_in in = {0};
    in.source_id = req->source_id;
    in.target_id = req->target_id;
    in.type = req->type;
    if ((st = check_rel_key(call, &in.source_id, req->type, &in.target_id)) != GRPC_STATUS_OK ||
        (st = check_label(call, (int)req->label)) != GRPC_STATUS_OK)
        return st;
    if (req->precondition_case ==
        MEMORY__V1__PUT_RELATIONSHIP_REQUEST__PRECONDITION_EXPECTED_VERSION) {
        if ((st = check_expected(call, req->expected_version, 1)) != GRPC_STATUS_OK) return st;
        in.has_expected = 1;
        in.expected_version = req->expected_version;
    }
    Google__Protobuf__Struct *props = req->properties;
    pii_json js[] = {{"properties", &props}};
    if ((st = apply_pii(call, svc, p, "type", in.type, NULL, 0, js, 1,
                        (const char ***)&in.pii_kinds, &in.npii)) != GRPC_STATUS_OK ||
        (st = struct_json(call, "properties", props, REL_PROPERTIES_MAX,
                          &in.properties_json)) != GRPC_STATUS_OK)
        return st;
    in.label = (int)req->label;
    rel_target(call, in.source_id, in.type, in.target_id);
    global_ctx c;
    init_ctx(&c, call, p, svc, 1);
    global_rel r;
    int created = 0;
    int rc = global_put_rel(svc->store, &c, &in, &r, &created);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    if (!(resp->relationship = render_rel(rpc_call_arena(call), &r))) return rpc_call_oom(call);
    resp->created = created;
    return GRPC_STATUS_OK;
}

static grpc_status_code do_delete_rel(rpc_call *call, const ProtobufCMessage *reqm,
                                      ProtobufCMessage *respm, void *arg) {
    global_service *svc = arg;
    const Memory__V1__DeleteRelationshipRequest *req =
        (const Memory__V1__DeleteRelationshipRequest *)reqm;
    (void)respm;
    const char *src = req->source_id, *dst = req->target_id;
    grpc_status_code st = check_rel_key(call, &src, req->type, &dst);
    if (st != GRPC_STATUS_OK) return st;
    int has_expected = req->precondition_case ==
                       MEMORY__V1__DELETE_RELATIONSHIP_REQUEST__PRECONDITION_EXPECTED_VERSION;
    if (has_expected && (st = check_expected(call, req->expected_version, 0)) != GRPC_STATUS_OK)
        return st;
    rel_target(call, src, req->type, dst);
    global_ctx c;
    init_ctx(&c, call, authn_principal(call), svc, 1);
    int rc = global_delete_rel(svc->store, &c, src, req->type, dst, has_expected,
                               req->expected_version);
    return store_status(call, rc, &c);
}

/* ------------------------------------------------------------ Traverse */

static grpc_status_code do_traverse(rpc_call *call, const ProtobufCMessage *reqm,
                                    ProtobufCMessage *respm, void *arg) {
    global_service *svc = arg;
    const Memory__V1__TraverseRequest *req = (const Memory__V1__TraverseRequest *)reqm;
    Memory__V1__TraverseResponse *resp = (Memory__V1__TraverseResponse *)respm;
    arena *a = rpc_call_arena(call);
    grpc_status_code st;
    global_traverse_in in = {0};
    in.start_id = req->start_id;
    if ((st = check_id(call, "start_id", &in.start_id, 0)) != GRPC_STATUS_OK) return st;
    if (req->n_relationship_types > REL_TYPES_MAX)
        return rpc_call_invalid(call, "relationship_types: %zu; at most %d", req->n_relationship_types,
                       REL_TYPES_MAX);
    for (size_t i = 0; i < req->n_relationship_types; i++) {
        char field[48];
        snprintf(field, sizeof field, "relationship_types[%zu]", i);
        if ((st = check_type(call, field, req->relationship_types[i], 0)) != GRPC_STATUS_OK)
            return st;
    }
    in.types = (const char *const *)req->relationship_types;
    in.ntypes = req->n_relationship_types;
    switch (req->direction) {
    case MEMORY__V1__EDGE_DIRECTION__EDGE_DIRECTION_UNSPECIFIED:
    case MEMORY__V1__EDGE_DIRECTION__EDGE_DIRECTION_OUT: in.dir = GLOBAL_DIR_OUT; break;
    case MEMORY__V1__EDGE_DIRECTION__EDGE_DIRECTION_IN: in.dir = GLOBAL_DIR_IN; break;
    case MEMORY__V1__EDGE_DIRECTION__EDGE_DIRECTION_BOTH: in.dir = GLOBAL_DIR_BOTH; break;
    default:
        return rpc_call_invalid(call, "direction: %d is not a memory.v1.EdgeDirection",
                       (int)req->direction);
    }
    in.max_depth = req->max_depth ? req->max_depth : DEFAULT_DEPTH;
    if (in.max_depth < 1 || in.max_depth > svc->o.max_depth)
        return rpc_call_invalid(call, "max_depth: %d; must be 1 to %d (0 = %d)", req->max_depth,
                       svc->o.max_depth, DEFAULT_DEPTH);
    in.limit = req->limit ? req->limit : DEFAULT_LIMIT;
    if (in.limit < 1 || in.limit > LIMIT_MAX)
        return rpc_call_invalid(call, "limit: %d; must be 1 to %d (0 = %d)", req->limit, LIMIT_MAX,
                       DEFAULT_LIMIT);
    global_ctx c;
    init_ctx(&c, call, authn_principal(call), svc, 0);
    global_traverse_out out;
    int rc = global_traverse(svc->store, &c, &in, &out);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    resp->nodes = arena_alloc(a, (out.nnodes + 1) * sizeof *resp->nodes);
    resp->edges = arena_alloc(a, (out.nedges + 1) * sizeof *resp->edges);
    if (!resp->nodes || !resp->edges) return rpc_call_oom(call);
    for (size_t i = 0; i < out.nnodes; i++) {
        Memory__V1__TraversalNode *n = arena_alloc(a, sizeof *n);
        if (!n) return rpc_call_oom(call);
        memory__v1__traversal_node__init(n);
        if (!(n->entity = render_entity(a, &out.nodes[i]))) return rpc_call_oom(call);
        n->depth = out.depths[i];
        resp->nodes[i] = n;
        target(call, "entity", out.nodes[i].id);
    }
    resp->n_nodes = out.nnodes;
    for (size_t i = 0; i < out.nedges; i++)
        if (!(resp->edges[i] = render_rel(a, &out.edges[i]))) return rpc_call_oom(call);
    resp->n_edges = out.nedges;
    resp->truncated = out.truncated;
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ RecordTask */

static grpc_status_code check_time(rpc_call *call, const char *field,
                                   const Google__Protobuf__Timestamp *ts, int64_t *us) {
    if (pbtime_timestamp_us(ts, us) != 0) return rpc_call_invalid(call, "%s: not a valid timestamp", field);
    return GRPC_STATUS_OK;
}

static grpc_status_code do_record_task(rpc_call *call, const ProtobufCMessage *reqm,
                                       ProtobufCMessage *respm, void *arg) {
    global_service *svc = arg;
    const Memory__V1__RecordTaskRequest *req = (const Memory__V1__RecordTaskRequest *)reqm;
    Memory__V1__RecordTaskResponse *resp = (Memory__V1__RecordTaskResponse *)respm;
    const principal *p = authn_principal(call);
    grpc_status_code st;
    global_task_in in = {0};
    in.id = req->id;
    in.description = req->description;
    if ((st = check_id(call, "id", &in.id, 1)) != GRPC_STATUS_OK ||
        (st = check_type(call, "type", req->type, 1)) != GRPC_STATUS_OK ||
        (st = check_text(call, "description", req->description, DESCRIPTION_MAX)) !=
            GRPC_STATUS_OK ||
        (st = check_label(call, (int)req->label)) != GRPC_STATUS_OK)
        return st;
    if (req->status < MEMORY__V1__TASK_STATUS__TASK_STATUS_PENDING ||
        req->status > MEMORY__V1__TASK_STATUS__TASK_STATUS_CANCELLED)
        return rpc_call_invalid(call, "status: %s; a task needs PENDING, RUNNING, SUCCEEDED, FAILED or "
                       "CANCELLED", req->status == 0 ? "TASK_STATUS_UNSPECIFIED" : "unknown");
    if (req->n_entity_ids > ENTITY_IDS_MAX)
        return rpc_call_invalid(call, "entity_ids: %zu; at most %d", req->n_entity_ids, ENTITY_IDS_MAX);
    for (size_t i = 0; i < req->n_entity_ids; i++) {
        char field[48];
        const char *id = req->entity_ids[i];
        snprintf(field, sizeof field, "entity_ids[%zu]", i);
        if ((st = check_id(call, field, &id, 0)) != GRPC_STATUS_OK) return st;
    }
    if (req->start_time) {
        if ((st = check_time(call, "start_time", req->start_time, &in.start_us)) !=
            GRPC_STATUS_OK)
            return st;
        in.has_start = 1;
    }
    if (req->end_time) {
        if ((st = check_time(call, "end_time", req->end_time, &in.end_us)) != GRPC_STATUS_OK)
            return st;
        in.has_end = 1;
        if (in.has_start && in.end_us < in.start_us)
            return rpc_call_invalid(call, "end_time: before start_time");
    }
    Google__Protobuf__Struct *prov = req->provenance, *result = req->result;
    pii_text texts[] = {{"description", &in.description}};
    pii_json js[] = {{"provenance", &prov}, {"result", &result}};
    if ((st = apply_pii(call, svc, p, "id", in.id, texts, 1, js, 2,
                        (const char ***)&in.pii_kinds, &in.npii)) != GRPC_STATUS_OK)
        return st;
    if (prov && (st = struct_json(call, "provenance", prov, TASK_JSON_MAX,
                                  &in.provenance_json)) != GRPC_STATUS_OK)
        return st;
    if (result && (st = struct_json(call, "result", result, TASK_JSON_MAX, &in.result_json)) !=
                      GRPC_STATUS_OK)
        return st;
    in.type = req->type;
    in.status = (int)req->status;
    in.entity_ids = (const char *const *)req->entity_ids;
    in.nentity_ids = req->n_entity_ids;
    in.label = (int)req->label;
    target(call, "task", in.id);
    global_ctx c;
    init_ctx(&c, call, p, svc, 1);
    global_task t;
    int created = 0;
    int rc = global_record_task(svc->store, &c, &in, &t, &created);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    if (!(resp->task = render_task(rpc_call_arena(call), &t))) return rpc_call_oom(call);
    resp->created = created;
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ ListTasks */

static grpc_status_code do_list_tasks(rpc_call *call, const ProtobufCMessage *reqm,
                                      ProtobufCMessage *respm, void *arg) {
    global_service *svc = arg;
    const Memory__V1__ListTasksRequest *req = (const Memory__V1__ListTasksRequest *)reqm;
    Memory__V1__ListTasksResponse *resp = (Memory__V1__ListTasksResponse *)respm;
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    grpc_status_code st;
    global_list_tasks_in in = {0};
    if (req->status < 0 || req->status > MEMORY__V1__TASK_STATUS__TASK_STATUS_CANCELLED)
        return rpc_call_invalid(call, "status: %d is not a memory.v1.TaskStatus", (int)req->status);
    in.status = (int)req->status;
    if ((st = check_type(call, "type", req->type, 1)) != GRPC_STATUS_OK) return st;
    in.type = req->type;
    if (req->page_size < 0)
        return rpc_call_invalid(call, "page_size: %d; must not be negative", req->page_size);
    in.limit = page_size(svc, req->page_size);
    if (req->time_range) {
        const Memory__V1__TimeRange *tr = req->time_range;
        if (tr->start_time) {
            if ((st = check_time(call, "time_range.start_time", tr->start_time, &in.start_us)) !=
                GRPC_STATUS_OK)
                return st;
            in.has_start = 1;
        }
        if (tr->end_time) {
            if ((st = check_time(call, "time_range.end_time", tr->end_time, &in.end_us)) !=
                GRPC_STATUS_OK)
                return st;
            in.has_end = 1;
        }
        if (in.has_start && in.has_end && in.start_us > in.end_us)
            return rpc_call_invalid(call, "time_range: start_time is after end_time");
    }
    Memory__V1__ListTasksRequest blank = *req;
    blank.page_token = (char *)"";
    blank.page_size = 0;
    const char *digest = filters_digest(a, &blank.base);
    if (!digest) return rpc_call_oom(call);
    const char *bind[] = {principal_tenant(p), principal_sub(p), digest};
    if (req->page_token[0]) {
        const char *cur[2];
        char *end = NULL;
        if (page_token_decode(a, "memoryd ListTasks v1", bind, 3, req->page_token, cur, 2) != 0 ||
            (in.after_start_us = strtoll(cur[0], &end, 10), !end || *end))
            return rpc_call_invalid(call, "page_token: not a token from a previous ListTasks with this "
                           "caller and these filters");
        in.has_after = 1;
        in.after_id = cur[1];
    }
    global_ctx c;
    init_ctx(&c, call, p, svc, 0);
    global_task *tasks;
    size_t n;
    int more;
    int rc = global_list_tasks(svc->store, &c, &in, &tasks, &n, &more);
    if (rc != STATUS_OK) return store_status(call, rc, &c);
    resp->tasks = arena_alloc(a, (n ? n : 1) * sizeof *resp->tasks);
    if (!resp->tasks) return rpc_call_oom(call);
    size_t bytes = 0, i = 0;
    for (; i < n; i++) {
        if (!(resp->tasks[i] = render_task(a, &tasks[i]))) return rpc_call_oom(call);
        bytes += protobuf_c_message_get_packed_size(&resp->tasks[i]->base) + 8;
        if (i > 0 && bytes > svc->o.max_response_bytes) {
            more = 1;
            break;
        }
        target(call, "task", tasks[i].id);
    }
    resp->n_tasks = i;
    if (more && i > 0) {
        const char *us = arena_printf(a, "%lld", (long long)tasks[i - 1].start_us);
        const char *cur[2] = {us, tasks[i - 1].id};
        if (!us ||
            !(resp->next_page_token = page_token_encode(a, "memoryd ListTasks v1", bind, 3, cur, 2)))
            return rpc_call_oom(call);
    }
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ registration */

int global_register(rpc_server *srv, pg_pool *pg, audit *aud, const global_options *o,
                    global_service **out) {
    global_service *svc = calloc(1, sizeof *svc);
    if (!svc) return -1;
    svc->aud = aud;
    if (o) svc->o = *o;
    if (svc->o.default_page_size <= 0) svc->o.default_page_size = 50;
    if (svc->o.default_page_size > PAGE_MAX) svc->o.default_page_size = PAGE_MAX;
    if (svc->o.max_depth <= 0 || svc->o.max_depth > 10) svc->o.max_depth = 10;
    if (svc->o.max_response_bytes == 0) svc->o.max_response_bytes = 3u << 20;
    global_store_options so = {svc->o.max_statement_ms, svc->o.max_response_bytes};
    if (global_store_create(pg, &so, &svc->store) != 0) {
        free(svc);
        return -1;
    }
#define M(name, req, resp, scope, fn)                                                        \
    {"/memory.v1.GlobalMemory/" name, &memory__v1__##req##__descriptor,                     \
     &memory__v1__##resp##__descriptor, scope, fn}
    static const rpc_unary_def methods[] = {
        M("PutEntity", put_entity_request, put_entity_response, "global:write", do_put_entity),
        M("GetEntity", get_entity_request, get_entity_response, "global:read", do_get_entity),
        M("DeleteEntity", delete_entity_request, delete_entity_response, "global:write",
          do_delete_entity),
        M("QueryEntities", query_entities_request, query_entities_response, "global:read",
          do_query_entities),
        M("PutRelationship", put_relationship_request, put_relationship_response,
          "global:write", do_put_rel),
        M("DeleteRelationship", delete_relationship_request, delete_relationship_response,
          "global:write", do_delete_rel),
        M("Traverse", traverse_request, traverse_response, "global:read", do_traverse),
        M("RecordTask", record_task_request, record_task_response, "global:write",
          do_record_task),
        M("ListTasks", list_tasks_request, list_tasks_response, "global:read", do_list_tasks),
    };
#undef M
    if (rpc_server_add_unary_methods(srv, methods, sizeof methods / sizeof methods[0], svc) != 0) {
        global_service_free(svc);
        return -1;
    }
    *out = svc;
    return 0;
}

void global_service_free(global_service *s) {
    if (!s) return;
    global_store_free(s->store);
    free(s);
}
