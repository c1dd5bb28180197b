/* tier_export: keyset-paged exports of a table; see tier_export.h. */
#include "service/tier/tier_export.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/b64url.h"
#include "service/core/text.h"
#include "service/tier/tier_sql.h"

int tier_export_json(tier_ctx *c, json_t *o, const char **json) {
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    *json = s ? arena_strdup(c->ar, s) : NULL;
    free(s);
    return *json ? STATUS_OK : tier_fail(c, STATUS_ENOMEM, "out of memory");
}

json_t *tier_export_bytes(tier_ctx *c, const void *v, size_t n, const char **encoding) {
    if (text_utf8_valid((const uint8_t *)v, n)) {
        *encoding = "text";
        return json_stringn(v, n);
    }
    *encoding = "base64url";
    char *b64 = arena_alloc(c->ar, b64url_encoded_len(n) + 1);
    return b64 ? json_stringn(b64, b64url_encode(v, n, b64)) : NULL;
}

typedef struct page_job {
    const pgq_sql *b;
    const char *what;
    PGresult *res;
} page_job;

static int page_in(pgq_session *ss, tier_ctx *c, void *arg) {
    (void)c;
    page_job *j = arg;
    return pgq_pipeline(ss, j->what, NULL, j->b, 1, &j->res);
}

/* One page's rows through emit, their strings in an arena of the page's. */
static int emit_rows(tier_ctx *c, const tier_export_pages *k, const PGresult *r,
                     const tier_erase_sel *sel, tier_export_emit emit, void *emit_arg) {
    arena *keep = c->ar, *page = arena_create();
    if (!page) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    c->ar = page;
    int rc = STATUS_OK;
    for (int i = 0; rc == STATUS_OK && i < PQntuples(r); i++) {
        tier_export_rec rec = {.kind = k->kind};
        tier_meta meta;
        rc = k->render(c, r, i, sel, &rec, &meta);
        rec.meta = &meta;
        if (rc == STATUS_OK) rc = emit(emit_arg, &rec);
    }
    c->ar = keep;
    arena_free(page);
    return rc == STATUS_ENOMEM ? tier_fail(c, STATUS_ENOMEM, "out of memory") : rc;
}

int tier_export_pages_run(pg_pool *pg, tier_ctx *c, const tier_export_pages *k,
                          const tier_erase_sel *sel, tier_export_emit emit, void *emit_arg) {
    assert(k->nkey >= 1 && k->nkey <= TIER_EXPORT_MAX_KEY && k->page > 0);
    char *after[TIER_EXPORT_MAX_KEY] = {NULL}; /* the last row's key; NULL on the first page */
    int rc = STATUS_OK;
    for (int more = 1; rc == STATUS_OK && more;) {
        pgq_sql b = {0};
        rc = k->select(&b, c, sel);
        if (after[0]) { /* (key columns) > (the last row's) */
            pgq_sql_add(&b, " AND (%s) > (", k->key);
            for (int j = 0; j < k->nkey; j++)
                pgq_sql_add(&b, "%s$%d", j ? ", " : "", pgq_text(&b, after[j]));
            pgq_sql_add(&b, ")");
        }
        pgq_sql_add(&b, " ORDER BY %s LIMIT %d", k->key, k->page);
        page_job job = {&b, k->what, NULL};
        if (rc == STATUS_OK) rc = tier_sql_run(pg, c, TIER_MAX_STATEMENT_MS, page_in, &job);
        if (rc != STATUS_OK) break;
        int rows = PQntuples(job.res);
        rc = emit_rows(c, k, job.res, sel, emit, emit_arg);
        more = rows == k->page;
        for (int j = 0; rc == STATUS_OK && more && j < k->nkey; j++) {
            free(after[j]);
            if (!(after[j] = strdup(PQgetvalue(job.res, rows - 1, k->key_cols[j]))))
                rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
        }
        PQclear(job.res);
    }
    for (int j = 0; j < TIER_EXPORT_MAX_KEY; j++) free(after[j]);
    return rc;
}
