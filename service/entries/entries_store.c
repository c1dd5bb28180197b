/* entries_store: SQL for the Entries tier; see entries_store.h.
 *
 * Query discipline: every statement is parameterized (values never enter
 * SQL text; the text only ever changes by fixed fragments), results come
 * back in binary format, and every statement runs inside a transaction
 * whose statement_timeout comes from the call's deadline (set_config(...,
 * true), i.e. SET LOCAL). Reads send BEGIN, the timeout, the query and
 * COMMIT as one libpq pipeline, so a Read costs one network round trip. */
#include "service/entries/entries_store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "service/auth/nsglob.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/store/pgq.h"

#define MAX_ATTEMPTS 3   /* tries when a pooled connection turns out dead */
#define MAX_CREATE_RACES 3

struct entries_store {
    pg_pool *pg;
    entries_store_options o;
};

/* The columns every row-returning query selects, in this order. */
#define COLS                                                                                 \
    "tenant, namespace, key, owner, label, content_type, metadata, tags, pii_kinds,"        \
    " size_bytes, version, created_at, updated_at, expires_at, compressed"
enum {
    C_TENANT,
    C_NS,
    C_KEY,
    C_OWNER,
    C_LABEL,
    C_CTYPE,
    C_META,
    C_TAGS,
    C_PII,
    C_SIZE,
    C_VERSION,
    C_CREATED,
    C_UPDATED,
    C_EXPIRES,
    C_COMPRESSED,
    C_VALUE, /* only when asked for */
};

/* ---------------------------------------------------------------- utils */

static int fail(entries_ctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(entries_ctx *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return code;
}

int entries_store_create(pg_pool *pg, const entries_store_options *o, entries_store **out) {
    entries_store *s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->pg = pg;
    s->o.max_statement_ms = 30000;
    s->o.max_response_bytes = 4u << 20;
    s->o.zstd_level = 3;
    if (o) {
        if (o->max_statement_ms > 0) s->o.max_statement_ms = o->max_statement_ms;
        if (o->max_response_bytes > 0) s->o.max_response_bytes = o->max_response_bytes;
        if (o->zstd_level != 0) s->o.zstd_level = o->zstd_level;
    }
    *out = s;
    return 0;
}

void entries_store_free(entries_store *s) { free(s); }

/* The read diode as a WHERE fragment (without a leading AND): the caller's
 * tenant, its own records unless its read scope is `:all`, labels up to
 * clr, and nothing expired. */
static void add_read_diode(pgq_sql *b, pgq_params *q, const principal *p) {
    pgq_sql_add(b, "tenant = $%d AND label <= $%d AND (expires_at IS NULL OR expires_at > now())",
            pgq_text(q, principal_tenant(p)), pgq_int4(q, (int32_t)principal_clr(p)));
    if (principal_scope(p, "entries:read") != PRINCIPAL_ALL)
        pgq_sql_add(b, " AND owner = $%d", pgq_text(q, principal_sub(p)));
}

/* A LIKE pattern (escape `\`) for a validated namespace or key pattern:
 * `*` becomes `%`, LIKE's own metacharacters match literally. */
static char *to_like(arena *ar, const char *pat) {
    size_t n = strlen(pat);
    char *out = arena_alloc(ar, 2 * n + 1);
    if (!out || nsglob_to_like(pat, n, out, 2 * n + 1) < 0) return NULL;
    return out;
}

/* The token's ns globs as LIKE patterns in one array literal; NULL with
 * *none = 1 when the token may touch no namespace (no claim, or only
 * globs that match nothing, as principal_ns_allows treats them). */
static const char *ns_globs_param(arena *ar, const principal *p, int *none) {
    const jwt_claims *cl = principal_claims(p);
    *none = 0;
    const char **likes = arena_alloc(ar, (cl->nns + 1) * sizeof *likes);
    if (!likes) return NULL;
    size_t n = 0;
    char why[128];
    for (size_t i = 0; i < cl->nns; i++) {
        if (nsglob_check_pattern(cl->ns[i], strlen(cl->ns[i]), why, sizeof why) != 0) continue;
        if (!(likes[n++] = to_like(ar, cl->ns[i]))) return NULL;
    }
    *none = n == 0;
    return *none ? NULL : pgq_array_literal(ar, likes, n);
}

/* ------------------------------------------------------------ sessions */

/* A pgq session plus the store and the call it serves. */
typedef struct {
    pgq_session q;
    entries_store *s;
    entries_ctx *c;
} session;

static int begin_session(entries_store *s, entries_ctx *c, session *ss) {
    ss->s = s;
    ss->c = c;
    return pgq_begin(&ss->q, s->pg, "entries", c->deadline_ms, s->o.max_statement_ms, c->err,
                     sizeof c->err);
}

static void end_session(session *ss) { pgq_end(&ss->q); }

static int pg_fail(session *ss, const PGresult *res, const char *what) {
    return pgq_pg_fail(&ss->q, res, what);
}

static PGresult *exec(session *ss, const char *sql, const pgq_params *q) {
    return pgq_exec_text(&ss->q, sql, q);
}

static int pipeline(session *ss, const char *what, const char *begin, const pgq_sql *sql,
                    const pgq_params *q, int commit, PGresult **res) {
    return pgq_pipeline(&ss->q, what, begin, sql, q, commit, res);
}

static int finish_tx(session *ss) {
    entries_ctx *c = ss->c;
    return pgq_commit(&ss->q, c->before_commit, c->after_commit, c->hook_arg);
}

/* Fills rec from row; with_value: column C_VALUE exists (NULL there =
 * value not sent, e.g. over the byte budget). */
static int decode_row(entries_ctx *c, const PGresult *r, int row, int with_value,
                      entries_record *rec) {
    arena *ar = c->ar;
    memset(rec, 0, sizeof *rec);
    int64_t label = 0, compressed = 0;
    rec->tenant = pgq_col_str(ar, r, row, C_TENANT);
    rec->ns = pgq_col_str(ar, r, row, C_NS);
    rec->key = pgq_col_str(ar, r, row, C_KEY);
    rec->owner = pgq_col_str(ar, r, row, C_OWNER);
    rec->content_type = pgq_col_str(ar, r, row, C_CTYPE);
    if (!rec->tenant || !rec->ns || !rec->key || !rec->owner || !rec->content_type)
        return fail(c, STATUS_ENOMEM, "out of memory");
    /* jsonb in binary form: a version byte (1), then the text. */
    int mlen = PQgetlength(r, row, C_META);
    const char *mp = PQgetvalue(r, row, C_META);
    if (PQgetisnull(r, row, C_META) || mlen < 1 || mp[0] != 1)
        return fail(c, STATUS_EINTERNAL, "entries row has an unreadable metadata column");
    if (!(rec->metadata_json = arena_strndup(ar, mp + 1, (size_t)mlen - 1)))
        return fail(c, STATUS_ENOMEM, "out of memory");
    if (pgq_col_int(r, row, C_LABEL, &label) != 0 || pgq_col_int(r, row, C_SIZE, &rec->size_bytes) != 0 ||
        pgq_col_int(r, row, C_VERSION, &rec->version) != 0 ||
        pgq_col_ts(r, row, C_CREATED, &rec->create_us) != 0 ||
        pgq_col_ts(r, row, C_UPDATED, &rec->update_us) != 0 ||
        pgq_col_text_array(ar, r, row, C_TAGS, &rec->tags, &rec->ntags) != 0 ||
        pgq_col_text_array(ar, r, row, C_PII, &rec->pii_kinds, &rec->npii) != 0 ||
        PQgetlength(r, row, C_COMPRESSED) != 1)
        return fail(c, STATUS_EINTERNAL, "entries row %s/%s has an unreadable column", rec->ns,
                    rec->key);
    compressed = PQgetvalue(r, row, C_COMPRESSED)[0] != 0;
    rec->label = (int)label;
    if (!PQgetisnull(r, row, C_EXPIRES)) {
        if (pgq_col_ts(r, row, C_EXPIRES, &rec->expire_us) != 0)
            return fail(c, STATUS_EINTERNAL, "entries row has an unreadable expires_at");
        rec->has_expire = 1;
    }
    if (!with_value || PQgetisnull(r, row, C_VALUE)) return STATUS_OK;
    const char *vp = PQgetvalue(r, row, C_VALUE);
    size_t vlen = (size_t)PQgetlength(r, row, C_VALUE);
    if (rec->size_bytes < 0 || rec->size_bytes > ENTRIES_VALUE_MAX)
        return fail(c, STATUS_EINTERNAL, "entries row %s/%s has size %lld", rec->ns, rec->key,
                    (long long)rec->size_bytes);
    size_t size = (size_t)rec->size_bytes;
    uint8_t *buf = arena_alloc(ar, size ? size : 1);
    if (!buf) return fail(c, STATUS_ENOMEM, "out of memory");
    if (compressed) {
        unsigned long long fsz = ZSTD_getFrameContentSize(vp, vlen);
        size_t got = fsz == size ? ZSTD_decompress(buf, size, vp, vlen) : 0;
        if (fsz != size || ZSTD_isError(got) || got != size) {
            log_fields(LOG_ERROR, "entries: stored value does not decompress", LOG_F_STR,
                       "namespace", rec->ns, LOG_F_STR, "key", rec->key, LOG_F_END);
            return fail(c, STATUS_EINTERNAL, "the stored value of %s/%s is corrupt", rec->ns,
                        rec->key);
        }
    } else {
        if (vlen != size)
            return fail(c, STATUS_EINTERNAL, "the stored value of %s/%s has the wrong size",
                        rec->ns, rec->key);
        memcpy(buf, vp, size);
    }
    rec->value = buf;
    rec->value_len = size;
    rec->has_value = 1;
    return STATUS_OK;
}

/* The final read filter behind the SQL predicates: a row that should not
 * have come back is a bug in the query. It is logged loudly and the whole
 * call fails; the row is never returned. */
static int check_row(entries_ctx *c, principal_breadth breadth, const entries_record *rec) {
    if (principal_may_read(c->p, breadth, rec->tenant, rec->owner, rec->label) &&
        principal_ns_allows(c->p, rec->ns))
        return STATUS_OK;
    log_fields(LOG_ERROR, "entries: READ DIODE MISMATCH, a row escaped the SQL predicates",
               LOG_F_STR, "caller", principal_sub(c->p), LOG_F_STR, "caller_tenant",
               principal_tenant(c->p), LOG_F_STR, "row_tenant", rec->tenant, LOG_F_STR,
               "row_owner", rec->owner, LOG_F_INT, "row_label", (int64_t)rec->label, LOG_F_STR,
               "namespace", rec->ns, LOG_F_END);
    return fail(c, STATUS_EINTERNAL, "internal error: read filter mismatch (logged)");
}

static int decode_rows(entries_ctx *c, const PGresult *r, int with_value, int max,
                       entries_record **out, size_t *n) {
    int rows = PQntuples(r);
    if (rows > max) rows = max;
    *out = NULL;
    *n = 0;
    entries_record *recs = arena_alloc(c->ar, ((size_t)rows + 1) * sizeof *recs);
    if (!recs) return fail(c, STATUS_ENOMEM, "out of memory");
    principal_breadth breadth = principal_scope(c->p, "entries:read");
    for (int i = 0; i < rows; i++) {
        int rc = decode_row(c, r, i, with_value, &recs[i]);
        if (rc == STATUS_OK) rc = check_row(c, breadth, &recs[i]);
        if (rc != STATUS_OK) return rc;
    }
    *out = recs;
    *n = (size_t)rows;
    return STATUS_OK;
}

/* ------------------------------------------------------------ reads */

/* Runs a read query with retries on connections that turn out dead
 * (pooled connections killed server-side fail on first use). */
typedef int (*read_fn)(session *ss, void *arg);

static int with_read_session(entries_store *s, entries_ctx *c, read_fn fn, void *arg) {
    int rc = STATUS_EUNAVAILABLE;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != STATUS_OK) return rc;
        rc = fn(&ss, arg);
        int retry = rc == STATUS_EUNAVAILABLE && ss.q.broken;
        end_session(&ss);
        if (!retry) break;
    }
    return rc;
}

typedef struct {
    const char *ns, *key;
    entries_record *out;
} read_args;

static int do_read(session *ss, void *arg) {
    read_args *a = arg;
    entries_ctx *c = ss->c;
    pgq_params q = {0};
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT " COLS ", value FROM entries WHERE ");
    add_read_diode(&b, &q, c->p);
    pgq_sql_add(&b, " AND namespace = $%d AND key = $%d", pgq_text(&q, a->ns), pgq_text(&q, a->key));
    PGresult *r;
    int rc = pipeline(ss, "read", NULL, &b, &q, 1, &r);
    if (rc != STATUS_OK) return rc;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return fail(c, STATUS_ENOTFOUND, "entry %s/%s not found", a->ns, a->key);
    }
    entries_record *recs;
    size_t n;
    rc = decode_rows(c, r, 1, 1, &recs, &n);
    PQclear(r);
    if (rc == STATUS_OK) *a->out = recs[0];
    return rc;
}

int entries_store_read(entries_store *s, entries_ctx *c, const char *ns, const char *key,
                       entries_record *out) {
    read_args a = {ns, key, out};
    return with_read_session(s, c, do_read, &a);
}

typedef struct {
    const entries_list_in *in;
    entries_record **out;
    size_t *n;
    int *more;
} list_args;

static int do_list(session *ss, void *arg) {
    list_args *a = arg;
    entries_ctx *c = ss->c;
    const entries_list_in *in = a->in;
    int none = 0;
    const char *globs = ns_globs_param(c->ar, c->p, &none);
    if (none) return STATUS_OK; /* the token may touch no namespace */
    const char *nsl = to_like(c->ar, in->ns_pattern), *kl = to_like(c->ar, in->key_pattern);
    if (!globs || !nsl || !kl) return fail(c, STATUS_ENOMEM, "out of memory");
    pgq_params q = {0};
    pgq_sql b = {0};
    /* With values, a running sum of sizes marks the rows past the byte
     * budget: they come back without their value and end the page. */
    if (in->with_values)
        pgq_sql_add(&b, "SELECT " COLS ", CASE WHEN run - size_bytes < $%d THEN value END FROM ("
                    "SELECT " COLS ", value, sum(size_bytes) OVER (ORDER BY namespace, key"
                    " ROWS UNBOUNDED PRECEDING) AS run FROM entries WHERE ",
                pgq_int8(&q, (int64_t)ss->s->o.max_response_bytes));
    else
        pgq_sql_add(&b, "SELECT " COLS " FROM entries WHERE ");
    add_read_diode(&b, &q, c->p);
    pgq_sql_add(&b, " AND namespace LIKE ANY($%d) AND namespace LIKE $%d AND key LIKE $%d",
            pgq_text_array(&q, globs), pgq_text(&q, nsl), pgq_text(&q, kl));
    if (in->after_ns)
        pgq_sql_add(&b, " AND (namespace, key) > ($%d, $%d)", pgq_text(&q, in->after_ns),
                pgq_text(&q, in->after_key));
    pgq_sql_add(&b, " ORDER BY namespace, key LIMIT $%d", pgq_int8(&q, (int64_t)in->limit + 1));
    if (in->with_values) pgq_sql_add(&b, ") page ORDER BY namespace, key");
    PGresult *r;
    int rc = pipeline(ss, "list", NULL, &b, &q, 1, &r);
    if (rc != STATUS_OK) return rc;
    int rows = PQntuples(r), take = rows < in->limit ? rows : in->limit;
    if (in->with_values) {
        for (int i = 0; i < take; i++)
            if (PQgetisnull(r, i, C_VALUE)) {
                take = i;
                break;
            }
    }
    rc = decode_rows(c, r, in->with_values, take, a->out, a->n);
    *a->more = rows > take;
    PQclear(r);
    return rc;
}

int entries_store_list(entries_store *s, entries_ctx *c, const entries_list_in *in,
                       entries_record **out, size_t *n, int *more) {
    *out = NULL;
    *n = 0;
    *more = 0;
    list_args a = {in, out, n, more};
    return with_read_session(s, c, do_list, &a);
}

typedef struct {
    const entries_search_in *in;
    entries_record **out;
    size_t *n;
} search_args;

/* term with LIKE's `\`, `%` and `_` escaped, so it matches literally. */
static char *like_escape(arena *ar, const char *s) {
    char *out = arena_alloc(ar, 2 * strlen(s) + 1), *w = out;
    if (!out) return NULL;
    for (; *s; s++) {
        if (*s == '%' || *s == '_' || *s == '\\') *w++ = '\\';
        *w++ = *s;
    }
    *w = '\0';
    return out;
}

static int do_search(session *ss, void *arg) {
    search_args *a = arg;
    entries_ctx *c = ss->c;
    const entries_search_in *in = a->in;
    int none = 0;
    const char *globs = ns_globs_param(c->ar, c->p, &none);
    if (none) return STATUS_OK;
    const char *nsl = to_like(c->ar, in->ns_pattern);
    if (!globs || !nsl) return fail(c, STATUS_ENOMEM, "out of memory");
    pgq_params q = {0};
    pgq_sql b = {0};
    if (in->with_values)
        pgq_sql_add(&b, "SELECT " COLS ", CASE WHEN run - size_bytes < $%d THEN value END FROM ("
                    "SELECT " COLS ", value, sum(size_bytes) OVER (ORDER BY updated_at DESC,"
                    " namespace, key ROWS UNBOUNDED PRECEDING) AS run FROM entries WHERE ",
                pgq_int8(&q, (int64_t)ss->s->o.max_response_bytes));
    else
        pgq_sql_add(&b, "SELECT " COLS " FROM entries WHERE ");
    add_read_diode(&b, &q, c->p);
    pgq_sql_add(&b, " AND namespace LIKE ANY($%d) AND namespace LIKE $%d", pgq_text_array(&q, globs),
            pgq_text(&q, nsl));
    if (in->term[0]) {
        const char *t = like_escape(c->ar, in->term);
        if (!t) return fail(c, STATUS_ENOMEM, "out of memory");
        /* search_text is lower-cased with the same ICU rules at write time.
         * The pattern is put back to the column's collation, or the
         * planner could not use the trigram index (157 ms -> 2 ms over
         * 200k rows). */
        pgq_sql_add(&b,
                " AND search_text LIKE ('%%' || lower($%d COLLATE \"und-x-icu\") || '%%')"
                " COLLATE \"default\"",
                pgq_text(&q, t));
    }
    if (in->ntags) {
        const char *tl = pgq_array_literal(c->ar, in->tags, in->ntags);
        if (!tl) return fail(c, STATUS_ENOMEM, "out of memory");
        pgq_sql_add(&b, " AND tags @> $%d", pgq_text_array(&q, tl));
    }
    if (in->content_type[0])
        pgq_sql_add(&b, " AND content_type = $%d", pgq_text(&q, in->content_type));
    if (in->created_by[0]) pgq_sql_add(&b, " AND owner = $%d", pgq_text(&q, in->created_by));
    if (in->has_start) pgq_sql_add(&b, " AND updated_at >= $%d", pgq_ts(&q, in->start_us));
    if (in->has_end) pgq_sql_add(&b, " AND updated_at < $%d", pgq_ts(&q, in->end_us));
    pgq_sql_add(&b, " ORDER BY updated_at DESC, namespace, key LIMIT $%d",
            pgq_int8(&q, (int64_t)in->limit));
    if (in->with_values) pgq_sql_add(&b, ") page ORDER BY updated_at DESC, namespace, key");
    if (b.overflow) return fail(c, STATUS_EINTERNAL, "search query too long");
    PGresult *r;
    int rc = pipeline(ss, "search", NULL, &b, &q, 1, &r);
    if (rc != STATUS_OK) return rc;
    int rows = PQntuples(r), take = rows;
    if (in->with_values) {
        for (int i = 0; i < take; i++)
            if (PQgetisnull(r, i, C_VALUE)) {
                take = i;
                break;
            }
    }
    rc = decode_rows(c, r, in->with_values, take, a->out, a->n);
    PQclear(r);
    return rc;
}

int entries_store_search(entries_store *s, entries_ctx *c, const entries_search_in *in,
                         entries_record **out, size_t *n) {
    *out = NULL;
    *n = 0;
    search_args a = {in, out, n};
    return with_read_session(s, c, do_search, &a);
}

typedef struct {
    const char *ns_pattern;
    entries_stats *out;
} stats_args;

static int do_stats(session *ss, void *arg) {
    stats_args *a = arg;
    entries_ctx *c = ss->c;
    int none = 0;
    const char *globs = ns_globs_param(c->ar, c->p, &none);
    if (none) return STATUS_OK;
    const char *nsl = to_like(c->ar, a->ns_pattern);
    if (!globs || !nsl) return fail(c, STATUS_ENOMEM, "out of memory");
    pgq_params q = {0};
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT count(*), count(DISTINCT namespace), coalesce(sum(size_bytes), 0)::int8,"
                " coalesce(sum(octet_length(value)), 0)::int8,"
                " count(*) FILTER (WHERE compressed) FROM entries WHERE ");
    add_read_diode(&b, &q, c->p);
    pgq_sql_add(&b, " AND namespace LIKE ANY($%d) AND namespace LIKE $%d", pgq_text_array(&q, globs),
            pgq_text(&q, nsl));
    PGresult *r;
    int rc = pipeline(ss, "stats", NULL, &b, &q, 1, &r);
    if (rc != STATUS_OK) return rc;
    entries_stats *o = a->out;
    if (PQntuples(r) != 1 || pgq_col_int(r, 0, 0, &o->entry_count) != 0 ||
        pgq_col_int(r, 0, 1, &o->namespace_count) != 0 || pgq_col_int(r, 0, 2, &o->value_bytes) != 0 ||
        pgq_col_int(r, 0, 3, &o->stored_bytes) != 0 || pgq_col_int(r, 0, 4, &o->compressed_count) != 0)
        rc = fail(c, STATUS_EINTERNAL, "unexpected stats result");
    PQclear(r);
    return rc;
}

int entries_store_stats(entries_store *s, entries_ctx *c, const char *ns_pattern,
                        entries_stats *out) {
    memset(out, 0, sizeof *out);
    stats_args a = {ns_pattern, out};
    return with_read_session(s, c, do_stats, &a);
}

/* ------------------------------------------------------------ writes */

/* The state of (ns, key) under a row lock, inside the open transaction. */
typedef struct {
    int exists;  /* a row is there (live or expired) */
    int live;    /* ... and not expired */
    const char *owner;
    int label;
    int64_t version;
} locked_row;

#define LOCK_SQL                                                                   \
    "SELECT owner, label, version, (expires_at IS NULL OR expires_at > now())"    \
    " FROM entries WHERE tenant = $1 AND namespace = $2 AND key = $3 FOR UPDATE"

static int decode_lock(entries_ctx *c, PGresult *r, locked_row *lr) {
    memset(lr, 0, sizeof *lr);
    if (PQntuples(r) == 0) return STATUS_OK;
    int64_t label, version;
    lr->owner = pgq_col_str(c->ar, r, 0, 0);
    if (!lr->owner || pgq_col_int(r, 0, 1, &label) != 0 || pgq_col_int(r, 0, 2, &version) != 0 ||
        PQgetlength(r, 0, 3) != 1)
        return fail(c, STATUS_EINTERNAL, "unexpected row-lock result");
    lr->exists = 1;
    lr->live = PQgetvalue(r, 0, 3)[0] != 0;
    lr->label = (int)label;
    lr->version = version;
    return STATUS_OK;
}

/* Locks the row; first: the transaction is begun in the same round trip. */
static int lock_row(session *ss, const char *ns, const char *key, int first, locked_row *lr) {
    entries_ctx *c = ss->c;
    pgq_params q = {0};
    pgq_text(&q, principal_tenant(c->p));
    pgq_text(&q, ns);
    pgq_text(&q, key);
    PGresult *r;
    int rc;
    if (first) {
        pgq_sql b = {0};
        pgq_sql_add(&b, "%s", LOCK_SQL);
        rc = pipeline(ss, "row lock", "BEGIN", &b, &q, 0, &r);
    } else {
        r = exec(ss, LOCK_SQL, &q);
        rc = PQresultStatus(r) == PGRES_TUPLES_OK ? STATUS_OK : pg_fail(ss, r, "row lock");
        if (rc != STATUS_OK) PQclear(r);
    }
    if (rc != STATUS_OK) return rc;
    rc = decode_lock(c, r, lr);
    PQclear(r);
    return rc;
}

/* Write diode for changing a live row: the caller must be able to read it
 * (label <= clr) and own it or hold `entries:write:all`. */
static int may_modify(entries_ctx *c, const locked_row *lr, const char *ns, const char *key) {
    if (lr->label > (int)principal_clr(c->p))
        return fail(c, STATUS_EDENIED,
                    "entry %s/%s is labelled above the token's read ceiling and cannot be "
                    "modified by it", ns, key);
    if (strcmp(lr->owner, principal_sub(c->p)) != 0 &&
        principal_scope(c->p, "entries:write") != PRINCIPAL_ALL)
        return fail(c, STATUS_EDENIED,
                    "entry %s/%s belongs to another principal; modifying it needs "
                    "entries:write:all", ns, key);
    return STATUS_OK;
}

/* Everything a write sends, prepared once before any attempt. */
typedef struct {
    const entries_write_in *in;
    const uint8_t *stored;
    size_t stored_len;
    int compressed;
    const char *search_text;
    const char *tags_lit;
    const char *pii_lit;
    entries_record *out;
    int *created;
} write_plan;

static const char WRITE_COLS[] =
    "owner, label, value, compressed, size_bytes, content_type, metadata, tags, pii_kinds,"
    " search_text, version, created_at, updated_at, expires_at";

/* Adds the parameters an INSERT and an UPDATE share and returns their $
 * numbers; the expiry is COALESCE($abs, now() + $ttl µs), NULL when both
 * are NULL. */
static void write_params(pgq_params *q, const write_plan *w, int *p_value, int *p_comp,
                         int *p_size, int *p_ctype, int *p_meta, int *p_tags, int *p_pii,
                         int *p_search, int *p_abs, int *p_ttl) {
    const entries_write_in *in = w->in;
    *p_value = pgq_bytes(q, w->stored, w->stored_len);
    *p_comp = pgq_bool(q, w->compressed);
    *p_size = pgq_int8(q, (int64_t)in->value_len);
    *p_ctype = pgq_text(q, in->content_type);
    *p_meta = pgq_text(q, in->metadata_json ? in->metadata_json : "{}");
    *p_tags = pgq_text_array(q, w->tags_lit);
    *p_pii = pgq_text_array(q, w->pii_lit);
    *p_search = pgq_text(q, w->search_text);
    *p_abs = in->has_expire ? pgq_ts(q, in->expire_us) : pgq_null(q, PGQ_OID_TIMESTAMPTZ);
    *p_ttl = in->has_ttl ? pgq_int8(q, in->ttl_us) : pgq_null(q, PGQ_OID_INT8);
}

static int do_write(session *ss, write_plan *w) {
    entries_ctx *c = ss->c;
    const entries_write_in *in = w->in;
    for (int race = 0; race < MAX_CREATE_RACES; race++) {
        locked_row lr;
        int rc = lock_row(ss, in->ns, in->key, race == 0, &lr);
        if (rc != STATUS_OK) return rc;
        if (lr.live && (rc = may_modify(c, &lr, in->ns, in->key)) != STATUS_OK) return rc;
        if (in->has_expected) {
            int64_t current = lr.live ? lr.version : 0;
            if (current == 0 && in->expected_version != 0)
                return fail(c, STATUS_ECONFLICT,
                            "entry %s/%s does not exist (expected_version %lld)", in->ns,
                            in->key, (long long)in->expected_version);
            if (current != in->expected_version)
                return fail(c, STATUS_ECONFLICT, "entry %s/%s is at version %lld, not %lld",
                            in->ns, in->key, (long long)current,
                            (long long)in->expected_version);
        }
        int label = principal_stamp_label(c->p, in->label, lr.live ? lr.label : 0);
        pgq_params q = {0};
        int p_tenant = pgq_text(&q, principal_tenant(c->p));
        int p_ns = pgq_text(&q, in->ns);
        int p_key = pgq_text(&q, in->key);
        int p_owner = pgq_text(&q, principal_sub(c->p));
        int p_label = pgq_int4(&q, label);
        int p_value, p_comp, p_size, p_ctype, p_meta, p_tags, p_pii, p_search, p_abs, p_ttl;
        write_params(&q, w, &p_value, &p_comp, &p_size, &p_ctype, &p_meta, &p_tags, &p_pii,
                     &p_search, &p_abs, &p_ttl);
        pgq_sql b = {0};
        const char *expiry = "COALESCE($%d, now() + $%d * interval '1 microsecond')";
        char exp_sql[96];
        snprintf(exp_sql, sizeof exp_sql, expiry, p_abs, p_ttl);
        const char *search = "lower($%d COLLATE \"und-x-icu\")";
        char search_sql[64];
        snprintf(search_sql, sizeof search_sql, search, p_search);
        if (!lr.exists) {
            pgq_sql_add(&b,
                    "INSERT INTO entries (tenant, namespace, key, %s) VALUES ($%d, $%d, $%d, $%d,"
                    " $%d, $%d, $%d, $%d, $%d, $%d::jsonb, $%d, $%d, %s, 1, now(), now(), %s)"
                    " ON CONFLICT (tenant, namespace, key) DO NOTHING RETURNING " COLS,
                    WRITE_COLS, p_tenant, p_ns, p_key, p_owner, p_label, p_value, p_comp, p_size,
                    p_ctype, p_meta, p_tags, p_pii, search_sql, exp_sql);
        } else {
            /* An expired row is replaced as a new entry: new owner, version
             * 1, new create time. A live one keeps owner and create time. */
            const char *owner_sql = lr.live ? "owner" : NULL;
            char owner_buf[16];
            if (!owner_sql) {
                snprintf(owner_buf, sizeof owner_buf, "$%d", p_owner);
                owner_sql = owner_buf;
            }
            pgq_sql_add(&b,
                    "UPDATE entries SET owner = %s, label = $%d, value = $%d, compressed = $%d,"
                    " size_bytes = $%d, content_type = $%d, metadata = $%d::jsonb, tags = $%d,"
                    " pii_kinds = $%d, search_text = %s, version = %s, created_at = %s,"
                    " updated_at = now(), expires_at = %s"
                    " WHERE tenant = $%d AND namespace = $%d AND key = $%d RETURNING " COLS,
                    owner_sql, p_label, p_value, p_comp, p_size, p_ctype, p_meta, p_tags, p_pii,
                    search_sql, lr.live ? "version + 1" : "1", lr.live ? "created_at" : "now()",
                    exp_sql, p_tenant, p_ns, p_key);
        }
        if (b.overflow) return fail(c, STATUS_EINTERNAL, "write query too long");
        PGresult *r = exec(ss, b.buf, &q);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            rc = pg_fail(ss, r, "write");
            PQclear(r);
            return rc;
        }
        if (PQntuples(r) == 0) {
            /* Lost a create race: the other transaction has committed its
             * row (ON CONFLICT waited for it); lock and re-evaluate. */
            PQclear(r);
            continue;
        }
        rc = decode_row(c, r, 0, 0, w->out);
        PQclear(r);
        if (rc != STATUS_OK) return rc;
        *w->created = !lr.live;
        return finish_tx(ss);
    }
    return fail(c, STATUS_ECONFLICT, "entry %s/%s is being created concurrently; retry",
                in->ns, in->key);
}

/* The stored form of a value: a zstd frame when over 1 KiB. */
static int compress_bytes(entries_store *s, entries_ctx *c, const uint8_t *v, size_t n,
                          const uint8_t **stored, size_t *stored_len, int *compressed) {
    *stored = v;
    *stored_len = n;
    *compressed = 0;
    if (n <= ENTRIES_COMPRESS_OVER) return STATUS_OK;
    size_t cap = ZSTD_compressBound(n);
    uint8_t *buf = arena_alloc(c->ar, cap);
    if (!buf) return fail(c, STATUS_ENOMEM, "out of memory");
    size_t got = ZSTD_compress(buf, cap, v, n, s->o.zstd_level);
    if (ZSTD_isError(got)) return fail(c, STATUS_EINTERNAL, "zstd: %s", ZSTD_getErrorName(got));
    *stored = buf;
    *stored_len = got;
    *compressed = 1;
    return STATUS_OK;
}

/* lower() happens in SQL; here the text it lowers: the key, and the value
 * when it is UTF-8 text PostgreSQL can hold (no NUL). */
static const char *search_source(arena *ar, const char *key, const uint8_t *v, size_t vlen) {
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

int entries_store_write(entries_store *s, entries_ctx *c, const entries_write_in *in,
                        entries_record *out, int *created) {
    write_plan w = {0};
    w.in = in;
    w.out = out;
    w.created = created;
    int rc = compress_bytes(s, c, in->value, in->value_len, &w.stored, &w.stored_len,
                            &w.compressed);
    if (rc != STATUS_OK) return rc;
    w.search_text = search_source(c->ar, in->key, in->value, in->value_len);
    w.tags_lit = pgq_array_literal(c->ar, in->tags, in->ntags);
    w.pii_lit = pgq_array_literal(c->ar, in->pii_kinds, in->npii);
    if (!w.search_text || !w.tags_lit || !w.pii_lit)
        return fail(c, STATUS_ENOMEM, "out of memory");
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != STATUS_OK) return rc;
        rc = do_write(&ss, &w);
        /* Retry only when the connection died before COMMIT was sent:
         * the server rolled the transaction back, nothing happened. */
        int retry = rc == STATUS_EUNAVAILABLE && ss.q.broken && !ss.q.commit_sent;
        end_session(&ss);
        if (!retry) break;
    }
    return rc;
}

static int do_delete(session *ss, const char *ns, const char *key, int has_expected,
                     int64_t expected) {
    entries_ctx *c = ss->c;
    locked_row lr;
    int rc = lock_row(ss, ns, key, 1, &lr);
    if (rc != STATUS_OK) return rc;
    if (!lr.live) return fail(c, STATUS_ENOTFOUND, "entry %s/%s not found", ns, key);
    if ((rc = may_modify(c, &lr, ns, key)) != STATUS_OK) return rc;
    if (has_expected && lr.version != expected)
        return fail(c, STATUS_ECONFLICT, "entry %s/%s is at version %lld, not %lld", ns, key,
                    (long long)lr.version, (long long)expected);
    pgq_params q = {0};
    pgq_text(&q, principal_tenant(c->p));
    pgq_text(&q, ns);
    pgq_text(&q, key);
    PGresult *r =
        exec(ss, "DELETE FROM entries WHERE tenant = $1 AND namespace = $2 AND key = $3", &q);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        rc = pg_fail(ss, r, "delete");
        PQclear(r);
        return rc;
    }
    PQclear(r);
    return finish_tx(ss);
}

int entries_store_delete(entries_store *s, entries_ctx *c, const char *ns, const char *key,
                         int has_expected, int64_t expected_version) {
    int rc = STATUS_EUNAVAILABLE;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != STATUS_OK) return rc;
        rc = do_delete(&ss, ns, key, has_expected, expected_version);
        int retry = rc == STATUS_EUNAVAILABLE && ss.q.broken && !ss.q.commit_sent;
        end_session(&ss);
        if (!retry) break;
    }
    return rc;
}

/* ------------------------------------------------------------ modify */

typedef struct {
    const entries_modify_in *in;
    entries_record *out;
} modify_args;

static int do_modify(session *ss, modify_args *a) {
    entries_ctx *c = ss->c;
    const entries_modify_in *in = a->in;
    pgq_params q = {0};
    pgq_sql b = {0};
    pgq_sql_add(&b,
            "SELECT " COLS ", value, (expires_at IS NULL OR expires_at > now()) FROM entries"
            " WHERE tenant = $%d AND namespace = $%d AND key = $%d FOR UPDATE",
            pgq_text(&q, principal_tenant(c->p)), pgq_text(&q, in->ns), pgq_text(&q, in->key));
    PGresult *r;
    int rc = pipeline(ss, "row lock", "BEGIN", &b, &q, 0, &r);
    if (rc != STATUS_OK) return rc;
    entries_record cur;
    int live = PQntuples(r) == 1 && PQgetlength(r, 0, C_VALUE + 1) == 1 &&
               PQgetvalue(r, 0, C_VALUE + 1)[0] != 0;
    rc = live ? decode_row(c, r, 0, 1, &cur) : STATUS_OK;
    PQclear(r);
    if (rc != STATUS_OK) return rc;
    if (!live) return fail(c, STATUS_ENOTFOUND, "entry %s/%s not found", in->ns, in->key);
    locked_row lr = {1, 1, cur.owner, cur.label, cur.version};
    if ((rc = may_modify(c, &lr, in->ns, in->key)) != STATUS_OK) return rc;
    if (in->has_expected && cur.version != in->expected_version)
        return fail(c, STATUS_ECONFLICT, "entry %s/%s is at version %lld, not %lld", in->ns,
                    in->key, (long long)cur.version, (long long)in->expected_version);
    entries_edit_out e = {0};
    c->err[0] = '\0';
    rc = in->edit(in->edit_arg, cur.value, cur.value_len, &e, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    cur.has_value = 0;
    cur.value = NULL;
    cur.value_len = 0;
    if (!e.changed) {
        *a->out = cur;
        return STATUS_OK; /* the session rolls the (lock-only) transaction back */
    }
    if (e.value_len > ENTRIES_VALUE_MAX)
        return fail(c, STATUS_ETOOBIG, "the new value of %s/%s would be %zu bytes; at most %d",
                    in->ns, in->key, e.value_len, ENTRIES_VALUE_MAX);
    const uint8_t *stored;
    size_t stored_len;
    int compressed;
    if ((rc = compress_bytes(ss->s, c, e.value, e.value_len, &stored, &stored_len,
                             &compressed)) != STATUS_OK)
        return rc;
    /* pii_kinds describe the whole record: keep the old kinds, add new. */
    const char **kinds = arena_alloc(c->ar, (cur.npii + e.npii + 1) * sizeof *kinds);
    if (!kinds) return fail(c, STATUS_ENOMEM, "out of memory");
    size_t nk = 0;
    for (size_t i = 0; i < cur.npii; i++) kinds[nk++] = cur.pii_kinds[i];
    for (size_t i = 0; i < e.npii; i++) {
        int dup = 0;
        for (size_t j = 0; j < nk && !dup; j++) dup = strcmp(kinds[j], e.pii_kinds[i]) == 0;
        if (!dup) kinds[nk++] = e.pii_kinds[i];
    }
    const char *kinds_lit = pgq_array_literal(c->ar, kinds, nk);
    const char *search = search_source(c->ar, in->key, e.value, e.value_len);
    if (!kinds_lit || !search) return fail(c, STATUS_ENOMEM, "out of memory");
    pgq_params u = {0};
    pgq_sql ub = {0};
    int p_label = pgq_int4(&u, principal_stamp_label(c->p, 0, cur.label));
    int p_value = pgq_bytes(&u, stored, stored_len);
    int p_comp = pgq_bool(&u, compressed);
    int p_size = pgq_int8(&u, (int64_t)e.value_len);
    int p_search = pgq_text(&u, search);
    int p_pii = pgq_text_array(&u, kinds_lit);
    pgq_sql_add(&ub,
            "UPDATE entries SET label = $%d, value = $%d, compressed = $%d, size_bytes = $%d,"
            " search_text = lower($%d COLLATE \"und-x-icu\"), pii_kinds = $%d,"
            " version = version + 1, updated_at = now()"
            " WHERE tenant = $%d AND namespace = $%d AND key = $%d RETURNING " COLS,
            p_label, p_value, p_comp, p_size, p_search, p_pii,
            pgq_text(&u, principal_tenant(c->p)), pgq_text(&u, in->ns), pgq_text(&u, in->key));
    r = exec(ss, ub.buf, &u);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        rc = pg_fail(ss, r, "update");
        PQclear(r);
        return rc;
    }
    rc = decode_row(c, r, 0, 0, a->out);
    PQclear(r);
    if (rc != STATUS_OK) return rc;
    return finish_tx(ss);
}

int entries_store_modify(entries_store *s, entries_ctx *c, const entries_modify_in *in,
                         entries_record *out) {
    int rc = STATUS_EUNAVAILABLE;
    modify_args a = {in, out};
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != STATUS_OK) return rc;
        rc = do_modify(&ss, &a);
        int retry = rc == STATUS_EUNAVAILABLE && ss.q.broken && !ss.q.commit_sent;
        end_session(&ss);
        if (!retry) break;
    }
    return rc;
}

/* ------------------------------------------------------------ purge */

static int do_purge(session *ss, const char *ns_pattern, int64_t *purged) {
    entries_ctx *c = ss->c;
    int none = 0;
    const char *globs = ns_globs_param(c->ar, c->p, &none);
    if (none) return STATUS_OK;
    const char *nsl = to_like(c->ar, ns_pattern);
    if (!globs || !nsl) return fail(c, STATUS_ENOMEM, "out of memory");
    pgq_params q = {0};
    pgq_sql b = {0};
    pgq_sql_add(&b,
            "DELETE FROM entries WHERE tenant = $%d AND expires_at <= now()"
            " AND namespace LIKE ANY($%d) AND namespace LIKE $%d",
            pgq_text(&q, principal_tenant(c->p)), pgq_text_array(&q, globs), pgq_text(&q, nsl));
    PGresult *r;
    int rc = pipeline(ss, "purge", "BEGIN", &b, &q, 0, &r);
    if (rc != STATUS_OK) return rc;
    *purged = atoll(PQcmdTuples(r));
    PQclear(r);
    return finish_tx(ss);
}

int entries_store_purge(entries_store *s, entries_ctx *c, const char *ns_pattern,
                        int64_t *purged) {
    *purged = 0;
    int rc = STATUS_EUNAVAILABLE;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != STATUS_OK) return rc;
        rc = do_purge(&ss, ns_pattern, purged);
        int retry = rc == STATUS_EUNAVAILABLE && ss.q.broken && !ss.q.commit_sent;
        end_session(&ss);
        if (!retry) break;
    }
    return rc;
}
