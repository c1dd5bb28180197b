/* entries_store_write: Write, DeleteEntry, Append/Replace and
 * PurgeExpired, each one transaction that starts with a row lock and ends
 * with the audit row and COMMIT; see entries_store.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/entries/entries_store_internal.h"
#include "service/tier/tier_sql_rank.h"

#define MAX_CREATE_RACES 3

/* ------------------------------------------------------------ row lock */

/* The row lock of (ns, key) (owner, label, version, live). */
static void lock_sql(pgq_sql *b, const tier_ctx *c, const char *ns, const char *key) {
    pgq_sql_add(b,
                "SELECT owner, label, version, (expires_at IS NULL OR expires_at > now())"
                " FROM entries WHERE tenant = $%d AND namespace = $%d AND key = $%d FOR UPDATE",
                pgq_text(b, principal_tenant(c->p)), pgq_text(b, ns), pgq_text(b, key));
}

/* Its answer: *row says whether a row is there (live or expired) and its
 * owner, label and version; *live whether it has not expired. */
static int lock_result(tier_ctx *c, const PGresult *r, tier_row *row, int *live) {
    int rc = tier_sql_lock_row(c, r, row);
    *live = 0;
    if (rc == STATUS_OK && row->exists && pgq_col_bool(r, 0, 3, live) != 0)
        rc = tier_fail(c, STATUS_EINTERNAL, "unexpected row-lock result");
    return rc;
}

/* The row as the write diode and compare-and-set see it: an expired entry
 * counts as absent. */
static tier_row as_live(const tier_row *row, int live) {
    tier_row r = *row;
    r.exists = live;
    return r;
}

/* ------------------------------------------------------------ Write */

/* Everything a write sends, prepared once before any attempt. */
typedef struct {
    const entries_write_in *in;
    const char *id; /* "ns/key" for messages */
    const uint8_t *stored;
    size_t stored_len;
    int compressed;
    const char *search_text;
    const char *language; /* search_doc's (tier_sql_rank.h) */
    const char *tags_lit;
    const char *pii_lit;
    entries_record *out;
    int *created;
} write_plan;

static const char WRITE_COLS[] =
    "owner, label, value, compressed, size_bytes, content_type, metadata, tags, pii_kinds,"
    " search_text, version, created_at, updated_at, expires_at";

/* The INSERT of a new entry or the UPDATE that replaces an existing row
 * (live: keeps owner, create time and counts the version on; expired: a
 * new entry in the old row). */
static void write_sql(pgq_sql *b, const tier_ctx *c, const write_plan *w, const tier_row *row,
                      int live, int label) {
    const entries_write_in *in = w->in;
    int p_tenant = pgq_text(b, principal_tenant(c->p));
    int p_ns = pgq_text(b, in->ns);
    int p_key = pgq_text(b, in->key);
    int p_owner = pgq_text(b, principal_sub(c->p));
    int p_label = pgq_int4(b, label);
    int p_value = pgq_bytes(b, w->stored, w->stored_len);
    int p_comp = pgq_bool(b, w->compressed);
    int p_size = pgq_int8(b, (int64_t)in->value_len);
    int p_ctype = pgq_text(b, in->content_type);
    int p_meta = pgq_text(b, in->metadata_json ? in->metadata_json : "{}");
    int p_tags = pgq_text_array(b, w->tags_lit);
    int p_pii = pgq_text_array(b, w->pii_lit);
    int p_search = pgq_text(b, w->search_text);
    int p_abs = in->has_expire ? pgq_ts(b, in->expire_us) : pgq_null(b, PGQ_OID_TIMESTAMPTZ);
    int p_ttl = in->has_ttl ? pgq_int8(b, in->ttl_us) : pgq_null(b, PGQ_OID_INT8);
    /* The expiry: COALESCE($abs, now() + $ttl µs), NULL when both are. */
    char exp_sql[96], search_sql[64], doc[192];
    snprintf(exp_sql, sizeof exp_sql, "COALESCE($%d, now() + $%d * interval '1 microsecond')",
             p_abs, p_ttl);
    snprintf(search_sql, sizeof search_sql, "lower($%d COLLATE \"und-x-icu\")", p_search);
    tier_sql_rank_doc(b, w->language, p_search, doc, sizeof doc);
    if (!row->exists) {
        pgq_sql_add(b,
                    "INSERT INTO entries (tenant, namespace, key, %s, search_doc) VALUES ($%d, $%d,"
                    " $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d::jsonb, $%d, $%d, %s, 1, now(), now(),"
                    " %s, %s) ON CONFLICT (tenant, namespace, key) DO NOTHING"
                    " RETURNING " ENTRIES_COLS,
                    WRITE_COLS, p_tenant, p_ns, p_key, p_owner, p_label, p_value, p_comp, p_size,
                    p_ctype, p_meta, p_tags, p_pii, search_sql, exp_sql, doc);
        return;
    }
    char owner_sql[16];
    snprintf(owner_sql, sizeof owner_sql, live ? "owner" : "$%d", p_owner);
    pgq_sql_add(b,
                "UPDATE entries SET owner = %s, label = $%d, value = $%d, compressed = $%d,"
                " size_bytes = $%d, content_type = $%d, metadata = $%d::jsonb, tags = $%d,"
                " pii_kinds = $%d, search_text = %s, search_doc = %s,"
                " version = %s, created_at = %s, updated_at = now(), expires_at = %s"
                " WHERE tenant = $%d AND namespace = $%d AND key = $%d RETURNING " ENTRIES_COLS,
                owner_sql, p_label, p_value, p_comp, p_size, p_ctype, p_meta, p_tags, p_pii,
                search_sql, doc, live ? "version + 1" : "1", live ? "created_at" : "now()", exp_sql,
                p_tenant, p_ns, p_key);
}

/* A Write on the event loop: the row lock (starting the transaction), the
 * INSERT or UPDATE, then the audit row and COMMIT; a lost create race
 * (the INSERT found the row another transaction had just committed) locks
 * and decides again. */
typedef struct {
    write_plan w;
    int wrote; /* the write's answer is next (else the row lock's) */
    int live;  /* of the locked row */
    int races;
} write_op;

static int decode_write(tier_async *op, const PGresult *r) {
    write_op *a = op->arg;
    tier_ctx *c = op->c;
    const entries_write_in *in = a->w.in;
    if (!a->wrote) {
        tier_row row;
        int rc = lock_result(c, r, &row, &a->live);
        if (rc != STATUS_OK) return rc;
        tier_row cur = as_live(&row, a->live);
        if ((rc = tier_may_write(c, &cur, in->has_expected, in->expected_version, "entry",
                                 a->w.id)) != STATUS_OK)
            return rc;
        int label = principal_stamp_label(c->p, in->label, a->live ? row.label : 0);
        write_sql(tier_async_next(op, "write", NULL), c, &a->w, &row, a->live, label);
        a->wrote = 1;
        return TIER_NEXT;
    }
    if (PQntuples(r) == 0) {
        if (++a->races >= MAX_CREATE_RACES)
            return tier_fail(c, STATUS_ECONFLICT, "entry %s is being created concurrently; retry",
                             a->w.id);
        lock_sql(tier_async_next(op, "row lock", NULL), c, in->ns, in->key);
        a->wrote = 0;
        return TIER_NEXT;
    }
    int rc = entries_decode_row(c, r, 0, 0, a->w.out);
    if (rc != STATUS_OK) return rc;
    *a->w.created = !a->live;
    return tier_async_commit(op);
}

tier_async *entries_store_write_async(entries_store *s, tier_ctx *c, const entries_write_in *in,
                                      entries_record *out, int *created, tier_async_done_fn done,
                                      void *arg) {
    write_op a = {0};
    a.w.in = arena_alloc(c->ar, sizeof *in);
    if (!a.w.in) return NULL;
    *(entries_write_in *)a.w.in = *in;
    a.w.language = s->text_language;
    a.w.out = out;
    a.w.created = created;
    tier_async *op = tier_async_new(c, "row lock", decode_write, &a, sizeof a, done, arg);
    if (!op) return NULL;
    write_plan *w = &((write_op *)op->arg)->w;
    int rc =
        entries_compress(c, in->value, in->value_len, &w->stored, &w->stored_len, &w->compressed);
    if (rc == STATUS_OK) {
        w->id = arena_printf(c->ar, "%s/%s", in->ns, in->key);
        w->search_text = entries_search_source(c->ar, in->key, in->value, in->value_len);
        w->tags_lit = pgq_array_literal(c->ar, in->tags, in->ntags);
        w->pii_lit = pgq_array_literal(c->ar, in->pii_kinds, in->npii);
        if (!w->id || !w->search_text || !w->tags_lit || !w->pii_lit)
            rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    if (rc == STATUS_OK) {
        tier_async_begin(op, "BEGIN");
        lock_sql(&op->sql, c, in->ns, in->key);
    }
    return tier_async_built(op, rc);
}

/* ------------------------------------------------------------ DeleteEntry */

/* A DeleteEntry on the event loop: the row lock, then the DELETE, the
 * audit row and COMMIT. */
typedef struct {
    const char *ns, *key, *id;
    int has_expected;
    int64_t expected;
    int deleted; /* the DELETE's answer is next */
} delete_op;

static int decode_delete(tier_async *op, const PGresult *r) {
    delete_op *a = op->arg;
    tier_ctx *c = op->c;
    if (a->deleted) return tier_async_commit(op);
    tier_row row;
    int live;
    int rc = lock_result(c, r, &row, &live);
    if (rc != STATUS_OK) return rc;
    if (!live) return tier_fail(c, STATUS_ENOTFOUND, "entry %s not found", a->id);
    if ((rc = tier_may_write(c, &row, a->has_expected, a->expected, "entry", a->id)) != STATUS_OK)
        return rc;
    pgq_sql *b = tier_async_next(op, "delete", NULL);
    pgq_sql_add(b, "DELETE FROM entries WHERE tenant = $%d AND namespace = $%d AND key = $%d",
                pgq_text(b, principal_tenant(c->p)), pgq_text(b, a->ns), pgq_text(b, a->key));
    a->deleted = 1;
    return TIER_NEXT;
}

tier_async *entries_store_delete_async(entries_store *s, tier_ctx *c, const char *ns,
                                       const char *key, int has_expected, int64_t expected_version,
                                       tier_async_done_fn done, void *arg) {
    (void)s;
    delete_op a = {ns, key, arena_printf(c->ar, "%s/%s", ns, key), has_expected, expected_version,
                   0};
    tier_async *op =
        a.id ? tier_async_new(c, "row lock", decode_delete, &a, sizeof a, done, arg) : NULL;
    if (!op) return NULL;
    tier_async_begin(op, "BEGIN");
    lock_sql(&op->sql, c, ns, key);
    return op;
}

/* ------------------------------------------------------------ Append / Replace */

/* An Append/Replace on the event loop: the row with its value, locked;
 * the edit (here, on the loop thread); the UPDATE; the audit row and
 * COMMIT. An edit that changes nothing rolls the lock back. */
typedef struct {
    entries_modify_in in;
    const char *id;
    entries_record *out;
    int updated;          /* the UPDATE's answer is next (else the row lock's) */
    const char *language; /* search_doc's (tier_sql_rank.h) */
} modify_op;

/* pii_kinds describe the whole record: the old kinds and the new ones. */
static const char **merge_kinds(arena *ar, const entries_record *cur, const entries_edit_out *e,
                                size_t *n) {
    const char **kinds = arena_alloc(ar, (cur->meta.npii + e->npii + 1) * sizeof *kinds);
    if (!kinds) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < cur->meta.npii; i++) kinds[k++] = cur->meta.pii_kinds[i];
    for (size_t i = 0; i < e->npii; i++) {
        int dup = 0;
        for (size_t j = 0; j < k && !dup; j++) dup = strcmp(kinds[j], e->pii_kinds[i]) == 0;
        if (!dup) kinds[k++] = e->pii_kinds[i];
    }
    *n = k;
    return kinds;
}

/* The UPDATE of the edit's result into the locked row cur. */
static int update_sql(pgq_sql *b, tier_ctx *c, const modify_op *a, const entries_record *cur,
                      const entries_edit_out *e) {
    const entries_modify_in *in = &a->in;
    if (e->value_len > ENTRIES_VALUE_MAX)
        return tier_fail(c, STATUS_ETOOBIG, "the new value of %s would be %zu bytes; at most %d",
                         a->id, e->value_len, ENTRIES_VALUE_MAX);
    const uint8_t *stored;
    size_t stored_len, nk = 0;
    int compressed;
    int rc = entries_compress(c, e->value, e->value_len, &stored, &stored_len, &compressed);
    if (rc != STATUS_OK) return rc;
    const char **kinds = merge_kinds(c->ar, cur, e, &nk);
    const char *kinds_lit = kinds ? pgq_array_literal(c->ar, kinds, nk) : NULL;
    const char *search = entries_search_source(c->ar, in->key, e->value, e->value_len);
    if (!kinds_lit || !search) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    int p_label = pgq_int4(b, principal_stamp_label(c->p, 0, cur->meta.label));
    int p_value = pgq_bytes(b, stored, stored_len);
    int p_comp = pgq_bool(b, compressed);
    int p_size = pgq_int8(b, (int64_t)e->value_len);
    int p_search = pgq_text(b, search);
    int p_pii = pgq_text_array(b, kinds_lit);
    char doc[192];
    tier_sql_rank_doc(b, a->language, p_search, doc, sizeof doc);
    pgq_sql_add(b,
                "UPDATE entries SET label = $%d, value = $%d, compressed = $%d, size_bytes = $%d,"
                " search_text = lower($%d COLLATE \"und-x-icu\"), search_doc = %s,"
                " pii_kinds = $%d, version = version + 1, updated_at = now()"
                " WHERE tenant = $%d AND namespace = $%d AND key = $%d RETURNING " ENTRIES_COLS,
                p_label, p_value, p_comp, p_size, p_search, doc, p_pii,
                pgq_text(b, principal_tenant(c->p)), pgq_text(b, in->ns), pgq_text(b, in->key));
    return STATUS_OK;
}

static int decode_modify(tier_async *op, const PGresult *r) {
    modify_op *a = op->arg;
    tier_ctx *c = op->c;
    const entries_modify_in *in = &a->in;
    if (a->updated) {
        int rc = PQntuples(r) == 1
                     ? entries_decode_row(c, r, 0, 0, a->out)
                     : tier_fail(c, STATUS_EINTERNAL, "update of %s changed no row", a->id);
        return rc != STATUS_OK ? rc : tier_async_commit(op);
    }
    entries_record cur;
    int live = 0;
    if (PQntuples(r) == 1 && pgq_col_bool(r, 0, ECOL_VALUE + 1, &live) != 0) live = 0;
    int rc = live ? entries_decode_row(c, r, 0, 1, &cur) : STATUS_OK;
    if (rc != STATUS_OK) return rc;
    if (!live) return tier_fail(c, STATUS_ENOTFOUND, "entry %s not found", a->id);
    tier_row row = {1, cur.meta.owner, cur.meta.label, cur.meta.version};
    if ((rc = tier_may_write(c, &row, in->has_expected, in->expected_version, "entry", a->id)) !=
        STATUS_OK)
        return rc;
    entries_edit_out e = {0};
    c->err[0] = '\0';
    if ((rc = in->edit(in->edit_arg, cur.value, cur.value_len, &e, c->err, sizeof c->err)) !=
        STATUS_OK)
        return rc;
    cur.has_value = 0;
    cur.value = NULL;
    cur.value_len = 0;
    if (!e.changed) {
        *a->out = cur;
        return STATUS_OK; /* the kit rolls the (lock-only) transaction back */
    }
    if ((rc = update_sql(tier_async_next(op, "update", NULL), c, a, &cur, &e)) != STATUS_OK)
        return rc;
    a->updated = 1;
    return TIER_NEXT;
}

tier_async *entries_store_modify_async(entries_store *s, tier_ctx *c, const entries_modify_in *in,
                                       entries_record *out, tier_async_done_fn done, void *arg) {
    modify_op a = {*in, arena_printf(c->ar, "%s/%s", in->ns, in->key), out, 0, s->text_language};
    tier_async *op =
        a.id ? tier_async_new(c, "row lock", decode_modify, &a, sizeof a, done, arg) : NULL;
    if (!op) return NULL;
    tier_async_begin(op, "BEGIN");
    pgq_sql *b = &op->sql;
    pgq_sql_add(b,
                "SELECT " ENTRIES_COLS ", value, (expires_at IS NULL OR expires_at > now())"
                " FROM entries WHERE tenant = $%d AND namespace = $%d AND key = $%d FOR UPDATE",
                pgq_text(b, principal_tenant(c->p)), pgq_text(b, in->ns), pgq_text(b, in->key));
    return op;
}

/* ------------------------------------------------------------ PurgeExpired */

/* The DELETE (starting the transaction), then the audit row and COMMIT. */
static int decode_purge(tier_async *op, const PGresult *r) {
    const entries_ns_args *a = op->arg;
    *(int64_t *)a->out = atoll(PQcmdTuples((PGresult *)r));
    return tier_async_commit(op);
}

tier_async *entries_store_purge_async(entries_store *s, tier_ctx *c, const char *ns_pattern,
                                      int64_t *purged, tier_async_done_fn done, void *arg) {
    (void)s;
    entries_ns_args a = {ns_pattern, purged};
    tier_async *op = tier_async_new(c, "purge", decode_purge, &a, sizeof a, done, arg);
    if (!op) return NULL;
    tier_async_begin(op, "BEGIN");
    pgq_sql *b = &op->sql;
    pgq_sql_add(b, "DELETE FROM entries WHERE tenant = $%d AND expires_at <= now()",
                pgq_text(b, principal_tenant(c->p)));
    int none, rc = entries_sql_ns_scope(c, ns_pattern, b, &none);
    return tier_async_built(op, rc != STATUS_OK ? rc : none ? TIER_NO_ROWS : STATUS_OK);
}
