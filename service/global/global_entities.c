/* global_entities: entities in PostgreSQL: PutEntity, GetEntity (and the
 * tenant-wide load behind the entity cache), DeleteEntity and
 * QueryEntities; see global_store.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/global/global_store_internal.h"

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
    if (!exists)
        pgq_sql_add(b,
                    "INSERT INTO entities AS e (tenant, id, owner, label, entity_type, name,"
                    " properties, pii_kinds, version, created_at, updated_at)"
                    " VALUES ($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, 1, now(), now())"
                    " ON CONFLICT (tenant, id) DO NOTHING RETURNING " GLOBAL_E_COLS,
                    p_tenant, p_id, pgq_text(b, principal_sub(c->p)), p_label, p_type, p_name,
                    p_props, p_pii);
    else
        pgq_sql_add(b,
                    "UPDATE entities AS e SET label = $%d, entity_type = $%d, name = $%d,"
                    " properties = $%d, pii_kinds = $%d, version = e.version + 1,"
                    " updated_at = now() WHERE e.tenant = $%d AND e.id = $%d"
                    " RETURNING " GLOBAL_E_COLS,
                    p_label, p_type, p_name, p_props, p_pii, p_tenant, p_id);
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
    (void)s;
    global_put g = {.k = &entity_put,
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

/* The sort key column for an order, as SQL over alias e. */
static const char *order_expr(global_order o) {
    switch (o) {
    case GLOBAL_ORDER_NAME: return "e.name";
    case GLOBAL_ORDER_CREATE_TIME: return "e.created_at";
    case GLOBAL_ORDER_UPDATE_TIME: return "e.updated_at";
    case GLOBAL_ORDER_RELEVANCE: return "ts_rank(e.search, websearch_to_tsquery('simple', $1))";
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
static int sort_key(tier_ctx *c, const PGresult *r, int i, global_order order,
                    const global_entity *e, const char **out) {
    char buf[48];
    int64_t us;
    float rank;
    switch (order) {
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

int global_sql_query(tier_ctx *c, const global_query_in *in, pgq_sql *b) {
    /* $1 is always the text query (used by the match and the rank). */
    pgq_text(b, in->text_query);
    const char *key = order_expr(in->order);
    pgq_sql_add(b, "SELECT " GLOBAL_E_COLS ", %s FROM entities e WHERE ", key);
    tier_sql_read_diode(b, c, "e");
    if (in->type[0]) pgq_sql_add(b, " AND e.entity_type = $%d", pgq_text(b, in->type));
    if (in->text_query[0]) pgq_sql_add(b, " AND e.search @@ websearch_to_tsquery('simple', $1)");
    for (size_t i = 0; i < in->npreds; i++) {
        int rc = global_pred_sql(b, c->ar, i, &in->preds[i], c->err, sizeof c->err);
        if (rc == -2) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        if (rc != 0) return STATUS_EINVALID;
    }
    if (in->nids) {
        const char *lit = pgq_array_literal(c->ar, in->ids, in->nids);
        if (!lit) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        pgq_sql_add(b, " AND e.id = ANY($%d)", pgq_text_array(b, lit));
    }
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
    for (int i = 0; i < take; i++) {
        int rc = global_decode_entity(c, r, i, &v[i]);
        if (rc == STATUS_OK) rc = sort_key(c, r, i, a->in.order, &v[i], &keys[i]);
        if (rc != STATUS_OK) return rc;
    }
    *a->out = (global_query_out){v, keys, (size_t)take, rows > take};
    return STATUS_OK;
}

tier_async *global_query_entities_async(global_store *s, tier_ctx *c, const global_query_in *in,
                                        global_query_out *out, tier_async_done_fn done, void *arg) {
    (void)s;
    query_args a = {*in, out};
    tier_async *op = tier_async_new(c, "query entities", decode_query, &a, sizeof a, done, arg);
    return tier_async_built(op, op ? global_sql_query(c, in, &op->sql) : STATUS_OK);
}
