/* episodic_embedded_sync: a collection's index brought up to date from
 * PostgreSQL (the rows changed since the sequence it covers, a page at a
 * time); see episodic_embedded_internal.h. */
#include <stdlib.h>
#include <string.h>

#include "service/episodic/episodic_embedded_internal.h"
#include "service/lexical/lex_text.h"

#define SYNC_PAGE 4096 /* points fetched per catch-up statement */

/* A decoded point row, applied under the write lock. */
typedef struct row {
    vs_id id;
    const float *vector; /* NULL: none (with no text either: a tombstone) */
    int dims;            /* vector's length */
    const char *text;    /* NULL: none */
    json_t *payload;
    tier_meta meta;
} row;

static int decode_row(tier_ctx *c, arena *a, const PGresult *r, int i, int dims, row *out) {
    /* pid, seq, owner, label, vector, payload, pii_kinds, version, created_at,
     * updated_at, text */
    int64_t label;
    memset(out, 0, sizeof *out);
    const char *pid = pgq_col_str(a, r, i, 0);
    if (!pid || vs_id_parse(pid, &out->id) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "episodic_points: bad pid");
    if (PQgetisnull(r, i, 4) && PQgetisnull(r, i, 10)) return STATUS_OK; /* tombstone */
    if (!PQgetisnull(r, i, 4)) {
        /* An index of dims 0 takes the first vector's length (it claimed dims). */
        int bytes = PQgetlength(r, i, 4), want = dims * (int)sizeof(float);
        if (dims ? bytes != want
                 : bytes <= 0 || bytes % (int)sizeof(float) || bytes / 4 > VS_MAX_DIMS)
            return tier_fail(c, STATUS_EINTERNAL, "episodic_points %s: vector of %d bytes, want %d",
                             pid, bytes, want);
        float *v = arena_alloc(a, (size_t)bytes);
        if (!v) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        memcpy(v, PQgetvalue(r, i, 4), (size_t)bytes);
        out->vector = v;
        out->dims = bytes / (int)sizeof(float);
    }
    if (!PQgetisnull(r, i, 10) && !(out->text = pgq_col_str(a, r, i, 10)))
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    out->meta.owner = pgq_col_str(a, r, i, 2);
    const char *payload = pgq_col_jsonb(a, r, i, 5);
    if (!out->meta.owner || pgq_col_int(r, i, 3, &label) != 0 ||
        pgq_col_text_array(a, r, i, 6, &out->meta.pii_kinds, &out->meta.npii) != 0 ||
        pgq_col_int(r, i, 7, &out->meta.version) != 0 ||
        pgq_col_ts(r, i, 8, &out->meta.create_us) != 0 ||
        pgq_col_ts(r, i, 9, &out->meta.update_us) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "episodic_points %s: unexpected row", pid);
    out->meta.label = (int)label;
    if (payload) {
        json_error_t jerr;
        out->payload = json_loads(payload, 0, &jerr);
        if (!json_is_object(out->payload)) {
            json_decref(out->payload);
            out->payload = NULL;
            return tier_fail(c, STATUS_EINTERNAL, "episodic_points %s: payload is not an object",
                             pid);
        }
    }
    return STATUS_OK;
}

/* One row into x (under the write lock): a tombstone removes the point;
 * a text is analyzed with an into terms (reused). */
static int apply_row(tier_ctx *c, episodic_index *x, lex_analyzer *an, lex_terms *terms,
                     const row *w) {
    if (!w->vector && !w->text) {
        episodic_index_remove(x, &w->id);
        return STATUS_OK;
    }
    if (w->vector && episodic_index_dims(x) == 0 && episodic_index_set_dims(x, w->dims) != 0)
        return tier_fail(c, STATUS_ENOMEM, "out of memory loading the collection");
    if (w->vector && w->dims != episodic_index_dims(x))
        return tier_fail(c, STATUS_EINTERNAL, "episodic_points: vector of %d dimensions, want %d",
                         w->dims, episodic_index_dims(x));
    if (w->text && lex_analyze(an, w->text, strlen(w->text), terms) != 0)
        return tier_fail(c, STATUS_ENOMEM, "out of memory analyzing a text");
    if (episodic_index_put(x, &w->id, w->vector, w->text, w->text ? terms : NULL, w->payload,
                           &w->meta) != 0)
        return tier_fail(c, STATUS_ENOMEM, "out of memory loading the collection");
    return STATUS_OK;
}

/* Applies the changes above ec->applied. In a write transaction (in_tx)
 * the caller holds the collection row lock, so the index then reflects
 * exactly the committed state. STATUS_ENOTFOUND when the collection is gone. */
int episodic_embedded_sync_index(pgq_session *ss, tier_ctx *c, ecoll *ec, int in_tx) {
    pthread_mutex_lock(&ec->sync_mu);
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT seq FROM episodic_collections WHERE cid = $%d", pgq_int8(&b, ec->cid));
    PGresult *r;
    int rc = episodic_embedded_query(ss, in_tx, "collection seq", &b, &r);
    int64_t seq = 0;
    if (rc == STATUS_OK) {
        if (PQntuples(r) == 0) rc = tier_fail(c, STATUS_ENOTFOUND, "the collection was deleted");
        else if (pgq_col_int(r, 0, 0, &seq) != 0)
            rc = tier_fail(c, STATUS_EINTERNAL, "unexpected episodic_collections.seq");
        PQclear(r);
    }

    /* Keyset over (seq, pid): one write may stamp more points than a page. */
    int64_t after_seq = ec->applied;
    char after_pid[40] = ""; /* "": the first page, everything above applied */
    lex_analyzer *an = lex_analyzer_of_thread(ec->language);
    if (rc == STATUS_OK && !an) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    lex_terms terms = {0};
    while (rc == STATUS_OK && seq > ec->applied) {
        int dims = episodic_index_dims(ec->x);
        arena *a = arena_create();
        if (!a) {
            rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
            break;
        }
        pgq_sql pb = {0};
        int cid = pgq_int8(&pb, ec->cid);
        int s = pgq_int8(&pb, after_seq);
        pgq_sql_add(&pb,
                    "SELECT pid, seq, owner, label, vector, payload, pii_kinds, version, "
                    "created_at, updated_at, text FROM episodic_points WHERE cid = $%d AND ",
                    cid);
        if (after_pid[0])
            pgq_sql_add(&pb, "seq >= $%d AND (seq, pid) > ($%d, $%d)", s, s,
                        pgq_text(&pb, after_pid));
        else pgq_sql_add(&pb, "seq > $%d", s);
        pgq_sql_add(&pb, " ORDER BY seq, pid LIMIT %d", SYNC_PAGE);
        rc = episodic_embedded_query(ss, in_tx, "catch up points", &pb, &r);
        if (rc != STATUS_OK) {
            arena_free(a);
            break;
        }
        int rows = PQntuples(r);
        row *batch = rows ? arena_alloc(a, (size_t)rows * sizeof *batch) : NULL;
        if (rows && !batch) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
        int decoded = 0;
        for (; rc == STATUS_OK && decoded < rows; decoded++)
            rc = decode_row(c, a, r, decoded, dims, &batch[decoded]);
        if (rc == STATUS_OK && rows) {
            const char *last = PQgetvalue(r, rows - 1, 0);
            snprintf(after_pid, sizeof after_pid, "%s", last);
            if (pgq_col_int(r, rows - 1, 1, &after_seq) != 0)
                rc = tier_fail(c, STATUS_EINTERNAL, "unexpected episodic_points.seq");
        }
        PQclear(r);
        if (rc == STATUS_OK) {
            pthread_rwlock_wrlock(&ec->rw);
            for (int i = 0; i < rows && rc == STATUS_OK; i++)
                rc = apply_row(c, ec->x, an, &terms, &batch[i]);
            pthread_rwlock_unlock(&ec->rw);
        }
        for (int i = 0; i < decoded && batch; i++) json_decref(batch[i].payload);
        arena_free(a);
        if (rc == STATUS_OK && rows < SYNC_PAGE) ec->applied = seq;
    }
    lex_terms_free(&terms);
    pthread_mutex_unlock(&ec->sync_mu);
    return rc;
}
