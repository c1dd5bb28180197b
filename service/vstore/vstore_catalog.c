/* vstore_catalog: collections in PostgreSQL (migration 6). */
#include "service/vstore/vstore_catalog.h"

#include <string.h>

#include "service/store/pgq.h"
#include "service/tier/tier_sql.h"

#define COLS "c.cid, c.name, c.dims, c.distance, c.owner, c.created_at, c.embedder_model"

typedef struct call {
    const char *name;
    int dims, distance;
    const char *model;
    int64_t cid;
    const char **recorded;
    int *recorded_dims;
    vstore_catalog_hook hook;
    void *arg;
    const char *after;
    size_t limit;
    vs_collection *out;
    vs_collection **list;
    size_t *n;
} call;

static int decode(tier_ctx *c, const PGresult *r, int row, vs_collection *out) {
    int64_t dims, distance;
    memset(out, 0, sizeof *out);
    out->name = pgq_col_str(c->ar, r, row, 1);
    out->owner = pgq_col_str(c->ar, r, row, 4);
    if (pgq_col_int(r, row, 0, &out->cid) != 0 || !out->name || !out->owner ||
        pgq_col_int(r, row, 2, &dims) != 0 || pgq_col_int(r, row, 3, &distance) != 0 ||
        pgq_col_ts(r, row, 5, &out->created_us) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "unexpected episodic_collections row");
    out->dims = (int)dims;
    out->distance = (int)distance;
    if (!PQgetisnull(r, row, 6) && !(out->embedder_model = pgq_col_str(c->ar, r, row, 6)))
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    return STATUS_OK;
}

/* The collection r returned, which it then frees (no row: missing with
 * "collection <name> <why>"). */
static int one_row(tier_ctx *c, PGresult *r, const call *a, int missing, const char *why,
                   vs_collection *out) {
    int rc = PQntuples(r) == 0 ? tier_fail(c, missing, "collection %s %s", a->name, why)
                               : decode(c, r, 0, out);
    PQclear(r);
    return rc;
}

/* The end of a write: the caller's hook joins its transaction; COMMIT. */
static int hook_commit(pgq_session *ss, tier_ctx *c, const call *a, int rc, vs_collection *col) {
    if (rc == STATUS_OK && a->hook) rc = a->hook(c, col, a->arg);
    return rc == STATUS_OK ? tier_sql_commit(ss, c) : rc;
}

static int create_fn(pgq_session *ss, tier_ctx *c, void *arg) {
    call *a = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "INSERT INTO episodic_collections AS c (tenant, name, dims, distance, owner, "
                "created_at, embedder_model) VALUES ($%d, $%d, $%d, $%d, $%d, now(), "
                "NULLIF($%d, '')) ON CONFLICT (tenant, name) DO NOTHING RETURNING " COLS,
                pgq_text(&b, principal_tenant(c->p)), pgq_text(&b, a->name), pgq_int4(&b, a->dims),
                pgq_int4(&b, a->distance), pgq_text(&b, principal_sub(c->p)),
                pgq_text(&b, a->model ? a->model : ""));
    PGresult *r;
    int rc = pgq_pipeline(ss, "create collection", "BEGIN", &b, 0, &r);
    if (rc != STATUS_OK) return rc;
    rc = one_row(c, r, a, STATUS_EEXISTS, "already exists", a->out);
    return hook_commit(ss, c, a, rc, a->out);
}

static int get_fn(pgq_session *ss, tier_ctx *c, void *arg) {
    call *a = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "SELECT " COLS " FROM episodic_collections c WHERE c.tenant = $%d AND c.name = $%d",
                pgq_text(&b, principal_tenant(c->p)), pgq_text(&b, a->name));
    PGresult *r;
    int rc = pgq_pipeline(ss, "get collection", NULL, &b, 1, &r);
    return rc == STATUS_OK ? one_row(c, r, a, STATUS_ENOTFOUND, "not found", a->out) : rc;
}

static int claim_fn(pgq_session *ss, tier_ctx *c, void *arg) {
    call *a = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "UPDATE episodic_collections c SET embedder_model = "
                "COALESCE(c.embedder_model, $%d) WHERE c.tenant = $%d AND c.cid = $%d "
                "RETURNING c.embedder_model",
                pgq_text(&b, a->model), pgq_text(&b, principal_tenant(c->p)), pgq_int8(&b, a->cid));
    PGresult *r;
    int rc = pgq_pipeline(ss, "record embedder model", NULL, &b, 1, &r);
    if (rc != STATUS_OK) return rc;
    if (PQntuples(r) == 0)
        rc = tier_fail(c, STATUS_ENOTFOUND, "collection %s was deleted meanwhile", a->name);
    else if (!(*a->recorded = pgq_col_str(c->ar, r, 0, 0)))
        rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    PQclear(r);
    return rc;
}

static int claim_dims_fn(pgq_session *ss, tier_ctx *c, void *arg) {
    call *a = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "UPDATE episodic_collections c SET dims = CASE WHEN c.dims = 0 THEN $%d "
                "ELSE c.dims END WHERE c.tenant = $%d AND c.cid = $%d RETURNING c.dims",
                pgq_int4(&b, a->dims), pgq_text(&b, principal_tenant(c->p)), pgq_int8(&b, a->cid));
    PGresult *r;
    int rc = pgq_pipeline(ss, "record dims", NULL, &b, 1, &r);
    if (rc != STATUS_OK) return rc;
    int64_t dims;
    if (PQntuples(r) == 0)
        rc = tier_fail(c, STATUS_ENOTFOUND, "collection %s was deleted meanwhile", a->name);
    else if (pgq_col_int(r, 0, 0, &dims) != 0)
        rc = tier_fail(c, STATUS_EINTERNAL, "unexpected episodic_collections.dims");
    else *a->recorded_dims = (int)dims;
    PQclear(r);
    return rc;
}

static int list_fn(pgq_session *ss, tier_ctx *c, void *arg) {
    call *a = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT " COLS " FROM episodic_collections c WHERE c.tenant = $%d",
                pgq_text(&b, principal_tenant(c->p)));
    if (a->after) pgq_sql_add(&b, " AND c.name > $%d", pgq_text(&b, a->after));
    pgq_sql_add(&b, " ORDER BY c.name LIMIT $%d", pgq_int8(&b, (int64_t)a->limit));
    PGresult *r;
    int rc = pgq_pipeline(ss, "list collections", NULL, &b, 1, &r);
    if (rc != STATUS_OK) return rc;
    int rows = PQntuples(r);
    *a->list = rows ? arena_alloc(c->ar, (size_t)rows * sizeof **a->list) : NULL;
    if (rows && !*a->list) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; rc == STATUS_OK && i < rows; i++) rc = decode(c, r, i, &(*a->list)[i]);
    *a->n = rc == STATUS_OK ? (size_t)rows : 0;
    PQclear(r);
    return rc;
}

static int delete_fn(pgq_session *ss, tier_ctx *c, void *arg) {
    call *a = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "DELETE FROM episodic_collections c WHERE c.tenant = $%d AND c.name = $%d "
                "RETURNING " COLS,
                pgq_text(&b, principal_tenant(c->p)), pgq_text(&b, a->name));
    PGresult *r;
    int rc = pgq_pipeline(ss, "delete collection", "BEGIN", &b, 0, &r);
    if (rc != STATUS_OK) return rc;
    vs_collection col;
    rc = one_row(c, r, a, STATUS_ENOTFOUND, "not found", &col);
    return hook_commit(ss, c, a, rc, &col);
}

static int run_on(pg_pool *pg, tier_ctx *c, call *a, tier_sql_fn fn) {
    return tier_sql_run(pg, c, TIER_MAX_STATEMENT_MS, fn, a);
}

int vstore_catalog_create(pg_pool *pg, tier_ctx *c, const char *name, int dims, int distance,
                          const char *model, vstore_catalog_hook hook, void *arg,
                          vs_collection *out) {
    call a = {.name = name,
              .dims = dims,
              .distance = distance,
              .model = model,
              .hook = hook,
              .arg = arg,
              .out = out};
    return run_on(pg, c, &a, create_fn);
}

int vstore_catalog_claim_model(pg_pool *pg, tier_ctx *c, const vs_collection *col,
                               const char *model, const char **recorded) {
    call a = {.name = col->name, .cid = col->cid, .model = model, .recorded = recorded};
    return run_on(pg, c, &a, claim_fn);
}

int vstore_catalog_claim_dims(pg_pool *pg, tier_ctx *c, vs_collection *col, int dims) {
    call a = {.name = col->name, .cid = col->cid, .dims = dims, .recorded_dims = &col->dims};
    return run_on(pg, c, &a, claim_dims_fn);
}

int vstore_catalog_get(pg_pool *pg, tier_ctx *c, const char *name, vs_collection *out) {
    call a = {.name = name, .out = out};
    return run_on(pg, c, &a, get_fn);
}

int vstore_catalog_list(pg_pool *pg, tier_ctx *c, const char *after, size_t limit,
                        vs_collection **out, size_t *n) {
    call a = {.after = after, .limit = limit, .list = out, .n = n};
    return run_on(pg, c, &a, list_fn);
}

int vstore_catalog_delete(pg_pool *pg, tier_ctx *c, const char *name, vstore_catalog_hook hook,
                          void *arg) {
    call a = {.name = name, .hook = hook, .arg = arg};
    return run_on(pg, c, &a, delete_fn);
}
