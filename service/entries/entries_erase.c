/* entries_erase: the Entries tier's eraser (tier/tier_erase.h): a data
 * subject's entries (owned by the principal, or whose metadata names the
 * subject id), or a retention rule's, deleted in one statement (at most
 * sel->limit), expired or not, and each deleted entry's copy dropped from
 * the router's cache on every replica. */
#include <jansson.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "service/entries/entries_store_internal.h"

#include "service/core/log.h"
#include "service/entries/entries_service_internal.h"
#include "service/tier/tier_erase.h"
#include "service/tier/tier_export.h"
#include "service/tier/tier_sql.h"

static int erase_where(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    int rc = tier_erase_sql_where(b, c, sel, NULL, "metadata");
    return rc == STATUS_OK ? tier_erase_sql_ns(b, c, sel, "namespace") : rc;
}

/* Each erased entry's copy goes from the router's cache on every replica. */
static void erased(void *state, tier_ctx *c, const PGresult *r) {
    for (int i = 0; i < PQntuples(r); i++) {
        const char *ns = pgq_col_str(c->ar, r, i, 0), *key = pgq_col_str(c->ar, r, i, 1);
        if (ns && key) entries_changed(state, c, ns, key);
    }
}

static const tier_erase_table erase_entries = {.table = "entries",
                                               .what = "erase entries",
                                               .where = erase_where,
                                               .returning = " namespace, key",
                                               .erased = erased};

int entries_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    const entries_service *svc = state;
    return tier_erase_table_run(&erase_entries, svc->env->pg, state, c, sel, count);
}

/* ------------------------------------------------------------ export */

#define EXPORT_PAGE 16 /* entries (up to 1 MiB each) in memory at a time */

static int select_entries(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    pgq_sql_add(b, "SELECT " ENTRIES_COLS ", value FROM entries WHERE ");
    return erase_where(b, c, sel);
}

/* An entry's content: its value as text when it is UTF-8, else base64. */
static int render_entry(tier_ctx *c, const entries_record *e, const char **json) {
    json_error_t jerr;
    json_t *meta = json_loads(e->metadata_json ? e->metadata_json : "{}", 0, &jerr);
    json_t *tags = json_array(), *value = NULL;
    for (size_t i = 0; tags && i < e->ntags; i++)
        json_array_append_new(tags, json_string(e->tags[i]));
    const char *encoding;
    value = tier_export_bytes(c, e->value, e->value_len, &encoding);
    json_t *o = json_pack("{s:o, s:s, s:s, s:o, s:o}", "value", value ? value : json_null(),
                          "value_encoding", encoding, "content_type", e->content_type, "metadata",
                          meta ? meta : json_object(), "tags", tags);
    return tier_export_json(c, o, json);
}

static int render_row(tier_ctx *c, const PGresult *r, int i, const tier_erase_sel *sel,
                      tier_export_rec *rec, tier_meta *meta) {
    (void)sel;
    entries_record e;
    int rc = entries_decode_row(c, r, i, 1, &e);
    if (rc == STATUS_OK) rc = render_entry(c, &e, &rec->json);
    if (rc == STATUS_OK && !(rec->id = arena_printf(c->ar, "%s/%s", e.ns, e.key)))
        rc = STATUS_ENOMEM;
    if (rc == STATUS_OK) *meta = e.meta;
    return rc;
}

static const tier_export_pages export_entries = {.kind = "entry",
                                                 .what = "export entries",
                                                 .key = "namespace, key",
                                                 .nkey = 2,
                                                 .key_cols = {ECOL_NS, ECOL_KEY},
                                                 .page = EXPORT_PAGE,
                                                 .select = select_entries,
                                                 .render = render_row};

int entries_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                   void *emit_arg) {
    const entries_service *svc = state;
    if (tier_erase_is_retention(sel)) return STATUS_OK;
    return tier_export_pages_run(svc->env->pg, c, &export_entries, sel, emit, emit_arg);
}
