/* episodic_embedded_write: the embedded backend's writes: upsert (reading
 * the existing points first for the write diode) and deletes by ids or by
 * filter (tombstones: neither vector nor text), each stamped with the
 * collection's next seq. They do not touch the in-memory index: the next
 * read catches up. */
#include <stdlib.h>
#include <string.h>

#include "service/core/array.h"
#include "service/core/clock.h"
#include "service/episodic/episodic_embedded_internal.h"
#include "service/episodic/episodic_filter.h"
#include "service/tier/tier_sql.h"

/* A point that is not a tombstone. */
#define LIVE "(vector IS NOT NULL OR text IS NOT NULL)"

/* Existing points among pids: (pid, owner, label, version, created_at). */
static int load_existing(pgq_session *ss, op *o, const char *pids_literal, PGresult **out) {
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "SELECT pid, owner, label, version, created_at FROM episodic_points "
                "WHERE cid = $%d AND pid = ANY($%d) AND " LIVE,
                pgq_int8(&b, o->col->cid), pgq_text_array(&b, pids_literal));
    return episodic_embedded_query(ss, 1, "existing points", &b, out);
}

static int decode_existing(tier_ctx *c, const PGresult *r, int i, tier_meta *m) {
    int64_t label;
    memset(m, 0, sizeof *m);
    m->owner = pgq_col_str(c->ar, r, i, 1);
    if (!m->owner || pgq_col_int(r, i, 2, &label) != 0 || pgq_col_int(r, i, 3, &m->version) != 0 ||
        pgq_col_ts(r, i, 4, &m->create_us) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "unexpected episodic_points row");
    m->label = (int)label;
    return STATUS_OK;
}

/* Locks the collection row and bumps its seq: the stamp of this write. */
static int bump_seq(pgq_session *ss, op *o, int in_tx, int64_t *seq) {
    pgq_sql b = {0};
    pgq_sql_add(&b, "UPDATE episodic_collections SET seq = seq + 1 WHERE cid = $%d RETURNING seq",
                pgq_int8(&b, o->col->cid));
    PGresult *r;
    int rc = in_tx ? episodic_embedded_query(ss, 1, "bump seq", &b, &r)
                   : pgq_pipeline(ss, "bump seq", "BEGIN", &b, 0, &r);
    if (rc != STATUS_OK) return rc;
    if (PQntuples(r) == 0)
        rc = tier_fail(o->c, STATUS_ENOTFOUND, "collection %s was deleted", o->col->name);
    else if (pgq_col_int(r, 0, 0, seq) != 0)
        rc = tier_fail(o->c, STATUS_EINTERNAL, "unexpected seq");
    PQclear(r);
    return rc;
}

static const char *pid_literal(tier_ctx *c, const vs_id *ids, size_t n) {
    const char **t = arena_alloc(c->ar, (n ? n : 1) * sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(t[i] = episodic_embedded_pid_text(c->ar, &ids[i]))) return NULL;
    return pgq_array_literal(c->ar, t, n);
}

static int upsert_fn(pgq_session *ss, void *arg) {
    op *o = arg;
    tier_ctx *c = o->c;
    int64_t seq, now = clock_wall_us();
    int rc = bump_seq(ss, o, 0, &seq);
    if (rc != STATUS_OK) return rc;

    vs_id *ids = arena_alloc(c->ar, o->n * sizeof *ids);
    if (!ids) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (size_t i = 0; i < o->n; i++) ids[i] = o->pts[i].id;
    const char *lit = pid_literal(c, ids, o->n);
    if (!lit) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    PGresult *r;
    if ((rc = load_existing(ss, o, lit, &r)) != STATUS_OK) return rc;

    size_t dims = (size_t)o->col->dims, vbytes = dims * sizeof(float);
    unsigned char *vecs = malloc(o->n * vbytes + 1); /* + 1: dims 0 */
    json_t *rows = json_array();
    if (!vecs || !rows) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (size_t i = 0; rc == STATUS_OK && i < o->n; i++) {
        const vs_point_in *pt = &o->pts[i];
        char buf[37];
        const char *pid = vs_id_text(&pt->id, buf);
        tier_meta existing, stamped;
        const tier_meta *ex = NULL;
        for (int j = 0; j < PQntuples(r); j++) {
            if (strcmp(PQgetvalue(r, j, 0), pid) != 0) continue;
            if ((rc = decode_existing(c, r, j, &existing)) != STATUS_OK) break;
            ex = &existing;
            break;
        }
        if (rc != STATUS_OK) break;
        if ((rc = vs_stamp(c, &pt->id, ex, pt->label, now, &stamped)) != STATUS_OK) break;
        if (pt->vector) memcpy(vecs + i * vbytes, pt->vector, vbytes);
        else memset(vecs + i * vbytes, 0, vbytes);
        json_t *pii = json_array();
        for (size_t k = 0; pii && k < pt->npii; k++)
            json_array_append_new(pii, json_string(pt->pii_kinds[k]));
        json_t *row =
            json_pack("{s:I, s:s, s:s, s:i, s:O, s:o, s:I, s:I, s:b, s:s?}", "i", (json_int_t)i,
                      "pid", pid, "owner", stamped.owner, "label", stamped.label, "payload",
                      pt->payload, "pii", pii, "version", (json_int_t)stamped.version, "created_us",
                      (json_int_t)stamped.create_us, "hv", pt->vector != NULL, "text", pt->text);
        if (!row || json_array_append_new(rows, row) != 0)
            rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    PQclear(r);
    char *rows_text =
        rc == STATUS_OK ? json_dumps(rows, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    if (rc == STATUS_OK && !rows_text) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    if (rc == STATUS_OK) {
        pgq_sql b = {0};
        int cid = pgq_int8(&b, o->col->cid), s = pgq_int8(&b, seq);
        int v = pgq_bytes(&b, vecs, o->n * vbytes), vb = pgq_int4(&b, (int32_t)vbytes);
        int ts = pgq_ts(&b, now), js = pgq_jsonb(&b, rows_text);
        pgq_sql_add(
            &b,
            "INSERT INTO episodic_points AS p (cid, pid, seq, owner, label, vector, text, "
            "payload, pii_kinds, version, created_at, updated_at) "
            "SELECT $%d, r.pid, $%d, r.owner, r.label, CASE WHEN r.hv THEN substring($%d "
            "FROM r.i * $%d + 1 FOR $%d) END, r.text, r.payload, "
            "ARRAY(SELECT jsonb_array_elements_text(r.pii)), "
            "r.version, 'epoch'::timestamptz + r.created_us * interval '1 microsecond', $%d "
            "FROM jsonb_to_recordset($%d) AS r(i int, pid text, owner text, label int, "
            "payload jsonb, pii jsonb, version bigint, created_us bigint, hv boolean, "
            "text text) "
            "ON CONFLICT (cid, pid) DO UPDATE SET seq = EXCLUDED.seq, owner = "
            "EXCLUDED.owner, label = EXCLUDED.label, vector = EXCLUDED.vector, text = "
            "EXCLUDED.text, payload = EXCLUDED.payload, pii_kinds = EXCLUDED.pii_kinds, "
            "version = EXCLUDED.version, created_at = EXCLUDED.created_at, "
            "updated_at = EXCLUDED.updated_at",
            cid, s, v, vb, vb, ts, js);
        rc = episodic_embedded_query(ss, 1, "upsert points", &b, &r);
        if (rc == STATUS_OK) PQclear(r);
    }
    free(rows_text);
    json_decref(rows);
    free(vecs);
    if (rc == STATUS_OK) rc = tier_sql_commit(ss, o->c);
    return rc;
}

int episodic_embedded_upsert(vstore *vs, tier_ctx *c, const vs_collection *col,
                             const vs_point_in *pts, size_t n) {
    op o = {.e = (embedded *)vs, .c = c, .col = col, .pts = pts, .n = n};
    return episodic_embedded_run(&o, upsert_fn);
}

/* Tombstones pids (a text[] literal) with seq; *deleted = rows changed. */
static int tombstone(pgq_session *ss, op *o, int64_t seq, const char *pids, int64_t *deleted) {
    pgq_sql b = {0};
    int s = pgq_int8(&b, seq), ts = pgq_ts(&b, clock_wall_us());
    pgq_sql_add(&b,
                "UPDATE episodic_points SET vector = NULL, text = NULL, payload = NULL, "
                "seq = $%d, updated_at = $%d WHERE cid = $%d AND pid = ANY($%d) AND " LIVE,
                s, ts, pgq_int8(&b, o->col->cid), pgq_text_array(&b, pids));
    PGresult *r;
    int rc = episodic_embedded_query(ss, 1, "delete points", &b, &r);
    if (rc != STATUS_OK) return rc;
    *deleted = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return STATUS_OK;
}

static int delete_ids_fn(pgq_session *ss, void *arg) {
    op *o = arg;
    tier_ctx *c = o->c;
    int64_t seq;
    o->deleted = 0;
    int rc = bump_seq(ss, o, 0, &seq);
    if (rc != STATUS_OK) return rc;
    const char *lit = pid_literal(c, o->ids, o->n);
    if (!lit) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    PGresult *r;
    if ((rc = load_existing(ss, o, lit, &r)) != STATUS_OK) return rc;
    int found = PQntuples(r);
    for (int j = 0; rc == STATUS_OK && j < found; j++) {
        tier_meta existing, ignored;
        vs_id id;
        if ((rc = decode_existing(c, r, j, &existing)) != STATUS_OK) break;
        if (vs_id_parse(PQgetvalue(r, j, 0), &id) != 0) {
            rc = tier_fail(c, STATUS_EINTERNAL, "episodic_points: bad pid");
            break;
        }
        rc = vs_stamp(c, &id, &existing, 0, 0, &ignored);
    }
    PQclear(r);
    if (rc != STATUS_OK || found == 0) return rc; /* nothing to delete: roll back */
    if ((rc = tombstone(ss, o, seq, lit, &o->deleted)) != STATUS_OK) return rc;
    return tier_sql_commit(ss, o->c);
}

int episodic_embedded_delete_ids(vstore *vs, tier_ctx *c, const vs_collection *col,
                                 const vs_id *ids, size_t n, int64_t *deleted) {
    op o = {.e = (embedded *)vs, .c = c, .col = col, .ids = ids, .n = n};
    int rc = episodic_embedded_run(&o, delete_ids_fn);
    *deleted = rc == STATUS_OK ? o.deleted : 0;
    return rc;
}

static int delete_filter_fn(pgq_session *ss, void *arg) {
    op *o = arg;
    tier_ctx *c = o->c;
    o->deleted = 0;
    /* Lock the collection first, so the index caught up below is exactly
     * the committed state the filter is evaluated on. */
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT seq FROM episodic_collections WHERE cid = $%d FOR UPDATE",
                pgq_int8(&b, o->col->cid));
    PGresult *r;
    int rc = pgq_pipeline(ss, "lock collection", "BEGIN", &b, 0, &r);
    if (rc != STATUS_OK) return rc;
    int gone = PQntuples(r) == 0;
    PQclear(r);
    if (gone) return tier_fail(c, STATUS_ENOTFOUND, "collection %s was deleted", o->col->name);
    if ((rc = episodic_embedded_sync_index(ss, c, o->ec, 1)) != STATUS_OK) return rc;

    episodic_embedded_accept_args aa = {.c = c, .filter = o->filter, .modifiable = 1};
    size_t cap = 64, n = 0;
    const char **pids = malloc(cap * sizeof *pids);
    if (!pids) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    pthread_rwlock_rdlock(&o->ec->rw);
    for (size_t s = 0, total = episodic_index_count(o->ec->x); rc == STATUS_OK && s < total; s++) {
        if (!episodic_embedded_accept(o->ec->x, s, &aa) ||
            !vs_meta_match(o->meta, episodic_index_meta(o->ec->x, s)))
            continue;
        if (o->meta && o->meta->limit && (int64_t)n >= o->meta->limit) break;
        const char **grown = array_grow(pids, &cap, n + 1, sizeof *pids, 64);
        if (!grown) {
            rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
            break;
        }
        pids = grown;
        if (!(pids[n++] = episodic_embedded_pid_text(c->ar, episodic_index_id(o->ec->x, s))))
            rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    pthread_rwlock_unlock(&o->ec->rw);
    const char *lit = rc == STATUS_OK && n ? pgq_array_literal(c->ar, pids, n) : NULL;
    free(pids);
    if (rc != STATUS_OK || n == 0) return rc;
    if (!lit) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    int64_t seq;
    if ((rc = bump_seq(ss, o, 1, &seq)) != STATUS_OK) return rc;
    if ((rc = tombstone(ss, o, seq, lit, &o->deleted)) != STATUS_OK) return rc;
    return tier_sql_commit(ss, o->c);
}

int episodic_embedded_delete_filter(vstore *vs, tier_ctx *c, const vs_collection *col,
                                    const Memory__V1__Filter *filter, const vs_meta_sel *meta,
                                    int64_t *deleted) {
    embedded *e = (embedded *)vs;
    *deleted = 0;
    ecoll *ec = episodic_embedded_acquire(e, c, col);
    if (!ec) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    op o = {.e = e, .c = c, .col = col, .ec = ec, .filter = filter, .meta = meta};
    int rc = episodic_embedded_run(&o, delete_filter_fn);
    if (rc == STATUS_OK)
        episodic_embedded_account(e, c, ec, col->name); /* it was written: no failure now */
    episodic_embedded_release(e, ec);
    if (rc == STATUS_ENOTFOUND) episodic_embedded_forget(e, c, col->name);
    if (rc == STATUS_OK) *deleted = o.deleted;
    return rc;
}
