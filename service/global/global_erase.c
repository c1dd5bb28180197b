/* global_erase: GlobalMemory's eraser (tier/tier_erase.h): a data
 * subject's entities, relationships and tasks in one transaction.
 * Relationships go first: those the selection names, and every one
 * touching an entity the selection names, whoever owns it (an edge to an
 * erased entity would still say something about it; the foreign keys
 * would cascade it anyway, uncounted). Then the entities, each dropped
 * from the entity cache on every replica, then the tasks (by provenance).
 * TIER_GLOBAL counts the three together. */
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
 * *count; with ids, the first column of what it returned (in c's arena). */
static int delete_rows(pgq_session *ss, tier_ctx *c, const pgq_sql *b, const char *what,
                       int64_t *count, const char ***ids, size_t *nids) {
    PGresult *r = NULL;
    int rc = pgq_exec_ok(ss, b, what, &r);
    if (rc != STATUS_OK) return rc;
    *count += atoll(PQcmdTuples(r));
    if (ids && (*ids = arena_alloc(c->ar, ((size_t)PQntuples(r) + 1) * sizeof **ids))) {
        for (int i = 0; i < PQntuples(r); i++)
            if (((*ids)[*nids] = pgq_col_str(c->ar, r, i, 0))) ++*nids;
    }
    PQclear(r);
    return STATUS_OK;
}

static int erase_in(pgq_session *ss, tier_ctx *c, void *arg) {
    erase_job *j = arg;
    const tier_erase_sel *sel = j->sel;
    j->count = 0;
    if (sel->dry_run) return count_all(ss, c, sel, &j->count);
    pgq_sql b = {0};
    pgq_sql_add(&b, "DELETE FROM relationships r WHERE ");
    int rc = rel_where(&b, c, sel);
    PGresult *r = NULL;
    if (rc == STATUS_OK) rc = pgq_pipeline(ss, "erase relationships", "BEGIN", &b, 0, &r);
    if (rc != STATUS_OK) return rc;
    j->count += atoll(PQcmdTuples(r));
    PQclear(r);

    const char **ids = NULL;
    size_t nids = 0;
    memset(&b, 0, sizeof b);
    pgq_sql_add(&b, "DELETE FROM entities e WHERE ");
    rc = tier_erase_sql_where(&b, c, sel, "e", "properties");
    pgq_sql_add(&b, " RETURNING id");
    if (rc == STATUS_OK) rc = delete_rows(ss, c, &b, "erase entities", &j->count, &ids, &nids);
    if (rc != STATUS_OK) return rc;

    memset(&b, 0, sizeof b);
    pgq_sql_add(&b, "DELETE FROM tasks t WHERE ");
    rc = tier_erase_sql_where(&b, c, sel, "t", "provenance");
    if (rc == STATUS_OK) rc = delete_rows(ss, c, &b, "erase tasks", &j->count, NULL, NULL);
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
