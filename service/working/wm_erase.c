/* wm_erase: WorkingMemory's eraser and exporter (tier/tier_erase.h): a
 * data subject's documents (those its principal owns, or those whose
 * content is a JSON object naming its subject id), or a retention rule's,
 * deleted in one statement, and the same selection read for
 * Privacy.Export a bounded page at a time. */
#include <jansson.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "service/tier/tier_erase.h"
#include "service/tier/tier_sql.h"
#include "service/working/wm_service_internal.h"
#include "service/working/wm_store_internal.h"

typedef struct erase_job {
    const tier_erase_sel *sel;
    int64_t count;
} erase_job;

static int erase_in(pgq_session *ss, tier_ctx *c, void *arg) {
    erase_job *j = arg;
    const tier_erase_sel *sel = j->sel;
    pgq_sql b = {0};
    /* As Entries': a plain DELETE rechecks its condition on a row updated
     * meanwhile; a bounded batch goes by ctid. */
    if (sel->dry_run) pgq_sql_add(&b, "SELECT count(*) FROM working_memory WHERE ");
    else if (sel->limit)
        pgq_sql_add(&b, "DELETE FROM working_memory WHERE ctid IN (SELECT ctid FROM"
                        " working_memory WHERE ");
    else pgq_sql_add(&b, "DELETE FROM working_memory WHERE ");
    int rc = tier_erase_sql_where_value(&b, c, sel, NULL, "content", 1);
    if (rc == STATUS_OK) rc = tier_erase_sql_ns(&b, c, sel, "node");
    if (rc != STATUS_OK) return rc;
    if (!sel->dry_run && sel->limit) pgq_sql_add(&b, " LIMIT %lld)", (long long)sel->limit);
    PGresult *r = NULL;
    if ((rc = pgq_pipeline(ss, "erase working memory", "BEGIN", &b, 1, &r)) != STATUS_OK) return rc;
    if (!sel->dry_run) j->count = atoll(PQcmdTuples(r));
    else if (pgq_col_int(r, 0, 0, &j->count) != 0)
        rc = tier_fail(c, STATUS_EINTERNAL, "unexpected count of working documents");
    PQclear(r);
    return rc;
}

int wm_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    const wm_service *svc = state;
    erase_job j = {.sel = sel};
    int rc = tier_sql_run(svc->env->pg, c, TIER_MAX_STATEMENT_MS, erase_in, &j);
    *count = rc == STATUS_OK ? j.count : 0;
    return rc;
}

/* ------------------------------------------------------------ export */

#define EXPORT_PAGE 32 /* documents (up to 1 MiB each) in memory at a time */

typedef struct export_job {
    const tier_erase_sel *sel;
    char *after[3]; /* node, thread, path of the last row; NULL on the first page */
    PGresult *res;
} export_job;

static int export_page(pgq_session *ss, tier_ctx *c, void *arg) {
    export_job *j = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT " WM_COLS ", content, node, thread FROM working_memory WHERE ");
    int rc = tier_erase_sql_where_value(&b, c, j->sel, NULL, "content", 1);
    if (rc == STATUS_OK) rc = tier_erase_sql_ns(&b, c, j->sel, "node");
    if (j->after[0])
        pgq_sql_add(&b, " AND (node, thread, path) > ($%d, $%d, $%d)", pgq_text(&b, j->after[0]),
                    pgq_text(&b, j->after[1]), pgq_text(&b, j->after[2]));
    pgq_sql_add(&b, " ORDER BY node, thread, path LIMIT %d", EXPORT_PAGE);
    return rc == STATUS_OK ? pgq_pipeline(ss, "export working memory", NULL, &b, 1, &j->res) : rc;
}

/* A document's content: {"node", "thread", "path", "content"}. */
static int render_doc(tier_ctx *c, const char *node, const char *thread, const wm_record *d,
                      const char **json) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "node", node, "thread", thread, "path", d->path,
                          "content", d->content ? d->content : "");
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    *json = s ? arena_strdup(c->ar, s) : NULL;
    free(s);
    return *json ? STATUS_OK : tier_fail(c, STATUS_ENOMEM, "out of memory");
}

static int export_rows(tier_ctx *c, const PGresult *r, tier_export_emit emit, void *emit_arg) {
    int rc = STATUS_OK;
    for (int i = 0; rc == STATUS_OK && i < PQntuples(r); i++) {
        wm_record d;
        tier_export_rec rec = {.kind = "working_document"};
        const char *node = pgq_col_str(c->ar, r, i, WCOL_CONTENT + 1);
        const char *thread = pgq_col_str(c->ar, r, i, WCOL_CONTENT + 2);
        rc = node && thread ? wm_decode_cols(c, r, i, 0, &d) : STATUS_ENOMEM;
        if (rc == STATUS_OK) rc = render_doc(c, node, thread, &d, &rec.json);
        if (rc == STATUS_OK &&
            !(rec.id = arena_printf(c->ar, "%s%s%s%s", node, thread[0] ? "@" : "", thread, d.path)))
            rc = STATUS_ENOMEM;
        rec.meta = &d.meta;
        if (rc == STATUS_OK) rc = emit(emit_arg, &rec);
    }
    return rc;
}

int wm_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
              void *emit_arg) {
    const wm_service *svc = state;
    if (tier_erase_is_retention(sel)) return STATUS_OK;
    export_job j = {.sel = sel};
    int rc = STATUS_OK;
    for (int more = 1; rc == STATUS_OK && more;) {
        j.res = NULL;
        rc = tier_sql_run(svc->env->pg, c, TIER_MAX_STATEMENT_MS, export_page, &j);
        if (rc != STATUS_OK) break;
        /* A page's strings in an arena of its own. */
        arena *keep = c->ar, *page = arena_create();
        int rows = PQntuples(j.res);
        c->ar = page;
        rc = page ? export_rows(c, j.res, emit, emit_arg) : STATUS_ENOMEM;
        c->ar = keep;
        arena_free(page);
        if (rc == STATUS_ENOMEM) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
        more = rows == EXPORT_PAGE;
        static const int cols[3] = {WCOL_CONTENT + 1, WCOL_CONTENT + 2, WCOL_PATH};
        for (int k = 0; rc == STATUS_OK && more && k < 3; k++) {
            free(j.after[k]);
            if (!(j.after[k] = strdup(PQgetvalue(j.res, rows - 1, cols[k]))))
                rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
        }
        PQclear(j.res);
    }
    for (int k = 0; k < 3; k++) free(j.after[k]);
    return rc;
}
