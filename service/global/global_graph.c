/* global_graph: relationships (PutRelationship, DeleteRelationship) and
 * Traverse, the breadth-first walk over them; see global_store.h. */
#include <stdlib.h>
#include <string.h>

#include "service/global/global_store_internal.h"

/* ------------------------------------------------------------ relationships */

static void lock_rel_sql(pgq_sql *b, const tier_ctx *c, const char *src, const char *type,
                         const char *dst) {
    pgq_sql_add(b,
                "SELECT owner, label, version FROM relationships WHERE tenant = $%d"
                " AND source_id = $%d AND rel_type = $%d AND target_id = $%d FOR UPDATE",
                pgq_text(b, principal_tenant(c->p)), pgq_text(b, src), pgq_text(b, type),
                pgq_text(b, dst));
}

static const char *rel_name(arena *a, const char *src, const char *type, const char *dst) {
    const char *s = arena_printf(a, "%s -[%s]-> %s", src, type, dst);
    return s ? s : "relationship";
}

static void rel_lock(const global_put *g, const tier_ctx *c, pgq_sql *b) {
    const global_rel_in *in = g->in;
    lock_rel_sql(b, c, in->source_id, in->type, in->target_id);
}

static int rel_locked(global_put *g, tier_ctx *c, const PGresult *r) {
    (void)r;
    const global_rel_in *in = g->in;
    return tier_may_write(c, &g->row, in->has_expected, in->expected_version, "relationship",
                          g->name);
}

/* Both ends visible to the caller, locked against a concurrent delete
 * (FOR KEY SHARE) until the relationship is written. */
static void rel_check(const global_put *g, const tier_ctx *c, pgq_sql *b) {
    const global_rel_in *in = g->in;
    pgq_sql_add(b, "SELECT e.id FROM entities e WHERE ");
    tier_sql_read_diode(b, c, "e");
    pgq_sql_add(b, " AND e.id IN ($%d, $%d) FOR KEY SHARE", pgq_text(b, in->source_id),
                pgq_text(b, in->target_id));
}

static int rel_checked(global_put *g, tier_ctx *c, const PGresult *r) {
    const global_rel_in *in = g->in;
    int have_src = 0, have_dst = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *id = PQgetvalue(r, i, 0);
        have_src |= strcmp(id, in->source_id) == 0;
        have_dst |= strcmp(id, in->target_id) == 0;
    }
    if (!have_src)
        return tier_fail(c, STATUS_ENOTFOUND, "source entity %s not found", in->source_id);
    if (!have_dst)
        return tier_fail(c, STATUS_ENOTFOUND, "target entity %s not found", in->target_id);
    return STATUS_OK;
}

static void rel_write(const global_put *g, const tier_ctx *c, pgq_sql *b, int exists, int label) {
    const global_rel_in *in = g->in;
    const char *pii = g->pii;
    int p_tenant = pgq_text(b, principal_tenant(c->p));
    int p_src = pgq_text(b, in->source_id);
    int p_type = pgq_text(b, in->type);
    int p_dst = pgq_text(b, in->target_id);
    int p_label = pgq_int4(b, label);
    int p_props = pgq_jsonb(b, in->properties_json);
    int p_pii = pgq_text_array(b, pii);
    if (!exists)
        pgq_sql_add(b,
                    "INSERT INTO relationships AS r (tenant, source_id, rel_type, target_id,"
                    " owner, label, properties, pii_kinds, version, created_at, updated_at)"
                    " VALUES ($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, 1, now(), now())"
                    " ON CONFLICT (tenant, source_id, rel_type, target_id) DO NOTHING"
                    " RETURNING " GLOBAL_R_COLS,
                    p_tenant, p_src, p_type, p_dst, pgq_text(b, principal_sub(c->p)), p_label,
                    p_props, p_pii);
    else
        pgq_sql_add(b,
                    "UPDATE relationships AS r SET label = $%d, properties = $%d,"
                    " pii_kinds = $%d, version = r.version + 1, updated_at = now()"
                    " WHERE r.tenant = $%d AND r.source_id = $%d AND r.rel_type = $%d"
                    " AND r.target_id = $%d RETURNING " GLOBAL_R_COLS,
                    p_label, p_props, p_pii, p_tenant, p_src, p_type, p_dst);
}

static int rel_written(global_put *g, tier_ctx *c, const PGresult *r) {
    return global_decode_rel(c, r, 0, g->out);
}

static const global_put_kind rel_put = {
    "relationship", rel_lock, rel_locked, rel_check, rel_checked, rel_write, rel_written,
};

tier_async *global_put_rel_async(global_store *s, tier_ctx *c, const global_rel_in *in,
                                 global_rel *out, int *created, tier_async_done_fn done,
                                 void *arg) {
    (void)s;
    global_put g = {.k = &rel_put,
                    .in = in,
                    .out = out,
                    .created = created,
                    .name = rel_name(c->ar, in->source_id, in->type, in->target_id),
                    .label = in->label};
    return global_put_start(c, &g, sizeof *in, in->pii_kinds, in->npii, done, arg);
}

/* A relationship's key, for its delete. */
typedef struct {
    const char *src, *type, *dst;
} rel_key;

static void rel_lock_key(const global_delete *d, const tier_ctx *c, pgq_sql *b) {
    const rel_key *k = d->key;
    lock_rel_sql(b, c, k->src, k->type, k->dst);
}

static void rel_delete_sql(const global_delete *d, const tier_ctx *c, pgq_sql *b) {
    const rel_key *k = d->key;
    int p_tenant = pgq_text(b, principal_tenant(c->p));
    int p_src = pgq_text(b, k->src);
    int p_type = pgq_text(b, k->type);
    pgq_sql_add(b,
                "DELETE FROM relationships WHERE tenant = $%d AND source_id = $%d"
                " AND rel_type = $%d AND target_id = $%d",
                p_tenant, p_src, p_type, pgq_text(b, k->dst));
}

tier_async *global_delete_rel_async(global_store *s, tier_ctx *c, const char *source_id,
                                    const char *type, const char *target_id, int has_expected,
                                    int64_t expected_version, tier_async_done_fn done, void *arg) {
    (void)s;
    rel_key *k = arena_alloc(c->ar, sizeof *k);
    if (!k) return NULL;
    *k = (rel_key){source_id, type, target_id};
    global_delete d = {.what = "relationship",
                       .name = rel_name(c->ar, source_id, type, target_id),
                       .key = k,
                       .has_expected = has_expected,
                       .expected = expected_version,
                       .lock_sql = rel_lock_key,
                       .delete_sql = rel_delete_sql};
    return global_delete_start(c, &d, done, arg);
}

/* ------------------------------------------------------------ Traverse */

typedef struct {
    global_traverse_in in;
    global_traverse_out *out;
    size_t max_response_bytes;
    int edges;              /* the second statement's result is next */
    global_query_in filter; /* in.filter's copy, narrowed to the walk's ids */
} traverse_args;

/* One direction's neighbours of the frontier w.frontier as rows (nid),
 * through relationships the caller may see. */
static void add_neighbours(pgq_sql *b, const tier_ctx *c, const char *from, const char *to,
                           int p_types) {
    pgq_sql_add(b, "SELECT r.%s AS nid FROM relationships r WHERE ", to);
    tier_sql_read_diode(b, c, "r");
    pgq_sql_add(b, " AND r.%s = ANY(w.frontier)", from);
    if (p_types) pgq_sql_add(b, " AND r.rel_type = ANY($%d)", p_types);
}

int global_sql_traverse(const tier_ctx *c, const global_traverse_in *in, pgq_sql *b) {
    int p_types = 0;
    if (in->ntypes) {
        const char *lit = pgq_array_literal(c->ar, in->types, in->ntypes);
        if (!lit) return -1;
        p_types = pgq_text_array(b, lit);
    }
    int p_max = pgq_int4(b, in->max_depth);
    int p_lim = pgq_int4(b, in->limit);
    /* Each row of `walk` is one BFS level: its depth, its entities
     * (frontier) and every entity seen so far (visited). The next level is
     * the visible neighbours of the frontier not yet visited, at most
     * limit + 1 of them by id (more could never be returned), so the walk
     * is cycle-safe, finds each entity at its shortest depth, and stops
     * once more than limit entities are known. The OFFSET 0 fences keep
     * the planner from evaluating the level's subquery twice and from
     * hash-joining the result against the whole entities table. */
    pgq_sql_add(b, "WITH RECURSIVE walk(depth, frontier, visited) AS ("
                   " SELECT 0, ARRAY[e.id], ARRAY[e.id] FROM entities e WHERE ");
    tier_sql_read_diode(b, c, "e");
    pgq_sql_add(b, " AND e.id = $%d", pgq_text(b, in->start_id));
    pgq_sql_add(b, " UNION ALL"
                   " SELECT w.depth + 1, nxt.ids, w.visited || nxt.ids FROM walk w,"
                   " LATERAL (SELECT ARRAY(SELECT DISTINCT nb.id FROM (");
    if (in->dir == GLOBAL_DIR_OUT || in->dir == GLOBAL_DIR_BOTH)
        add_neighbours(b, c, "source_id", "target_id", p_types);
    if (in->dir == GLOBAL_DIR_BOTH) pgq_sql_add(b, " UNION ALL ");
    if (in->dir == GLOBAL_DIR_IN || in->dir == GLOBAL_DIR_BOTH)
        add_neighbours(b, c, "target_id", "source_id", p_types);
    pgq_sql_add(b, ") n JOIN entities nb ON nb.id = n.nid AND ");
    tier_sql_read_diode(b, c, "nb");
    pgq_sql_add(b,
                " WHERE NOT nb.id = ANY(w.visited) ORDER BY nb.id LIMIT $%d + 1) AS ids"
                " OFFSET 0) nxt"
                " WHERE w.depth < $%d AND cardinality(w.frontier) > 0"
                " AND cardinality(w.visited) <= $%d)"
                " SELECT " GLOBAL_E_COLS ", x.depth FROM (SELECT depth, unnest(frontier) AS id"
                " FROM walk) x, LATERAL (SELECT * FROM entities e WHERE e.tenant = $%d"
                " AND e.id = x.id OFFSET 0) e ORDER BY x.depth, x.id LIMIT $%d + 1",
                p_lim, p_max, p_lim, pgq_text(b, principal_tenant(c->p)), p_lim);
    return 0;
}

int global_sql_traverse_edges(const tier_ctx *c, const global_traverse_in *in,
                              const char *const *ids, size_t n, pgq_sql *b) {
    const char *lit = pgq_array_literal(c->ar, ids, n);
    if (!lit) return -1;
    int p_ids = pgq_text_array(b, lit);
    pgq_sql_add(b, "SELECT " GLOBAL_R_COLS ", octet_length(r.properties::text)"
                   " FROM relationships r WHERE ");
    tier_sql_read_diode(b, c, "r");
    pgq_sql_add(b, " AND r.source_id = ANY($%d) AND r.target_id = ANY($%d)", p_ids, p_ids);
    if (in->ntypes) {
        const char *types = pgq_array_literal(c->ar, in->types, in->ntypes);
        if (!types) return -1;
        pgq_sql_add(b, " AND r.rel_type = ANY($%d)", pgq_text_array(b, types));
    }
    pgq_sql_add(b, " ORDER BY r.source_id, r.rel_type, r.target_id");
    return 0;
}

/* The walk's entities, at most limit of them (truncated when more). */
static int walk_nodes(tier_ctx *c, const PGresult *r, const global_traverse_in *in,
                      global_traverse_out *out, const char ***ids) {
    int rows = PQntuples(r);
    if (rows == 0) return tier_fail(c, STATUS_ENOTFOUND, "entity %s not found", in->start_id);
    int take = rows < in->limit ? rows : in->limit;
    out->truncated = rows > take;
    out->nodes = arena_alloc(c->ar, (size_t)take * sizeof *out->nodes);
    out->depths = arena_alloc(c->ar, (size_t)take * sizeof *out->depths);
    *ids = arena_alloc(c->ar, (size_t)take * sizeof **ids);
    if (!out->nodes || !out->depths || !*ids) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; i < take; i++) {
        int64_t depth;
        int rc = global_decode_entity(c, r, i, &out->nodes[i]);
        if (rc != STATUS_OK) return rc;
        if (pgq_col_int(r, i, GLOBAL_E_NCOLS, &depth) != 0)
            return tier_fail(c, STATUS_EINTERNAL, "unreadable depth");
        out->depths[i] = (int)depth;
        (*ids)[i] = out->nodes[i].id;
    }
    out->nnodes = (size_t)take;
    return STATUS_OK;
}

/* The edges among the walk's entities, while they fit the byte budget. */
static int walk_edges(tier_ctx *c, const PGresult *r, size_t budget, global_traverse_out *out) {
    int nrel = PQntuples(r);
    out->edges = arena_alloc(c->ar, ((size_t)nrel + 1) * sizeof *out->edges);
    if (!out->edges) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    size_t bytes = 0;
    for (int i = 0; i < nrel; i++) {
        int64_t plen = 0;
        pgq_col_int(r, i, 11, &plen);
        bytes += (size_t)plen + (size_t)PQgetlength(r, i, 1) + (size_t)PQgetlength(r, i, 2) +
                 (size_t)PQgetlength(r, i, 3) + 64;
        if (bytes > budget) {
            out->truncated = 1;
            break;
        }
        int rc = global_decode_rel(c, r, i, &out->edges[out->nedges]);
        if (rc != STATUS_OK) return rc;
        out->nedges++;
    }
    return STATUS_OK;
}

/* A row of the filter query, by id. */
typedef struct {
    const char *id;
    int row;
} matched;

static int by_id(const void *x, const void *y) {
    return strcmp(((const matched *)x)->id, ((const matched *)y)->id);
}

/* Keeps the walk's entities the filter query returned (rows of
 * global_sql_query: the entity columns, then the sort key), in the walk's
 * order, with their full-text rank when the filter has a text query. The
 * rows are sorted by id and each entity looked up in them: n log n on the
 * loop thread, for up to TIER_PAGE_MAX entities. */
static int walk_filtered(tier_ctx *c, const PGresult *r, const global_query_in *filter,
                         global_traverse_out *out) {
    int rows = PQntuples(r), text = filter->text_query[0] != 0;
    matched *m = arena_alloc(c->ar, ((size_t)rows + 1) * sizeof *m);
    if (!m || (text && !(out->ranks = arena_alloc(c->ar, (out->nnodes + 1) * sizeof *out->ranks))))
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (int row = 0; row < rows; row++) m[row] = (matched){PQgetvalue(r, row, 1), row};
    qsort(m, (size_t)rows, sizeof *m, by_id);
    size_t kept = 0;
    for (size_t i = 0; i < out->nnodes; i++) {
        matched key = {out->nodes[i].id, 0};
        const matched *hit = bsearch(&key, m, (size_t)rows, sizeof *m, by_id);
        if (!hit) continue;
        float rank = 0;
        if (text && pgq_col_float4(r, hit->row, GLOBAL_E_NCOLS, &rank) != 0)
            return tier_fail(c, STATUS_EINTERNAL, "unreadable rank");
        out->nodes[kept] = out->nodes[i];
        out->depths[kept] = out->depths[i];
        if (text) out->ranks[kept] = rank;
        kept++;
    }
    out->nnodes = kept;
    return STATUS_OK;
}

/* The walk, then the edges among the entities it returned (or, with a
 * filter, those of them matching it), in one read-only snapshot: two
 * round trips on the same connection, the second ending the transaction. */
static int decode_traverse(tier_async *op, const PGresult *r) {
    traverse_args *a = op->arg;
    if (a->edges)
        return a->in.filter ? walk_filtered(op->c, r, &a->filter, a->out)
                            : walk_edges(op->c, r, a->max_response_bytes, a->out);
    const char **ids = NULL;
    int rc = walk_nodes(op->c, r, &a->in, a->out, &ids);
    if (rc != STATUS_OK) return rc;
    a->edges = 1;
    if (a->in.filter) {
        a->filter = *a->in.filter;
        a->filter.ids = ids;
        a->filter.nids = a->out->nnodes;
        a->filter.after_id = NULL;
        a->filter.order = a->filter.text_query[0] ? GLOBAL_ORDER_RELEVANCE : GLOBAL_ORDER_ID;
        a->filter.limit = (int)a->out->nnodes;
        a->filter.ranked = 0; /* a traversal's filter matches strictly: no language */
        rc = global_sql_query(op->c, &a->filter, tier_async_next(op, "filter traversal", "COMMIT"),
                              NULL);
        return rc == STATUS_OK ? TIER_NEXT : rc;
    }
    pgq_sql *b = tier_async_next(op, "traverse edges", "COMMIT");
    if (global_sql_traverse_edges(op->c, &a->in, ids, a->out->nnodes, b) != 0)
        return tier_fail(op->c, STATUS_ENOMEM, "out of memory");
    return TIER_NEXT;
}

tier_async *global_traverse_async(global_store *s, tier_ctx *c, const global_traverse_in *in,
                                  global_traverse_out *out, tier_async_done_fn done, void *arg) {
    traverse_args a = {*in, out, s->max_response_bytes, 0, {0}};
    tier_async *op = tier_async_new(c, "traverse", decode_traverse, &a, sizeof a, done, arg);
    if (!op) return NULL;
    tier_async_begin(op, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    int rc = global_sql_traverse(c, in, &op->sql) == 0
                 ? STATUS_OK
                 : tier_fail(c, STATUS_ENOMEM, "out of memory");
    return tier_async_built(op, rc);
}
