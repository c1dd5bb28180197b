/* global_router: GlobalMemory's part of a routed query (router.proto's
 * GraphQuery); see global_service.h. */
#include <stdlib.h>

#include "service/global/global_service_internal.h"

struct global_graph {
    global_service *svc;
    tier_ctx *c;
    tier_async *op;
    int traverse;
    int limit;
    global_query_in q;
    global_traverse_in t;
    global_query_out qout;
    global_traverse_out tout;
};

grpc_status_code global_graph_prepare(struct global_service *svc, rpc_call *call,
                                      const char *prefix, const Memory__V1__GraphQuery *q,
                                      int limit, tier_ctx *c, void (*done)(void *arg, int rc),
                                      void *arg, global_graph **out) {
    global_graph *g = arena_zalloc(c->ar, sizeof *g);
    if (!g) return rpc_call_oom(call);
    g->svc = svc;
    g->c = c;
    g->limit = limit;
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
        g->op = global_traverse_async(&svc->store, c, &g->t, &g->tout, done, arg);
    } else {
        /* Best first: by rank with a text query, else by id. */
        g->q.order = g->q.text_query[0] ? GLOBAL_ORDER_RELEVANCE : GLOBAL_ORDER_ID;
        g->q.descending = g->q.text_query[0] != 0;
        g->op = global_query_entities_async(&svc->store, c, &g->q, &g->qout, done, arg);
    }
    if (!g->op) return rpc_call_oom(call);
    *out = g;
    return GRPC_STATUS_OK;
}

void global_graph_submit(global_graph *g) { tier_async_submit(&g->svc->store, g->op); }

void global_graph_cancel(global_graph *g) { tier_async_cancel(&g->svc->store, g->op); }

/* Best score first, ties in the store's order (depth, then id), moving
 * each hit's entity index along: an insertion sort, stable, over at most
 * TIER_PAGE_MAX hits. */
static void sort_by_score(global_graph_hit *h, size_t *at, size_t n) {
    for (size_t i = 1; i < n; i++) {
        global_graph_hit x = h[i];
        size_t xat = at[i], j = i;
        for (; j > 0 && h[j - 1].score < x.score; j--) h[j] = h[j - 1], at[j] = at[j - 1];
        h[j] = x, at[j] = xat;
    }
}

long global_graph_hits(global_graph *g, arena *a, global_graph_hit **hits) {
    const global_entity *ents = g->traverse ? g->tout.nodes : g->qout.ents;
    size_t n = g->traverse ? g->tout.nnodes : g->qout.n;
    global_graph_hit *h = arena_alloc(a, (n + 1) * sizeof *h);
    size_t *at = arena_alloc(a, (n + 1) * sizeof *at); /* each hit's entity */
    if (!h || !at) return -1;
    int text = g->q.text_query[0] != 0;
    for (size_t i = 0; i < n; i++) {
        at[i] = i;
        h[i].depth = g->traverse ? g->tout.depths[i] : 0;
        if (text)
            h[i].score = g->traverse ? (double)g->tout.ranks[i] : strtod(g->qout.keys[i], NULL);
        else h[i].score = 1.0 / (1.0 + h[i].depth);
    }
    /* Entity queries come best first from the store; a traversal with a
     * text query is ranked here. Only the hits kept are rendered. */
    if (g->traverse && text) sort_by_score(h, at, n);
    if (n > (size_t)g->limit) n = (size_t)g->limit;
    for (size_t i = 0; i < n; i++)
        if (!(h[i].entity = global_render_entity(a, &ents[at[i]]))) return -1;
    *hits = h;
    return (long)n;
}
