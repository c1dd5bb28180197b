/* global_entities: entities in PostgreSQL: PutEntity, GetEntity (and the
 * tenant-wide load behind the entity cache), DeleteEntity and
 * QueryEntities; see global_store.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/global/global_store_internal.h"
#include "service/tier/tier_sql_rank.h"

/* ------------------------------------------------------------ PutEntity */

static void lock_entity_sql(pgq_sql *b, const tier_ctx *c, const char *id) {
    pgq_sql_add(b,
                "SELECT owner, label, version FROM entities WHERE tenant = $%d AND id = $%d"
                " FOR UPDATE",
                pgq_text(b, principal_tenant(c->p)), pgq_text(b, id));
}

static void entity_lock(const global_put *g, const tier_ctx *c, pgq_sql *b) {
    lock_entity_sql(b, c, ((const global_entity_in *)g->in)->id);
}

static int entity_locked(global_put *g, tier_ctx *c, const PGresult *r) {
    (void)r;
    const global_entity_in *in = g->in;
    return tier_may_write(c, &g->row, in->has_expected, in->expected_version, "entity", in->id);
}

static void entity_write(const global_put *g, const tier_ctx *c, pgq_sql *b, int exists,
                         int label) {
    const global_entity_in *in = g->in;
    int p_tenant = pgq_text(b, principal_tenant(c->p));
    int p_id = pgq_text(b, in->id);
    int p_label = pgq_int4(b, label);
    int p_type = pgq_text(b, in->type);
    int p_name = pgq_text(b, in->name);
    int p_props = pgq_jsonb(b, in->properties_json);
    int p_pii = pgq_text_array(b, g->pii);
    /* The ranked document: the name and the string property values. */
    char cfg[128], doc[384];
    tier_sql_rank_cfg(b, g->lang, cfg, sizeof cfg);
    snprintf(doc, sizeof doc, "to_tsvector(%s, $%d) || jsonb_to_tsvector(%s, $%d, '[\"string\"]')",
             cfg, p_name, cfg, p_props);
    if (!exists)
        pgq_sql_add(b,
                    "INSERT INTO entities AS e (tenant, id, owner, label, entity_type, name,"
                    " properties, pii_kinds, version, created_at, updated_at, rank_doc)"
                    " VALUES ($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, 1, now(), now(), %s)"
                    " ON CONFLICT (tenant, id) DO NOTHING RETURNING " GLOBAL_E_COLS,
                    p_tenant, p_id, pgq_text(b, principal_sub(c->p)), p_label, p_type, p_name,
                    p_props, p_pii, doc);
    else
        pgq_sql_add(b,
                    "UPDATE entities AS e SET label = $%d, entity_type = $%d, name = $%d,"
                    " properties = $%d, pii_kinds = $%d, rank_doc = %s, version = e.version + 1,"
                    " updated_at = now() WHERE e.tenant = $%d AND e.id = $%d"
                    " RETURNING " GLOBAL_E_COLS,
                    p_label, p_type, p_name, p_props, p_pii, doc, p_tenant, p_id);
}

static int entity_written(global_put *g, tier_ctx *c, const PGresult *r) {
    return global_decode_entity(c, r, 0, g->out);
}

static const global_put_kind entity_put = {
    "entity", entity_lock, entity_locked, NULL, NULL, entity_write, entity_written,
};

tier_async *global_put_entity_async(global_store *s, tier_ctx *c, const global_entity_in *in,
                                    global_entity *out, int *created, tier_async_done_fn done,
                                    void *arg) {
    global_put g = {.k = &entity_put,
                    .lang = s->text_language,
                    .in = in,
                    .out = out,
                    .created = created,
                    .name = in->id,
                    .label = in->label};
    return global_put_start(c, &g, sizeof *in, in->pii_kinds, in->npii, done, arg);
}

/* ------------------------------------------------------------ GetEntity */

typedef struct {
    const char *id;
    int tenant_wide; /* the cache's load: no read diode (the cache applies it) */
    global_entity *out;
} get_entity_args;

void global_sql_get_entity(const tier_ctx *c, const char *id, pgq_sql *b) {
    pgq_sql_add(b, "SELECT " GLOBAL_E_COLS " FROM entities e WHERE ");
    tier_sql_read_diode(b, c, "e");
    pgq_sql_add(b, " AND e.id = $%d", pgq_text(b, id));
}

/* The entity in GetEntity's result: tenant_wide (the cache's load) checks
 * only the tenant, else the whole read diode. */
static int entity_of(tier_ctx *c, const PGresult *r, const char *id, int tenant_wide,
                     global_entity *out) {
    if (PQntuples(r) == 0) return tier_fail(c, STATUS_ENOTFOUND, "entity %s not found", id);
    return tenant_wide ? global_decode_entity_row(c, r, 0, out)
                       : global_decode_entity(c, r, 0, out);
}

static int decode_get_entity(tier_async *op, const PGresult *res) {
    get_entity_args *a = op->arg;
    return entity_of(op->c, res, a->id, a->tenant_wide, a->out);
}

tier_async *global_get_entity_async(global_store *s, tier_ctx *c, const char *id,
                                    global_entity *out, tier_async_done_fn done, void *arg) {
    (void)s;
    get_entity_args a = {id, 0, out};
    tier_async *op = tier_async_new(c, "get entity", decode_get_entity, &a, sizeof a, done, arg);
    if (op) global_sql_get_entity(c, id, &op->sql);
    return op;
}

tier_async *global_load_entity_async(global_store *s, tier_ctx *c, const char *id,
                                     global_entity *out, tier_async_done_fn done, void *arg) {
    (void)s;
    get_entity_args a = {id, 1, out};
    tier_async *op = tier_async_new(c, "load entity", decode_get_entity, &a, sizeof a, done, arg);
    if (op)
        pgq_sql_add(&op->sql,
                    "SELECT " GLOBAL_E_COLS " FROM entities e WHERE e.tenant = $%d AND e.id = $%d",
                    pgq_text(&op->sql, principal_tenant(c->p)), pgq_text(&op->sql, id));
    return op;
}

/* ------------------------------------------------------------ DeleteEntity */

static void entity_lock_key(const global_delete *d, const tier_ctx *c, pgq_sql *b) {
    lock_entity_sql(b, c, d->key);
}

/* Relationships touching it go with it (ON DELETE CASCADE), but only when
 * the caller may modify every one of them: one owned by another principal
 * (without global:write:all) or labelled above the caller's ceiling
 * refuses the delete instead of vanishing with it. Checked and deleted in
 * one statement under the entity's row lock, which a concurrent
 * PutRelationship's foreign-key check waits for. */
static void entity_delete_sql(const global_delete *d, const tier_ctx *c, pgq_sql *b) {
    int p_tenant = pgq_text(b, principal_tenant(c->p));
    int p_id = pgq_text(b, d->key);
    int p_sub = pgq_text(b, principal_sub(c->p));
    int p_all = pgq_bool(b, c->write_breadth == PRINCIPAL_ALL);
    pgq_sql_add(b,
                "DELETE FROM entities e WHERE e.tenant = $%d AND e.id = $%d AND NOT EXISTS ("
                "SELECT 1 FROM relationships r WHERE r.tenant = $%d"
                " AND (r.source_id = $%d OR r.target_id = $%d)"
                " AND (r.label > $%d OR (r.owner <> $%d AND NOT $%d))) RETURNING 1",
                p_tenant, p_id, p_tenant, p_id, p_id, pgq_int4(b, (int32_t)principal_clr(c->p)),
                p_sub, p_all);
}

tier_async *global_delete_entity_async(global_store *s, tier_ctx *c, const char *id,
                                       int has_expected, int64_t expected_version,
                                       tier_async_done_fn done, void *arg) {
    (void)s;
    global_delete d = {.what = "entity",
                       .name = id,
                       .key = id,
                       .has_expected = has_expected,
                       .expected = expected_version,
                       .lock_sql = entity_lock_key,
                       .delete_sql = entity_delete_sql,
                       .refusable = 1,
                       .refused_why = "has relationships the caller may not modify (another "
                                      "principal's, or labelled above its read ceiling); those "
                                      "must go first"};
    return global_delete_start(c, &d, done, arg);
}

/* ------------------------------------------------------------ QueryEntities */

typedef struct {
    global_query_in in;
    global_query_out *out;
} query_args;

/* The relevance of a text query, as SQL over alias e: BM25 when ranked
 * (rank_scores s, tier_sql_rank.h), else ts_rank of the web-search query. */
static const char *relevance_expr(const global_query_in *in) {
    return in->ranked ? "s.rank_score" : "ts_rank(e.search, websearch_to_tsquery('simple', $1))";
}

/* The sort key column for an order, as SQL over alias e. */
static const char *order_expr(const global_query_in *in) {
    switch (in->order) {
    case GLOBAL_ORDER_NAME: return "e.name";
    case GLOBAL_ORDER_CREATE_TIME: return "e.created_at";
    case GLOBAL_ORDER_UPDATE_TIME: return "e.updated_at";
    case GLOBAL_ORDER_RELEVANCE: return relevance_expr(in);
    default: return "e.id";
    }
}

/* Keyset condition: after the previous page's last entity. */
static void add_cursor(pgq_sql *b, const global_query_in *in, const char *key) {
    const char *cmp = in->descending ? "<" : ">";
    int p_id = pgq_text(b, in->after_id);
    switch (in->order) {
    case GLOBAL_ORDER_ID: pgq_sql_add(b, " AND e.id %s $%d", cmp, p_id); break;
    case GLOBAL_ORDER_NAME:
        pgq_sql_add(b, " AND (e.name, e.id) %s ($%d, $%d)", cmp, pgq_text(b, in->after_key), p_id);
        break;
    case GLOBAL_ORDER_CREATE_TIME:
    case GLOBAL_ORDER_UPDATE_TIME:
        /* Sent as a binary timestamptz: exact to the microsecond. */
        pgq_sql_add(b, " AND (%s, e.id) %s ($%d, $%d)", key, cmp,
                    pgq_ts(b, strtoll(in->after_key, NULL, 10)), p_id);
        break;
    case GLOBAL_ORDER_RELEVANCE:
        pgq_sql_add(b, " AND (%s, e.id) %s ($%d::real, $%d)", key, cmp, pgq_text(b, in->after_key),
                    p_id);
        break;
    }
}

/* Row i's sort key as text, for the next page's cursor. */
static int sort_key(tier_ctx *c, const PGresult *r, int i, const global_query_in *in,
                    const global_entity *e, const char **out) {
    char buf[48];
    int64_t us;
    float rank;
    if (in->order == GLOBAL_ORDER_RELEVANCE && in->ranked) {
        /* numeric text: read back exactly as the next page's cursor */
        *out = arena_strdup(c->ar, PQgetvalue(r, i, GLOBAL_E_NCOLS));
        return *out ? STATUS_OK : tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    switch (in->order) {
    case GLOBAL_ORDER_ID: *out = e->id; return STATUS_OK;
    case GLOBAL_ORDER_NAME: *out = e->name; return STATUS_OK;
    case GLOBAL_ORDER_CREATE_TIME:
    case GLOBAL_ORDER_UPDATE_TIME:
        if (pgq_col_ts(r, i, GLOBAL_E_NCOLS, &us) != 0)
            return tier_fail(c, STATUS_EINTERNAL, "unreadable sort key");
        snprintf(buf, sizeof buf, "%lld", (long long)us);
        break;
    case GLOBAL_ORDER_RELEVANCE:
        /* %.9g prints every float exactly enough to read it back. */
        if (pgq_col_float4(r, i, GLOBAL_E_NCOLS, &rank) != 0)
            return tier_fail(c, STATUS_EINTERNAL, "unreadable rank");
        snprintf(buf, sizeof buf, "%.9g", (double)rank);
        break;
    }
    *out = arena_strdup(c->ar, buf);
    return *out ? STATUS_OK : tier_fail(c, STATUS_ENOMEM, "out of memory");
}

/* The criteria besides the text query, as AND fragments over alias e. */
static int add_criteria(tier_ctx *c, const global_query_in *in, pgq_sql *b) {
    if (in->type[0]) pgq_sql_add(b, " AND e.entity_type = $%d", pgq_text(b, in->type));
    for (size_t i = 0; i < in->npreds; i++) {
        int rc = global_pred_sql(b, c->ar, i, &in->preds[i], c->err, sizeof c->err);
        if (rc == STATUS_ENOMEM) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        if (rc != 0) return STATUS_EINVALID;
    }
    if (in->nids) {
        const char *lit = pgq_array_literal(c->ar, in->ids, in->nids);
        if (!lit) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        pgq_sql_add(b, " AND e.id = ANY($%d)", pgq_text_array(b, lit));
    }
    return STATUS_OK;
}

/* The visible entities the criteria besides the text admit: FROM ...
 * WHERE over alias e. */
static int scope(tier_ctx *c, const global_query_in *in, pgq_sql *b) {
    pgq_sql_add(b, "entities e WHERE ");
    tier_sql_read_diode(b, c, "e");
    return add_criteria(c, in, b);
}

/* Ranked (tier_sql_rank.h): the candidates are those of the scope that
 * share a word with the text query, by their stored documents. */
static int ranked_head(tier_ctx *c, const global_query_in *in, pgq_sql *b, const char *lang) {
    tier_sql_rank_open(b, lang, in->text_query);
    int rc = scope(c, in, b);
    if (rc != STATUS_OK) return rc;
    tier_sql_rank_candidates(b);
    pgq_sql_add(b, "e.id, e.rank_doc FROM ");
    if ((rc = scope(c, in, b)) != STATUS_OK) return rc;
    pgq_sql_add(b, " AND e.rank_doc @@ " TIER_SQL_RANK_QUERY);
    tier_sql_rank_close(b, "id");
    return STATUS_OK;
}

/* After ranked_head: the page. By relevance, the best limit + 1
 * candidates after the cursor are found first and only they are read
 * whole; the relevance key goes out as text (numeric, read back exactly as
 * the next cursor). By another key, every scored candidate is read. */
static int ranked_select(tier_ctx *c, const global_query_in *in, pgq_sql *b, const char *key) {
    const char *dir = in->descending ? "DESC" : "ASC";
    int p_tenant = pgq_text(b, principal_tenant(c->p));
    if (in->order == GLOBAL_ORDER_RELEVANCE) {
        pgq_sql_add(b, "SELECT " GLOBAL_E_COLS ", top.rank_score::text, top.rank_score::float4 FROM"
                       " (SELECT s.id AS top_id, s.rank_score FROM rank_scores s WHERE true");
        if (in->after_id)
            pgq_sql_add(b, " AND (s.rank_score, s.id) %s ($%d::numeric, $%d)",
                        in->descending ? "<" : ">", pgq_text(b, in->after_key),
                        pgq_text(b, in->after_id));
        pgq_sql_add(b,
                    " ORDER BY s.rank_score %s, s.id %s LIMIT $%d) top JOIN entities e ON"
                    " e.tenant = $%d AND e.id = top.top_id ORDER BY top.rank_score %s, e.id %s",
                    dir, dir, pgq_int8(b, (int64_t)in->limit + 1), p_tenant, dir, dir);
        return STATUS_OK;
    }
    pgq_sql_add(b,
                "SELECT " GLOBAL_E_COLS ", %s, s.rank_score::float4 FROM rank_scores s"
                " JOIN entities e ON e.tenant = $%d AND e.id = s.id WHERE true",
                key, p_tenant);
    if (in->after_id) add_cursor(b, in, key);
    pgq_sql_add(b, " ORDER BY %s %s", key, dir);
    if (in->order != GLOBAL_ORDER_ID) pgq_sql_add(b, ", e.id %s", dir);
    pgq_sql_add(b, " LIMIT $%d", pgq_int8(b, (int64_t)in->limit + 1));
    return STATUS_OK;
}

int global_sql_query(tier_ctx *c, const global_query_in *in, pgq_sql *b, const char *lang) {
    const char *key = order_expr(in);
    int rc;
    if (in->ranked) {
        if ((rc = ranked_head(c, in, b, lang)) != STATUS_OK) return rc;
        return ranked_select(c, in, b, key);
    }
    /* $1 is the text query (used by the match and the rank). */
    pgq_text(b, in->text_query);
    pgq_sql_add(b, "SELECT " GLOBAL_E_COLS ", %s%s%s FROM entities e WHERE ", key,
                in->text_query[0] ? ", " : "", in->text_query[0] ? relevance_expr(in) : "");
    tier_sql_read_diode(b, c, "e");
    if (in->text_query[0]) pgq_sql_add(b, " AND e.search @@ websearch_to_tsquery('simple', $1)");
    if ((rc = add_criteria(c, in, b)) != STATUS_OK) return rc;
    if (in->after_id) add_cursor(b, in, key);
    const char *dir = in->descending ? "DESC" : "ASC";
    pgq_sql_add(b, " ORDER BY %s %s", key, dir);
    if (in->order != GLOBAL_ORDER_ID) pgq_sql_add(b, ", e.id %s", dir);
    pgq_sql_add(b, " LIMIT $%d", pgq_int8(b, (int64_t)in->limit + 1));
    return STATUS_OK;
}

static int decode_query(tier_async *op, const PGresult *r) {
    const query_args *a = op->arg;
    tier_ctx *c = op->c;
    int rows = PQntuples(r), take = rows < a->in.limit ? rows : a->in.limit;
    global_entity *v = arena_alloc(c->ar, ((size_t)take + 1) * sizeof *v);
    const char **keys = arena_alloc(c->ar, ((size_t)take + 1) * sizeof *keys);
    if (!v || !keys) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    float *scores = NULL;
    if (a->in.text_query[0] && !(scores = arena_alloc(c->ar, ((size_t)take + 1) * sizeof *scores)))
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; i < take; i++) {
        int rc = global_decode_entity(c, r, i, &v[i]);
        if (rc == STATUS_OK) rc = sort_key(c, r, i, &a->in, &v[i], &keys[i]);
        if (rc != STATUS_OK) return rc;
        /* the relevance follows the sort key */
        if (scores && pgq_col_float4(r, i, GLOBAL_E_NCOLS + 1, &scores[i]) != 0)
            return tier_fail(c, STATUS_EINTERNAL, "unreadable relevance");
    }
    *a->out = (global_query_out){v, keys, scores, (size_t)take, rows > take};
    return STATUS_OK;
}

tier_async *global_query_entities_async(global_store *s, tier_ctx *c, const global_query_in *in,
                                        global_query_out *out, tier_async_done_fn done, void *arg) {
    query_args a = {*in, out};
    tier_async *op = tier_async_new(c, "query entities", decode_query, &a, sizeof a, done, arg);
    return tier_async_built(op,
                            op ? global_sql_query(c, in, &op->sql, s->text_language) : STATUS_OK);
}
