/* entries_erase: the Entries tier's eraser (tier/tier_erase.h): a data
 * subject's entries (owned by the principal, or whose metadata names the
 * subject id), or a retention rule's, deleted in one statement (at most
 * sel->limit), expired or not, and each deleted entry's copy dropped from
 * the router's cache on every replica. */
#include <libpq-fe.h>

#include "service/core/log.h"
#include "service/entries/entries_service_internal.h"
#include "service/tier/tier_erase.h"
#include "service/tier/tier_sql.h"

typedef struct erase_job {
    const entries_service *svc;
    const tier_erase_sel *sel;
    int64_t count;
} erase_job;

static int erase_in(pgq_session *ss, tier_ctx *c, void *arg) {
    erase_job *j = arg;
    pgq_sql b = {0};
    if (j->sel->dry_run) pgq_sql_add(&b, "SELECT count(*) FROM entries WHERE ");
    else pgq_sql_add(&b, "DELETE FROM entries WHERE ctid IN (SELECT ctid FROM entries WHERE ");
    int rc = tier_erase_sql_where(&b, c, j->sel, NULL, "metadata");
    if (rc != STATUS_OK) return rc;
    if (!j->sel->dry_run && j->sel->limit) pgq_sql_add(&b, " LIMIT %lld", (long long)j->sel->limit);
    if (!j->sel->dry_run) pgq_sql_add(&b, ") RETURNING namespace, key");
    PGresult *r = NULL;
    rc = pgq_pipeline(ss, "erase entries", "BEGIN", &b, 1, &r);
    if (rc != STATUS_OK) return rc;
    if (j->sel->dry_run) {
        if (pgq_col_int(r, 0, 0, &j->count) != 0)
            rc = tier_fail(c, STATUS_EINTERNAL, "unexpected count of entries");
    } else {
        j->count = PQntuples(r);
        for (int i = 0; i < PQntuples(r); i++) {
            const char *ns = pgq_col_str(c->ar, r, i, 0), *key = pgq_col_str(c->ar, r, i, 1);
            if (ns && key) entries_changed(j->svc, c, ns, key);
        }
    }
    PQclear(r);
    return rc;
}

int entries_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    erase_job j = {.svc = state, .sel = sel};
    int rc = tier_sql_run(j.svc->env->pg, c, TIER_MAX_STATEMENT_MS, erase_in, &j);
    *count = rc == STATUS_OK ? j.count : 0;
    return rc;
}
