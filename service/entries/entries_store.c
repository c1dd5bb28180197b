/* entries_store: SQL for the Entries tier; see entries_store.h.
 *
 * Query discipline: every statement is parameterized (values never enter
 * SQL text; the text only ever changes by fixed fragments), results come
 * back in binary format, and every statement runs inside a transaction
 * whose statement_timeout comes from the call's deadline (set_config(...,
 * true), i.e. SET LOCAL). Reads send BEGIN, the timeout, the query and
 * COMMIT as one libpq pipeline, so a Read costs one network round trip. */
#include "service/entries/entries_store.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "service/auth/nsglob.h"
#include "service/core/log.h"

/* PostgreSQL type oids used for parameters. */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT4 23
#define OID_TEXT 25
#define OID_TEXT_ARRAY 1009
#define OID_TIMESTAMPTZ 1184

#define PG_EPOCH_US 946684800000000LL /* 2000-01-01 in Unix microseconds */
#define MAX_PARAMS 24
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

int entries_utf8_text(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        if (b == 0) return 0;
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (b >= 0xc2 && b <= 0xdf) {
            len = 2;
            cp = b & 0x1f;
        } else if (b >= 0xe0 && b <= 0xef) {
            len = 3;
            cp = b & 0x0f;
        } else if (b >= 0xf0 && b <= 0xf4) {
            len = 4;
            cp = b & 0x07;
        } else {
            return 0;
        }
        if (n - i < len) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

const char *entries_strerror(int code) {
    switch (code) {
    case ENTRIES_OK: return "ENTRIES_OK";
    case ENTRIES_ENOTFOUND: return "ENTRIES_ENOTFOUND";
    case ENTRIES_EDENIED: return "ENTRIES_EDENIED";
    case ENTRIES_ECONFLICT: return "ENTRIES_ECONFLICT";
    case ENTRIES_EUNAVAILABLE: return "ENTRIES_EUNAVAILABLE";
    case ENTRIES_ETIMEOUT: return "ENTRIES_ETIMEOUT";
    case ENTRIES_EINTERNAL: return "ENTRIES_EINTERNAL";
    case ENTRIES_ENOMEM: return "ENTRIES_ENOMEM";
    case ENTRIES_ETOOBIG: return "ENTRIES_ETOOBIG";
    default: return "ENTRIES_E?";
    }
}

static int fail(entries_ctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(entries_ctx *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return code;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

/* ------------------------------------------------------------ parameters */

typedef struct {
    int n;
    const char *vals[MAX_PARAMS];
    int lens[MAX_PARAMS];
    int fmts[MAX_PARAMS];
    Oid types[MAX_PARAMS];
    unsigned char bin[MAX_PARAMS][8];
} qparams;

/* Each adder returns the parameter's $number. Overflow is a programming
 * error (queries have fixed shapes), caught by the assert-like abort. */
static int qp_add(qparams *q, Oid type, const char *val, int len, int fmt) {
    if (q->n >= MAX_PARAMS) abort();
    q->types[q->n] = type;
    q->vals[q->n] = val;
    q->lens[q->n] = len;
    q->fmts[q->n] = fmt;
    return ++q->n;
}
static int qp_text(qparams *q, const char *s) { return qp_add(q, OID_TEXT, s, 0, 0); }
static int qp_text_array(qparams *q, const char *lit) {
    return qp_add(q, OID_TEXT_ARRAY, lit, 0, 0);
}
static int qp_bytes(qparams *q, const void *p, size_t n) {
    return qp_add(q, OID_BYTEA, p ? (const char *)p : "", (int)n, 1);
}
static void put_be64(unsigned char *b, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        b[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}
static int qp_int8(qparams *q, int64_t v) {
    put_be64(q->bin[q->n], (uint64_t)v);
    return qp_add(q, OID_INT8, (const char *)q->bin[q->n], 8, 1);
}
static int qp_int4(qparams *q, int32_t v) {
    uint32_t be = htonl((uint32_t)v);
    memcpy(q->bin[q->n], &be, 4);
    return qp_add(q, OID_INT4, (const char *)q->bin[q->n], 4, 1);
}
static int qp_bool(qparams *q, int v) {
    q->bin[q->n][0] = v ? 1 : 0;
    return qp_add(q, OID_BOOL, (const char *)q->bin[q->n], 1, 1);
}
static int qp_ts(qparams *q, int64_t unix_us) {
    put_be64(q->bin[q->n], (uint64_t)(unix_us - PG_EPOCH_US));
    return qp_add(q, OID_TIMESTAMPTZ, (const char *)q->bin[q->n], 8, 1);
}
static int qp_null(qparams *q, Oid type) { return qp_add(q, type, NULL, 0, 0); }

/* A PostgreSQL array literal {"a","b"} of strs in the arena: every element
 * quoted, `"` and `\` backslash-escaped, so any text is carried as is. */
static char *array_literal(arena *ar, const char *const *strs, size_t n) {
    size_t cap = 3;
    for (size_t i = 0; i < n; i++) cap += 2 * strlen(strs[i]) + 3;
    char *out = arena_alloc(ar, cap);
    if (!out) return NULL;
    char *w = out;
    *w++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i) *w++ = ',';
        *w++ = '"';
        for (const char *r = strs[i]; *r; r++) {
            if (*r == '"' || *r == '\\') *w++ = '\\';
            *w++ = *r;
        }
        *w++ = '"';
    }
    *w++ = '}';
    *w = '\0';
    return out;
}

/* ------------------------------------------------------------ SQL text */

typedef struct {
    char buf[4096];
    size_t len;
    int overflow;
} sqlbuf;

static void sql_add(sqlbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sql_add(sqlbuf *b, const char *fmt, ...) {
    if (b->overflow) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->buf + b->len, sizeof b->buf - b->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof b->buf - b->len) {
        b->overflow = 1;
        return;
    }
    b->len += (size_t)n;
}

/* The read diode as a WHERE fragment (without a leading AND): the caller's
 * tenant, its own records unless its read scope is `:all`, labels up to
 * clr, and nothing expired. */
static void add_read_diode(sqlbuf *b, qparams *q, const principal *p) {
    sql_add(b, "tenant = $%d AND label <= $%d AND (expires_at IS NULL OR expires_at > now())",
            qp_text(q, principal_tenant(p)), qp_int4(q, (int32_t)principal_clr(p)));
    if (principal_scope(p, "entries:read") != PRINCIPAL_ALL)
        sql_add(b, " AND owner = $%d", qp_text(q, principal_sub(p)));
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
    return *none ? NULL : array_literal(ar, likes, n);
}

/* ------------------------------------------------------------ sessions */

typedef struct {
    entries_store *s;
    entries_ctx *c;
    PGconn *conn;
    int broken;      /* release the connection as broken */
    int commit_sent; /* COMMIT went out: a failure now has an unknown outcome */
    char timeout[24];
} session;

static int begin_session(entries_store *s, entries_ctx *c, session *ss) {
    memset(ss, 0, sizeof *ss);
    ss->s = s;
    ss->c = c;
    int64_t ms;
    if (c->deadline_ms == INT64_MAX) {
        ms = s->o.max_statement_ms;
    } else {
        ms = c->deadline_ms - now_ms();
        if (ms <= 0) return fail(c, ENTRIES_ETIMEOUT, "the call's deadline passed");
        if (ms > INT32_MAX) ms = INT32_MAX;
    }
    snprintf(ss->timeout, sizeof ss->timeout, "%lld", (long long)ms);
    char err[256];
    ss->conn = pg_pool_acquire(s->pg, c->deadline_ms, err, sizeof err);
    if (!ss->conn) {
        if (c->deadline_ms != INT64_MAX && now_ms() >= c->deadline_ms)
            return fail(c, ENTRIES_ETIMEOUT, "the call's deadline passed waiting for PostgreSQL");
        return fail(c, ENTRIES_EUNAVAILABLE, "%s", err);
    }
    return ENTRIES_OK;
}

static void end_session(session *ss) {
    if (!ss->conn) return;
    if (!ss->broken && PQstatus(ss->conn) == CONNECTION_OK &&
        PQtransactionStatus(ss->conn) != PQTRANS_IDLE) {
        PGresult *r = PQexec(ss->conn, "ROLLBACK");
        if (PQresultStatus(r) != PGRES_COMMAND_OK) ss->broken = 1;
        PQclear(r);
    }
    pg_pool_release(ss->s->pg, ss->conn, ss->broken);
    ss->conn = NULL;
}

/* Classifies a failed result (res may be NULL: no answer at all), marks
 * the connection broken when it is, sets c->err. */
static int pg_fail(session *ss, const PGresult *res, const char *what) {
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : "";
    if (!msg || !*msg) msg = PQerrorMessage(ss->conn);
    int conn_bad = PQstatus(ss->conn) != CONNECTION_OK || !state ||
                   strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0;
    if (conn_bad) ss->broken = 1;
    int len = (int)strcspn(msg, "\n");
    if (state && strcmp(state, "57014") == 0)
        return fail(ss->c, ENTRIES_ETIMEOUT, "PostgreSQL: %s cancelled at the call's deadline",
                    what);
    /* A dead pooled connection is routine (the caller retries on a fresh
     * one); anything else is worth an error line. */
    log_fields(conn_bad ? LOG_WARN : LOG_ERROR, "entries: PostgreSQL error", LOG_F_STR, "during",
               what, LOG_F_STR,
               "sqlstate", state ? state : "", LOG_F_STR, "error", msg, LOG_F_INT, "broken",
               (int64_t)conn_bad, LOG_F_END);
    if (conn_bad)
        return fail(ss->c, ENTRIES_EUNAVAILABLE, "PostgreSQL connection lost during %s: %.*s",
                    what, len, msg);
    return fail(ss->c, ENTRIES_EUNAVAILABLE, "PostgreSQL failed during %s: %.*s", what, len,
                msg);
}

static PGresult *exec(session *ss, const char *sql, const qparams *q) {
    return PQexecParams(ss->conn, sql, q ? q->n : 0, q ? q->types : NULL, q ? q->vals : NULL,
                        q ? q->lens : NULL, q ? q->fmts : NULL, 1);
}

/* Sends BEGIN, the statement timeout and sql as one pipeline and reads the
 * answers: one round trip. With commit, COMMIT follows (a read); without,
 * the transaction stays open (a write continues in it). On ENTRIES_OK *res
 * holds sql's result (PGRES_TUPLES_OK or COMMAND_OK), owned by the caller. */
static int pipeline(session *ss, const char *what, const char *begin, const sqlbuf *sql,
                    const qparams *q, int commit, PGresult **res) {
    *res = NULL;
    if (sql->overflow) return fail(ss->c, ENTRIES_EINTERNAL, "%s query too long", what);
    PGconn *conn = ss->conn;
    if (!PQenterPipelineMode(conn)) return pg_fail(ss, NULL, "pipeline start");
    const char *tparam[1] = {ss->timeout};
    int sent = PQsendQueryParams(conn, begin, 0, NULL, NULL, NULL, NULL, 0) &&
               PQsendQueryParams(conn, "SELECT set_config('statement_timeout', $1, true)", 1,
                                 NULL, tparam, NULL, NULL, 0) &&
               PQsendQueryParams(conn, sql->buf, q->n, q->types, q->vals, q->lens, q->fmts, 1) &&
               (!commit || PQsendQueryParams(conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 0)) &&
               PQpipelineSync(conn);
    int ncmd = commit ? 4 : 3;
    PGresult *first_err = NULL, *mine = NULL;
    if (sent) {
        for (int i = 0; i < ncmd; i++) {
            PGresult *r;
            while ((r = PQgetResult(conn)) != NULL) {
                ExecStatusType st = PQresultStatus(r);
                if (st == PGRES_FATAL_ERROR && !first_err) {
                    first_err = r;
                } else if (i == 2 && !mine && (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)) {
                    mine = r;
                } else {
                    PQclear(r);
                }
            }
            if (PQstatus(conn) != CONNECTION_OK) break;
        }
        if (PQstatus(conn) == CONNECTION_OK) {
            PGresult *r = PQgetResult(conn); /* the sync point */
            if (PQresultStatus(r) != PGRES_PIPELINE_SYNC) ss->broken = 1;
            PQclear(r);
        }
    }
    if (!PQexitPipelineMode(conn)) ss->broken = 1;
    int rc = ENTRIES_OK;
    if (!sent || first_err || !mine || ss->broken) {
        rc = pg_fail(ss, first_err, what);
        PQclear(mine);
        mine = NULL;
    }
    PQclear(first_err);
    *res = mine;
    return rc;
}

/* ------------------------------------------------------------ decoding */

static int32_t get_be32(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return (int32_t)ntohl(v);
}
static int64_t get_be64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | (unsigned char)p[i];
    return (int64_t)v;
}

static int col_int(const PGresult *r, int row, int col, int64_t *out) {
    int len = PQgetlength(r, row, col);
    const char *p = PQgetvalue(r, row, col);
    if (PQgetisnull(r, row, col)) return -1;
    if (len == 8) *out = get_be64(p);
    else if (len == 4) *out = get_be32(p);
    else if (len == 2) *out = (int16_t)(((unsigned char)p[0] << 8) | (unsigned char)p[1]);
    else return -1;
    return 0;
}

static int col_ts(const PGresult *r, int row, int col, int64_t *unix_us) {
    if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8) return -1;
    *unix_us = get_be64(PQgetvalue(r, row, col)) + PG_EPOCH_US;
    return 0;
}

static const char *col_str(arena *ar, const PGresult *r, int row, int col) {
    if (PQgetisnull(r, row, col)) return NULL;
    return arena_strndup(ar, PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col));
}

/* A one-dimensional text[] in binary form -> strings in the arena. */
static int col_text_array(arena *ar, const PGresult *r, int row, int col, const char ***out,
                          size_t *n) {
    *out = NULL;
    *n = 0;
    if (PQgetisnull(r, row, col)) return -1;
    const char *p = PQgetvalue(r, row, col);
    size_t len = (size_t)PQgetlength(r, row, col);
    if (len < 12) return -1;
    int32_t ndim = get_be32(p);
    if (ndim == 0) return 0;
    if (ndim != 1 || len < 20) return -1;
    int32_t count = get_be32(p + 12);
    if (count < 0 || count > 100000) return -1;
    const char **v = arena_alloc(ar, ((size_t)count + 1) * sizeof *v);
    if (!v) return -1;
    size_t off = 20;
    for (int32_t i = 0; i < count; i++) {
        if (len - off < 4) return -1;
        int32_t el = get_be32(p + off);
        off += 4;
        if (el < 0 || (size_t)el > len - off) return -1; /* NULL elements never stored */
        if (!(v[i] = arena_strndup(ar, p + off, (size_t)el))) return -1;
        off += (size_t)el;
    }
    *out = v;
    *n = (size_t)count;
    return 0;
}

/* Fills rec from row; with_value: column C_VALUE exists (NULL there =
 * value not sent, e.g. over the byte budget). */
static int decode_row(entries_ctx *c, const PGresult *r, int row, int with_value,
                      entries_record *rec) {
    arena *ar = c->ar;
    memset(rec, 0, sizeof *rec);
    int64_t label = 0, compressed = 0;
    rec->tenant = col_str(ar, r, row, C_TENANT);
    rec->ns = col_str(ar, r, row, C_NS);
    rec->key = col_str(ar, r, row, C_KEY);
    rec->owner = col_str(ar, r, row, C_OWNER);
    rec->content_type = col_str(ar, r, row, C_CTYPE);
    if (!rec->tenant || !rec->ns || !rec->key || !rec->owner || !rec->content_type)
        return fail(c, ENTRIES_ENOMEM, "out of memory");
    /* jsonb in binary form: a version byte (1), then the text. */
    int mlen = PQgetlength(r, row, C_META);
    const char *mp = PQgetvalue(r, row, C_META);
    if (PQgetisnull(r, row, C_META) || mlen < 1 || mp[0] != 1)
        return fail(c, ENTRIES_EINTERNAL, "entries row has an unreadable metadata column");
    if (!(rec->metadata_json = arena_strndup(ar, mp + 1, (size_t)mlen - 1)))
        return fail(c, ENTRIES_ENOMEM, "out of memory");
    if (col_int(r, row, C_LABEL, &label) != 0 || col_int(r, row, C_SIZE, &rec->size_bytes) != 0 ||
        col_int(r, row, C_VERSION, &rec->version) != 0 ||
        col_ts(r, row, C_CREATED, &rec->create_us) != 0 ||
        col_ts(r, row, C_UPDATED, &rec->update_us) != 0 ||
        col_text_array(ar, r, row, C_TAGS, &rec->tags, &rec->ntags) != 0 ||
        col_text_array(ar, r, row, C_PII, &rec->pii_kinds, &rec->npii) != 0 ||
        PQgetlength(r, row, C_COMPRESSED) != 1)
        return fail(c, ENTRIES_EINTERNAL, "entries row %s/%s has an unreadable column", rec->ns,
                    rec->key);
    compressed = PQgetvalue(r, row, C_COMPRESSED)[0] != 0;
    rec->label = (int)label;
    if (!PQgetisnull(r, row, C_EXPIRES)) {
        if (col_ts(r, row, C_EXPIRES, &rec->expire_us) != 0)
            return fail(c, ENTRIES_EINTERNAL, "entries row has an unreadable expires_at");
        rec->has_expire = 1;
    }
    if (!with_value || PQgetisnull(r, row, C_VALUE)) return ENTRIES_OK;
    const char *vp = PQgetvalue(r, row, C_VALUE);
    size_t vlen = (size_t)PQgetlength(r, row, C_VALUE);
    if (rec->size_bytes < 0 || rec->size_bytes > ENTRIES_VALUE_MAX)
        return fail(c, ENTRIES_EINTERNAL, "entries row %s/%s has size %lld", rec->ns, rec->key,
                    (long long)rec->size_bytes);
    size_t size = (size_t)rec->size_bytes;
    uint8_t *buf = arena_alloc(ar, size ? size : 1);
    if (!buf) return fail(c, ENTRIES_ENOMEM, "out of memory");
    if (compressed) {
        unsigned long long fsz = ZSTD_getFrameContentSize(vp, vlen);
        size_t got = fsz == size ? ZSTD_decompress(buf, size, vp, vlen) : 0;
        if (fsz != size || ZSTD_isError(got) || got != size) {
            log_fields(LOG_ERROR, "entries: stored value does not decompress", LOG_F_STR,
                       "namespace", rec->ns, LOG_F_STR, "key", rec->key, LOG_F_END);
            return fail(c, ENTRIES_EINTERNAL, "the stored value of %s/%s is corrupt", rec->ns,
                        rec->key);
        }
    } else {
        if (vlen != size)
            return fail(c, ENTRIES_EINTERNAL, "the stored value of %s/%s has the wrong size",
                        rec->ns, rec->key);
        memcpy(buf, vp, size);
    }
    rec->value = buf;
    rec->value_len = size;
    rec->has_value = 1;
    return ENTRIES_OK;
}

/* The final read filter behind the SQL predicates: a row that should not
 * have come back is a bug in the query. It is logged loudly and the whole
 * call fails; the row is never returned. */
static int check_row(entries_ctx *c, principal_breadth breadth, const entries_record *rec) {
    if (principal_may_read(c->p, breadth, rec->tenant, rec->owner, rec->label) &&
        principal_ns_allows(c->p, rec->ns))
        return ENTRIES_OK;
    log_fields(LOG_ERROR, "entries: READ DIODE MISMATCH, a row escaped the SQL predicates",
               LOG_F_STR, "caller", principal_sub(c->p), LOG_F_STR, "caller_tenant",
               principal_tenant(c->p), LOG_F_STR, "row_tenant", rec->tenant, LOG_F_STR,
               "row_owner", rec->owner, LOG_F_INT, "row_label", (int64_t)rec->label, LOG_F_STR,
               "namespace", rec->ns, LOG_F_END);
    return fail(c, ENTRIES_EINTERNAL, "internal error: read filter mismatch (logged)");
}

static int decode_rows(entries_ctx *c, const PGresult *r, int with_value, int max,
                       entries_record **out, size_t *n) {
    int rows = PQntuples(r);
    if (rows > max) rows = max;
    *out = NULL;
    *n = 0;
    entries_record *recs = arena_alloc(c->ar, ((size_t)rows + 1) * sizeof *recs);
    if (!recs) return fail(c, ENTRIES_ENOMEM, "out of memory");
    principal_breadth breadth = principal_scope(c->p, "entries:read");
    for (int i = 0; i < rows; i++) {
        int rc = decode_row(c, r, i, with_value, &recs[i]);
        if (rc == ENTRIES_OK) rc = check_row(c, breadth, &recs[i]);
        if (rc != ENTRIES_OK) return rc;
    }
    *out = recs;
    *n = (size_t)rows;
    return ENTRIES_OK;
}

/* ------------------------------------------------------------ reads */

/* Runs a read query with retries on connections that turn out dead
 * (pooled connections killed server-side fail on first use). */
typedef int (*read_fn)(session *ss, void *arg);

static int with_read_session(entries_store *s, entries_ctx *c, read_fn fn, void *arg) {
    int rc = ENTRIES_EUNAVAILABLE;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != ENTRIES_OK) return rc;
        rc = fn(&ss, arg);
        int retry = rc == ENTRIES_EUNAVAILABLE && ss.broken;
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
    qparams q = {0};
    sqlbuf b = {0};
    sql_add(&b, "SELECT " COLS ", value FROM entries WHERE ");
    add_read_diode(&b, &q, c->p);
    sql_add(&b, " AND namespace = $%d AND key = $%d", qp_text(&q, a->ns), qp_text(&q, a->key));
    PGresult *r;
    int rc = pipeline(ss, "read", "BEGIN READ ONLY", &b, &q, 1, &r);
    if (rc != ENTRIES_OK) return rc;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return fail(c, ENTRIES_ENOTFOUND, "entry %s/%s not found", a->ns, a->key);
    }
    entries_record *recs;
    size_t n;
    rc = decode_rows(c, r, 1, 1, &recs, &n);
    PQclear(r);
    if (rc == ENTRIES_OK) *a->out = recs[0];
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
    if (none) return ENTRIES_OK; /* the token may touch no namespace */
    const char *nsl = to_like(c->ar, in->ns_pattern), *kl = to_like(c->ar, in->key_pattern);
    if (!globs || !nsl || !kl) return fail(c, ENTRIES_ENOMEM, "out of memory");
    qparams q = {0};
    sqlbuf b = {0};
    /* With values, a running sum of sizes marks the rows past the byte
     * budget: they come back without their value and end the page. */
    if (in->with_values)
        sql_add(&b, "SELECT " COLS ", CASE WHEN run - size_bytes < $%d THEN value END FROM ("
                    "SELECT " COLS ", value, sum(size_bytes) OVER (ORDER BY namespace, key"
                    " ROWS UNBOUNDED PRECEDING) AS run FROM entries WHERE ",
                qp_int8(&q, (int64_t)ss->s->o.max_response_bytes));
    else
        sql_add(&b, "SELECT " COLS " FROM entries WHERE ");
    add_read_diode(&b, &q, c->p);
    sql_add(&b, " AND namespace LIKE ANY($%d) AND namespace LIKE $%d AND key LIKE $%d",
            qp_text_array(&q, globs), qp_text(&q, nsl), qp_text(&q, kl));
    if (in->after_ns)
        sql_add(&b, " AND (namespace, key) > ($%d, $%d)", qp_text(&q, in->after_ns),
                qp_text(&q, in->after_key));
    sql_add(&b, " ORDER BY namespace, key LIMIT $%d", qp_int8(&q, (int64_t)in->limit + 1));
    if (in->with_values) sql_add(&b, ") page ORDER BY namespace, key");
    PGresult *r;
    int rc = pipeline(ss, "list", "BEGIN READ ONLY", &b, &q, 1, &r);
    if (rc != ENTRIES_OK) return rc;
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
    if (none) return ENTRIES_OK;
    const char *nsl = to_like(c->ar, in->ns_pattern);
    if (!globs || !nsl) return fail(c, ENTRIES_ENOMEM, "out of memory");
    qparams q = {0};
    sqlbuf b = {0};
    if (in->with_values)
        sql_add(&b, "SELECT " COLS ", CASE WHEN run - size_bytes < $%d THEN value END FROM ("
                    "SELECT " COLS ", value, sum(size_bytes) OVER (ORDER BY updated_at DESC,"
                    " namespace, key ROWS UNBOUNDED PRECEDING) AS run FROM entries WHERE ",
                qp_int8(&q, (int64_t)ss->s->o.max_response_bytes));
    else
        sql_add(&b, "SELECT " COLS " FROM entries WHERE ");
    add_read_diode(&b, &q, c->p);
    sql_add(&b, " AND namespace LIKE ANY($%d) AND namespace LIKE $%d", qp_text_array(&q, globs),
            qp_text(&q, nsl));
    if (in->term[0]) {
        const char *t = like_escape(c->ar, in->term);
        if (!t) return fail(c, ENTRIES_ENOMEM, "out of memory");
        /* search_text is lower-cased with the same ICU rules at write time.
         * The pattern is put back to the column's collation, or the
         * planner could not use the trigram index (157 ms -> 2 ms over
         * 200k rows). */
        sql_add(&b,
                " AND search_text LIKE ('%%' || lower($%d COLLATE \"und-x-icu\") || '%%')"
                " COLLATE \"default\"",
                qp_text(&q, t));
    }
    if (in->ntags) {
        const char *tl = array_literal(c->ar, in->tags, in->ntags);
        if (!tl) return fail(c, ENTRIES_ENOMEM, "out of memory");
        sql_add(&b, " AND tags @> $%d", qp_text_array(&q, tl));
    }
    if (in->content_type[0])
        sql_add(&b, " AND content_type = $%d", qp_text(&q, in->content_type));
    if (in->created_by[0]) sql_add(&b, " AND owner = $%d", qp_text(&q, in->created_by));
    if (in->has_start) sql_add(&b, " AND updated_at >= $%d", qp_ts(&q, in->start_us));
    if (in->has_end) sql_add(&b, " AND updated_at < $%d", qp_ts(&q, in->end_us));
    sql_add(&b, " ORDER BY updated_at DESC, namespace, key LIMIT $%d",
            qp_int8(&q, (int64_t)in->limit));
    if (in->with_values) sql_add(&b, ") page ORDER BY updated_at DESC, namespace, key");
    if (b.overflow) return fail(c, ENTRIES_EINTERNAL, "search query too long");
    PGresult *r;
    int rc = pipeline(ss, "search", "BEGIN READ ONLY", &b, &q, 1, &r);
    if (rc != ENTRIES_OK) return rc;
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
    if (none) return ENTRIES_OK;
    const char *nsl = to_like(c->ar, a->ns_pattern);
    if (!globs || !nsl) return fail(c, ENTRIES_ENOMEM, "out of memory");
    qparams q = {0};
    sqlbuf b = {0};
    sql_add(&b, "SELECT count(*), count(DISTINCT namespace), coalesce(sum(size_bytes), 0)::int8,"
                " coalesce(sum(octet_length(value)), 0)::int8,"
                " count(*) FILTER (WHERE compressed) FROM entries WHERE ");
    add_read_diode(&b, &q, c->p);
    sql_add(&b, " AND namespace LIKE ANY($%d) AND namespace LIKE $%d", qp_text_array(&q, globs),
            qp_text(&q, nsl));
    PGresult *r;
    int rc = pipeline(ss, "stats", "BEGIN READ ONLY", &b, &q, 1, &r);
    if (rc != ENTRIES_OK) return rc;
    entries_stats *o = a->out;
    if (PQntuples(r) != 1 || col_int(r, 0, 0, &o->entry_count) != 0 ||
        col_int(r, 0, 1, &o->namespace_count) != 0 || col_int(r, 0, 2, &o->value_bytes) != 0 ||
        col_int(r, 0, 3, &o->stored_bytes) != 0 || col_int(r, 0, 4, &o->compressed_count) != 0)
        rc = fail(c, ENTRIES_EINTERNAL, "unexpected stats result");
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
    if (PQntuples(r) == 0) return ENTRIES_OK;
    int64_t label, version;
    lr->owner = col_str(c->ar, r, 0, 0);
    if (!lr->owner || col_int(r, 0, 1, &label) != 0 || col_int(r, 0, 2, &version) != 0 ||
        PQgetlength(r, 0, 3) != 1)
        return fail(c, ENTRIES_EINTERNAL, "unexpected row-lock result");
    lr->exists = 1;
    lr->live = PQgetvalue(r, 0, 3)[0] != 0;
    lr->label = (int)label;
    lr->version = version;
    return ENTRIES_OK;
}

/* Locks the row; first: the transaction is begun in the same round trip. */
static int lock_row(session *ss, const char *ns, const char *key, int first, locked_row *lr) {
    entries_ctx *c = ss->c;
    qparams q = {0};
    qp_text(&q, principal_tenant(c->p));
    qp_text(&q, ns);
    qp_text(&q, key);
    PGresult *r;
    int rc;
    if (first) {
        sqlbuf b = {0};
        sql_add(&b, "%s", LOCK_SQL);
        rc = pipeline(ss, "row lock", "BEGIN", &b, &q, 0, &r);
    } else {
        r = exec(ss, LOCK_SQL, &q);
        rc = PQresultStatus(r) == PGRES_TUPLES_OK ? ENTRIES_OK : pg_fail(ss, r, "row lock");
        if (rc != ENTRIES_OK) PQclear(r);
    }
    if (rc != ENTRIES_OK) return rc;
    rc = decode_lock(c, r, lr);
    PQclear(r);
    return rc;
}

/* Write diode for changing a live row: the caller must be able to read it
 * (label <= clr) and own it or hold `entries:write:all`. */
static int may_modify(entries_ctx *c, const locked_row *lr, const char *ns, const char *key) {
    if (lr->label > (int)principal_clr(c->p))
        return fail(c, ENTRIES_EDENIED,
                    "entry %s/%s is labelled above the token's read ceiling and cannot be "
                    "modified by it", ns, key);
    if (strcmp(lr->owner, principal_sub(c->p)) != 0 &&
        principal_scope(c->p, "entries:write") != PRINCIPAL_ALL)
        return fail(c, ENTRIES_EDENIED,
                    "entry %s/%s belongs to another principal; modifying it needs "
                    "entries:write:all", ns, key);
    return ENTRIES_OK;
}

static int finish_tx(session *ss) {
    entries_ctx *c = ss->c;
    /* The caller has given up (or is about to): rather than commit a change
     * it will be told failed, roll back. Statements each had the remaining
     * time as their timeout, so the whole transaction may run past it. */
    if (c->deadline_ms != INT64_MAX && now_ms() >= c->deadline_ms)
        return fail(c, ENTRIES_ETIMEOUT,
                    "the call's deadline passed before the change could commit; nothing was "
                    "changed");
    if (c->before_commit) {
        char err[256] = "";
        if (c->before_commit(ss->conn, c->hook_arg, err, sizeof err) != 0) {
            if (PQstatus(ss->conn) != CONNECTION_OK) ss->broken = 1;
            return fail(c, ENTRIES_EUNAVAILABLE, "cannot record the audit row: %s", err);
        }
    }
    /* From here a lost connection leaves the outcome unknown: no retry. */
    ss->commit_sent = 1;
    PGresult *r = PQexec(ss->conn, "COMMIT");
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    int rc = ok ? ENTRIES_OK : pg_fail(ss, r, "commit");
    PQclear(r);
    if (ok && c->after_commit) c->after_commit(c->hook_arg);
    return rc;
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
static void write_params(qparams *q, const write_plan *w, int *p_value, int *p_comp,
                         int *p_size, int *p_ctype, int *p_meta, int *p_tags, int *p_pii,
                         int *p_search, int *p_abs, int *p_ttl) {
    const entries_write_in *in = w->in;
    *p_value = qp_bytes(q, w->stored, w->stored_len);
    *p_comp = qp_bool(q, w->compressed);
    *p_size = qp_int8(q, (int64_t)in->value_len);
    *p_ctype = qp_text(q, in->content_type);
    *p_meta = qp_text(q, in->metadata_json ? in->metadata_json : "{}");
    *p_tags = qp_text_array(q, w->tags_lit);
    *p_pii = qp_text_array(q, w->pii_lit);
    *p_search = qp_text(q, w->search_text);
    *p_abs = in->has_expire ? qp_ts(q, in->expire_us) : qp_null(q, OID_TIMESTAMPTZ);
    *p_ttl = in->has_ttl ? qp_int8(q, in->ttl_us) : qp_null(q, OID_INT8);
}

static int do_write(session *ss, write_plan *w) {
    entries_ctx *c = ss->c;
    const entries_write_in *in = w->in;
    for (int race = 0; race < MAX_CREATE_RACES; race++) {
        locked_row lr;
        int rc = lock_row(ss, in->ns, in->key, race == 0, &lr);
        if (rc != ENTRIES_OK) return rc;
        if (lr.live && (rc = may_modify(c, &lr, in->ns, in->key)) != ENTRIES_OK) return rc;
        if (in->has_expected) {
            int64_t current = lr.live ? lr.version : 0;
            if (current == 0 && in->expected_version != 0)
                return fail(c, ENTRIES_ECONFLICT,
                            "entry %s/%s does not exist (expected_version %lld)", in->ns,
                            in->key, (long long)in->expected_version);
            if (current != in->expected_version)
                return fail(c, ENTRIES_ECONFLICT, "entry %s/%s is at version %lld, not %lld",
                            in->ns, in->key, (long long)current,
                            (long long)in->expected_version);
        }
        int label = principal_stamp_label(c->p, in->label, lr.live ? lr.label : 0);
        qparams q = {0};
        int p_tenant = qp_text(&q, principal_tenant(c->p));
        int p_ns = qp_text(&q, in->ns);
        int p_key = qp_text(&q, in->key);
        int p_owner = qp_text(&q, principal_sub(c->p));
        int p_label = qp_int4(&q, label);
        int p_value, p_comp, p_size, p_ctype, p_meta, p_tags, p_pii, p_search, p_abs, p_ttl;
        write_params(&q, w, &p_value, &p_comp, &p_size, &p_ctype, &p_meta, &p_tags, &p_pii,
                     &p_search, &p_abs, &p_ttl);
        sqlbuf b = {0};
        const char *expiry = "COALESCE($%d, now() + $%d * interval '1 microsecond')";
        char exp_sql[96];
        snprintf(exp_sql, sizeof exp_sql, expiry, p_abs, p_ttl);
        const char *search = "lower($%d COLLATE \"und-x-icu\")";
        char search_sql[64];
        snprintf(search_sql, sizeof search_sql, search, p_search);
        if (!lr.exists) {
            sql_add(&b,
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
            sql_add(&b,
                    "UPDATE entries SET owner = %s, label = $%d, value = $%d, compressed = $%d,"
                    " size_bytes = $%d, content_type = $%d, metadata = $%d::jsonb, tags = $%d,"
                    " pii_kinds = $%d, search_text = %s, version = %s, created_at = %s,"
                    " updated_at = now(), expires_at = %s"
                    " WHERE tenant = $%d AND namespace = $%d AND key = $%d RETURNING " COLS,
                    owner_sql, p_label, p_value, p_comp, p_size, p_ctype, p_meta, p_tags, p_pii,
                    search_sql, lr.live ? "version + 1" : "1", lr.live ? "created_at" : "now()",
                    exp_sql, p_tenant, p_ns, p_key);
        }
        if (b.overflow) return fail(c, ENTRIES_EINTERNAL, "write query too long");
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
        if (rc != ENTRIES_OK) return rc;
        *w->created = !lr.live;
        return finish_tx(ss);
    }
    return fail(c, ENTRIES_ECONFLICT, "entry %s/%s is being created concurrently; retry",
                in->ns, in->key);
}

/* The stored form of a value: a zstd frame when over 1 KiB. */
static int compress_bytes(entries_store *s, entries_ctx *c, const uint8_t *v, size_t n,
                          const uint8_t **stored, size_t *stored_len, int *compressed) {
    *stored = v;
    *stored_len = n;
    *compressed = 0;
    if (n <= ENTRIES_COMPRESS_OVER) return ENTRIES_OK;
    size_t cap = ZSTD_compressBound(n);
    uint8_t *buf = arena_alloc(c->ar, cap);
    if (!buf) return fail(c, ENTRIES_ENOMEM, "out of memory");
    size_t got = ZSTD_compress(buf, cap, v, n, s->o.zstd_level);
    if (ZSTD_isError(got)) return fail(c, ENTRIES_EINTERNAL, "zstd: %s", ZSTD_getErrorName(got));
    *stored = buf;
    *stored_len = got;
    *compressed = 1;
    return ENTRIES_OK;
}

/* lower() happens in SQL; here the text it lowers: the key, and the value
 * when it is UTF-8 text PostgreSQL can hold (no NUL). */
static const char *search_source(arena *ar, const char *key, const uint8_t *v, size_t vlen) {
    int text = entries_utf8_text(v, vlen);
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
    if (rc != ENTRIES_OK) return rc;
    w.search_text = search_source(c->ar, in->key, in->value, in->value_len);
    w.tags_lit = array_literal(c->ar, in->tags, in->ntags);
    w.pii_lit = array_literal(c->ar, in->pii_kinds, in->npii);
    if (!w.search_text || !w.tags_lit || !w.pii_lit)
        return fail(c, ENTRIES_ENOMEM, "out of memory");
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != ENTRIES_OK) return rc;
        rc = do_write(&ss, &w);
        /* Retry only when the connection died before COMMIT was sent:
         * the server rolled the transaction back, nothing happened. */
        int retry = rc == ENTRIES_EUNAVAILABLE && ss.broken && !ss.commit_sent;
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
    if (rc != ENTRIES_OK) return rc;
    if (!lr.live) return fail(c, ENTRIES_ENOTFOUND, "entry %s/%s not found", ns, key);
    if ((rc = may_modify(c, &lr, ns, key)) != ENTRIES_OK) return rc;
    if (has_expected && lr.version != expected)
        return fail(c, ENTRIES_ECONFLICT, "entry %s/%s is at version %lld, not %lld", ns, key,
                    (long long)lr.version, (long long)expected);
    qparams q = {0};
    qp_text(&q, principal_tenant(c->p));
    qp_text(&q, ns);
    qp_text(&q, key);
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
    int rc = ENTRIES_EUNAVAILABLE;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != ENTRIES_OK) return rc;
        rc = do_delete(&ss, ns, key, has_expected, expected_version);
        int retry = rc == ENTRIES_EUNAVAILABLE && ss.broken && !ss.commit_sent;
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
    qparams q = {0};
    sqlbuf b = {0};
    sql_add(&b,
            "SELECT " COLS ", value, (expires_at IS NULL OR expires_at > now()) FROM entries"
            " WHERE tenant = $%d AND namespace = $%d AND key = $%d FOR UPDATE",
            qp_text(&q, principal_tenant(c->p)), qp_text(&q, in->ns), qp_text(&q, in->key));
    PGresult *r;
    int rc = pipeline(ss, "row lock", "BEGIN", &b, &q, 0, &r);
    if (rc != ENTRIES_OK) return rc;
    entries_record cur;
    int live = PQntuples(r) == 1 && PQgetlength(r, 0, C_VALUE + 1) == 1 &&
               PQgetvalue(r, 0, C_VALUE + 1)[0] != 0;
    rc = live ? decode_row(c, r, 0, 1, &cur) : ENTRIES_OK;
    PQclear(r);
    if (rc != ENTRIES_OK) return rc;
    if (!live) return fail(c, ENTRIES_ENOTFOUND, "entry %s/%s not found", in->ns, in->key);
    locked_row lr = {1, 1, cur.owner, cur.label, cur.version};
    if ((rc = may_modify(c, &lr, in->ns, in->key)) != ENTRIES_OK) return rc;
    if (in->has_expected && cur.version != in->expected_version)
        return fail(c, ENTRIES_ECONFLICT, "entry %s/%s is at version %lld, not %lld", in->ns,
                    in->key, (long long)cur.version, (long long)in->expected_version);
    entries_edit_out e = {0};
    c->err[0] = '\0';
    rc = in->edit(in->edit_arg, cur.value, cur.value_len, &e, c->err, sizeof c->err);
    if (rc != ENTRIES_OK) return rc;
    cur.has_value = 0;
    cur.value = NULL;
    cur.value_len = 0;
    if (!e.changed) {
        *a->out = cur;
        return ENTRIES_OK; /* the session rolls the (lock-only) transaction back */
    }
    if (e.value_len > ENTRIES_VALUE_MAX)
        return fail(c, ENTRIES_ETOOBIG, "the new value of %s/%s would be %zu bytes; at most %d",
                    in->ns, in->key, e.value_len, ENTRIES_VALUE_MAX);
    const uint8_t *stored;
    size_t stored_len;
    int compressed;
    if ((rc = compress_bytes(ss->s, c, e.value, e.value_len, &stored, &stored_len,
                             &compressed)) != ENTRIES_OK)
        return rc;
    /* pii_kinds describe the whole record: keep the old kinds, add new. */
    const char **kinds = arena_alloc(c->ar, (cur.npii + e.npii + 1) * sizeof *kinds);
    if (!kinds) return fail(c, ENTRIES_ENOMEM, "out of memory");
    size_t nk = 0;
    for (size_t i = 0; i < cur.npii; i++) kinds[nk++] = cur.pii_kinds[i];
    for (size_t i = 0; i < e.npii; i++) {
        int dup = 0;
        for (size_t j = 0; j < nk && !dup; j++) dup = strcmp(kinds[j], e.pii_kinds[i]) == 0;
        if (!dup) kinds[nk++] = e.pii_kinds[i];
    }
    const char *kinds_lit = array_literal(c->ar, kinds, nk);
    const char *search = search_source(c->ar, in->key, e.value, e.value_len);
    if (!kinds_lit || !search) return fail(c, ENTRIES_ENOMEM, "out of memory");
    qparams u = {0};
    sqlbuf ub = {0};
    int p_label = qp_int4(&u, principal_stamp_label(c->p, 0, cur.label));
    int p_value = qp_bytes(&u, stored, stored_len);
    int p_comp = qp_bool(&u, compressed);
    int p_size = qp_int8(&u, (int64_t)e.value_len);
    int p_search = qp_text(&u, search);
    int p_pii = qp_text_array(&u, kinds_lit);
    sql_add(&ub,
            "UPDATE entries SET label = $%d, value = $%d, compressed = $%d, size_bytes = $%d,"
            " search_text = lower($%d COLLATE \"und-x-icu\"), pii_kinds = $%d,"
            " version = version + 1, updated_at = now()"
            " WHERE tenant = $%d AND namespace = $%d AND key = $%d RETURNING " COLS,
            p_label, p_value, p_comp, p_size, p_search, p_pii,
            qp_text(&u, principal_tenant(c->p)), qp_text(&u, in->ns), qp_text(&u, in->key));
    r = exec(ss, ub.buf, &u);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        rc = pg_fail(ss, r, "update");
        PQclear(r);
        return rc;
    }
    rc = decode_row(c, r, 0, 0, a->out);
    PQclear(r);
    if (rc != ENTRIES_OK) return rc;
    return finish_tx(ss);
}

int entries_store_modify(entries_store *s, entries_ctx *c, const entries_modify_in *in,
                         entries_record *out) {
    int rc = ENTRIES_EUNAVAILABLE;
    modify_args a = {in, out};
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != ENTRIES_OK) return rc;
        rc = do_modify(&ss, &a);
        int retry = rc == ENTRIES_EUNAVAILABLE && ss.broken && !ss.commit_sent;
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
    if (none) return ENTRIES_OK;
    const char *nsl = to_like(c->ar, ns_pattern);
    if (!globs || !nsl) return fail(c, ENTRIES_ENOMEM, "out of memory");
    qparams q = {0};
    sqlbuf b = {0};
    sql_add(&b,
            "DELETE FROM entries WHERE tenant = $%d AND expires_at <= now()"
            " AND namespace LIKE ANY($%d) AND namespace LIKE $%d",
            qp_text(&q, principal_tenant(c->p)), qp_text_array(&q, globs), qp_text(&q, nsl));
    PGresult *r;
    int rc = pipeline(ss, "purge", "BEGIN", &b, &q, 0, &r);
    if (rc != ENTRIES_OK) return rc;
    *purged = atoll(PQcmdTuples(r));
    PQclear(r);
    return finish_tx(ss);
}

int entries_store_purge(entries_store *s, entries_ctx *c, const char *ns_pattern,
                        int64_t *purged) {
    *purged = 0;
    int rc = ENTRIES_EUNAVAILABLE;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        session ss;
        rc = begin_session(s, c, &ss);
        if (rc != ENTRIES_OK) return rc;
        rc = do_purge(&ss, ns_pattern, purged);
        int retry = rc == ENTRIES_EUNAVAILABLE && ss.broken && !ss.commit_sent;
        end_session(&ss);
        if (!retry) break;
    }
    return rc;
}
