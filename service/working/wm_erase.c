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
#include "service/tier/tier_export.h"
#include "service/tier/tier_sql.h"
#include "service/working/wm_service_internal.h"
#include "service/working/wm_store_internal.h"

static int erase_where(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    int rc = tier_erase_sql_where_value(b, c, sel, NULL, "content", 1);
    return rc == STATUS_OK ? tier_erase_sql_ns(b, c, sel, "node") : rc;
}

static const tier_erase_table erase_docs = {
    .table = "working_memory", .what = "erase working memory", .where = erase_where};

int wm_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    const wm_service *svc = state;
    return tier_erase_table_run(&erase_docs, svc->env->pg, state, c, sel, count);
}

/* ------------------------------------------------------------ export */

#define EXPORT_PAGE 32 /* documents (up to 1 MiB each) in memory at a time */

static int select_docs(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    pgq_sql_add(b, "SELECT " WM_COLS ", content, node, thread FROM working_memory WHERE ");
    return erase_where(b, c, sel);
}

/* A document's content: {"node", "thread", "path", "content"}. */
static int render_doc(tier_ctx *c, const char *node, const char *thread, const wm_record *d,
                      const char **json) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "node", node, "thread", thread, "path", d->path,
                          "content", d->content ? d->content : "");
    return tier_export_json(c, o, json);
}

static int render_row(tier_ctx *c, const PGresult *r, int i, const tier_erase_sel *sel,
                      tier_export_rec *rec, tier_meta *meta) {
    (void)sel;
    wm_record d;
    const char *node = pgq_col_str(c->ar, r, i, WCOL_CONTENT + 1);
    const char *thread = pgq_col_str(c->ar, r, i, WCOL_CONTENT + 2);
    int rc = node && thread ? wm_decode_cols(c, r, i, 0, &d) : STATUS_ENOMEM;
    if (rc == STATUS_OK) rc = render_doc(c, node, thread, &d, &rec->json);
    if (rc == STATUS_OK &&
        !(rec->id = arena_printf(c->ar, "%s%s%s%s", node, thread[0] ? "@" : "", thread, d.path)))
        rc = STATUS_ENOMEM;
    if (rc == STATUS_OK) *meta = d.meta;
    return rc;
}

static const tier_export_pages export_docs = {
    .kind = "working_document",
    .what = "export working memory",
    .key = "node, thread, path",
    .nkey = 3,
    .key_cols = {WCOL_CONTENT + 1, WCOL_CONTENT + 2, WCOL_PATH},
    .page = EXPORT_PAGE,
    .select = select_docs,
    .render = render_row};

int wm_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
              void *emit_arg) {
    const wm_service *svc = state;
    if (tier_erase_is_retention(sel)) return STATUS_OK;
    return tier_export_pages_run(svc->env->pg, c, &export_docs, sel, emit, emit_arg);
}
