/* router_service: memory.v1.Router's requests and the tier; see
 * router_service.h. A request becomes a router_query (the query of each
 * kind it has), checked against the token's scopes for the tiers that
 * answer those kinds, and runs (router_run.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/authn.h"
#include "service/core/text.h"
#include "service/router/router_internal.h"
#include "service/tier/tier_check.h"

#define LIMIT_MAX 1000
#define LIMIT_DEFAULT 10
#define USER_MAX 256
/* A recall's text: what the vector part checks further (its embedder's
 * bound) is at most this many characters. */
#define RECALL_TEXT_MAX 32768

/* Each kind's field in RouterQuery, for errors. */
static const char *const kind_field[TIER_ROUTE_KINDS] = {"vector_search", "graph_query",
                                                         "recent_lookup"};

static grpc_status_code check_limit(rpc_call *call, int32_t limit, int *out) {
    if (limit < 0 || limit > LIMIT_MAX)
        return rpc_call_invalid(call, "limit: %d; must be 1 to %d (0 = %d)", (int)limit, LIMIT_MAX,
                                LIMIT_DEFAULT);
    *out = limit ? limit : LIMIT_DEFAULT;
    return GRPC_STATUS_OK;
}

/* The token's breadth for a recall's part: PRINCIPAL_DENY when it may
 * not read that user's records of the tier. */
static principal_breadth recall_breadth(const principal *p, const char *scope, int other_user) {
    principal_breadth b = principal_scope(p, scope);
    return other_user && b != PRINCIPAL_ALL ? PRINCIPAL_DENY : b;
}

/* The scope kind's part needs: its tier's read scope, with `:all` for a
 * recall for another user. */
static const char *scope_of(arena *a, const tier_routable *rt, int other_user) {
    const char *s = rt ? rt->route->read_scope : "(no tier)";
    return other_user ? arena_printf(a, "%s:all", s) : s;
}

/* Checks q's parts against the tiers that answer them and the token's
 * scopes (a hybrid's part the token may not read is skipped, saying why),
 * then runs it. */
static grpc_status_code route(rpc_call *call, router_service *svc, router_query *q,
                              Memory__V1__RouterQueryResponse *resp) {
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    int other_user = q->recall && q->recall_user[0] && strcmp(q->recall_user, principal_sub(p));
    const char *scope[TIER_ROUTE_KINDS] = {0};
    int runs = 0;
    for (int k = 0; k < TIER_ROUTE_KINDS; k++) {
        const tier_routable *rt = router_route_of(svc->env, (tier_route_kind)k);
        if (!(scope[k] = scope_of(a, rt, other_user))) return rpc_call_oom(call);
        if (!q->part[k]) continue;
        if (!rt) {
            rpc_call_set_error(call, "%s: no tier of this server answers it", kind_field[k]);
            return GRPC_STATUS_UNIMPLEMENTED;
        }
        if (recall_breadth(p, rt->route->read_scope, other_user) != PRINCIPAL_DENY) {
            runs += !q->skip[k];
            continue;
        }
        if (!q->hybrid) {
            rpc_call_set_error(call, "%s needs the %s scope", kind_field[k], rt->route->read_scope);
            return GRPC_STATUS_PERMISSION_DENIED;
        }
        if (!(q->skip[k] = arena_printf(a, "the token lacks %s", scope[k])))
            return rpc_call_oom(call);
    }
    if (q->hybrid && !runs) {
        rpc_call_set_error(call, "%s needs %s or %s (it has neither)",
                           q->recall ? "recall" : "hybrid", scope[TIER_ROUTE_VECTOR],
                           scope[TIER_ROUTE_GRAPH]);
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    return router_run(call, svc, q, resp);
}

/* A request's query, normalised: INVALID_ARGUMENT when none or half a
 * hybrid is given. kind is the request's query_case (both messages number
 * their oneof alike: checked below). */
_Static_assert((int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_HYBRID ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_HYBRID &&
                   (int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_RECENT_LOOKUP ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_RECENT_LOOKUP &&
                   (int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_GRAPH_QUERY ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_GRAPH_QUERY &&
                   (int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_VECTOR_SEARCH ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_VECTOR_SEARCH &&
                   (int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_RECALL ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_RECALL,
               "RouterQueryRequest and RouterQueryStreamRequest number their query alike");
/* Kind k's query q of the request, its fields named with prefix. */
static void set_part(router_query *q, int k, const ProtobufCMessage *m, const char *prefix) {
    q->part[k] = m;
    q->prefix[k] = prefix;
}

/* A recall as the hybrid query it runs (router.proto's RecallQuery). */
static grpc_status_code recall_of(rpc_call *call, const Memory__V1__RecallQuery *rq,
                                  router_query *q) {
    if (!rq->text[0]) return rpc_call_invalid(call, "recall.text: required");
    /* Checked here, not only by the vector part: the graph part uses it
     * too. */
    RPC_CHECK(tier_check_text(call, "recall.text", rq->text, RECALL_TEXT_MAX));
    long uc = rq->user[0] ? text_name_chars(rq->user) : 0;
    if (uc < 0 || uc > USER_MAX)
        return rpc_call_invalid(call,
                                "recall.user: %s; a principal is 1 to %d printable characters",
                                uc < 0 ? "not printable UTF-8" : "too long", USER_MAX);
    arena *a = rpc_call_arena(call);
    Memory__V1__VectorSearchQuery *v =
        arena_message(a, &memory__v1__vector_search_query__descriptor);
    if (!v) return rpc_call_oom(call);
    v->collection = rq->collection;
    v->text = rq->text;
    v->filter = rq->filter;
    v->options = rq->options;
    v->with_payload = 1;
    const char *words = router_recall_words(a, rq->text);
    if (!words) return rpc_call_oom(call);
    if (words[0]) {
        Memory__V1__GraphQuery *g = arena_message(a, &memory__v1__graph_query__descriptor);
        if (!g) return rpc_call_oom(call);
        g->text_query = (char *)words;
        set_part(q, TIER_ROUTE_GRAPH, &g->base, "recall.");
    } else {
        q->skip[TIER_ROUTE_GRAPH] =
            "the text has no words (besides common ones) for the graph's full-text query";
    }
    q->hybrid = q->recall = 1;
    q->recall_user = rq->user;
    set_part(q, TIER_ROUTE_VECTOR, &v->base, "recall.");
    return GRPC_STATUS_OK;
}

static grpc_status_code query_of(rpc_call *call, int kind, const Memory__V1__VectorSearchQuery *v,
                                 const Memory__V1__GraphQuery *g,
                                 const Memory__V1__RecentLookupQuery *r,
                                 const Memory__V1__HybridQuery *h,
                                 const Memory__V1__RecallQuery *rc, int32_t limit,
                                 router_query *q) {
    memset(q, 0, sizeof *q);
    RPC_CHECK(check_limit(call, limit, &q->limit));
    switch (kind) {
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_VECTOR_SEARCH:
        set_part(q, TIER_ROUTE_VECTOR, &v->base, "vector_search.");
        break;
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_GRAPH_QUERY:
        set_part(q, TIER_ROUTE_GRAPH, &g->base, "graph_query.");
        break;
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_RECENT_LOOKUP:
        set_part(q, TIER_ROUTE_RECENT, &r->base, "recent_lookup.");
        break;
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_HYBRID:
        if (!h->vector_search) return rpc_call_invalid(call, "hybrid.vector_search: required");
        if (!h->graph_query) return rpc_call_invalid(call, "hybrid.graph_query: required");
        q->hybrid = 1;
        set_part(q, TIER_ROUTE_VECTOR, &h->vector_search->base, "hybrid.vector_search.");
        set_part(q, TIER_ROUTE_GRAPH, &h->graph_query->base, "hybrid.graph_query.");
        break;
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_RECALL: return recall_of(call, rc, q);
    default:
        return rpc_call_invalid(call, "query: required (set one of vector_search, graph_query, "
                                      "recent_lookup, hybrid, recall)");
    }
    return GRPC_STATUS_OK;
}

static RPC_UNARY_HANDLER(do_query, router_service, Memory__V1__RouterQueryRequest,
                         Memory__V1__RouterQueryResponse) {
    router_query q;
    RPC_CHECK(query_of(call, (int)req->query_case, req->vector_search, req->graph_query,
                       req->recent_lookup, req->hybrid, req->recall, req->limit, &q));
    return route(call, svc, &q, resp);
}

static grpc_status_code do_query_stream(rpc_call *call, const ProtobufCMessage *msg, void *arg) {
    const Memory__V1__RouterQueryStreamRequest *req =
        (const Memory__V1__RouterQueryStreamRequest *)msg;
    router_query q;
    RPC_CHECK(query_of(call, (int)req->query_case, req->vector_search, req->graph_query,
                       req->recent_lookup, req->hybrid, req->recall, req->limit, &q));
    return route(call, arg, &q, NULL);
}

/* ------------------------------------------------------------ the tier */

static int router_open(tier_env *env, void **state, char *err, size_t errlen) {
    router_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    if (!svc) return -1;
    (void)err, (void)errlen;
    svc->env = env; /* its routes: those of the tiers after it too */
    svc->default_deadline_ms = env->cfg ? env->cfg->router_default_deadline_ms : 5000;
    if (svc->default_deadline_ms <= 0) svc->default_deadline_ms = 5000;
    return 0;
}

static void router_free(void *state) { free(state); }

#define SVC "memory.v1.Router"
static const rpc_method methods[] = {
    RPC_METHOD_UNARY(SVC, "Query", memory__v1__router_query, "router:query", do_query),
    RPC_METHOD_SERVER_STREAM(SVC, "QueryStream", memory__v1__router_query_stream, "router:query",
                             do_query_stream),
};

static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG}};

const tier router_tier = {TIER_FIELDS("router", services, methods, router_open, router_free)};
