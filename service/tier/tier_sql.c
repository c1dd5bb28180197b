/* tier_sql: the record rules in SQL; see tier_sql.h. */
#include "service/tier/tier_sql.h"

#include <stdio.h>
#include <string.h>

#include "service/auth/nsglob.h"

typedef struct {
    tier_ctx *c;
    tier_sql_fn fn;
    void *arg;
} run_args;

static int run_one(pgq_session *ss, void *arg) {
    run_args *r = arg;
    return r->fn(ss, r->c, r->arg);
}

int tier_sql_run(pg_pool *pg, tier_ctx *c, int max_statement_ms, tier_sql_fn fn, void *arg) {
    run_args r = {c, fn, arg};
    c->err[0] = '\0';
    return pgq_run(pg, c->tier, c->deadline_ms, max_statement_ms, c->cancel, c->err, sizeof c->err,
                   run_one, &r);
}

static int audit_row_fn(pgq_session *ss, tier_ctx *c, void *arg) {
    (void)arg;
    pgq_sql b = {0};
    char why[256] = "";
    if (c->commit_sql(c->hook_arg, &b, why, sizeof why) != 0)
        return tier_fail(c, STATUS_ENOMEM, "cannot build the write's audit row: %s", why);
    PGresult *r;
    int rc = pgq_exec_ok(ss, &b, "store the write's audit row", &r);
    PQclear(r);
    return rc;
}

int tier_sql_audit_row(pg_pool *pg, tier_ctx *c) {
    if (!c->commit_sql) return STATUS_OK;
    int rc = tier_sql_run(pg, c, 0, audit_row_fn, NULL);
    if (rc == STATUS_OK && c->after_commit) c->after_commit(c->hook_arg);
    return rc;
}

int tier_sql_commit(pgq_session *ss, tier_ctx *c) {
    return pgq_commit(ss, c->before_commit, c->after_commit, c->hook_arg);
}

void tier_sql_read_diode(pgq_sql *b, const tier_ctx *c, const char *alias) {
    const char *a = alias ? alias : "", *dot = alias ? "." : "";
    pgq_sql_add(b, "%s%stenant = $%d AND %s%slabel <= $%d", a, dot,
                pgq_text(b, principal_tenant(c->p)), a, dot,
                pgq_int4(b, (int32_t)principal_clr(c->p)));
    if (c->read_breadth != PRINCIPAL_ALL)
        pgq_sql_add(b, " AND %s%sowner = $%d", a, dot, pgq_text(b, principal_sub(c->p)));
}

int tier_sql_lock_row(tier_ctx *c, const PGresult *r, tier_row *row) {
    memset(row, 0, sizeof *row);
    if (PQntuples(r) == 0) return STATUS_OK;
    int64_t label;
    row->owner = pgq_col_str(c->ar, r, 0, 0);
    if (!row->owner || pgq_col_int(r, 0, 1, &label) != 0 ||
        pgq_col_int(r, 0, 2, &row->version) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "unexpected row-lock result");
    row->exists = 1;
    row->label = (int)label;
    return STATUS_OK;
}

int tier_sql_lock(pgq_session *ss, tier_ctx *c, const pgq_sql *sql, int begin, tier_row *row,
                  PGresult **res) {
    memset(row, 0, sizeof *row);
    if (res) *res = NULL;
    PGresult *r;
    int rc = begin ? pgq_pipeline(ss, "row lock", "BEGIN", sql, 0, &r)
                   : pgq_exec_ok(ss, sql, "row lock", &r);
    if (rc != STATUS_OK) return rc;
    if ((rc = tier_sql_lock_row(c, r, row)) != STATUS_OK) {
        PQclear(r);
        return rc;
    }
    if (res) *res = r;
    else PQclear(r);
    return STATUS_OK;
}

tier_store tier_store_on(pg_pool *pg, apg *pga, size_t max_response_bytes) {
    return (tier_store){
        pg, pga, max_response_bytes ? max_response_bytes : TIER_STORE_RESPONSE_BYTES, "english"};
}

/* ---- one statement on the event loop ---- */

static void async_done(apg_query *q, int status, PGresult *res) {
    tier_async *op = q->arg;
    if (op->rolling_back) {
        PQclear(res); /* the ROLLBACK's; the op ends as its decode said */
        op->done(op->done_arg, op->rollback_rc);
        return;
    }
    if (op->committing) { /* the audit row and COMMIT: no decode */
        PQclear(res);
        if (status != STATUS_OK) snprintf(op->c->err, sizeof op->c->err, "%s", q->err);
        else if (op->c->after_commit) op->c->after_commit(op->c->hook_arg);
        op->done(op->done_arg, status);
        return;
    }
    if (status != STATUS_OK) snprintf(op->c->err, sizeof op->c->err, "%s", q->err);
    else status = op->decode(op, res);
    PQclear(res);
    if (status == TIER_NEXT) {
        apg_submit(op->store->pga, q); /* on the connection q holds */
        return;
    }
    if (q->held) {
        /* The decode refused what the transaction read so far: roll it
         * back on its connection, then end the op. */
        op->rolling_back = 1;
        op->rollback_rc = status;
        pgq_sql_add(tier_async_next(op, "rollback", NULL), "ROLLBACK");
        q->hold = 0;
        apg_submit(op->store->pga, q);
        return;
    }
    op->done(op->done_arg, status);
}

int tier_async_commit(tier_async *op) {
    tier_ctx *c = op->c;
    pgq_sql *b = tier_async_next(op, "commit", "COMMIT");
    if (c->commit_sql) {
        char why[256] = "";
        if (c->commit_sql(c->hook_arg, b, why, sizeof why) != 0)
            return tier_fail(c, STATUS_EUNAVAILABLE, "cannot record the audit row: %s", why);
    } else {
        /* Nothing to add: the statement is a no-op ahead of COMMIT. */
        pgq_sql_add(b, "SELECT 1");
    }
    op->committing = 1;
    return TIER_NEXT;
}

void tier_async_begin(tier_async *op, const char *begin) {
    op->q.before = begin;
    op->q.hold = 1;
}

pgq_sql *tier_async_next(tier_async *op, const char *what, const char *after) {
    memset(&op->sql, 0, sizeof op->sql);
    op->q.what = what;
    op->q.before = NULL;
    op->q.after = after;
    op->q.hold = after == NULL;
    return &op->sql;
}

tier_async *tier_async_new(tier_ctx *c, const char *what, tier_async_decode_fn decode,
                           const void *args, size_t size, tier_async_done_fn done, void *done_arg) {
    tier_async *op = arena_zalloc(c->ar, sizeof *op);
    void *copy = op ? arena_alloc(c->ar, size ? size : 1) : NULL;
    if (!copy) return NULL;
    if (size) memcpy(copy, args, size); /* args may be NULL then */
    op->c = c;
    op->decode = decode;
    op->arg = copy;
    op->done = done;
    op->done_arg = done_arg;
    op->q.sql = &op->sql;
    op->q.what = what;
    op->q.done = async_done;
    op->q.arg = op;
    return op;
}

tier_async *tier_async_built(tier_async *op, int rc) {
    if (op && rc != STATUS_OK) {
        op->skip = 1;
        op->skip_rc = rc == TIER_NO_ROWS ? STATUS_OK : rc;
    }
    return op;
}

void tier_async_submit(const tier_store *s, tier_async *op) {
    if (op->skip) {
        op->done(op->done_arg, op->skip_rc);
        return;
    }
    op->c->err[0] = '\0';
    op->store = s;
    op->q.deadline_ms = op->c->deadline_ms;
    apg_submit(s->pga, &op->q);
}

void tier_async_cancel(const tier_store *s, tier_async *op) { apg_cancel(s->pga, &op->q); }

const char *tier_sql_ns_likes(arena *a, char *const *globs, size_t n, int *none) {
    *none = 0;
    const char **likes = arena_alloc(a, (n + 1) * sizeof *likes);
    if (!likes) return NULL;
    size_t k = 0;
    char why[128];
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(globs[i]);
        if (nsglob_check_pattern(globs[i], len, why, sizeof why) != 0) continue;
        char *like = arena_alloc(a, 2 * len + 1);
        if (!like || nsglob_to_like(globs[i], len, like, 2 * len + 1) < 0) return NULL;
        likes[k++] = like;
    }
    *none = k == 0;
    return *none ? NULL : pgq_array_literal(a, likes, k);
}
