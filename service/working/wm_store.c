/* wm_store: Read, List and Render, each one round trip carrying the read
 * diode, and the row decoding the writes share; see wm_store.h. */
#include <stdlib.h>
#include <string.h>

#include "service/auth/principal.h"
#include "service/tier/tier_record.h"
#include "service/working/wm_store_internal.h"

void wm_sql_memory(pgq_sql *b, const wm_addr *m, const char *alias) {
    const char *a = alias ? alias : "", *dot = alias ? "." : "";
    pgq_sql_add(b, " AND %s%snode = $%d AND %s%sthread = $%d", a, dot, pgq_text(b, m->node), a, dot,
                pgq_text(b, m->thread));
}

void wm_sql_under(pgq_sql *b, const char *dir) {
    if (strcmp(dir, "/") == 0) return;
    /* Under "/a": "/a" itself and the paths from "/a/" up to (not
     * including) "/a0", '0' following '/' in byte order. */
    int p = pgq_text(b, dir);
    pgq_sql_add(b,
                " AND (path = $%d OR (path > ($%d || '/') COLLATE \"C\""
                " AND path < ($%d || '0') COLLATE \"C\"))",
                p, p, p);
}

int wm_decode_cols(tier_ctx *c, const PGresult *r, int row, int off, wm_record *rec) {
    arena *ar = c->ar;
    memset(rec, 0, sizeof *rec);
    tier_meta *mt = &rec->meta;
    int64_t label = 0;
    mt->tenant = pgq_col_str(ar, r, row, off + WCOL_TENANT);
    rec->path = pgq_col_str(ar, r, row, off + WCOL_PATH);
    mt->owner = pgq_col_str(ar, r, row, off + WCOL_OWNER);
    if (!mt->tenant || !rec->path || !mt->owner)
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    if (pgq_col_int(r, row, off + WCOL_LABEL, &label) != 0 ||
        pgq_col_text_array(ar, r, row, off + WCOL_PII, &mt->pii_kinds, &mt->npii) != 0 ||
        pgq_col_int(r, row, off + WCOL_VERSION, &mt->version) != 0 ||
        pgq_col_ts(r, row, off + WCOL_CREATED, &mt->create_us) != 0 ||
        pgq_col_ts(r, row, off + WCOL_UPDATED, &mt->update_us) != 0 ||
        pgq_col_int(r, row, off + WCOL_CHARS, &rec->chars) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "working memory row %s has an unreadable column",
                         rec->path);
    mt->label = (int)label;
    if (PQnfields(r) > off + WCOL_CONTENT && !PQgetisnull(r, row, off + WCOL_CONTENT) &&
        !(rec->content = pgq_col_str(ar, r, row, off + WCOL_CONTENT)))
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    return STATUS_OK;
}

int wm_decode_row(tier_ctx *c, const wm_addr *m, const PGresult *r, int row, wm_record *rec) {
    int rc = wm_decode_cols(c, r, row, 0, rec);
    return rc != STATUS_OK ? rc
                           : tier_check_row(c, &rec->meta, principal_ns_allows(c->p, m->node),
                                            "working document %s%s", m->node, rec->path);
}

/* ------------------------------------------------------------ Read */

typedef struct {
    wm_addr m;
    const char *path;
    wm_record *out;
} read_args;

static int decode_read(tier_async *op, const PGresult *r) {
    read_args *a = op->arg;
    if (PQntuples(r) == 0)
        return tier_fail(op->c, STATUS_ENOTFOUND, "document %s not found in %s", a->path,
                         a->m.node);
    return wm_decode_row(op->c, &a->m, r, 0, a->out);
}

tier_async *wm_store_read_async(wm_store *s, tier_ctx *c, const wm_addr *m, const char *path,
                                wm_record *out, tier_async_done_fn done, void *arg) {
    (void)s;
    read_args a = {*m, path, out};
    tier_async *op = tier_async_new(c, "read document", decode_read, &a, sizeof a, done, arg);
    if (!op) return NULL;
    pgq_sql *b = &op->sql;
    pgq_sql_add(b, "SELECT " WM_COLS ", content FROM working_memory WHERE ");
    tier_sql_read_diode(b, c, NULL);
    wm_sql_memory(b, m, NULL);
    pgq_sql_add(b, " AND path = $%d", pgq_text(b, path));
    return op;
}

/* ------------------------------------------------------------ List */

typedef struct {
    wm_list_in in;
    wm_page *out;
} list_args;

static int decode_list(tier_async *op, const PGresult *r) {
    list_args *a = op->arg;
    int rows = PQntuples(r), take = rows < a->in.limit ? rows : a->in.limit;
    wm_record *recs = arena_alloc(op->c->ar, ((size_t)take + 1) * sizeof *recs);
    if (!recs) return tier_fail(op->c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; i < take; i++) {
        int rc = wm_decode_row(op->c, &a->in.m, r, i, &recs[i]);
        if (rc != STATUS_OK) return rc;
    }
    a->out->recs = recs;
    a->out->n = (size_t)take;
    a->out->more = rows > take;
    return STATUS_OK;
}

tier_async *wm_store_list_async(wm_store *s, tier_ctx *c, const wm_list_in *in, wm_page *out,
                                tier_async_done_fn done, void *arg) {
    (void)s;
    list_args a = {*in, out};
    tier_async *op = tier_async_new(c, "list documents", decode_list, &a, sizeof a, done, arg);
    if (!op) return NULL;
    pgq_sql *b = &op->sql;
    pgq_sql_add(b, "SELECT " WM_COLS " FROM working_memory WHERE ");
    tier_sql_read_diode(b, c, NULL);
    wm_sql_memory(b, &in->m, NULL);
    wm_sql_under(b, in->dir);
    if (in->after) pgq_sql_add(b, " AND path > $%d", pgq_text(b, in->after));
    pgq_sql_add(b, " ORDER BY path LIMIT $%d", pgq_int8(b, (int64_t)in->limit + 1));
    return op;
}

/* ------------------------------------------------------------ Render */

/* Render's columns: only what the text and the final read filter need. */
enum { RCOL_TENANT, RCOL_PATH, RCOL_OWNER, RCOL_LABEL, RCOL_CHARS, RCOL_CONTENT, RCOL_GLOBAL };

static int by_path(const void *a, const void *b) {
    return strcmp(((const wm_doc *)a)->path, ((const wm_doc *)b)->path);
}

int wm_decode_render(tier_ctx *c, const wm_render_in *in, const PGresult *r, wm_memory *out) {
    int rows = PQntuples(r);
    wm_doc *docs = arena_alloc(c->ar, ((size_t)rows + 1) * sizeof *docs);
    if (!docs) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    int fell_back = 0;
    for (int i = 0; i < rows; i++) {
        tier_meta m = {0};
        int64_t label;
        wm_doc *d = &docs[i];
        m.tenant = pgq_col_str(c->ar, r, i, RCOL_TENANT);
        m.owner = pgq_col_str(c->ar, r, i, RCOL_OWNER);
        d->path = pgq_col_str(c->ar, r, i, RCOL_PATH);
        d->content =
            PQgetisnull(r, i, RCOL_CONTENT) ? NULL : pgq_col_str(c->ar, r, i, RCOL_CONTENT);
        if (!m.tenant || !m.owner || !d->path || (!d->content && !PQgetisnull(r, i, RCOL_CONTENT)))
            return tier_fail(c, STATUS_ENOMEM, "out of memory");
        if (pgq_col_int(r, i, RCOL_LABEL, &label) != 0 ||
            pgq_col_int(r, i, RCOL_CHARS, &d->chars) != 0 ||
            pgq_col_bool(r, i, RCOL_GLOBAL, &fell_back) != 0)
            return tier_fail(c, STATUS_EINTERNAL, "unexpected render row");
        m.label = (int)label;
        int rc = tier_check_row(c, &m, principal_ns_allows(c->p, in->m.node),
                                "working document %s%s", in->m.node, d->path);
        if (rc != STATUS_OK) return rc;
    }
    /* Byte order, as the tree needs it: sorted here rather than by
     * PostgreSQL, which would sort the contents along. */
    qsort(docs, (size_t)rows, sizeof *docs, by_path);
    out->docs = docs;
    out->n = (size_t)rows;
    out->fell_back = rows > 0 && fell_back && in->global_fallback;
    return STATUS_OK;
}

/* The rows of the memory Render shows, on table alias a: the read diode,
 * the node, and the thread's documents or, with the fallback, the node's
 * global ones when the caller sees none of the thread's. */
static void render_where(pgq_sql *b, const tier_ctx *c, const wm_render_in *in, const char *a,
                         int p_node, int p_thread) {
    tier_sql_read_diode(b, c, a);
    pgq_sql_add(b, " AND %s.node = $%d", a, p_node);
    if (!in->global_fallback) {
        pgq_sql_add(b, " AND %s.thread = $%d", a, p_thread);
        return;
    }
    pgq_sql_add(b,
                " AND (%s.thread = $%d OR (%s.thread = '' AND NOT EXISTS (SELECT 1"
                " FROM working_memory x WHERE ",
                a, p_thread, a);
    tier_sql_read_diode(b, c, "x");
    pgq_sql_add(b, " AND x.node = $%d AND x.thread = $%d)))", p_node, p_thread);
}

void wm_sql_render(const tier_ctx *c, const wm_render_in *in, pgq_sql *b) {
    /* The contents come back only when a lower bound of the FULL text
     * (WM_RENDER_FULL_OVERHEAD per document, computed once over the same
     * rows) shows it may fit the budget: FULL is all or nothing, so the
     * TREE of a large memory reads no content at all. No ORDER BY: the
     * decoder sorts the paths. */
    int p_budget = pgq_int8(b, in->full_budget ? in->full_budget + 1 : 0);
    int p_node = pgq_text(b, in->m.node), p_thread = pgq_text(b, in->m.thread);
    pgq_sql_add(b,
                "SELECT w.tenant, w.path, w.owner, w.label, w.chars, CASE WHEN (SELECT"
                " sum(char_length(t.path) + %d + t.chars) FROM working_memory t WHERE ",
                (int)WM_RENDER_FULL_OVERHEAD(0));
    render_where(b, c, in, "t", p_node, p_thread);
    pgq_sql_add(b, ") <= $%d THEN w.content END, w.thread = '' FROM working_memory w WHERE ",
                p_budget);
    render_where(b, c, in, "w", p_node, p_thread);
}

typedef struct {
    wm_render_in in;
    wm_memory *out;
} render_args;

static int decode_render(tier_async *op, const PGresult *r) {
    render_args *a = op->arg;
    return wm_decode_render(op->c, &a->in, r, a->out);
}

tier_async *wm_store_render_async(wm_store *s, tier_ctx *c, const wm_render_in *in, wm_memory *out,
                                  tier_async_done_fn done, void *arg) {
    (void)s;
    render_args a = {*in, out};
    tier_async *op = tier_async_new(c, "render memory", decode_render, &a, sizeof a, done, arg);
    if (op) wm_sql_render(c, in, &op->sql);
    return op;
}
