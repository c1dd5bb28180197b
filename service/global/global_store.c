/* global_store: SQL for the GlobalMemory tier; see global_store.h.
 *
 * Query discipline is pgq's (pgq.h): parameterized statements prepared
 * per connection, binary results, a statement_timeout from the call's
 * deadline, one-round-trip reads, explicit write transactions. */
#include "service/global/global_store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/log.h"

#define MAX_CREATE_RACES 3
#define TIER "global"

struct global_store {
    pg_pool *pg;
    global_store_options o;
};

/* Entity columns every entity query selects (alias e), in this order. */
#define E_COLS                                                                              \
    "e.tenant, e.id, e.owner, e.label, e.entity_type, e.name, e.properties, e.pii_kinds,"  \
    " e.version, e.created_at, e.updated_at"
#define E_NCOLS 11
/* Relationship columns (alias r). */
#define R_COLS                                                                              \
    "r.tenant, r.source_id, r.rel_type, r.target_id, r.owner, r.label, r.properties,"      \
    " r.pii_kinds, r.version, r.created_at, r.updated_at"
/* Task columns (alias t). */
#define T_COLS                                                                              \
    "t.tenant, t.id, t.owner, t.label, t.task_type, t.description, t.status, t.provenance," \
    " t.result, t.entity_ids, t.pii_kinds, t.start_time, t.end_time, t.version,"            \
    " t.created_at, t.updated_at"

static int fail(global_ctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(global_ctx *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return code;
}

int global_store_create(pg_pool *pg, const global_store_options *o, global_store **out) {
    global_store *s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->pg = pg;
    s->o.max_statement_ms = 30000;
    s->o.max_response_bytes = 4u << 20;
    if (o) {
        if (o->max_statement_ms > 0) s->o.max_statement_ms = o->max_statement_ms;
        if (o->max_response_bytes > 0) s->o.max_response_bytes = o->max_response_bytes;
    }
    *out = s;
    return 0;
}

void global_store_free(global_store *s) { free(s); }

/* ------------------------------------------------------------ sessions */

typedef int (*session_fn)(pgq_session *ss, global_ctx *c, void *arg);

typedef struct {
    global_ctx *c;
    session_fn fn;
    void *arg;
} run_args;

static int run_one(pgq_session *ss, void *arg) {
    run_args *r = arg;
    return r->fn(ss, r->c, r->arg);
}

/* Runs fn in a session, retried on a fresh connection when a pooled one
 * turned out dead before anything was committed. */
static int run(global_store *s, global_ctx *c, session_fn fn, void *arg) {
    run_args r = {c, fn, arg};
    c->err[0] = '\0';
    return pgq_run(s->pg, TIER, c->deadline_ms, s->o.max_statement_ms, c->err, sizeof c->err,
                   run_one, &r);
}

static int commit(pgq_session *ss, global_ctx *c) {
    return pgq_commit(ss, c->before_commit, c->after_commit, c->hook_arg);
}

/* ------------------------------------------------------------ diodes */

/* The read diode on alias a as a WHERE fragment (no leading AND): the
 * caller's tenant, its own records unless its read scope is `:all`, and
 * labels up to clr. */
static void add_read_diode(pgq_sql *b, pgq_params *q, const principal *p, const char *a) {
    pgq_sql_add(b, "%s.tenant = $%d AND %s.label <= $%d", a, pgq_text(q, principal_tenant(p)),
                a, pgq_int4(q, (int32_t)principal_clr(p)));
    if (principal_scope(p, "global:read") != PRINCIPAL_ALL)
        pgq_sql_add(b, " AND %s.owner = $%d", a, pgq_text(q, principal_sub(p)));
}

/* The final read filter behind the SQL predicates: a row that should not
 * have come back is a bug in a query. Logged loudly; the call fails. */
static int check_row(global_ctx *c, const char *what, const char *id, const global_meta *m) {
    if (principal_may_read(c->p, principal_scope(c->p, "global:read"), m->tenant, m->owner,
                           m->label))
        return STATUS_OK;
    log_fields(LOG_ERROR, "global: READ DIODE MISMATCH, a row escaped the SQL predicates",
               LOG_F_STR, "caller", principal_sub(c->p), LOG_F_STR, "caller_tenant",
               principal_tenant(c->p), LOG_F_STR, "row_tenant", m->tenant, LOG_F_STR,
               "row_owner", m->owner, LOG_F_INT, "row_label", (int64_t)m->label, LOG_F_STR,
               "kind", what, LOG_F_STR, "id", id, LOG_F_END);
    return fail(c, STATUS_EINTERNAL, "internal error: read filter mismatch (logged)");
}

/* The state of a record under a row lock. */
typedef struct {
    int exists;
    const char *owner;
    int label;
    int64_t version;
    int64_t start_us; /* tasks */
} locked_row;

static int decode_lock(global_ctx *c, PGresult *r, locked_row *lr) {
    memset(lr, 0, sizeof *lr);
    if (PQntuples(r) == 0) return STATUS_OK;
    int64_t label;
    lr->owner = pgq_col_str(c->ar, r, 0, 0);
    if (!lr->owner || pgq_col_int(r, 0, 1, &label) != 0 ||
        pgq_col_int(r, 0, 2, &lr->version) != 0)
        return fail(c, STATUS_EINTERNAL, "unexpected row-lock result");
    if (PQnfields(r) > 3 && pgq_col_ts(r, 0, 3, &lr->start_us) != 0)
        return fail(c, STATUS_EINTERNAL, "unexpected row-lock result");
    lr->exists = 1;
    lr->label = (int)label;
    return STATUS_OK;
}

/* BEGIN and the row lock in one round trip. */
static int lock_row(pgq_session *ss, global_ctx *c, const pgq_sql *b, const pgq_params *q,
                    locked_row *lr) {
    PGresult *r;
    int rc = pgq_pipeline(ss, "row lock", "BEGIN", b, q, 0, &r);
    if (rc != STATUS_OK) return rc;
    rc = decode_lock(c, r, lr);
    PQclear(r);
    return rc;
}

/* Write diode for changing an existing record: the caller must be able to
 * read it (label <= clr) and own it or hold `global:write:all`. */
static int may_modify(global_ctx *c, const locked_row *lr, const char *what, const char *id) {
    if (lr->label > (int)principal_clr(c->p))
        return fail(c, STATUS_EDENIED,
                    "%s %s is labelled above the token's read ceiling and cannot be modified "
                    "by it", what, id);
    if (strcmp(lr->owner, principal_sub(c->p)) != 0 &&
        principal_scope(c->p, "global:write") != PRINCIPAL_ALL)
        return fail(c, STATUS_EDENIED,
                    "%s %s belongs to another principal; modifying it needs global:write:all",
                    what, id);
    return STATUS_OK;
}

static int check_expected(global_ctx *c, const locked_row *lr, int has_expected,
                          int64_t expected, const char *what, const char *id) {
    if (!has_expected) return STATUS_OK;
    int64_t current = lr->exists ? lr->version : 0;
    if (current == expected) return STATUS_OK;
    if (current == 0)
        return fail(c, STATUS_ECONFLICT, "%s %s does not exist (expected_version %lld)", what, id,
                    (long long)expected);
    if (expected == 0)
        return fail(c, STATUS_ECONFLICT, "%s %s already exists (version %lld)", what, id,
                    (long long)current);
    return fail(c, STATUS_ECONFLICT, "%s %s is at version %lld, not %lld", what, id,
                (long long)current, (long long)expected);
}

/* ------------------------------------------------------------ decoding */

static int decode_meta(global_ctx *c, const PGresult *r, int row, int c_tenant, int c_owner,
                       int c_label, int c_pii, int c_version, int c_created,
                       global_meta *m) {
    int64_t label;
    m->tenant = pgq_col_str(c->ar, r, row, c_tenant);
    m->owner = pgq_col_str(c->ar, r, row, c_owner);
    if (!m->tenant || !m->owner || pgq_col_int(r, row, c_label, &label) != 0 ||
        pgq_col_text_array(c->ar, r, row, c_pii, &m->pii_kinds, &m->npii) != 0 ||
        pgq_col_int(r, row, c_version, &m->version) != 0 ||
        pgq_col_ts(r, row, c_created, &m->create_us) != 0 ||
        pgq_col_ts(r, row, c_created + 1, &m->update_us) != 0)
        return -1;
    m->label = (int)label;
    return 0;
}

/* The columns of an entities row, without the read filter. */
static int decode_entity_row(global_ctx *c, const PGresult *r, int row, global_entity *e) {
    memset(e, 0, sizeof *e);
    e->id = pgq_col_str(c->ar, r, row, 1);
    e->type = pgq_col_str(c->ar, r, row, 4);
    e->name = pgq_col_str(c->ar, r, row, 5);
    e->properties_json = pgq_col_jsonb(c->ar, r, row, 6);
    if (!e->id || !e->type || !e->name || !e->properties_json ||
        decode_meta(c, r, row, 0, 2, 3, 7, 8, 9, &e->meta) != 0)
        return fail(c, STATUS_EINTERNAL, "an entities row has an unreadable column");
    return STATUS_OK;
}

static int decode_entity(global_ctx *c, const PGresult *r, int row, global_entity *e) {
    int rc = decode_entity_row(c, r, row, e);
    return rc != STATUS_OK ? rc : check_row(c, "entity", e->id, &e->meta);
}

static int decode_rel(global_ctx *c, const PGresult *r, int row, global_rel *e) {
    memset(e, 0, sizeof *e);
    e->source_id = pgq_col_str(c->ar, r, row, 1);
    e->type = pgq_col_str(c->ar, r, row, 2);
    e->target_id = pgq_col_str(c->ar, r, row, 3);
    e->properties_json = pgq_col_jsonb(c->ar, r, row, 6);
    if (!e->source_id || !e->type || !e->target_id || !e->properties_json ||
        decode_meta(c, r, row, 0, 4, 5, 7, 8, 9, &e->meta) != 0)
        return fail(c, STATUS_EINTERNAL, "a relationships row has an unreadable column");
    return check_row(c, "relationship", e->source_id, &e->meta);
}

static int decode_task(global_ctx *c, const PGresult *r, int row, global_task *t) {
    memset(t, 0, sizeof *t);
    int64_t status;
    t->id = pgq_col_str(c->ar, r, row, 1);
    t->type = pgq_col_str(c->ar, r, row, 4);
    t->description = pgq_col_str(c->ar, r, row, 5);
    if (!PQgetisnull(r, row, 7) && !(t->provenance_json = pgq_col_jsonb(c->ar, r, row, 7)))
        return fail(c, STATUS_EINTERNAL, "a tasks row has an unreadable provenance");
    if (!PQgetisnull(r, row, 8) && !(t->result_json = pgq_col_jsonb(c->ar, r, row, 8)))
        return fail(c, STATUS_EINTERNAL, "a tasks row has an unreadable result");
    if (!PQgetisnull(r, row, 12)) {
        if (pgq_col_ts(r, row, 12, &t->end_us) != 0)
            return fail(c, STATUS_EINTERNAL, "a tasks row has an unreadable end_time");
        t->has_end = 1;
    }
    if (!t->id || !t->type || !t->description || pgq_col_int(r, row, 6, &status) != 0 ||
        pgq_col_text_array(c->ar, r, row, 9, &t->entity_ids, &t->nentity_ids) != 0 ||
        pgq_col_ts(r, row, 11, &t->start_us) != 0 ||
        decode_meta(c, r, row, 0, 2, 3, 10, 13, 14, &t->meta) != 0)
        return fail(c, STATUS_EINTERNAL, "a tasks row has an unreadable column");
    t->status = (int)status;
    return check_row(c, "task", t->id, &t->meta);
}

/* ------------------------------------------------------------ entities */

typedef struct {
    const global_entity_in *in;
    global_entity *out;
    int *created;
} put_entity_args;

static int put_entity(pgq_session *ss, global_ctx *c, void *arg) {
    put_entity_args *a = arg;
    const global_entity_in *in = a->in;
    const char *pii = pgq_array_literal(c->ar, in->pii_kinds, in->npii);
    if (!pii) return fail(c, STATUS_ENOMEM, "out of memory");
    for (int race = 0; race < MAX_CREATE_RACES; race++) {
        pgq_params lq = {0};
        pgq_sql lb = {0};
        pgq_sql_add(&lb,
                    "SELECT owner, label, version FROM entities WHERE tenant = $%d AND id = $%d"
                    " FOR UPDATE",
                    pgq_text(&lq, principal_tenant(c->p)), pgq_text(&lq, in->id));
        locked_row lr;
        int rc = race == 0 ? lock_row(ss, c, &lb, &lq, &lr) : STATUS_OK;
        if (race > 0) {
            PGresult *r;
            if ((rc = pgq_exec_ok(ss, &lb, &lq, "row lock", &r)) != STATUS_OK) return rc;
            rc = decode_lock(c, r, &lr);
            PQclear(r);
        }
        if (rc != STATUS_OK) return rc;
        if (lr.exists && (rc = may_modify(c, &lr, "entity", in->id)) != STATUS_OK) return rc;
        if ((rc = check_expected(c, &lr, in->has_expected, in->expected_version, "entity",
                                 in->id)) != STATUS_OK)
            return rc;
        int label = principal_stamp_label(c->p, in->label, lr.exists ? lr.label : 0);
        pgq_params q = {0};
        pgq_sql b = {0};
        int p_tenant = pgq_text(&q, principal_tenant(c->p));
        int p_id = pgq_text(&q, in->id);
        int p_label = pgq_int4(&q, label);
        int p_type = pgq_text(&q, in->type);
        int p_name = pgq_text(&q, in->name);
        int p_props = pgq_jsonb(&q, in->properties_json);
        int p_pii = pgq_text_array(&q, pii);
        if (!lr.exists)
            pgq_sql_add(&b,
                        "INSERT INTO entities AS e (tenant, id, owner, label, entity_type, name,"
                        " properties, pii_kinds, version, created_at, updated_at)"
                        " VALUES ($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, 1, now(), now())"
                        " ON CONFLICT (tenant, id) DO NOTHING RETURNING " E_COLS,
                        p_tenant, p_id, pgq_text(&q, principal_sub(c->p)), p_label, p_type,
                        p_name, p_props, p_pii);
        else
            pgq_sql_add(&b,
                        "UPDATE entities AS e SET label = $%d, entity_type = $%d, name = $%d,"
                        " properties = $%d, pii_kinds = $%d, version = e.version + 1,"
                        " updated_at = now() WHERE e.tenant = $%d AND e.id = $%d"
                        " RETURNING " E_COLS,
                        p_label, p_type, p_name, p_props, p_pii, p_tenant, p_id);
        PGresult *r;
        if ((rc = pgq_exec_ok(ss, &b, &q, "entity write", &r)) != STATUS_OK) return rc;
        if (PQntuples(r) == 0) {
            /* Lost a create race: the other transaction committed its row
             * (ON CONFLICT waited for it); lock and re-evaluate. */
            PQclear(r);
            continue;
        }
        rc = decode_entity(c, r, 0, a->out);
        PQclear(r);
        if (rc != STATUS_OK) return rc;
        *a->created = !lr.exists;
        return commit(ss, c);
    }
    return fail(c, STATUS_ECONFLICT, "entity %s is being created concurrently; retry", in->id);
}

int global_put_entity(global_store *s, global_ctx *c, const global_entity_in *in,
                      global_entity *out, int *created) {
    put_entity_args a = {in, out, created};
    return run(s, c, put_entity, &a);
}

typedef struct {
    const char *id;
    global_entity *out;
} get_entity_args;

void global_sql_get_entity(const principal *p, const char *id, pgq_sql *b, pgq_params *q) {
    pgq_sql_add(b, "SELECT " E_COLS " FROM entities e WHERE ");
    add_read_diode(b, q, p, "e");
    pgq_sql_add(b, " AND e.id = $%d", pgq_text(q, id));
}

static int get_entity(pgq_session *ss, global_ctx *c, void *arg) {
    get_entity_args *a = arg;
    pgq_params q = {0};
    pgq_sql b = {0};
    global_sql_get_entity(c->p, a->id, &b, &q);
    PGresult *r;
    int rc = pgq_pipeline(ss, "get entity", NULL, &b, &q, 1, &r);
    if (rc != STATUS_OK) return rc;
    if (PQntuples(r) == 0) rc = fail(c, STATUS_ENOTFOUND, "entity %s not found", a->id);
    else rc = decode_entity(c, r, 0, a->out);
    PQclear(r);
    return rc;
}

int global_get_entity(global_store *s, global_ctx *c, const char *id, global_entity *out) {
    get_entity_args a = {id, out};
    return run(s, c, get_entity, &a);
}

static int load_entity(pgq_session *ss, global_ctx *c, void *arg) {
    get_entity_args *a = arg;
    pgq_params q = {0};
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT " E_COLS " FROM entities e WHERE e.tenant = $%d AND e.id = $%d",
                pgq_text(&q, principal_tenant(c->p)), pgq_text(&q, a->id));
    PGresult *r;
    int rc = pgq_pipeline(ss, "load entity", NULL, &b, &q, 1, &r);
    if (rc != STATUS_OK) return rc;
    if (PQntuples(r) == 0) rc = fail(c, STATUS_ENOTFOUND, "entity %s not found", a->id);
    else rc = decode_entity_row(c, r, 0, a->out);
    PQclear(r);
    return rc;
}

int global_load_entity(global_store *s, global_ctx *c, const char *id, global_entity *out) {
    get_entity_args a = {id, out};
    return run(s, c, load_entity, &a);
}

typedef struct {
    const char *id;
    int has_expected;
    int64_t expected;
} delete_entity_args;

static int delete_entity(pgq_session *ss, global_ctx *c, void *arg) {
    delete_entity_args *a = arg;
    pgq_params q = {0};
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "SELECT owner, label, version FROM entities WHERE tenant = $%d AND id = $%d"
                " FOR UPDATE",
                pgq_text(&q, principal_tenant(c->p)), pgq_text(&q, a->id));
    locked_row lr;
    int rc = lock_row(ss, c, &b, &q, &lr);
    if (rc != STATUS_OK) return rc;
    if (!lr.exists) return fail(c, STATUS_ENOTFOUND, "entity %s not found", a->id);
    if ((rc = may_modify(c, &lr, "entity", a->id)) != STATUS_OK ||
        (rc = check_expected(c, &lr, a->has_expected, a->expected, "entity", a->id)) !=
            STATUS_OK)
        return rc;
    /* Relationships touching it go with it (ON DELETE CASCADE). */
    pgq_params dq = {0};
    pgq_sql d = {0};
    int p_tenant = pgq_text(&dq, principal_tenant(c->p));
    pgq_sql_add(&d, "DELETE FROM entities WHERE tenant = $%d AND id = $%d", p_tenant,
                pgq_text(&dq, a->id));
    PGresult *r;
    if ((rc = pgq_exec_ok(ss, &d, &dq, "entity delete", &r)) != STATUS_OK) return rc;
    PQclear(r);
    return commit(ss, c);
}

int global_delete_entity(global_store *s, global_ctx *c, const char *id, int has_expected,
                         int64_t expected_version) {
    delete_entity_args a = {id, has_expected, expected_version};
    return run(s, c, delete_entity, &a);
}

/* ------------------------------------------------------------ QueryEntities */

typedef struct {
    const global_query_in *in;
    global_entity **out;
    const char ***keys;
    size_t *n;
    int *more;
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

static int query_entities(pgq_session *ss, global_ctx *c, void *arg) {
    query_args *a = arg;
    const global_query_in *in = a->in;
    pgq_params q = {0};
    pgq_sql b = {0};
    /* $1 is always the text query (used by the match and the rank). */
    pgq_text(&q, in->text_query);
    const char *key = order_expr(in->order);
    pgq_sql_add(&b, "SELECT " E_COLS ", %s FROM entities e WHERE ", key);
    add_read_diode(&b, &q, c->p, "e");
    if (in->type[0]) pgq_sql_add(&b, " AND e.entity_type = $%d", pgq_text(&q, in->type));
    if (in->text_query[0]) pgq_sql_add(&b, " AND e.search @@ websearch_to_tsquery('simple', $1)");
    for (size_t i = 0; i < in->npreds; i++) {
        int rc = global_pred_sql(&b, &q, c->ar, i, &in->preds[i], c->err, sizeof c->err);
        if (rc == -2) return fail(c, STATUS_ENOMEM, "out of memory");
        if (rc != 0) return STATUS_EINVALID;
    }
    const char *cmp = in->descending ? "<" : ">", *dir = in->descending ? "DESC" : "ASC";
    if (in->after_id) {
        int p_id = pgq_text(&q, in->after_id);
        switch (in->order) {
        case GLOBAL_ORDER_ID: pgq_sql_add(&b, " AND e.id %s $%d", cmp, p_id); break;
        case GLOBAL_ORDER_NAME:
            pgq_sql_add(&b, " AND (e.name, e.id) %s ($%d, $%d)", cmp,
                        pgq_text(&q, in->after_key), p_id);
            break;
        case GLOBAL_ORDER_CREATE_TIME:
        case GLOBAL_ORDER_UPDATE_TIME:
            /* Sent as a binary timestamptz: exact to the microsecond. */
            pgq_sql_add(&b, " AND (%s, e.id) %s ($%d, $%d)", key, cmp,
                        pgq_ts(&q, strtoll(in->after_key, NULL, 10)), p_id);
            break;
        case GLOBAL_ORDER_RELEVANCE:
            pgq_sql_add(&b, " AND (%s, e.id) %s ($%d::real, $%d)", key, cmp,
                        pgq_text(&q, in->after_key), p_id);
            break;
        }
    }
    pgq_sql_add(&b, " ORDER BY %s %s", key, dir);
    if (in->order != GLOBAL_ORDER_ID) pgq_sql_add(&b, ", e.id %s", dir);
    pgq_sql_add(&b, " LIMIT $%d", pgq_int8(&q, (int64_t)in->limit + 1));
    PGresult *r;
    int rc = pgq_pipeline(ss, "query entities", NULL, &b, &q, 1, &r);
    if (rc != STATUS_OK) return rc;
    int rows = PQntuples(r), take = rows < in->limit ? rows : in->limit;
    global_entity *v = arena_alloc(c->ar, ((size_t)take + 1) * sizeof *v);
    const char **keys = arena_alloc(c->ar, ((size_t)take + 1) * sizeof *keys);
    if (!v || !keys) rc = fail(c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; rc == STATUS_OK && i < take; i++) {
        rc = decode_entity(c, r, i, &v[i]);
        if (rc != STATUS_OK) break;
        char buf[48];
        int64_t us;
        float rank;
        switch (in->order) {
        case GLOBAL_ORDER_ID: keys[i] = v[i].id; break;
        case GLOBAL_ORDER_NAME: keys[i] = v[i].name; break;
        case GLOBAL_ORDER_CREATE_TIME:
        case GLOBAL_ORDER_UPDATE_TIME:
            if (pgq_col_ts(r, i, E_NCOLS, &us) != 0) {
                rc = fail(c, STATUS_EINTERNAL, "unreadable sort key");
                break;
            }
            snprintf(buf, sizeof buf, "%lld", (long long)us);
            keys[i] = arena_strdup(c->ar, buf);
            break;
        case GLOBAL_ORDER_RELEVANCE:
            /* %.9g prints every float exactly enough to read it back. */
            if (pgq_col_float4(r, i, E_NCOLS, &rank) != 0) {
                rc = fail(c, STATUS_EINTERNAL, "unreadable rank");
                break;
            }
            snprintf(buf, sizeof buf, "%.9g", (double)rank);
            keys[i] = arena_strdup(c->ar, buf);
            break;
        }
        if (rc == STATUS_OK && !keys[i]) rc = fail(c, STATUS_ENOMEM, "out of memory");
    }
    PQclear(r);
    if (rc != STATUS_OK) return rc;
    *a->out = v;
    *a->keys = keys;
    *a->n = (size_t)take;
    *a->more = rows > take;
    return STATUS_OK;
}

int global_query_entities(global_store *s, global_ctx *c, const global_query_in *in,
                          global_entity **out, const char ***keys, size_t *n, int *more) {
    *out = NULL;
    *keys = NULL;
    *n = 0;
    *more = 0;
    query_args a = {in, out, keys, n, more};
    return run(s, c, query_entities, &a);
}

/* ------------------------------------------------------------ relationships */

static void add_rel_lock(pgq_sql *b, pgq_params *q, const principal *p, const char *src,
                         const char *type, const char *dst) {
    pgq_sql_add(b,
                "SELECT owner, label, version FROM relationships WHERE tenant = $%d"
                " AND source_id = $%d AND rel_type = $%d AND target_id = $%d FOR UPDATE",
                pgq_text(q, principal_tenant(p)), pgq_text(q, src), pgq_text(q, type),
                pgq_text(q, dst));
}

static const char *rel_name(arena *a, const char *src, const char *type, const char *dst) {
    const char *s = arena_printf(a, "%s -[%s]-> %s", src, type, dst);
    return s ? s : "relationship";
}

typedef struct {
    const global_rel_in *in;
    global_rel *out;
    int *created;
} put_rel_args;

/* Both ends visible to the caller, locked against a concurrent delete
 * (FOR KEY SHARE) until the relationship is written. */
static int check_ends(pgq_session *ss, global_ctx *c, const char *src, const char *dst) {
    pgq_params q = {0};
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT e.id FROM entities e WHERE ");
    add_read_diode(&b, &q, c->p, "e");
    pgq_sql_add(&b, " AND e.id IN ($%d, $%d) FOR KEY SHARE", pgq_text(&q, src),
                pgq_text(&q, dst));
    PGresult *r;
    int rc = pgq_exec_ok(ss, &b, &q, "endpoint check", &r);
    if (rc != STATUS_OK) return rc;
    int have_src = 0, have_dst = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *id = PQgetvalue(r, i, 0);
        have_src |= strcmp(id, src) == 0;
        have_dst |= strcmp(id, dst) == 0;
    }
    PQclear(r);
    if (!have_src) return fail(c, STATUS_ENOTFOUND, "source entity %s not found", src);
    if (!have_dst) return fail(c, STATUS_ENOTFOUND, "target entity %s not found", dst);
    return STATUS_OK;
}

static int put_rel(pgq_session *ss, global_ctx *c, void *arg) {
    put_rel_args *a = arg;
    const global_rel_in *in = a->in;
    const char *name = rel_name(c->ar, in->source_id, in->type, in->target_id);
    const char *pii = pgq_array_literal(c->ar, in->pii_kinds, in->npii);
    if (!pii) return fail(c, STATUS_ENOMEM, "out of memory");
    for (int race = 0; race < MAX_CREATE_RACES; race++) {
        pgq_params lq = {0};
        pgq_sql lb = {0};
        add_rel_lock(&lb, &lq, c->p, in->source_id, in->type, in->target_id);
        locked_row lr;
        int rc;
        if (race == 0) {
            rc = lock_row(ss, c, &lb, &lq, &lr);
        } else {
            PGresult *r;
            if ((rc = pgq_exec_ok(ss, &lb, &lq, "row lock", &r)) != STATUS_OK) return rc;
            rc = decode_lock(c, r, &lr);
            PQclear(r);
        }
        if (rc != STATUS_OK) return rc;
        if (lr.exists && (rc = may_modify(c, &lr, "relationship", name)) != STATUS_OK) return rc;
        if ((rc = check_expected(c, &lr, in->has_expected, in->expected_version, "relationship",
                                 name)) != STATUS_OK)
            return rc;
        if (race == 0 && (rc = check_ends(ss, c, in->source_id, in->target_id)) != STATUS_OK)
            return rc;
        int label = principal_stamp_label(c->p, in->label, lr.exists ? lr.label : 0);
        pgq_params q = {0};
        pgq_sql b = {0};
        int p_tenant = pgq_text(&q, principal_tenant(c->p));
        int p_src = pgq_text(&q, in->source_id);
        int p_type = pgq_text(&q, in->type);
        int p_dst = pgq_text(&q, in->target_id);
        int p_label = pgq_int4(&q, label);
        int p_props = pgq_jsonb(&q, in->properties_json);
        int p_pii = pgq_text_array(&q, pii);
        if (!lr.exists)
            pgq_sql_add(&b,
                        "INSERT INTO relationships AS r (tenant, source_id, rel_type, target_id,"
                        " owner, label, properties, pii_kinds, version, created_at, updated_at)"
                        " VALUES ($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, 1, now(), now())"
                        " ON CONFLICT (tenant, source_id, rel_type, target_id) DO NOTHING"
                        " RETURNING " R_COLS,
                        p_tenant, p_src, p_type, p_dst, pgq_text(&q, principal_sub(c->p)),
                        p_label, p_props, p_pii);
        else
            pgq_sql_add(&b,
                        "UPDATE relationships AS r SET label = $%d, properties = $%d,"
                        " pii_kinds = $%d, version = r.version + 1, updated_at = now()"
                        " WHERE r.tenant = $%d AND r.source_id = $%d AND r.rel_type = $%d"
                        " AND r.target_id = $%d RETURNING " R_COLS,
                        p_label, p_props, p_pii, p_tenant, p_src, p_type, p_dst);
        PGresult *r;
        if (b.overflow) return fail(c, STATUS_EINTERNAL, "relationship write query too long");
        r = pgq_exec(ss, &b, &q);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            /* An end deleted under us despite the key-share lock cannot
             * happen; a foreign-key violation would still say which. */
            rc = pgq_sqlstate_is(r, "23503")
                     ? fail(c, STATUS_ENOTFOUND, "an end of %s no longer exists", name)
                     : pgq_pg_fail(ss, r, "relationship write");
            PQclear(r);
            return rc;
        }
        if (PQntuples(r) == 0) {
            PQclear(r);
            continue;
        }
        rc = decode_rel(c, r, 0, a->out);
        PQclear(r);
        if (rc != STATUS_OK) return rc;
        *a->created = !lr.exists;
        return commit(ss, c);
    }
    return fail(c, STATUS_ECONFLICT, "%s is being created concurrently; retry", name);
}

int global_put_rel(global_store *s, global_ctx *c, const global_rel_in *in, global_rel *out,
                   int *created) {
    put_rel_args a = {in, out, created};
    return run(s, c, put_rel, &a);
}

typedef struct {
    const char *src, *type, *dst;
    int has_expected;
    int64_t expected;
} delete_rel_args;

static int delete_rel(pgq_session *ss, global_ctx *c, void *arg) {
    delete_rel_args *a = arg;
    const char *name = rel_name(c->ar, a->src, a->type, a->dst);
    pgq_params q = {0};
    pgq_sql b = {0};
    add_rel_lock(&b, &q, c->p, a->src, a->type, a->dst);
    locked_row lr;
    int rc = lock_row(ss, c, &b, &q, &lr);
    if (rc != STATUS_OK) return rc;
    if (!lr.exists) return fail(c, STATUS_ENOTFOUND, "relationship %s not found", name);
    if ((rc = may_modify(c, &lr, "relationship", name)) != STATUS_OK ||
        (rc = check_expected(c, &lr, a->has_expected, a->expected, "relationship", name)) !=
            STATUS_OK)
        return rc;
    pgq_params dq = {0};
    pgq_sql d = {0};
    int p_tenant = pgq_text(&dq, principal_tenant(c->p));
    int p_src = pgq_text(&dq, a->src);
    int p_type = pgq_text(&dq, a->type);
    pgq_sql_add(&d,
                "DELETE FROM relationships WHERE tenant = $%d AND source_id = $%d"
                " AND rel_type = $%d AND target_id = $%d",
                p_tenant, p_src, p_type, pgq_text(&dq, a->dst));
    PGresult *r;
    if ((rc = pgq_exec_ok(ss, &d, &dq, "relationship delete", &r)) != STATUS_OK) return rc;
    PQclear(r);
    return commit(ss, c);
}

int global_delete_rel(global_store *s, global_ctx *c, const char *source_id, const char *type,
                      const char *target_id, int has_expected, int64_t expected_version) {
    delete_rel_args a = {source_id, type, target_id, has_expected, expected_version};
    return run(s, c, delete_rel, &a);
}

/* ------------------------------------------------------------ Traverse */

typedef struct {
    const global_traverse_in *in;
    global_traverse_out *out;
    size_t max_response_bytes;
} traverse_args;

/* One direction's neighbours of the frontier w.frontier as rows (nid),
 * through relationships the caller may see. */
static void add_neighbours(pgq_sql *b, pgq_params *q, const principal *p, const char *from,
                           const char *to, int p_types) {
    pgq_sql_add(b, "SELECT r.%s AS nid FROM relationships r WHERE ", to);
    add_read_diode(b, q, p, "r");
    pgq_sql_add(b, " AND r.%s = ANY(w.frontier)", from);
    if (p_types) pgq_sql_add(b, " AND r.rel_type = ANY($%d)", p_types);
}

int global_sql_traverse(arena *a, const principal *p, const global_traverse_in *in, pgq_sql *b,
                        pgq_params *q) {
    int p_types = 0;
    if (in->ntypes) {
        const char *lit = pgq_array_literal(a, in->types, in->ntypes);
        if (!lit) return -1;
        p_types = pgq_text_array(q, lit);
    }
    int p_max = pgq_int4(q, in->max_depth);
    int p_lim = pgq_int4(q, in->limit);
    /* Each row of `walk` is one BFS level: its depth, its entities
     * (frontier) and every entity seen so far (visited). The next level is
     * the visible neighbours of the frontier not yet visited, at most
     * limit + 1 of them by id (more could never be returned), so the walk
     * is cycle-safe, finds each entity at its shortest depth, and stops
     * once more than limit entities are known. The OFFSET 0 fences keep
     * the planner from evaluating the level's subquery twice and from
     * hash-joining the result against the whole entities table. */
    pgq_sql_add(b,
                "WITH RECURSIVE walk(depth, frontier, visited) AS ("
                " SELECT 0, ARRAY[e.id], ARRAY[e.id] FROM entities e WHERE ");
    add_read_diode(b, q, p, "e");
    pgq_sql_add(b, " AND e.id = $%d", pgq_text(q, in->start_id));
    pgq_sql_add(b,
                " UNION ALL"
                " SELECT w.depth + 1, nxt.ids, w.visited || nxt.ids FROM walk w,"
                " LATERAL (SELECT ARRAY(SELECT DISTINCT nb.id FROM (");
    if (in->dir == GLOBAL_DIR_OUT || in->dir == GLOBAL_DIR_BOTH)
        add_neighbours(b, q, p, "source_id", "target_id", p_types);
    if (in->dir == GLOBAL_DIR_BOTH) pgq_sql_add(b, " UNION ALL ");
    if (in->dir == GLOBAL_DIR_IN || in->dir == GLOBAL_DIR_BOTH)
        add_neighbours(b, q, p, "target_id", "source_id", p_types);
    pgq_sql_add(b, ") n JOIN entities nb ON nb.id = n.nid AND ");
    add_read_diode(b, q, p, "nb");
    pgq_sql_add(b,
                " WHERE NOT nb.id = ANY(w.visited) ORDER BY nb.id LIMIT $%d + 1) AS ids"
                " OFFSET 0) nxt"
                " WHERE w.depth < $%d AND cardinality(w.frontier) > 0"
                " AND cardinality(w.visited) <= $%d)"
                " SELECT " E_COLS ", x.depth FROM (SELECT depth, unnest(frontier) AS id FROM walk)"
                " x, LATERAL (SELECT * FROM entities e WHERE e.tenant = $%d AND e.id = x.id"
                " OFFSET 0) e ORDER BY x.depth, x.id LIMIT $%d + 1",
                p_lim, p_max, p_lim, pgq_text(q, principal_tenant(p)), p_lim);
    return 0;
}

int global_sql_traverse_edges(arena *a, const principal *p, const global_traverse_in *in,
                              const char *const *ids, size_t n, pgq_sql *b, pgq_params *q) {
    const char *lit = pgq_array_literal(a, ids, n);
    if (!lit) return -1;
    int p_ids = pgq_text_array(q, lit);
    pgq_sql_add(b, "SELECT " R_COLS ", octet_length(r.properties::text) FROM relationships r"
                   " WHERE ");
    add_read_diode(b, q, p, "r");
    pgq_sql_add(b, " AND r.source_id = ANY($%d) AND r.target_id = ANY($%d)", p_ids, p_ids);
    if (in->ntypes) {
        const char *types = pgq_array_literal(a, in->types, in->ntypes);
        if (!types) return -1;
        pgq_sql_add(b, " AND r.rel_type = ANY($%d)", pgq_text_array(q, types));
    }
    pgq_sql_add(b, " ORDER BY r.source_id, r.rel_type, r.target_id");
    return 0;
}

static int traverse(pgq_session *ss, global_ctx *c, void *arg) {
    traverse_args *a = arg;
    const global_traverse_in *in = a->in;
    global_traverse_out *out = a->out;
    const principal *p = c->p;
    pgq_params q = {0};
    pgq_sql b = {0};
    if (global_sql_traverse(c->ar, p, in, &b, &q) != 0)
        return fail(c, STATUS_ENOMEM, "out of memory");
    PGresult *r;
    int rc = pgq_pipeline(ss, "traverse", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", &b,
                          &q, 0, &r);
    if (rc != STATUS_OK) return rc;
    int rows = PQntuples(r);
    if (rows == 0) {
        PQclear(r);
        return fail(c, STATUS_ENOTFOUND, "entity %s not found", in->start_id);
    }
    int take = rows < in->limit ? rows : in->limit;
    out->truncated = rows > take;
    out->nodes = arena_alloc(c->ar, (size_t)take * sizeof *out->nodes);
    out->depths = arena_alloc(c->ar, (size_t)take * sizeof *out->depths);
    const char **ids = arena_alloc(c->ar, (size_t)take * sizeof *ids);
    if (!out->nodes || !out->depths || !ids) rc = fail(c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; rc == STATUS_OK && i < take; i++) {
        int64_t depth;
        rc = decode_entity(c, r, i, &out->nodes[i]);
        if (rc == STATUS_OK && pgq_col_int(r, i, E_NCOLS, &depth) != 0)
            rc = fail(c, STATUS_EINTERNAL, "unreadable depth");
        out->depths[i] = (int)depth;
        ids[i] = out->nodes[i].id;
    }
    PQclear(r);
    if (rc != STATUS_OK) return rc;
    out->nnodes = (size_t)take;

    /* The edges among the returned entities, in the same snapshot. */
    pgq_params eq = {0};
    pgq_sql eb = {0};
    if (global_sql_traverse_edges(c->ar, p, in, ids, out->nnodes, &eb, &eq) != 0)
        return fail(c, STATUS_ENOMEM, "out of memory");
    /* The edges and the COMMIT of the read-only snapshot: one round trip. */
    if ((rc = pgq_pipeline(ss, "traverse edges", NULL, &eb, &eq, 1, &r)) != STATUS_OK)
        return rc;
    int nrel = PQntuples(r);
    out->edges = arena_alloc(c->ar, ((size_t)nrel + 1) * sizeof *out->edges);
    if (!out->edges) rc = fail(c, STATUS_ENOMEM, "out of memory");
    size_t bytes = 0;
    for (int i = 0; rc == STATUS_OK && i < nrel; i++) {
        int64_t plen = 0;
        pgq_col_int(r, i, 11, &plen);
        bytes += (size_t)plen + (size_t)PQgetlength(r, i, 1) + (size_t)PQgetlength(r, i, 2) +
                 (size_t)PQgetlength(r, i, 3) + 64;
        if (bytes > a->max_response_bytes) {
            out->truncated = 1;
            break;
        }
        rc = decode_rel(c, r, i, &out->edges[out->nedges]);
        if (rc == STATUS_OK) out->nedges++;
    }
    PQclear(r);
    return rc;
}

int global_traverse(global_store *s, global_ctx *c, const global_traverse_in *in,
                    global_traverse_out *out) {
    memset(out, 0, sizeof *out);
    traverse_args a = {in, out, s->o.max_response_bytes};
    return run(s, c, traverse, &a);
}

/* ------------------------------------------------------------ tasks */

typedef struct {
    const global_task_in *in;
    global_task *out;
    int *created;
} record_task_args;

static int record_task(pgq_session *ss, global_ctx *c, void *arg) {
    record_task_args *a = arg;
    const global_task_in *in = a->in;
    const char *pii = pgq_array_literal(c->ar, in->pii_kinds, in->npii);
    const char *ents = pgq_array_literal(c->ar, in->entity_ids, in->nentity_ids);
    if (!pii || !ents) return fail(c, STATUS_ENOMEM, "out of memory");
    for (int race = 0; race < MAX_CREATE_RACES; race++) {
        pgq_params lq = {0};
        pgq_sql lb = {0};
        pgq_sql_add(&lb,
                    "SELECT owner, label, version, start_time FROM tasks WHERE tenant = $%d"
                    " AND id = $%d FOR UPDATE",
                    pgq_text(&lq, principal_tenant(c->p)), pgq_text(&lq, in->id));
        locked_row lr;
        int rc;
        if (race == 0) {
            rc = lock_row(ss, c, &lb, &lq, &lr);
        } else {
            PGresult *r;
            if ((rc = pgq_exec_ok(ss, &lb, &lq, "row lock", &r)) != STATUS_OK) return rc;
            rc = decode_lock(c, r, &lr);
            PQclear(r);
        }
        if (rc != STATUS_OK) return rc;
        if (lr.exists && (rc = may_modify(c, &lr, "task", in->id)) != STATUS_OK) return rc;
        if (in->has_end && lr.exists && !in->has_start && in->end_us < lr.start_us)
            return fail(c, STATUS_EINVALID,
                        "end_time: before the task's recorded start_time");
        int label = principal_stamp_label(c->p, in->label, lr.exists ? lr.label : 0);
        pgq_params q = {0};
        pgq_sql b = {0};
        int p_tenant = pgq_text(&q, principal_tenant(c->p));
        int p_id = pgq_text(&q, in->id);
        int p_label = pgq_int4(&q, label);
        int p_type = pgq_text(&q, in->type);
        int p_desc = pgq_text(&q, in->description);
        int p_status = pgq_int4(&q, in->status);
        int p_prov = in->provenance_json ? pgq_jsonb(&q, in->provenance_json)
                                         : pgq_null(&q, PGQ_OID_JSONB);
        int p_result =
            in->result_json ? pgq_jsonb(&q, in->result_json) : pgq_null(&q, PGQ_OID_JSONB);
        int p_ents = pgq_text_array(&q, ents);
        int p_pii = pgq_text_array(&q, pii);
        int p_start = in->has_start ? pgq_ts(&q, in->start_us) : pgq_null(&q, PGQ_OID_TIMESTAMPTZ);
        int p_end = in->has_end ? pgq_ts(&q, in->end_us) : pgq_null(&q, PGQ_OID_TIMESTAMPTZ);
        if (!lr.exists)
            pgq_sql_add(&b,
                        "INSERT INTO tasks AS t (tenant, id, owner, label, task_type,"
                        " description, status, provenance, result, entity_ids, pii_kinds,"
                        " start_time, end_time, version, created_at, updated_at)"
                        " VALUES ($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d,"
                        " COALESCE($%d, now()), $%d, 1, now(), now())"
                        " ON CONFLICT (tenant, id) DO NOTHING RETURNING " T_COLS,
                        p_tenant, p_id, pgq_text(&q, principal_sub(c->p)), p_label, p_type,
                        p_desc, p_status, p_prov, p_result, p_ents, p_pii, p_start, p_end);
        else
            pgq_sql_add(&b,
                        "UPDATE tasks AS t SET label = $%d, task_type = $%d, description = $%d,"
                        " status = $%d, provenance = $%d, result = $%d, entity_ids = $%d,"
                        " pii_kinds = $%d, start_time = COALESCE($%d, t.start_time),"
                        " end_time = $%d, version = t.version + 1, updated_at = now()"
                        " WHERE t.tenant = $%d AND t.id = $%d RETURNING " T_COLS,
                        p_label, p_type, p_desc, p_status, p_prov, p_result, p_ents, p_pii,
                        p_start, p_end, p_tenant, p_id);
        PGresult *r;
        if ((rc = pgq_exec_ok(ss, &b, &q, "task write", &r)) != STATUS_OK) return rc;
        if (PQntuples(r) == 0) {
            PQclear(r);
            continue;
        }
        rc = decode_task(c, r, 0, a->out);
        PQclear(r);
        if (rc != STATUS_OK) return rc;
        if (a->out->has_end && a->out->end_us < a->out->start_us)
            return fail(c, STATUS_EINVALID, "end_time: before start_time");
        *a->created = !lr.exists;
        return commit(ss, c);
    }
    return fail(c, STATUS_ECONFLICT, "task %s is being created concurrently; retry", in->id);
}

int global_record_task(global_store *s, global_ctx *c, const global_task_in *in,
                       global_task *out, int *created) {
    record_task_args a = {in, out, created};
    return run(s, c, record_task, &a);
}

typedef struct {
    const global_list_tasks_in *in;
    global_task **out;
    size_t *n;
    int *more;
} list_tasks_args;

static int list_tasks(pgq_session *ss, global_ctx *c, void *arg) {
    list_tasks_args *a = arg;
    const global_list_tasks_in *in = a->in;
    pgq_params q = {0};
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT " T_COLS " FROM tasks t WHERE ");
    add_read_diode(&b, &q, c->p, "t");
    if (in->status) pgq_sql_add(&b, " AND t.status = $%d", pgq_int4(&q, in->status));
    if (in->type[0]) pgq_sql_add(&b, " AND t.task_type = $%d", pgq_text(&q, in->type));
    if (in->has_start) pgq_sql_add(&b, " AND t.start_time >= $%d", pgq_ts(&q, in->start_us));
    if (in->has_end) pgq_sql_add(&b, " AND t.start_time < $%d", pgq_ts(&q, in->end_us));
    if (in->has_after) {
        int p_ts = pgq_ts(&q, in->after_start_us);
        pgq_sql_add(&b, " AND (t.start_time < $%d OR (t.start_time = $%d AND t.id > $%d))",
                    p_ts, p_ts, pgq_text(&q, in->after_id));
    }
    pgq_sql_add(&b, " ORDER BY t.start_time DESC, t.id LIMIT $%d",
                pgq_int8(&q, (int64_t)in->limit + 1));
    PGresult *r;
    int rc = pgq_pipeline(ss, "list tasks", NULL, &b, &q, 1, &r);
    if (rc != STATUS_OK) return rc;
    int rows = PQntuples(r), take = rows < in->limit ? rows : in->limit;
    global_task *v = arena_alloc(c->ar, ((size_t)take + 1) * sizeof *v);
    if (!v) rc = fail(c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; rc == STATUS_OK && i < take; i++) rc = decode_task(c, r, i, &v[i]);
    PQclear(r);
    if (rc != STATUS_OK) return rc;
    *a->out = v;
    *a->n = (size_t)take;
    *a->more = rows > take;
    return STATUS_OK;
}

int global_list_tasks(global_store *s, global_ctx *c, const global_list_tasks_in *in,
                      global_task **out, size_t *n, int *more) {
    *out = NULL;
    *n = 0;
    *more = 0;
    list_tasks_args a = {in, out, n, more};
    return run(s, c, list_tasks, &a);
}
