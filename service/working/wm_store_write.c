/* wm_store_write: Append/Update (an edit of a locked document) and
 * DeleteDocument, each one transaction that starts with a row lock and
 * ends with the audit row and COMMIT; see wm_store.h. */
#include <stdio.h>
#include <string.h>

#include "service/auth/principal.h"
#include "service/tier/tier_record.h"
#include "service/working/wm_store_internal.h"

#define MAX_CREATE_RACES 3

/* ------------------------------------------------------------ Append / Update */

typedef struct {
    wm_edit_in in;
    const char *id; /* "node/path" for messages */
    wm_record *out;
    int *created;
    int wrote;     /* the INSERT's or UPDATE's answer is next (else the lock's) */
    int inserting; /* that statement is an INSERT */
    int races;     /* INSERTs that found the memory full or the row there */
} edit_op;

/* The row lock: owner, label, version (tier_sql_lock_row), then the
 * columns of the document and its content. */
static void lock_sql(pgq_sql *b, const tier_ctx *c, const wm_edit_in *in) {
    pgq_sql_add(b,
                "SELECT owner, label, version, " WM_COLS ", content FROM working_memory"
                " WHERE tenant = $%d",
                pgq_text(b, principal_tenant(c->p)));
    wm_sql_memory(b, &in->m, NULL);
    pgq_sql_add(b, " AND path = $%d FOR UPDATE", pgq_text(b, in->path));
}

/* The new document, unless its memory holds WM_DOCS_MAX already (then, as
 * when another transaction created the path first, no row comes back). */
static void insert_sql(pgq_sql *b, const tier_ctx *c, const wm_edit_in *in, const wm_edit_out *e,
                       const char *pii_lit, int label) {
    int p_tenant = pgq_text(b, principal_tenant(c->p));
    int p_node = pgq_text(b, in->m.node);
    int p_thread = pgq_text(b, in->m.thread);
    int p_path = pgq_text(b, in->path);
    int p_owner = pgq_text(b, principal_sub(c->p));
    int p_label = pgq_int4(b, label);
    int p_content = pgq_text(b, e->content);
    int p_chars = pgq_int4(b, (int32_t)e->chars);
    int p_pii = pgq_text_array(b, pii_lit);
    pgq_sql_add(b,
                "INSERT INTO working_memory (tenant, node, thread, path, owner, label, content,"
                " chars, pii_kinds, version, created_at, updated_at)"
                " SELECT $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, 1, now(), now()"
                " WHERE (SELECT count(*) FROM working_memory WHERE tenant = $%d AND node = $%d"
                " AND thread = $%d) < %d"
                " ON CONFLICT (tenant, node, thread, path) DO NOTHING RETURNING " WM_COLS
                ", content",
                p_tenant, p_node, p_thread, p_path, p_owner, p_label, p_content, p_chars, p_pii,
                p_tenant, p_node, p_thread, WM_DOCS_MAX);
}

static void update_sql(pgq_sql *b, const tier_ctx *c, const wm_edit_in *in, const wm_edit_out *e,
                       const char *pii_lit, int label) {
    int p_label = pgq_int4(b, label);
    int p_content = pgq_text(b, e->content);
    int p_chars = pgq_int4(b, (int32_t)e->chars);
    int p_pii = pgq_text_array(b, pii_lit);
    pgq_sql_add(b,
                "UPDATE working_memory SET label = $%d, content = $%d, chars = $%d,"
                " pii_kinds = $%d, version = version + 1, updated_at = now()"
                " WHERE tenant = $%d",
                p_label, p_content, p_chars, p_pii, pgq_text(b, principal_tenant(c->p)));
    wm_sql_memory(b, &in->m, NULL);
    pgq_sql_add(b, " AND path = $%d RETURNING " WM_COLS ", content", pgq_text(b, in->path));
}

/* The locked row (or its absence): the write diode, compare-and-set, the
 * edit, then the INSERT or UPDATE. */
static int edit_locked(tier_async *op, const PGresult *r) {
    edit_op *a = op->arg;
    tier_ctx *c = op->c;
    const wm_edit_in *in = &a->in;
    tier_row row;
    int rc = tier_sql_lock_row(c, r, &row);
    if (rc != STATUS_OK) return rc;
    if (!row.exists && a->races > 0 && in->create)
        return tier_fail(c, STATUS_ETOOBIG, "memory %s%s%s holds %d documents; delete some first",
                         in->m.node, in->m.thread[0] ? " thread " : "", in->m.thread, WM_DOCS_MAX);
    /* A document the caller may not read is absent to Update, as to Read;
     * Append cannot create over it, and says so. */
    if (!in->create && (!row.exists || !tier_may_read(c, row.owner, row.label)))
        return tier_fail(c, STATUS_ENOTFOUND, "document %s not found", a->id);
    if ((rc = tier_may_write(c, &row, in->has_expected, in->expected_version, "document", a->id)) !=
        STATUS_OK)
        return rc;
    /* The lock's own three columns come first, then the document's. */
    wm_record cur = {.content = ""};
    if (row.exists && (rc = wm_decode_cols(c, r, 0, 3, &cur)) != STATUS_OK) return rc;
    if (!cur.content) return tier_fail(c, STATUS_EINTERNAL, "unexpected row-lock result");
    wm_edit_out e = {0};
    c->err[0] = '\0';
    if ((rc = in->edit(in->edit_arg, cur.content, row.exists, &e, c->err, sizeof c->err)) !=
        STATUS_OK)
        return rc;
    if (!e.changed) {
        /* Nothing to write: the answer is the document as it is (the kit
         * rolls the lock-only transaction back). */
        *a->out = cur;
        a->out->content = NULL;
        return STATUS_OK;
    }
    if (e.chars > WM_DOC_MAX_CHARS)
        return tier_fail(c, STATUS_ETOOBIG, "document %s would be %lld characters; at most %d",
                         a->id, (long long)e.chars, WM_DOC_MAX_CHARS);
    const char *pii_lit = pgq_array_literal(c->ar, e.pii_kinds, e.npii);
    if (!pii_lit) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    int label = principal_stamp_label(c->p, in->label, row.exists ? row.label : 0);
    pgq_sql *b = tier_async_next(op, row.exists ? "update document" : "create document", NULL);
    if (row.exists) update_sql(b, c, in, &e, pii_lit, label);
    else insert_sql(b, c, in, &e, pii_lit, label);
    a->wrote = 1;
    a->inserting = !row.exists;
    return TIER_NEXT;
}

static int decode_edit(tier_async *op, const PGresult *r) {
    edit_op *a = op->arg;
    tier_ctx *c = op->c;
    if (!a->wrote) return edit_locked(op, r);
    if (PQntuples(r) == 0) {
        /* The INSERT found the path created meanwhile, or the memory full:
         * lock again and decide (a row there now: the edit applies to it;
         * none: the memory is full). */
        if (!a->inserting || ++a->races >= MAX_CREATE_RACES)
            return tier_fail(c, STATUS_ECONFLICT,
                             "document %s is being created concurrently; retry", a->id);
        lock_sql(tier_async_next(op, "row lock", NULL), c, &a->in);
        a->wrote = 0;
        return TIER_NEXT;
    }
    /* No read filter: a write may stamp a label above the writer's clr. */
    int rc = wm_decode_cols(c, r, 0, 0, a->out);
    if (rc != STATUS_OK) return rc;
    a->out->content = NULL;
    *a->created = a->inserting;
    return tier_async_commit(op);
}

tier_async *wm_store_edit_async(wm_store *s, tier_ctx *c, const wm_edit_in *in, wm_record *out,
                                int *created, tier_async_done_fn done, void *arg) {
    (void)s;
    edit_op a = {.in = *in, .out = out, .created = created};
    if (!(a.id = arena_printf(c->ar, "%s%s", in->m.node, in->path))) return NULL;
    *created = 0;
    tier_async *op = tier_async_new(c, "row lock", decode_edit, &a, sizeof a, done, arg);
    if (!op) return NULL;
    tier_async_begin(op, "BEGIN");
    lock_sql(&op->sql, c, in);
    return op;
}

/* ------------------------------------------------------------ DeleteDocument */

typedef struct {
    wm_delete_in in;
    const char *id;
    int64_t *deleted;
    int deleting; /* the DELETE's answer is next */
} delete_op;

/* The visible documents at (and under) path, locked: owner, label,
 * version, path. */
static void delete_lock_sql(pgq_sql *b, tier_ctx *c, const wm_delete_in *in) {
    pgq_sql_add(b, "SELECT owner, label, version, path FROM working_memory WHERE ");
    tier_sql_read_diode(b, c, NULL);
    wm_sql_memory(b, &in->m, NULL);
    if (in->recursive) wm_sql_under(b, in->path);
    else pgq_sql_add(b, " AND path = $%d", pgq_text(b, in->path));
    pgq_sql_add(b, " ORDER BY path FOR UPDATE");
}

static int decode_delete(tier_async *op, const PGresult *r) {
    delete_op *a = op->arg;
    tier_ctx *c = op->c;
    if (a->deleting) {
        *a->deleted = PQntuples(r);
        return tier_async_commit(op);
    }
    int rows = PQntuples(r);
    if (rows == 0)
        return tier_fail(c, STATUS_ENOTFOUND, "%s %s not found",
                         a->in.recursive ? "no document at or under" : "document", a->id);
    const char **paths = arena_alloc(c->ar, (size_t)rows * sizeof *paths);
    if (!paths) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; i < rows; i++) {
        int64_t label;
        tier_row row = {1, pgq_col_str(c->ar, r, i, 0), 0, 0};
        const char *path = paths[i] = pgq_col_str(c->ar, r, i, 3);
        if (!row.owner || !path || pgq_col_int(r, i, 1, &label) != 0 ||
            pgq_col_int(r, i, 2, &row.version) != 0)
            return tier_fail(c, STATUS_EINTERNAL, "unexpected row-lock result");
        row.label = (int)label;
        const char *id = arena_printf(c->ar, "%s%s", a->in.m.node, path);
        if (!id) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        int rc =
            tier_may_write(c, &row, a->in.has_expected, a->in.expected_version, "document", id);
        if (rc != STATUS_OK) return rc;
    }
    /* The rows locked and judged above, and no others: a document created
     * under the path meanwhile is not the caller's to delete unseen. */
    const char *lit = pgq_array_literal(c->ar, paths, (size_t)rows);
    if (!lit) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    pgq_sql *b = tier_async_next(op, "delete documents", NULL);
    pgq_sql_add(b, "DELETE FROM working_memory WHERE tenant = $%d",
                pgq_text(b, principal_tenant(c->p)));
    wm_sql_memory(b, &a->in.m, NULL);
    pgq_sql_add(b, " AND path = ANY($%d) RETURNING path", pgq_text_array(b, lit));
    a->deleting = 1;
    return TIER_NEXT;
}

tier_async *wm_store_delete_async(wm_store *s, tier_ctx *c, const wm_delete_in *in,
                                  int64_t *deleted, tier_async_done_fn done, void *arg) {
    (void)s;
    delete_op a = {.in = *in, .deleted = deleted};
    if (!(a.id = arena_printf(c->ar, "%s%s", in->m.node, in->path))) return NULL;
    *deleted = 0;
    tier_async *op = tier_async_new(c, "row lock", decode_delete, &a, sizeof a, done, arg);
    if (!op) return NULL;
    tier_async_begin(op, "BEGIN");
    delete_lock_sql(&op->sql, c, in);
    return op;
}
