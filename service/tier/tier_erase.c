/* tier_erase: the erasure principal and the subject's JSON; see
 * tier_erase.h. */
#include "service/tier/tier_erase.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/tier/tier_sql.h"

principal *tier_erase_principal(const tier_erase_sel *sel) {
    jwt_claims *cl = calloc(1, sizeof *cl);
    if (!cl) return NULL;
    /* No scopes: the principal only carries the diode's inputs; the
     * breadths are the context's (PRINCIPAL_ALL without an owner, so the
     * placeholder sub is never compared with an owner). */
    cl->sub = strdup(sel->owner ? sel->owner : " erasure");
    cl->tenant = strdup(sel->tenant);
    cl->iss = NULL;
    cl->clr = sel->max_label ? (jwt_label)sel->max_label : JWT_LABEL_SECRET;
    cl->lvl = JWT_LABEL_PUBLIC;
    if (!cl->sub || !cl->tenant) {
        jwt_claims_free(cl);
        return NULL;
    }
    return principal_create(cl);
}

const char *tier_erase_subject_json(arena *a, const tier_erase_sel *sel) {
    json_t *o = json_pack("{s:s}", "subject_id", sel->subject_id ? sel->subject_id : "");
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    const char *copy = s ? arena_strdup(a, s) : NULL;
    free(s);
    return copy;
}

int tier_erase_is_retention(const tier_erase_sel *sel) {
    return sel->before_us || sel->label || sel->pii_kind;
}

/* Every condition of sel but its subject. */
static void where_but_subject(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel,
                              const char *alias) {
    const char *a = alias ? alias : "", *dot = alias ? "." : "";
    tier_sql_read_diode(b, c, alias);
    if (sel->before_us)
        pgq_sql_add(b, " AND %s%supdated_at < $%d", a, dot, pgq_ts(b, sel->before_us));
    if (sel->label) pgq_sql_add(b, " AND %s%slabel = $%d", a, dot, pgq_int4(b, sel->label));
    if (sel->pii_kind && strcmp(sel->pii_kind, "*") == 0)
        pgq_sql_add(b, " AND %s%spii_kinds <> '{}'", a, dot);
    else if (sel->pii_kind)
        pgq_sql_add(b, " AND $%d = ANY(%s%spii_kinds)", pgq_text(b, sel->pii_kind), a, dot);
}

int tier_erase_sql_where(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel, const char *alias,
                         const char *json_col) {
    const char *a = alias ? alias : "", *dot = alias ? "." : "";
    where_but_subject(b, c, sel, alias);
    if (!sel->subject_id) return STATUS_OK;
    if (!json_col) {
        pgq_sql_add(b, " AND false");
        return STATUS_OK;
    }
    const char *json = tier_erase_subject_json(c->ar, sel);
    if (!json) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    pgq_sql_add(b, " AND (%s%s%s->>'subject_id') = $%d AND %s%s%s @> $%d", a, dot, json_col,
                pgq_text(b, sel->subject_id), a, dot, json_col, pgq_jsonb(b, json));
    return STATUS_OK;
}

int tier_erase_sql_ns(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel, const char *col) {
    if (!sel->ns_limited) return STATUS_OK;
    int none;
    const char *likes = tier_sql_ns_likes(c->ar, sel->ns, sel->nns, &none);
    if (none) pgq_sql_add(b, " AND false");
    else if (!likes) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    else pgq_sql_add(b, " AND %s LIKE ANY($%d)", col, pgq_text_array(b, likes));
    return STATUS_OK;
}

int tier_erase_sql_where_value(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel,
                               const char *alias, const char *value_col, int is_text) {
    const char *a = alias ? alias : "", *dot = alias ? "." : "";
    where_but_subject(b, c, sel, alias);
    if (!sel->subject_id) return STATUS_OK;
    /* Only bytes that spell the key (or could, through a \u escape) are
     * decoded: the function is the slow part. (The SQL text '\\u'::bytea
     * is a backslash and a u: bytea's escape input doubles backslashes.) */
    const char *bytes = is_text
                            ? arena_printf(c->ar, "convert_to(%s%s%s, 'UTF8')", a, dot, value_col)
                            : arena_printf(c->ar, "%s%s%s", a, dot, value_col);
    if (!bytes) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    pgq_sql_add(b,
                " AND (position('subject_id'::bytea IN %s) > 0 OR position('\\\\u'::bytea IN %s)"
                " > 0) AND memoryd_subject_of(%s) = $%d",
                bytes, bytes, bytes, pgq_text(b, sel->subject_id));
    return STATUS_OK;
}

void tier_erase_sql_begin(pgq_sql *b, const tier_erase_sel *sel, const char *table,
                          const char *alias) {
    const char *as = alias ? alias : table, *sp = alias ? " " : "";
    if (!alias) alias = "";
    if (sel->dry_run) pgq_sql_add(b, "SELECT count(*) FROM %s%s%s WHERE ", table, sp, alias);
    else if (sel->limit)
        pgq_sql_add(b, "DELETE FROM %s WHERE ctid IN (SELECT %s.ctid FROM %s%s%s WHERE ", table, as,
                    table, sp, alias);
    else pgq_sql_add(b, "DELETE FROM %s%s%s WHERE ", table, sp, alias);
}

void tier_erase_sql_end(pgq_sql *b, const tier_erase_sel *sel) {
    if (!sel->dry_run && sel->limit) pgq_sql_add(b, " LIMIT %lld)", (long long)sel->limit);
}

int tier_erase_sql_count(tier_ctx *c, const tier_erase_sel *sel, const PGresult *r,
                         const char *what, int64_t *count) {
    if (!sel->dry_run) {
        *count = atoll(PQcmdTuples((PGresult *)r));
        return STATUS_OK;
    }
    if (pgq_col_int(r, 0, 0, count) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "unexpected count of %s", what);
    return STATUS_OK;
}

typedef struct table_job {
    const tier_erase_table *t;
    void *state;
    const tier_erase_sel *sel;
    int64_t count;
} table_job;

static int erase_table_in(pgq_session *ss, tier_ctx *c, void *arg) {
    table_job *j = arg;
    const tier_erase_table *t = j->t;
    pgq_sql b = {0};
    tier_erase_sql_begin(&b, j->sel, t->table, NULL);
    int rc = t->where(&b, c, j->sel);
    if (rc != STATUS_OK) return rc;
    tier_erase_sql_end(&b, j->sel);
    int returns = t->returning && !j->sel->dry_run;
    if (returns) pgq_sql_add(&b, " RETURNING%s", t->returning);
    PGresult *r = NULL;
    if ((rc = pgq_pipeline(ss, t->what, "BEGIN", &b, 1, &r)) != STATUS_OK) return rc;
    rc = tier_erase_sql_count(c, j->sel, r, t->what, &j->count);
    if (rc == STATUS_OK && returns && t->erased) t->erased(j->state, c, r);
    PQclear(r);
    return rc;
}

int tier_erase_table_run(const tier_erase_table *t, pg_pool *pg, void *state, tier_ctx *c,
                         const tier_erase_sel *sel, int64_t *count) {
    table_job j = {.t = t, .state = state, .sel = sel};
    int rc = tier_sql_run(pg, c, TIER_MAX_STATEMENT_MS, erase_table_in, &j);
    *count = rc == STATUS_OK ? j.count : 0;
    return rc;
}
