/* global_rpc_graph: the GlobalMemory handlers for the graph's edges:
 * PutRelationship, DeleteRelationship and Traverse. */
#include <stdio.h>

#include "service/global/global_service_internal.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_page.h"

#define REL_PROPERTIES_MAX (64 * 1024)
#define REL_TYPES_MAX 64
#define DEFAULT_DEPTH 2
#define DEFAULT_LIMIT 100

/* A relationship's key: both ends and its type. */
static grpc_status_code check_rel_key(rpc_call *call, const char **src, const char *type,
                                      const char **dst) {
    RPC_CHECK(tier_check_id(call, "source_id", src, 0));
    RPC_CHECK(tier_check_name(call, "type", type, GLOBAL_TYPE_MAX, 1));
    RPC_CHECK(tier_check_id(call, "target_id", dst, 0));
    return GRPC_STATUS_OK;
}

static void rel_target(rpc_call *call, const char *src, const char *type, const char *dst) {
    tier_target(call, "relationship:%s/%s/%s", src, type, dst);
}

/* PutRelationship's answer until the loop thread renders it. */
typedef struct {
    global_rel r;
    int created;
} rel_put;

static grpc_status_code render_put_rel(tier_pending_call *pc) {
    const rel_put *w = pc->out;
    Memory__V1__PutRelationshipResponse *resp = (Memory__V1__PutRelationshipResponse *)pc->resp;
    if (!(resp->relationship = global_render_rel(pc->c->ar, &w->r))) return rpc_call_oom(pc->call);
    resp->created = w->created;
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(global_do_put_rel, global_service, Memory__V1__PutRelationshipRequest,
                  Memory__V1__PutRelationshipResponse) {
    global_rel_in in = {0};
    in.source_id = req->source_id;
    in.target_id = req->target_id;
    in.type = req->type;
    RPC_CHECK(check_rel_key(call, &in.source_id, req->type, &in.target_id));
    RPC_CHECK(tier_check_label(call, "label", (int)req->label));
    RPC_CHECK(TIER_CHECK_PRECONDITION(call, req, MEMORY__V1__PUT_RELATIONSHIP_REQUEST,
                                      TIER_EXPECT_CREATE_OK, &in.has_expected,
                                      &in.expected_version));
    const Google__Protobuf__Struct *props = req->properties;
    pii_field f[] = {PII_STRUCT("properties", &props)};
    RPC_CHECK(global_pii(call, svc, "type", &in.type, f, 1, &in.pii_kinds, &in.npii));
    RPC_CHECK(
        tier_check_struct(call, "properties", props, REL_PROPERTIES_MAX, &in.properties_json));
    in.label = (int)req->label;
    rel_target(call, in.source_id, in.type, in.target_id);
    tier_pending_call *pc = tier_pending_new(call, "global", svc->env->audit, sizeof(rel_put),
                                             render_put_rel, &resp->base);
    rel_put *w = pc ? pc->out : NULL;
    tier_async *op =
        w ? global_put_rel_async(&svc->store, pc->c, &in, &w->r, &w->created, tier_pending_done, pc)
          : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

RPC_UNARY_HANDLER(global_do_delete_rel, global_service, Memory__V1__DeleteRelationshipRequest,
                  Memory__V1__DeleteRelationshipResponse) {
    const char *src = req->source_id, *dst = req->target_id;
    int has_expected = TIER_HAS_EXPECTED(req, MEMORY__V1__DELETE_RELATIONSHIP_REQUEST);
    RPC_CHECK(check_rel_key(call, &src, req->type, &dst));
    if (has_expected)
        RPC_CHECK(tier_check_expected(call, req->expected_version, TIER_EXPECT_VERSION));
    rel_target(call, src, req->type, dst);
    tier_pending_call *pc =
        tier_pending_new(call, "global", svc->env->audit, 1, tier_render_nothing, &resp->base);
    tier_async *op =
        pc ? global_delete_rel_async(&svc->store, pc->c, src, req->type, dst, has_expected,
                                     req->expected_version, tier_pending_done, pc)
           : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

/* ------------------------------------------------------------ Traverse */

grpc_status_code global_check_traverse(rpc_call *call, const global_service *svc,
                                       const char *prefix, const char *start_id, char *const *types,
                                       size_t ntypes, int direction, int max_depth,
                                       global_traverse_in *in) {
    char field[96];
    snprintf(field, sizeof field, "%sstart_id", prefix);
    in->start_id = start_id;
    RPC_CHECK(tier_check_id(call, field, &in->start_id, 0));
    if (ntypes > REL_TYPES_MAX)
        return rpc_call_invalid(call, "%srelationship_types: %zu; at most %d", prefix, ntypes,
                                REL_TYPES_MAX);
    for (size_t i = 0; i < ntypes; i++) {
        snprintf(field, sizeof field, "%srelationship_types[%zu]", prefix, i);
        RPC_CHECK(tier_check_name(call, field, types[i], GLOBAL_TYPE_MAX, 1));
    }
    in->types = (const char *const *)types;
    in->ntypes = ntypes;
    switch (direction) {
    case MEMORY__V1__EDGE_DIRECTION__EDGE_DIRECTION_UNSPECIFIED:
    case MEMORY__V1__EDGE_DIRECTION__EDGE_DIRECTION_OUT: in->dir = GLOBAL_DIR_OUT; break;
    case MEMORY__V1__EDGE_DIRECTION__EDGE_DIRECTION_IN: in->dir = GLOBAL_DIR_IN; break;
    case MEMORY__V1__EDGE_DIRECTION__EDGE_DIRECTION_BOTH: in->dir = GLOBAL_DIR_BOTH; break;
    default:
        return rpc_call_invalid(call, "%sdirection: %d is not a memory.v1.EdgeDirection", prefix,
                                direction);
    }
    in->max_depth = max_depth ? max_depth : DEFAULT_DEPTH;
    if (in->max_depth < 1 || in->max_depth > svc->max_depth)
        return rpc_call_invalid(call, "%smax_depth: %d; must be 1 to %d (0 = %d)", prefix,
                                max_depth, svc->max_depth, DEFAULT_DEPTH);
    return GRPC_STATUS_OK;
}

static grpc_status_code traverse_in(rpc_call *call, const global_service *svc,
                                    const Memory__V1__TraverseRequest *req,
                                    global_traverse_in *in) {
    RPC_CHECK(global_check_traverse(call, svc, "", req->start_id, req->relationship_types,
                                    req->n_relationship_types, (int)req->direction, req->max_depth,
                                    in));
    in->limit = req->limit ? req->limit : DEFAULT_LIMIT;
    if (in->limit < 1 || in->limit > TIER_PAGE_MAX)
        return rpc_call_invalid(call, "limit: %d; must be 1 to %d (0 = %d)", req->limit,
                                TIER_PAGE_MAX, DEFAULT_LIMIT);
    return GRPC_STATUS_OK;
}

static grpc_status_code render_traverse(tier_pending_call *pc) {
    const global_traverse_out *out = pc->out;
    Memory__V1__TraverseResponse *resp = (Memory__V1__TraverseResponse *)pc->resp;
    rpc_call *call = pc->call;
    arena *a = pc->c->ar;
    resp->nodes = arena_alloc(a, (out->nnodes + 1) * sizeof *resp->nodes);
    resp->edges = arena_alloc(a, (out->nedges + 1) * sizeof *resp->edges);
    if (!resp->nodes || !resp->edges) return rpc_call_oom(call);
    for (size_t i = 0; i < out->nnodes; i++) {
        Memory__V1__TraversalNode *n = arena_alloc(a, sizeof *n);
        if (!n) return rpc_call_oom(call);
        memory__v1__traversal_node__init(n);
        if (!(n->entity = global_render_entity(a, &out->nodes[i]))) return rpc_call_oom(call);
        n->depth = out->depths[i];
        resp->nodes[i] = n;
        tier_target(call, "entity:%s", out->nodes[i].id);
    }
    resp->n_nodes = out->nnodes;
    for (size_t i = 0; i < out->nedges; i++)
        if (!(resp->edges[i] = global_render_rel(a, &out->edges[i]))) return rpc_call_oom(call);
    resp->n_edges = out->nedges;
    resp->truncated = out->truncated;
    return GRPC_STATUS_OK;
}

/* On the event loop: two statements in one snapshot (global_store.h). */
RPC_UNARY_HANDLER(global_do_traverse, global_service, Memory__V1__TraverseRequest,
                  Memory__V1__TraverseResponse) {
    global_traverse_in in = {0};
    RPC_CHECK(traverse_in(call, svc, req, &in));
    tier_pending_call *pc = tier_pending_new(call, "global", NULL, sizeof(global_traverse_out),
                                             render_traverse, &resp->base);
    tier_async *op =
        pc ? global_traverse_async(&svc->store, pc->c, &in, pc->out, tier_pending_done, pc) : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}
