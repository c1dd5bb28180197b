/* global_router: GlobalMemory's part of a routed query (router.proto's
 * GraphQuery, tier_route.h): an entity query (type, predicates, full text;
 * best rank first with a text query, else by id), or, with start_id, a
 * traversal whose entities are then filtered by those criteria (by depth,
 * then id), run as GlobalMemory runs its own queries (the same statements,
 * the same read diode in them and on every row). A result's score is the
 * full-text rank with a text query, else 1 / (1 + depth). */
#include <stdlib.h>

#include "service/global/global_service_internal.h"

typedef struct global_graph {
    global_service *svc;
    tier_ctx *c;
    tier_async *op;
    int traverse;
    int limit;
    global_query_in q;
    global_traverse_in t;
    global_query_out qout;
    global_traverse_out tout;
    tier_route_answer *ans;
    tier_route_done done;
    void *done_arg;
} global_graph;

/* One entity found: its depth from start_id (0 without a traversal), its
 * score, and which of the store's entities it is. */
typedef struct graph_hit {
    int depth;
    double score;
    size_t at;
} graph_hit;

static void graph_done(void *arg, int rc);

static grpc_status_code graph_prepare(void *state, rpc_call *call, const char *prefix,
                                      const ProtobufCMessage *query, int limit, tier_ctx *c,
                                      tier_route_answer *ans, tier_route_done done, void *arg,
                                      void **out) {
    global_service *svc = state;
    const Memory__V1__GraphQuery *q = (const Memory__V1__GraphQuery *)query;
    global_graph *g = arena_zalloc(c->ar, sizeof *g);
    if (!g) return rpc_call_oom(call);
    g->svc = svc;
    g->c = c;
    g->limit = limit;
    g->ans = ans;
    g->done = done;
    g->done_arg = arg;
    RPC_CHECK(global_check_query(call, prefix, q->entity_type, q->text_query, q->predicates,
                                 q->n_predicates, &g->q));
    g->q.limit = limit;
    g->traverse = q->start_id[0] != 0;
    if (g->traverse) {
        RPC_CHECK(global_check_traverse(call, svc, prefix, q->start_id, q->relationship_types,
                                        q->n_relationship_types, (int)q->direction, q->max_depth,
                                        &g->t));
        /* The walk explores as far as a page may reach; the filter then
         * keeps what matches and the hits are cut to limit. */
        g->t.limit = TIER_PAGE_MAX;
        g->t.filter = &g->q;
        g->op = global_traverse_async(&svc->store, c, &g->t, &g->tout, graph_done, g);
    } else {
        /* Best first: by rank with a text query, else by id. */
        g->q.order = g->q.text_query[0] ? GLOBAL_ORDER_RELEVANCE : GLOBAL_ORDER_ID;
        g->q.descending = g->q.text_query[0] != 0;
        g->op = global_query_entities_async(&svc->store, c, &g->q, &g->qout, graph_done, g);
    }
    if (!g->op) return rpc_call_oom(call);
    *out = g;
    return GRPC_STATUS_OK;
}

static void graph_start(void *part) {
    global_graph *g = part;
    tier_async_submit(&g->svc->store, g->op);
}

static void graph_cancel(void *part) {
    global_graph *g = part;
    tier_async_cancel(&g->svc->store, g->op);
}

/* Best score first, ties in the store's order (depth, then id): an
 * insertion sort, stable, over at most TIER_PAGE_MAX hits. */
static void sort_by_score(graph_hit *h, size_t n) {
    for (size_t i = 1; i < n; i++) {
        graph_hit x = h[i];
        size_t j = i;
        for (; j > 0 && h[j - 1].score < x.score; j--) h[j] = h[j - 1];
        h[j] = x;
    }
}

/* The entities found as the answer's results, best first, each named
 * for the audit row: 0, or -1 when out of memory. */
static int graph_answer(global_graph *g) {
    arena *a = g->c->ar;
    const global_entity *ents = g->traverse ? g->tout.nodes : g->qout.ents;
    size_t n = g->traverse ? g->tout.nnodes : g->qout.n;
    graph_hit *h = arena_alloc(a, (n + 1) * sizeof *h);
    if (!h) return -1;
    int text = g->q.text_query[0] != 0;
    for (size_t i = 0; i < n; i++) {
        h[i].at = i;
        h[i].depth = g->traverse ? g->tout.depths[i] : 0;
        if (text)
            h[i].score = g->traverse ? (double)g->tout.ranks[i] : strtod(g->qout.keys[i], NULL);
        else h[i].score = 1.0 / (1.0 + h[i].depth);
    }
    /* Entity queries come best first from the store; a traversal with a
     * text query is ranked here. Only the hits kept are rendered. */
    if (g->traverse && text) sort_by_score(h, n);
    if (n > (size_t)g->limit) n = (size_t)g->limit;
    tier_route_answer *ans = g->ans;
    if (!(ans->results = arena_alloc(a, (n + 1) * sizeof *ans->results)) ||
        !(ans->targets = arena_alloc(a, (n + 1) * sizeof *ans->targets)))
        return -1;
    for (size_t i = 0; i < n; i++) {
        Memory__V1__RouterResult *r =
            tier_route_result(a, MEMORY__V1__TIER__TIER_GLOBAL, 0, h[i].score);
        if (!r || !(r->entity = global_render_entity(a, &ents[h[i].at]))) return -1;
        r->record_case = MEMORY__V1__ROUTER_RESULT__RECORD_ENTITY;
        r->depth = h[i].depth;
        if (!(ans->targets[i] = arena_printf(a, "entity:%s", r->entity->id))) return -1;
        ans->results[i] = r;
    }
    ans->n = ans->ntargets = n;
    return 0;
}

/* The statement ended (loop thread). */
static void graph_done(void *arg, int rc) {
    global_graph *g = arg;
    if (rc == STATUS_OK && graph_answer(g) != 0)
        rc = tier_fail(g->c, STATUS_ENOMEM, "out of memory");
    g->done(g->done_arg, rc);
}

const tier_route global_route = {
    .kind = TIER_ROUTE_GRAPH,
    .tier = MEMORY__V1__TIER__TIER_GLOBAL,
    .label = "global memory",
    .ctx_tier = "global",
    .read_scope = "global:read",
    .prepare = graph_prepare,
    .start = graph_start,
    .cancel = graph_cancel,
};
