/* entries_erase: the Entries tier's eraser (tier/tier_erase.h): a data
 * subject's entries (owned by the principal, or whose metadata names the
 * subject id), or a retention rule's, deleted in one statement (at most
 * sel->limit), expired or not, and each deleted entry's copy dropped from
 * the router's cache on every replica. */
#include <jansson.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/b64url.h"
#include "service/core/text.h"
#include "service/entries/entries_store_internal.h"

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
    /* Without a batch bound a plain DELETE, which rechecks its condition
     * on a row updated meanwhile (so Forget erases it); a batch by ctid (a
     * row updated meanwhile waits for the sweeper's next batch). */
    const tier_erase_sel *sel = j->sel;
    if (sel->dry_run) pgq_sql_add(&b, "SELECT count(*) FROM entries WHERE ");
    else if (sel->limit)
        pgq_sql_add(&b, "DELETE FROM entries WHERE ctid IN (SELECT ctid FROM entries WHERE ");
    else pgq_sql_add(&b, "DELETE FROM entries WHERE ");
    int rc = tier_erase_sql_where(&b, c, sel, NULL, "metadata");
    if (rc == STATUS_OK) rc = tier_erase_sql_ns(&b, c, sel, "namespace");
    if (rc != STATUS_OK) return rc;
    if (!sel->dry_run && sel->limit) pgq_sql_add(&b, " LIMIT %lld)", (long long)sel->limit);
    if (!sel->dry_run) pgq_sql_add(&b, " RETURNING namespace, key");
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

/* ------------------------------------------------------------ export */

#define EXPORT_PAGE 16 /* entries (up to 1 MiB each) in memory at a time */

typedef struct export_job {
    const tier_erase_sel *sel;
    const char *after_ns, *after_key; /* the keyset cursor; NULL on the first page */
    PGresult *res;
} export_job;

static int export_page(pgq_session *ss, tier_ctx *c, void *arg) {
    export_job *j = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT " ENTRIES_COLS ", value FROM entries WHERE ");
    int rc = tier_erase_sql_where(&b, c, j->sel, NULL, "metadata");
    if (rc == STATUS_OK) rc = tier_erase_sql_ns(&b, c, j->sel, "namespace");
    if (j->after_ns)
        pgq_sql_add(&b, " AND (namespace, key) > ($%d, $%d)", pgq_text(&b, j->after_ns),
                    pgq_text(&b, j->after_key));
    pgq_sql_add(&b, " ORDER BY namespace, key LIMIT %d", EXPORT_PAGE);
    return rc == STATUS_OK ? pgq_pipeline(ss, "export entries", NULL, &b, 1, &j->res) : rc;
}

/* An entry's content: its value as text when it is UTF-8, else base64. */
static int render_entry(tier_ctx *c, const entries_record *e, const char **json) {
    json_error_t jerr;
    json_t *meta = json_loads(e->metadata_json ? e->metadata_json : "{}", 0, &jerr);
    json_t *tags = json_array(), *value = NULL;
    for (size_t i = 0; tags && i < e->ntags; i++)
        json_array_append_new(tags, json_string(e->tags[i]));
    const char *encoding = "text";
    if (text_utf8_valid(e->value, e->value_len)) {
        value = json_stringn((const char *)e->value, e->value_len);
    } else {
        char *b64 = arena_alloc(c->ar, b64url_encoded_len(e->value_len) + 1);
        if (b64) value = json_stringn(b64, b64url_encode(e->value, e->value_len, b64));
        encoding = "base64url";
    }
    json_t *o = json_pack("{s:o, s:s, s:s, s:o, s:o}", "value", value ? value : json_null(),
                          "value_encoding", encoding, "content_type", e->content_type, "metadata",
                          meta ? meta : json_object(), "tags", tags);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    *json = s ? arena_strdup(c->ar, s) : NULL;
    free(s);
    return *json ? STATUS_OK : tier_fail(c, STATUS_ENOMEM, "out of memory");
}

int entries_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                   void *emit_arg) {
    const entries_service *svc = state;
    if (tier_erase_is_retention(sel)) return STATUS_OK;
    export_job j = {.sel = sel};
    char *after[2] = {NULL, NULL};
    int rc = STATUS_OK;
    for (int more = 1; rc == STATUS_OK && more;) {
        j.after_ns = after[0], j.after_key = after[1], j.res = NULL;
        rc = tier_sql_run(svc->env->pg, c, TIER_MAX_STATEMENT_MS, export_page, &j);
        if (rc != STATUS_OK) break;
        /* A page's strings and values in an arena of its own. */
        arena *keep = c->ar, *page = arena_create();
        int rows = PQntuples(j.res);
        c->ar = page;
        if (!page) rc = STATUS_ENOMEM;
        for (int i = 0; rc == STATUS_OK && i < rows; i++) {
            entries_record e;
            tier_export_rec rec = {.kind = "entry"};
            rc = entries_decode_row(c, j.res, i, 1, &e);
            if (rc == STATUS_OK) rc = render_entry(c, &e, &rec.json);
            if (rc == STATUS_OK && !(rec.id = arena_printf(c->ar, "%s/%s", e.ns, e.key)))
                rc = STATUS_ENOMEM;
            rec.meta = &e.meta;
            if (rc == STATUS_OK) rc = emit(emit_arg, &rec);
        }
        c->ar = keep;
        arena_free(page);
        if (rc == STATUS_ENOMEM) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
        more = rows == EXPORT_PAGE;
        for (int k = 0; rc == STATUS_OK && more && k < 2; k++) {
            free(after[k]);
            if (!(after[k] = strdup(PQgetvalue(j.res, rows - 1, ECOL_NS + k))))
                rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
        }
        PQclear(j.res);
    }
    free(after[0]);
    free(after[1]);
    return rc;
}
