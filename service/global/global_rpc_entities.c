/* global_rpc_entities: the GlobalMemory handlers for entities: PutEntity,
 * GetEntity (through the entity cache when there is one), DeleteEntity
 * and QueryEntities. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/authn.h"
#include "service/global/global_service_internal.h"
#include "service/pb/pbjson.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_page.h"

#define NAME_MAX_CHARS 1024
#define PROPERTIES_MAX (1024 * 1024)
#define PREDICATES_MAX 32
#define TEXT_QUERY_MAX 1024
#define PATH_MAX_CHARS 1024

/* After a write of entity id committed: every replica's cache forgets it. */
static void entity_changed(const global_service *svc, const tier_ctx *c, const char *id) {
    if (svc->entities) cache_records_changed(svc->entities, c->ar, principal_tenant(c->p), id);
}

/* PutEntity's answer until the loop thread renders it. */
typedef struct {
    global_entity e;
    int created;
} entity_put;

static grpc_status_code render_put(tier_pending_call *pc) {
    const entity_put *w = pc->out;
    Memory__V1__PutEntityResponse *resp = (Memory__V1__PutEntityResponse *)pc->resp;
    entity_changed(pc->arg, pc->c, w->e.id);
    if (!(resp->entity = global_render_entity(pc->c->ar, &w->e))) return rpc_call_oom(pc->call);
    resp->created = w->created;
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(global_do_put_entity, global_service, Memory__V1__PutEntityRequest,
                  Memory__V1__PutEntityResponse) {
    global_entity_in in = {0};
    in.id = req->id;
    in.name = req->name;
    RPC_CHECK(tier_check_id(call, "id", &in.id, 1));
    RPC_CHECK(tier_check_name(call, "type", req->type, GLOBAL_TYPE_MAX, 1));
    RPC_CHECK(tier_check_text(call, "name", req->name, NAME_MAX_CHARS));
    RPC_CHECK(tier_check_label(call, "label", (int)req->label));
    RPC_CHECK(TIER_CHECK_PRECONDITION(call, req, MEMORY__V1__PUT_ENTITY_REQUEST,
                                      TIER_EXPECT_CREATE_OK, &in.has_expected,
                                      &in.expected_version));
    const Google__Protobuf__Struct *props = req->properties;
    pii_field f[] = {PII_TEXT("name", &in.name), PII_STRUCT("properties", &props)};
    RPC_CHECK(global_pii(call, svc, "id", &in.id, f, 2, &in.pii_kinds, &in.npii));
    RPC_CHECK(tier_check_struct(call, "properties", props, PROPERTIES_MAX, &in.properties_json));
    in.type = req->type;
    in.label = (int)req->label;
    tier_target(call, "entity:%s", in.id);
    tier_pending_call *pc = tier_pending_new(call, "global", svc->env->audit, sizeof(entity_put),
                                             render_put, &resp->base);
    if (!pc) return rpc_call_oom(call);
    pc->arg = svc;
    entity_put *w = pc->out;
    tier_async *op =
        global_put_entity_async(&svc->store, pc->c, &in, &w->e, &w->created, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

/* GetEntity straight from the store, on the event loop. */
static grpc_status_code render_entity(tier_pending_call *pc) {
    const global_entity *e = pc->out;
    Memory__V1__GetEntityResponse *resp = (Memory__V1__GetEntityResponse *)pc->resp;
    if (!(resp->entity = global_render_entity(pc->c->ar, e))) return rpc_call_oom(pc->call);
    tier_target(pc->call, "entity:%s", e->id);
    return GRPC_STATUS_OK;
}

static grpc_status_code get_entity_pending(rpc_call *call, global_service *svc, const char *id,
                                           Memory__V1__GetEntityResponse *resp) {
    tier_pending_call *pc =
        tier_pending_new(call, "global", NULL, sizeof(global_entity), render_entity, &resp->base);
    tier_async *op =
        pc ? global_get_entity_async(&svc->store, pc->c, id, pc->out, tier_pending_done, pc) : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

/* GetEntity's answer from the entity cache (rc and m of cache_records_peek
 * or _get). */
static grpc_status_code answer_cached(rpc_call *call, tier_ctx *c, const char *id, int rc,
                                      ProtobufCMessage *m, Memory__V1__GetEntityResponse *resp) {
    if (rc == STATUS_ENOTFOUND) tier_fail(c, rc, "entity %s not found", id);
    if (rc != STATUS_OK) return tier_status(call, rc, c);
    resp->entity = (Memory__V1__Entity *)m;
    tier_target(call, "entity:%s", id);
    return GRPC_STATUS_OK;
}

/* GetEntity through the entity cache past an L1 miss, on the event loop:
 * this call loads the entity (its statement is built up front, so a
 * cancel can end it even before it is sent) or waits for a concurrent
 * load of it. Lives in the call's arena. */
typedef struct {
    cache_records_fetch f;
    rpc_call *call;
    global_service *svc;
    tier_ctx *c;
    const char *id;
    global_entity e; /* what the load read */
    tier_async *load;
    Memory__V1__GetEntityResponse *resp;
} entity_fetch;

/* The load's statement has answered (loop thread): the entity, tenant-wide,
 * as memory.v1.Entity for the cache. */
static void entity_loaded(void *arg, int rc) {
    entity_fetch *ef = arg;
    cache_record rec = {0};
    Memory__V1__Entity *m = NULL;
    if (rc == STATUS_OK && !(m = global_render_entity(ef->c->ar, &ef->e))) rc = STATUS_ENOMEM;
    if (m)
        rec = (cache_record){&m->base, ef->e.meta.owner, ef->e.meta.label, ef->e.meta.update_us, 0};
    cache_records_loaded(&ef->f, rc, &rec);
}

static void start_entity_load(void *arg, cache_records_fetch *f) {
    (void)f;
    entity_fetch *ef = arg;
    tier_async_submit(&ef->svc->store, ef->load);
}

static void entity_fetched(void *arg, int rc, ProtobufCMessage *m) {
    entity_fetch *ef = arg;
    rpc_call_complete(ef->call, answer_cached(ef->call, ef->c, ef->id, rc, m, ef->resp));
}

static void cancel_entity_fetch(rpc_call *call, void *arg) {
    entity_fetch *ef = arg;
    int r = cache_records_cancel(ef->svc->entities, &ef->f);
    if (r == CACHE_ASIDE_LOADING) {
        tier_async_cancel(&ef->svc->store, ef->load);
    } else if (r == CACHE_ASIDE_LEFT) {
        rpc_call_set_error(call, "the client cancelled the call");
        rpc_call_complete(call, GRPC_STATUS_CANCELLED);
    }
}

static grpc_status_code get_entity_cached(rpc_call *call, global_service *svc, tier_ctx *c,
                                          const char *id, Memory__V1__GetEntityResponse *resp) {
    entity_fetch *ef = arena_zalloc(c->ar, sizeof *ef);
    if (!ef) return rpc_call_oom(call);
    *ef = (entity_fetch){.call = call, .svc = svc, .c = c, .id = id, .resp = resp};
    /* The caller's deadline bounds the L2 lookup (without one it would
     * end at once, and every GetEntity would miss L2). */
    cache_records_fetch_init(&ef->f, c->p, c->read_breadth, c->ar, c->deadline_ms,
                             start_entity_load, entity_fetched, ef);
    if (!(ef->load = global_load_entity_async(&svc->store, c, id, &ef->e, entity_loaded, ef)))
        return rpc_call_oom(call);
    /* Registered first: once fetched, the call may complete at any moment. */
    if (rpc_call_on_cancel(call, cancel_entity_fetch, ef) != 0) return GRPC_STATUS_CANCELLED;
    ProtobufCMessage *m = NULL;
    int rc = cache_records_get(svc->entities, &ef->f, id, &m);
    if (rc == CACHE_RECORDS_PENDING) return RPC_PENDING;
    return answer_cached(call, c, id, rc, m, resp);
}

RPC_UNARY_HANDLER(global_do_get_entity, global_service, Memory__V1__GetEntityRequest,
                  Memory__V1__GetEntityResponse) {
    const char *id = req->id;
    RPC_CHECK(tier_check_id(call, "id", &id, 0));
    /* A read that must see a recent write (read-your-writes) loads from
     * PostgreSQL: a cached copy, or a load in flight, may predate it. */
    if (!svc->entities || rpc_call_wants_fresh(call))
        return get_entity_pending(call, svc, id, resp);
    /* Through the entity cache: an L1 hit is answered here. */
    tier_ctx *c = arena_alloc(rpc_call_arena(call), sizeof *c);
    if (!c) return rpc_call_oom(call);
    *c = tier_ctx_for(call, "global", NULL);
    ProtobufCMessage *m = NULL;
    int rc = cache_records_peek(svc->entities, c->p, c->read_breadth, id, c->ar, &m);
    if (rc == CACHE_RECORDS_MISS) return get_entity_cached(call, svc, c, id, resp);
    return answer_cached(call, c, id, rc, m, resp);
}

/* DeleteEntity has nothing to answer; the entity cache forgets the id. */
static grpc_status_code render_delete(tier_pending_call *pc) {
    entity_changed(pc->arg, pc->c, *(const char **)pc->out);
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(global_do_delete_entity, global_service, Memory__V1__DeleteEntityRequest,
                  Memory__V1__DeleteEntityResponse) {
    const char *id = req->id;
    int has_expected = TIER_HAS_EXPECTED(req, MEMORY__V1__DELETE_ENTITY_REQUEST);
    RPC_CHECK(tier_check_id(call, "id", &id, 0));
    if (has_expected)
        RPC_CHECK(tier_check_expected(call, req->expected_version, TIER_EXPECT_VERSION));
    tier_target(call, "entity:%s", id);
    tier_pending_call *pc = tier_pending_new(call, "global", svc->env->audit, sizeof(const char *),
                                             render_delete, &resp->base);
    if (!pc) return rpc_call_oom(call);
    pc->arg = svc;
    *(const char **)pc->out = id;
    tier_async *op = global_delete_entity_async(&svc->store, pc->c, id, has_expected,
                                                req->expected_version, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
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

grpc_status_code global_check_query(rpc_call *call, const char *prefix, const char *type,
                                    const char *text_query,
                                    Memory__V1__PropertyPredicate *const *pps, size_t npreds,
                                    global_query_in *in) {
    char field[96];
    snprintf(field, sizeof field, "%stype", prefix);
    RPC_CHECK(tier_check_name(call, field, type, GLOBAL_TYPE_MAX, 0));
    snprintf(field, sizeof field, "%stext_query", prefix);
    RPC_CHECK(tier_check_text(call, field, text_query, TEXT_QUERY_MAX));
    in->type = type;
    in->text_query = text_query;
    arena *a = rpc_call_arena(call);
    if (npreds > PREDICATES_MAX)
        return rpc_call_invalid(call, "%spredicates: %zu; at most %d", prefix, npreds,
                                PREDICATES_MAX);
    global_pred *preds = arena_alloc(a, (npreds + 1) * sizeof *preds);
    if (!preds) return rpc_call_oom(call);
    for (size_t i = 0; i < npreds; i++) {
        const Memory__V1__PropertyPredicate *pp = pps[i];
        snprintf(field, sizeof field, "%spredicates[%zu].path", prefix, i);
        RPC_CHECK(tier_check_text(call, field, pp->path, PATH_MAX_CHARS));
        preds[i].path = pp->path;
        preds[i].op = (int)pp->op;
        preds[i].kind = value_kind(pp->value);
        if (pp->value && pp->op != MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EXISTS) {
            char *json = NULL, why[300];
            size_t len = 0;
            snprintf(field, sizeof field, "%spredicates[%zu].value", prefix, i);
            if (pbjson_from_value(pp->value, field, &json, &len, why, sizeof why) != 0)
                return rpc_call_invalid(call, "%s", why);
            preds[i].value_json = arena_strndup(a, json, len);
            free(json);
            if (!preds[i].value_json) return rpc_call_oom(call);
        }
    }
    /* Each predicate is checked now, as the statement that runs it will
     * be built (no I/O): a bad one is the caller's error before anything
     * runs, in the router's parts as in QueryEntities. */
    pgq_sql *scratch = npreds ? arena_alloc(a, sizeof *scratch) : NULL;
    if (npreds && !scratch) return rpc_call_oom(call);
    for (size_t i = 0; i < npreds; i++) {
        char why[300];
        memset(scratch, 0, sizeof *scratch);
        int rc = global_pred_sql(scratch, a, i, &preds[i], why, sizeof why);
        if (rc == STATUS_ENOMEM) return rpc_call_oom(call);
        if (rc != 0) return rpc_call_invalid(call, "%s%s", prefix, why);
    }
    in->preds = preds;
    in->npreds = npreds;
    return GRPC_STATUS_OK;
}

/* order_by, resolved: relevance is the default with a text query and
 * best-first; everything else defaults to id, ascending. */
static grpc_status_code ordering(rpc_call *call, const Memory__V1__QueryEntitiesRequest *req,
                                 global_query_in *in) {
    int order = (int)req->order_by;
    if (order == MEMORY__V1__ENTITY_ORDER_BY__ENTITY_ORDER_BY_UNSPECIFIED)
        order = req->text_query[0] ? GLOBAL_ORDER_RELEVANCE : GLOBAL_ORDER_ID;
    if (order < GLOBAL_ORDER_ID || order > GLOBAL_ORDER_RELEVANCE)
        return rpc_call_invalid(call, "order_by: %d is not a memory.v1.EntityOrderBy",
                                (int)req->order_by);
    if (order == GLOBAL_ORDER_RELEVANCE && !req->text_query[0])
        return rpc_call_invalid(call, "order_by: ENTITY_ORDER_BY_RELEVANCE needs a text_query");
    in->order = (global_order)order;
    in->descending = order == GLOBAL_ORDER_RELEVANCE ? !req->descending : req->descending;
    return GRPC_STATUS_OK;
}

/* QueryEntities' answer until the loop thread renders it: the entities
 * and the cursor's binding for the next page's token. */
typedef struct {
    global_query_out q;
    tier_page pg;
} query_pending;

static grpc_status_code render_query(tier_pending_call *pc) {
    const query_pending *qp = pc->out;
    const global_service *svc = pc->arg;
    Memory__V1__QueryEntitiesResponse *resp = (Memory__V1__QueryEntitiesResponse *)pc->resp;
    ProtobufCMessage **msgs;
    int cut;
    RPC_CHECK(tier_page_fill(pc->call, &global_entity_page, qp->q.ents, qp->q.n,
                             svc->env->max_response_bytes, &msgs, &resp->n_entities, &cut));
    resp->entities = (Memory__V1__Entity **)msgs;
    size_t i = resp->n_entities;
    if (qp->q.scores) {
        resp->scores = qp->q.scores; /* in the call's arena, as the entities */
        resp->n_scores = i;
    }
    if ((qp->q.more || cut) && i > 0) {
        const char *next[2] = {qp->q.keys[i - 1], qp->q.ents[i - 1].id};
        if (!(resp->next_page_token = tier_page_seal(pc->call, &qp->pg, next, 2)))
            return rpc_call_oom(pc->call);
    }
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(global_do_query_entities, global_service, Memory__V1__QueryEntitiesRequest,
                  Memory__V1__QueryEntitiesResponse) {
    global_query_in in = {0};
    RPC_CHECK(global_check_query(call, "", req->type, req->text_query, req->predicates,
                                 req->n_predicates, &in));
    RPC_CHECK(tier_page_size(call, req->page_size, &in.limit));
    RPC_CHECK(ordering(call, req, &in));
    RPC_CHECK(tier_check_text_match(call, "text_match", req->text_match, "text_query",
                                    req->text_query, &in.ranked));
    tier_pending_call *pc =
        tier_pending_new(call, "global", NULL, sizeof(query_pending), render_query, &resp->base);
    if (!pc) return rpc_call_oom(call);
    query_pending *qp = pc->out;
    RPC_CHECK(tier_page_bind(call, authn_principal(call), &req->base, &qp->pg));
    RPC_CHECK(tier_page_resume(call, &qp->pg, req->page_token, &in.after_key, &in.after_id, 0));
    pc->arg = svc;
    tier_async *op =
        global_query_entities_async(&svc->store, pc->c, &in, &qp->q, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}
