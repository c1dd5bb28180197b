/* entries_store: rows, globs and stored values of the Entries tier; the
 * reads are in entries_store_read.c, the writes in entries_store_write.c.
 * See entries_store.h.
 *
 * Query discipline is pgq's (pgq.h): every statement is parameterized
 * (values never enter SQL text; the text only ever changes by fixed
 * fragments), results come back in binary format, and every statement
 * runs under a statement_timeout taken from the call's deadline. A read is
 * one round trip. */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "service/auth/nsglob.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/entries/entries_store_internal.h"

void entries_read_diode(pgq_sql *b, const tier_ctx *c) {
    tier_sql_read_diode(b, c, NULL);
    pgq_sql_add(b, " AND (expires_at IS NULL OR expires_at > now())");
}

char *entries_to_like(arena *ar, const char *pat) {
    size_t n = strlen(pat);
    char *out = arena_alloc(ar, 2 * n + 1);
    if (!out || nsglob_to_like(pat, n, out, 2 * n + 1) < 0) return NULL;
    return out;
}

/* The token's ns globs as LIKE patterns in one array literal (NULL: none
 * usable, *none = 1; or out of memory). */
static const char *ns_globs(arena *ar, const principal *p, int *none) {
    const jwt_claims *cl = principal_claims(p);
    return tier_sql_ns_likes(ar, cl->ns, cl->nns, none);
}

int entries_sql_ns_scope(tier_ctx *c, const char *ns_pattern, pgq_sql *b, int *none) {
    const char *globs = ns_globs(c->ar, c->p, none);
    if (*none) return STATUS_OK;
    const char *nsl = entries_to_like(c->ar, ns_pattern);
    if (!globs || !nsl) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    pgq_sql_add(b, " AND namespace LIKE ANY($%d) AND namespace LIKE $%d", pgq_text_array(b, globs),
                pgq_text(b, nsl));
    return STATUS_OK;
}

/* The value column: decompressed when stored compressed, checked against
 * the recorded size either way. */
static int decode_value(tier_ctx *c, const PGresult *r, int row, int compressed,
                        entries_record *rec) {
    const char *vp = PQgetvalue(r, row, ECOL_VALUE);
    size_t vlen = (size_t)PQgetlength(r, row, ECOL_VALUE);
    if (rec->size_bytes < 0 || rec->size_bytes > ENTRIES_VALUE_MAX)
        return tier_fail(c, STATUS_EINTERNAL, "entries row %s/%s has size %lld", rec->ns, rec->key,
                         (long long)rec->size_bytes);
    size_t size = (size_t)rec->size_bytes;
    uint8_t *buf = arena_alloc(c->ar, size ? size : 1);
    if (!buf) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    if (compressed) {
        unsigned long long fsz = ZSTD_getFrameContentSize(vp, vlen);
        size_t got = fsz == size ? ZSTD_decompress(buf, size, vp, vlen) : 0;
        if (fsz != size || ZSTD_isError(got) || got != size) {
            log_fields(LOG_ERROR, "entries: stored value does not decompress", LOG_F_STR,
                       "namespace", rec->ns, LOG_F_STR, "key", rec->key, LOG_F_END);
            return tier_fail(c, STATUS_EINTERNAL, "the stored value of %s/%s is corrupt", rec->ns,
                             rec->key);
        }
    } else {
        if (vlen != size)
            return tier_fail(c, STATUS_EINTERNAL, "the stored value of %s/%s has the wrong size",
                             rec->ns, rec->key);
        memcpy(buf, vp, size);
    }
    rec->value = buf;
    rec->value_len = size;
    rec->has_value = 1;
    return STATUS_OK;
}

int entries_decode_row(tier_ctx *c, const PGresult *r, int row, int with_value,
                       entries_record *rec) {
    arena *ar = c->ar;
    memset(rec, 0, sizeof *rec);
    tier_meta *m = &rec->meta;
    int64_t label = 0;
    m->tenant = pgq_col_str(ar, r, row, ECOL_TENANT);
    rec->ns = pgq_col_str(ar, r, row, ECOL_NS);
    rec->key = pgq_col_str(ar, r, row, ECOL_KEY);
    m->owner = pgq_col_str(ar, r, row, ECOL_OWNER);
    rec->content_type = pgq_col_str(ar, r, row, ECOL_CTYPE);
    if (!m->tenant || !rec->ns || !rec->key || !m->owner || !rec->content_type)
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    if (!(rec->metadata_json = pgq_col_jsonb(ar, r, row, ECOL_META)))
        return tier_fail(c, STATUS_EINTERNAL, "entries row has an unreadable metadata column");
    if (pgq_col_int(r, row, ECOL_LABEL, &label) != 0 ||
        pgq_col_int(r, row, ECOL_SIZE, &rec->size_bytes) != 0 ||
        pgq_col_int(r, row, ECOL_VERSION, &m->version) != 0 ||
        pgq_col_ts(r, row, ECOL_CREATED, &m->create_us) != 0 ||
        pgq_col_ts(r, row, ECOL_UPDATED, &m->update_us) != 0 ||
        pgq_col_text_array(ar, r, row, ECOL_TAGS, &rec->tags, &rec->ntags) != 0 ||
        pgq_col_text_array(ar, r, row, ECOL_PII, &m->pii_kinds, &m->npii) != 0 ||
        PQgetlength(r, row, ECOL_COMPRESSED) != 1)
        return tier_fail(c, STATUS_EINTERNAL, "entries row %s/%s has an unreadable column", rec->ns,
                         rec->key);
    int compressed = PQgetvalue(r, row, ECOL_COMPRESSED)[0] != 0;
    m->label = (int)label;
    if (!PQgetisnull(r, row, ECOL_EXPIRES)) {
        if (pgq_col_ts(r, row, ECOL_EXPIRES, &m->expire_us) != 0)
            return tier_fail(c, STATUS_EINTERNAL, "entries row has an unreadable expires_at");
        m->has_expire = 1;
    }
    if (!with_value || PQgetisnull(r, row, ECOL_VALUE)) return STATUS_OK;
    return decode_value(c, r, row, compressed, rec);
}

int entries_decode_rows(tier_ctx *c, const PGresult *r, int with_value, int max,
                        entries_record **out, size_t *n) {
    int rows = PQntuples(r);
    if (rows > max) rows = max;
    *out = NULL;
    *n = 0;
    entries_record *recs = arena_alloc(c->ar, ((size_t)rows + 1) * sizeof *recs);
    if (!recs) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; i < rows; i++) {
        entries_record *e = &recs[i];
        int rc = entries_decode_row(c, r, i, with_value, e);
        if (rc == STATUS_OK)
            rc = tier_check_row(c, &e->meta, principal_ns_allows(c->p, e->ns), "entry %s/%s", e->ns,
                                e->key);
        if (rc != STATUS_OK) return rc;
    }
    *out = recs;
    *n = (size_t)rows;
    return STATUS_OK;
}

int entries_compress(tier_ctx *c, const uint8_t *v, size_t n, const uint8_t **stored,
                     size_t *stored_len, int *compressed) {
    *stored = v;
    *stored_len = n;
    *compressed = 0;
    if (n <= ENTRIES_COMPRESS_OVER) return STATUS_OK;
    size_t cap = ZSTD_compressBound(n);
    uint8_t *buf = arena_alloc(c->ar, cap);
    if (!buf) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    size_t got = ZSTD_compress(buf, cap, v, n, ENTRIES_ZSTD_LEVEL);
    if (ZSTD_isError(got))
        return tier_fail(c, STATUS_EINTERNAL, "zstd: %s", ZSTD_getErrorName(got));
    *stored = buf;
    *stored_len = got;
    *compressed = 1;
    return STATUS_OK;
}

const char *entries_search_source(arena *ar, const char *key, const uint8_t *v, size_t vlen) {
    int text = text_utf8_valid(v, vlen);
    size_t kl = strlen(key), n = kl + (text ? 1 + vlen : 0);
    char *s = arena_alloc(ar, n + 1);
    if (!s) return NULL;
    memcpy(s, key, kl);
    if (text) {
        s[kl] = '\n';
        if (vlen) memcpy(s + kl + 1, v, vlen);
    }
    s[n] = '\0';
    return s;
}
