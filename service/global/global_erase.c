/* global_erase: GlobalMemory's eraser (tier/tier_erase.h): a data
 * subject's (or a retention rule's) entities, relationships and tasks in
 * one transaction. The selection's entities are locked first (at most
 * sel->limit); then every relationship touching one of them, whoever owns
 * it (an edge to an erased entity would still say something about it; the
 * foreign keys would cascade it anyway, uncounted), and the relationships
 * the selection names itself; then the entities, each dropped from the
 * entity cache on every replica; then the tasks (by provenance). TIER_GLOBAL
 * counts the three together. */
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "service/cache/cache_records.h"
#include "service/global/global_service_internal.h"
#include "service/tier/tier_erase.h"
#include "service/tier/tier_sql.h"

typedef struct erase_job {
    const global_service *svc;
    const tier_erase_sel *sel;
    int64_t count;
} erase_job;

/* The relationships sel reaches, as a WHERE fragment on alias r. */
static int rel_where(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    pgq_sql_add(b, "(");
    int rc = tier_erase_sql_where(b, c, sel, "r", "properties");
    if (rc != STATUS_OK) return rc;
    pgq_sql_add(b,
                ") OR (r.tenant = $%d AND EXISTS (SELECT 1 FROM entities e WHERE "
                "e.tenant = r.tenant AND e.id IN (r.source_id, r.target_id) AND ",
                pgq_text(b, sel->tenant));
    rc = tier_erase_sql_where(b, c, sel, "e", "properties");
    pgq_sql_add(b, "))");
    return rc;
}

static int count_all(pgq_session *ss, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT (SELECT count(*) FROM entities e WHERE ");
    int rc = tier_erase_sql_where(&b, c, sel, "e", "properties");
    pgq_sql_add(&b, ") + (SELECT count(*) FROM relationships r WHERE ");
    if (rc == STATUS_OK) rc = rel_where(&b, c, sel);
    pgq_sql_add(&b, ") + (SELECT count(*) FROM tasks t WHERE ");
    if (rc == STATUS_OK) rc = tier_erase_sql_where(&b, c, sel, "t", "provenance");
    pgq_sql_add(&b, ")");
    PGresult *r = NULL;
    if (rc == STATUS_OK) rc = pgq_pipeline(ss, "count erasure", NULL, &b, 1, &r);
    if (rc == STATUS_OK && pgq_col_int(r, 0, 0, count) != 0)
        rc = tier_fail(c, STATUS_EINTERNAL, "unexpected erasure count");
    PQclear(r);
    return rc;
}

/* Runs b (a DELETE) in the open transaction: its row count added to
 * *count. */
static int delete_rows(pgq_session *ss, const pgq_sql *b, const char *what, int64_t *count) {
    PGresult *r = NULL;
    int rc = pgq_exec_ok(ss, b, what, &r);
    if (rc == STATUS_OK) *count += atoll(PQcmdTuples(r));
    PQclear(r);
    return rc;
}

/* " LIMIT n" of a batch, or nothing. */
static void add_limit(pgq_sql *b, const tier_erase_sel *sel) {
    if (sel->limit) pgq_sql_add(b, " LIMIT %lld", (long long)sel->limit);
}

/* The selection's entities, locked, their ids into *ids (in c's arena). */
static int lock_entities(pgq_session *ss, tier_ctx *c, const tier_erase_sel *sel, const char ***ids,
                         size_t *n) {
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT e.id FROM entities e WHERE ");
    int rc = tier_erase_sql_where(&b, c, sel, "e", "properties");
    add_limit(&b, sel);
    pgq_sql_add(&b, " FOR UPDATE");
    PGresult *r = NULL;
    if (rc == STATUS_OK) rc = pgq_pipeline(ss, "lock erased entities", "BEGIN", &b, 0, &r);
    if (rc != STATUS_OK) return rc;
    *n = 0;
    *ids = arena_alloc(c->ar, ((size_t)PQntuples(r) + 1) * sizeof **ids);
    for (int i = 0; *ids && i < PQntuples(r); i++)
        if (((*ids)[*n] = pgq_col_str(c->ar, r, i, 0))) ++*n;
    if (!*ids || *n != (size_t)PQntuples(r)) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    PQclear(r);
    return rc;
}

static int erase_in(pgq_session *ss, tier_ctx *c, void *arg) {
    erase_job *j = arg;
    const tier_erase_sel *sel = j->sel;
    j->count = 0;
    if (sel->dry_run) return count_all(ss, c, sel, &j->count);
    const char **ids = NULL;
    size_t nids = 0;
    int rc = lock_entities(ss, c, sel, &ids, &nids);
    const char *lit = rc == STATUS_OK && nids ? pgq_array_literal(c->ar, ids, nids) : NULL;
    if (rc == STATUS_OK && nids && !lit) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    pgq_sql b = {0};
    if (rc == STATUS_OK && nids) { /* every relationship touching them */
        int t = pgq_text(&b, sel->tenant), in = pgq_text_array(&b, lit);
        pgq_sql_add(&b,
                    "DELETE FROM relationships WHERE tenant = $%d AND "
                    "(source_id = ANY($%d) OR target_id = ANY($%d))",
                    t, in, in);
        rc = delete_rows(ss, &b, "erase relationships of erased entities", &j->count);
    }
    if (rc == STATUS_OK) { /* and those the selection names itself */
        memset(&b, 0, sizeof b);
        pgq_sql_add(&b, "DELETE FROM relationships WHERE ctid IN (SELECT r.ctid FROM "
                        "relationships r WHERE ");
        rc = tier_erase_sql_where(&b, c, sel, "r", "properties");
        add_limit(&b, sel);
        pgq_sql_add(&b, ")");
        if (rc == STATUS_OK) rc = delete_rows(ss, &b, "erase relationships", &j->count);
    }
    if (rc == STATUS_OK && nids) {
        memset(&b, 0, sizeof b);
        int t = pgq_text(&b, sel->tenant), in = pgq_text_array(&b, lit);
        pgq_sql_add(&b, "DELETE FROM entities WHERE tenant = $%d AND id = ANY($%d)", t, in);
        rc = delete_rows(ss, &b, "erase entities", &j->count);
    }
    if (rc == STATUS_OK) {
        memset(&b, 0, sizeof b);
        pgq_sql_add(&b, "DELETE FROM tasks WHERE ctid IN (SELECT t.ctid FROM tasks t WHERE ");
        rc = tier_erase_sql_where(&b, c, sel, "t", "provenance");
        add_limit(&b, sel);
        pgq_sql_add(&b, ")");
        if (rc == STATUS_OK) rc = delete_rows(ss, &b, "erase tasks", &j->count);
    }
    if (rc == STATUS_OK) rc = pgq_commit(ss, NULL, NULL, NULL);
    if (rc != STATUS_OK) return rc;
    /* Only once committed: a copy dropped before could be loaded again
     * from the rows still there. */
    if (j->svc->entities)
        for (size_t i = 0; i < nids; i++)
            cache_records_changed(j->svc->entities, c->ar, sel->tenant, ids[i]);
    return STATUS_OK;
}

int global_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    erase_job j = {.svc = state, .sel = sel};
    int rc = tier_sql_run(j.svc->env->pg, c, TIER_MAX_STATEMENT_MS, erase_in, &j);
    *count = rc == STATUS_OK ? j.count : 0;
    return rc;
}
