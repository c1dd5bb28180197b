/* pgq: shared query discipline for PostgreSQL tiers; see pgq.h.
 *
 * Prepared statements: a statement's name is derived from a hash of its
 * text and parameter types; each connection remembers (as libpq instance
 * data, freed with the connection) which statements it has prepared, with
 * their full text, so a hash collision can only cost a fallback to an
 * unnamed statement, never the wrong statement. Parse messages are sent in
 * the same pipeline as the first execution, so preparing costs no extra
 * round trip. */
#include "service/store/pgq.h"

#include <arpa/inet.h>
#include <libpq-events.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/core/array.h"
#include "service/core/clock.h"
#include "service/core/hash.h"
#include "service/core/log.h"
#include "service/store/pgq_internal.h"

#define PG_EPOCH_US 946684800000000LL /* 2000-01-01 in Unix microseconds */
#define MAX_ATTEMPTS 3
#define STMT_CACHE_MAX 256 /* statements per connection; beyond, unnamed ones */

/* ------------------------------------------------------------ utils */

int pgq_fail(pgq_session *ss, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ss->err, ss->errlen, fmt, ap);
    va_end(ap);
    return code;
}

/* ------------------------------------------------------------ parameters */

static int add(pgq_params *q, Oid type, const char *val, int len, int fmt) {
    if (q->n >= PGQ_MAX_PARAMS) abort();
    q->types[q->n] = type;
    q->vals[q->n] = val;
    q->lens[q->n] = len;
    q->fmts[q->n] = fmt;
    return ++q->n;
}

static void put_be64(unsigned char *b, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        b[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

int pgq_text(pgq_sql *b, const char *s) { return add(&b->params, PGQ_OID_TEXT, s, 0, 0); }
int pgq_jsonb(pgq_sql *b, const char *json) { return add(&b->params, PGQ_OID_JSONB, json, 0, 0); }
int pgq_text_array(pgq_sql *b, const char *lit) {
    return add(&b->params, PGQ_OID_TEXT_ARRAY, lit, 0, 0);
}
int pgq_bytes(pgq_sql *b, const void *p, size_t n) {
    return add(&b->params, PGQ_OID_BYTEA, p ? (const char *)p : "", (int)n, 1);
}
int pgq_int8(pgq_sql *b, int64_t v) {
    put_be64(b->params.bin[b->params.n], (uint64_t)v);
    return add(&b->params, PGQ_OID_INT8, (const char *)b->params.bin[b->params.n], 8, 1);
}
int pgq_int4(pgq_sql *b, int32_t v) {
    uint32_t be = htonl((uint32_t)v);
    memcpy(b->params.bin[b->params.n], &be, 4);
    return add(&b->params, PGQ_OID_INT4, (const char *)b->params.bin[b->params.n], 4, 1);
}
int pgq_bool(pgq_sql *b, int v) {
    b->params.bin[b->params.n][0] = v ? 1 : 0;
    return add(&b->params, PGQ_OID_BOOL, (const char *)b->params.bin[b->params.n], 1, 1);
}
int pgq_ts(pgq_sql *b, int64_t unix_us) {
    put_be64(b->params.bin[b->params.n], (uint64_t)(unix_us - PG_EPOCH_US));
    return add(&b->params, PGQ_OID_TIMESTAMPTZ, (const char *)b->params.bin[b->params.n], 8, 1);
}
int pgq_null(pgq_sql *b, Oid type) { return add(&b->params, type, NULL, 0, 0); }

char *pgq_array_literal(arena *ar, const char *const *strs, size_t n) {
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

void pgq_sql_add(pgq_sql *b, const char *fmt, ...) {
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

/* ------------------------------------------------------------ statement cache */

typedef struct {
    uint64_t hash;
    char *text; /* SQL, then a NUL, then the parameter types as text */
    size_t len;
} stmt;

struct pgq_stmt_cache {
    stmt *v;
    size_t n, cap;
};
typedef struct pgq_stmt_cache stmt_cache;

static int stmt_events(PGEventId id, void *info, void *pass) {
    (void)pass;
    if (id == PGEVT_CONNDESTROY || id == PGEVT_CONNRESET) {
        PGconn *conn = id == PGEVT_CONNDESTROY ? ((PGEventConnDestroy *)info)->conn
                                               : ((PGEventConnReset *)info)->conn;
        stmt_cache *c = PQinstanceData(conn, stmt_events);
        if (c) {
            for (size_t i = 0; i < c->n; i++) free(c->v[i].text);
            c->n = 0;
            if (id == PGEVT_CONNDESTROY) {
                free(c->v);
                free(c);
                PQsetInstanceData(conn, stmt_events, NULL);
            }
        }
    }
    return 1;
}

static stmt_cache *cache_of(PGconn *conn) {
    stmt_cache *c = PQinstanceData(conn, stmt_events);
    if (c) return c;
    if (!PQregisterEventProc(conn, stmt_events, "memoryd statement cache", NULL)) return NULL;
    if (!(c = calloc(1, sizeof *c))) return NULL;
    if (!PQsetInstanceData(conn, stmt_events, c)) {
        free(c);
        return NULL;
    }
    return c;
}

/* The identity of a statement: its text and its parameter types (the same
 * text with other types would bind differently). */
typedef pgq_stmt_key stmt_key;

static int make_key(const char *sql, const pgq_params *q, stmt_key *k) {
    size_t sl = strlen(sql);
    k->len = sl + 1 + (size_t)(q ? q->n : 0) * 11;
    if (!(k->key = malloc(k->len + 1))) return -1;
    memcpy(k->key, sql, sl + 1);
    size_t off = sl + 1;
    for (int i = 0; q && i < q->n; i++)
        off += (size_t)snprintf(k->key + off, 12, "%10u,", (unsigned)q->types[i]);
    k->len = off;
    uint64_t h = hash_fnv1a(k->key, k->len);
    k->hash = h;
    snprintf(k->name, sizeof k->name, "mq_%016llx", (unsigned long long)h);
    return 0;
}

/* 1: prepared with this text; 0: not prepared (and the name is free);
 * -1: the name is taken by another text (use an unnamed statement). */
static int cache_find(const stmt_cache *c, const stmt_key *k) {
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].hash == k->hash)
            return c->v[i].len == k->len && memcmp(c->v[i].text, k->key, k->len) == 0 ? 1 : -1;
    return 0;
}

/* Takes ownership of k->key. */
static void cache_add(stmt_cache *c, stmt_key *k) {
    stmt *v = array_grow(c->v, &c->cap, c->n + 1, sizeof *v, 16);
    if (!v) return;
    c->v = v;
    c->v[c->n++] = (stmt){k->hash, k->key, k->len};
    k->key = NULL;
}

void pgq_plan_make(PGconn *conn, const char *sql, const pgq_params *q, pgq_plan *p) {
    memset(p, 0, sizeof *p);
    p->state = -1;
    p->cache = cache_of(conn);
    if (!p->cache || make_key(sql, q, &p->key) != 0) return;
    p->state = cache_find(p->cache, &p->key);
    if (p->state == 0 && p->cache->n >= STMT_CACHE_MAX) p->state = -1;
}

void pgq_plan_done(pgq_plan *p, int prepared_ok) {
    if (p->state == 0 && prepared_ok) cache_add(p->cache, &p->key);
    free(p->key.key);
    p->key.key = NULL;
}

int pgq_plan_send(PGconn *conn, pgq_plan *p, const char *sql, const pgq_params *q) {
    int n = q ? q->n : 0;
    const Oid *types = q ? q->types : NULL;
    const char *const *vals = q ? q->vals : NULL;
    const int *lens = q ? q->lens : NULL, *fmts = q ? q->fmts : NULL;
    if (p->state < 0) return PQsendQueryParams(conn, sql, n, types, vals, lens, fmts, 1) ? 0 : -1;
    if (p->state == 0 && !PQsendPrepare(conn, p->key.name, sql, n, types)) return -1;
    if (!PQsendQueryPrepared(conn, p->key.name, n, vals, lens, fmts, 1)) return -1;
    return p->state == 0 ? 1 : 0;
}

/* ------------------------------------------------------------ sessions */

/* statement_timeout for the next round trip: what is left of the call's
 * deadline now (the session may have waited or run statements since it
 * began), so the server's own cancel, not the watchdog's cut, ends a
 * statement that runs too long. STATUS_ETIMEOUT when nothing is left. */
static int refresh_timeout(pgq_session *ss) {
    if (ss->deadline_ms == INT64_MAX) return STATUS_OK;
    int64_t ms = ss->deadline_ms - clock_mono_ms(NULL);
    if (ms <= 0) return STATUS_ETIMEOUT;
    snprintf(ss->timeout, sizeof ss->timeout, "%lld", (long long)(ms < INT32_MAX ? ms : INT32_MAX));
    return STATUS_OK;
}

int pgq_begin(pgq_session *ss, pg_pool *pool, const char *tier, int64_t deadline_ms,
              int max_statement_ms, char *err, size_t errlen) {
    *ss = (pgq_session){
        .pool = pool, .tier = tier, .deadline_ms = deadline_ms, .err = err, .errlen = errlen};
    int64_t max_ms = max_statement_ms > 0 ? max_statement_ms : 30000;
    if (deadline_ms == INT64_MAX)
        snprintf(ss->timeout, sizeof ss->timeout, "%lld", (long long)max_ms);
    else if (refresh_timeout(ss) != STATUS_OK)
        return pgq_fail(ss, STATUS_ETIMEOUT, "the call's deadline passed");
    char why[256];
    ss->conn = pg_pool_acquire(pool, deadline_ms, why, sizeof why);
    if (!ss->conn) {
        if (deadline_ms != INT64_MAX && clock_mono_ms(NULL) >= deadline_ms)
            return pgq_fail(ss, STATUS_ETIMEOUT,
                            "the call's deadline passed waiting for PostgreSQL");
        return pgq_fail(ss, STATUS_EUNAVAILABLE, "%s", why);
    }
    /* statement_timeout ends a statement on a server that runs; the
     * watchdog ends the wait on one that does not answer at all. */
    pg_pool_watch(pool, ss->conn,
                  deadline_ms != INT64_MAX ? deadline_ms : clock_mono_ms(NULL) + max_ms);
    return STATUS_OK;
}

void pgq_end(pgq_session *ss) {
    if (!ss->conn) return;
    if (!ss->broken && PQstatus(ss->conn) == CONNECTION_OK &&
        PQtransactionStatus(ss->conn) != PQTRANS_IDLE) {
        PGresult *r = PQexec(ss->conn, "ROLLBACK");
        if (PQresultStatus(r) != PGRES_COMMAND_OK) ss->broken = 1;
        PQclear(r);
    }
    pg_pool_release(ss->pool, ss->conn, ss->broken);
    ss->conn = NULL;
}

int pgq_sqlstate_is(const PGresult *res, const char *state) {
    const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    return s && strcmp(s, state) == 0;
}

int pgq_pg_fail(pgq_session *ss, const PGresult *res, const char *what) {
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    snprintf(ss->sqlstate, sizeof ss->sqlstate, "%s", state ? state : "");
    const char *msg = res ? PQresultErrorMessage(res) : "";
    if (!msg || !*msg) msg = PQerrorMessage(ss->conn);
    int conn_bad = PQstatus(ss->conn) != CONNECTION_OK || !state || strncmp(state, "08", 2) == 0 ||
                   strncmp(state, "57P", 3) == 0;
    if (conn_bad) ss->broken = 1;
    if (conn_bad && pg_pool_cut(ss->pool, ss->conn) && cancel_fired(ss->cancel))
        return pgq_fail(ss, STATUS_ECANCELLED,
                        "the call was cancelled during %s; the connection was closed", what);
    if (conn_bad && pg_pool_cut(ss->pool, ss->conn))
        return pgq_fail(ss, STATUS_ETIMEOUT,
                        "PostgreSQL did not answer %s by the call's deadline; the connection "
                        "was closed",
                        what);
    int len = (int)strcspn(msg, "\n");
    if (state && strcmp(state, "57014") == 0)
        return pgq_fail(ss, STATUS_ETIMEOUT, "PostgreSQL: %s cancelled at the call's deadline",
                        what);
    /* A dead pooled connection is routine (the caller retries on a fresh
     * one); anything else is worth an error line. */
    log_fields(conn_bad ? LOG_WARN : LOG_ERROR, "PostgreSQL error", LOG_F_STR, "tier", ss->tier,
               LOG_F_STR, "during", what, LOG_F_STR, "sqlstate", state ? state : "", LOG_F_STR,
               "error", msg, LOG_F_INT, "broken", (int64_t)conn_bad, LOG_F_END);
    if (conn_bad)
        return pgq_fail(ss, STATUS_EUNAVAILABLE, "PostgreSQL connection lost during %s: %.*s", what,
                        len, msg);
    return pgq_fail(ss, STATUS_EUNAVAILABLE, "PostgreSQL failed during %s: %.*s", what, len, msg);
}

/* Reads one command's results in pipeline mode: keeps the first error and
 * (when want) the command's data result. */
static void drain_one(PGconn *conn, PGresult **first_err, PGresult **mine, int want) {
    PGresult *r;
    while ((r = PQgetResult(conn)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_FATAL_ERROR && !*first_err) {
            *first_err = r;
        } else if (want && !*mine && (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)) {
            *mine = r;
        } else {
            PQclear(r);
        }
    }
}

/* Runs sql inside the open transaction; Parse, Bind and Execute in one
 * round trip when the statement is new to this connection. */
static PGresult *exec_sql(pgq_session *ss, const char *sql, const pgq_params *q) {
    pgq_plan p;
    pgq_plan_make(ss->conn, sql, q, &p);
    PGresult *r;
    if (p.state < 0) {
        pgq_plan_done(&p, 0);
        return PQexecParams(ss->conn, sql, q ? q->n : 0, q ? q->types : NULL, q ? q->vals : NULL,
                            q ? q->lens : NULL, q ? q->fmts : NULL, 1);
    }
    if (p.state == 1) {
        pgq_plan_done(&p, 0);
        return PQexecPrepared(ss->conn, p.key.name, q ? q->n : 0, q ? q->vals : NULL,
                              q ? q->lens : NULL, q ? q->fmts : NULL, 1);
    }
    if (!PQenterPipelineMode(ss->conn)) {
        pgq_plan_done(&p, 0);
        return NULL;
    }
    PGresult *first_err = NULL, *mine = NULL, *parsed = NULL;
    int sent = pgq_plan_send(ss->conn, &p, sql, q) >= 0 && PQpipelineSync(ss->conn);
    if (sent) {
        drain_one(ss->conn, &first_err, &parsed, 1); /* the Parse */
        if (PQstatus(ss->conn) == CONNECTION_OK) drain_one(ss->conn, &first_err, &mine, 1);
        if (PQstatus(ss->conn) == CONNECTION_OK) {
            PGresult *s = PQgetResult(ss->conn);
            if (PQresultStatus(s) != PGRES_PIPELINE_SYNC) ss->broken = 1;
            PQclear(s);
        }
    }
    if (!PQexitPipelineMode(ss->conn)) ss->broken = 1;
    pgq_plan_done(&p, parsed != NULL && PQresultStatus(parsed) == PGRES_COMMAND_OK);
    PQclear(parsed);
    if (first_err) {
        PQclear(mine);
        return first_err;
    }
    r = mine;
    return r;
}

PGresult *pgq_exec(pgq_session *ss, const pgq_sql *sql) {
    if (sql->overflow) return NULL;
    return exec_sql(ss, sql->buf, &sql->params);
}

int pgq_exec_ok(pgq_session *ss, const pgq_sql *sql, const char *what, PGresult **out) {
    *out = NULL;
    if (sql->overflow) return pgq_fail(ss, STATUS_EINTERNAL, "%s query too long", what);
    PGresult *r = pgq_exec(ss, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        int rc = pgq_pg_fail(ss, r, what);
        PQclear(r);
        return rc;
    }
    *out = r;
    return STATUS_OK;
}

#define TIMEOUT_SQL "SELECT set_config('statement_timeout', $1, true)"

int pgq_pipeline(pgq_session *ss, const char *what, const char *begin, const pgq_sql *sql,
                 int commit, PGresult **res) {
    const pgq_params *q = &sql->params;
    *res = NULL;
    if (sql->overflow) {
        log_fields(LOG_ERROR, "query text too long", LOG_F_STR, "tier", ss->tier, LOG_F_STR,
                   "during", what, LOG_F_END);
        return pgq_fail(ss, STATUS_EINTERNAL, "%s query too long", what);
    }
    if (refresh_timeout(ss) != STATUS_OK)
        return pgq_fail(ss, STATUS_ETIMEOUT, "the call's deadline passed before %s", what);
    PGconn *conn = ss->conn;
    pgq_params tq = {0};
    add(&tq, PGQ_OID_TEXT, ss->timeout, 0, 0);
    pgq_plan tp, p;
    pgq_plan_make(ss->conn, TIMEOUT_SQL, &tq, &tp);
    pgq_plan_make(ss->conn, sql->buf, q, &p);
    if (!PQenterPipelineMode(conn)) {
        pgq_plan_done(&tp, 0);
        pgq_plan_done(&p, 0);
        return pgq_pg_fail(ss, NULL, "pipeline start");
    }
    /* Without begin the statements run in the implicit transaction that
     * lasts until the Sync: the timeout (SET LOCAL semantics) still covers
     * the query, and a one-statement read costs two executions, not four. */
    /* With commit, a transaction begun here or left open by an earlier
     * statement of the session ends in the same round trip. */
    int send_commit = commit && (begin || PQtransactionStatus(conn) == PQTRANS_INTRANS);
    enum { SKIP, PARSE_T, PARSE_Q, MINE } slots[6];
    int n = 0, tparse = -1, qparse = -1;
    int sent = 1;
    if (begin) {
        sent = PQsendQueryParams(conn, begin, 0, NULL, NULL, NULL, NULL, 0);
        slots[n++] = SKIP;
    }
    if (sent && (tparse = pgq_plan_send(ss->conn, &tp, TIMEOUT_SQL, &tq)) >= 0) {
        if (tparse) slots[n++] = PARSE_T;
        slots[n++] = SKIP;
    }
    if (sent && tparse >= 0 && (qparse = pgq_plan_send(ss->conn, &p, sql->buf, q)) >= 0) {
        if (qparse) slots[n++] = PARSE_Q;
        slots[n++] = MINE;
    }
    sent = sent && tparse >= 0 && qparse >= 0 &&
           (!send_commit || PQsendQueryParams(conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 0)) &&
           PQpipelineSync(conn);
    if (send_commit) slots[n++] = SKIP;
    PGresult *first_err = NULL, *mine = NULL, *tparsed = NULL, *qparsed = NULL;
    if (sent) {
        for (int i = 0; i < n; i++) {
            if (slots[i] == PARSE_T) drain_one(conn, &first_err, &tparsed, 1);
            else if (slots[i] == PARSE_Q) drain_one(conn, &first_err, &qparsed, 1);
            else drain_one(conn, &first_err, &mine, slots[i] == MINE);
            if (PQstatus(conn) != CONNECTION_OK) break;
        }
        if (PQstatus(conn) == CONNECTION_OK) {
            PGresult *r = PQgetResult(conn); /* the sync point */
            if (PQresultStatus(r) != PGRES_PIPELINE_SYNC) ss->broken = 1;
            PQclear(r);
        }
    }
    if (!PQexitPipelineMode(conn)) ss->broken = 1;
    pgq_plan_done(&tp, tparsed != NULL && PQresultStatus(tparsed) == PGRES_COMMAND_OK);
    pgq_plan_done(&p, qparsed != NULL && PQresultStatus(qparsed) == PGRES_COMMAND_OK);
    PQclear(tparsed);
    PQclear(qparsed);
    int rc = STATUS_OK;
    if (!sent || first_err || !mine || ss->broken) {
        rc = pgq_pg_fail(ss, first_err, what);
        PQclear(mine);
        mine = NULL;
    }
    PQclear(first_err);
    *res = mine;
    return rc;
}

int pgq_commit(pgq_session *ss, pgq_before_commit_fn before_commit, void (*after_commit)(void *),
               void *hook_arg) {
    /* The caller has given up (or is about to): rather than commit a change
     * it will be told failed, roll back. Statements each had the remaining
     * time as their timeout, so the whole transaction may run past it. */
    if (ss->deadline_ms != INT64_MAX && clock_mono_ms(NULL) >= ss->deadline_ms)
        return pgq_fail(ss, STATUS_ETIMEOUT,
                        "the call's deadline passed before the change could commit; nothing "
                        "was changed");
    if (before_commit) {
        char why[256] = "";
        if (before_commit(ss, hook_arg, why, sizeof why) != 0) {
            if (PQstatus(ss->conn) != CONNECTION_OK) ss->broken = 1;
            return pgq_fail(ss, STATUS_EUNAVAILABLE, "cannot record the audit row: %s", why);
        }
    }
    /* From here a lost connection leaves the outcome unknown: no retry. */
    ss->commit_sent = 1;
    PGresult *r = PQexec(ss->conn, "COMMIT");
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    int rc = ok ? STATUS_OK : pgq_pg_fail(ss, r, "commit");
    PQclear(r);
    if (ok && after_commit) after_commit(hook_arg);
    return rc;
}

#define COPY_CHUNK (1u << 20) /* PQputCopyData takes an int length */

int pgq_copy_in(pgq_session *ss, const char *what, const char *copy_sql, const char *data,
                size_t len) {
    PGconn *conn = ss->conn;
    pgq_params tq = {0};
    add(&tq, PGQ_OID_TEXT, ss->timeout, 0, 0);
    PGresult *r = PQexec(conn, "BEGIN");
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (ok) {
        r = exec_sql(ss, TIMEOUT_SQL, &tq);
        ok = PQresultStatus(r) == PGRES_TUPLES_OK;
        PQclear(r);
    }
    r = ok ? PQexec(conn, copy_sql) : NULL;
    if (!r || PQresultStatus(r) != PGRES_COPY_IN) {
        int rc = pgq_pg_fail(ss, r, what);
        PQclear(r);
        return rc;
    }
    PQclear(r);
    for (size_t off = 0; ok && off < len; off += COPY_CHUNK) {
        size_t n = len - off < COPY_CHUNK ? len - off : COPY_CHUNK;
        ok = PQputCopyData(conn, data + off, (int)n) == 1;
    }
    ok = PQputCopyEnd(conn, ok ? NULL : "memoryd: sending the rows failed") == 1 && ok;
    /* Every result: the COPY's completion, or its error. */
    PGresult *err = NULL;
    while ((r = PQgetResult(conn)) != NULL) {
        if (!err && PQresultStatus(r) != PGRES_COMMAND_OK) err = r;
        else PQclear(r);
    }
    if (!ok || err) {
        int rc = pgq_pg_fail(ss, err, what);
        PQclear(err);
        return rc;
    }
    return pgq_commit(ss, NULL, NULL, NULL);
}

/* cancel_token's wake-up: the watchdog cuts the session's connection. */
static void cut_session(void *arg) {
    pgq_session *ss = arg;
    pg_pool_cut_now(ss->pool, ss->conn);
}

int pgq_run(pg_pool *pool, const char *tier, int64_t deadline_ms, int max_statement_ms,
            cancel_token *cancel, char *err, size_t errlen, pgq_fn fn, void *arg) {
    int rc = STATUS_EUNAVAILABLE;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        pgq_session ss;
        rc = pgq_begin(&ss, pool, tier, deadline_ms, max_statement_ms, err, errlen);
        if (rc != STATUS_OK) return rc;
        ss.cancel = cancel;
        if (cancel_wait_begin(cancel, cut_session, &ss) != 0)
            rc = pgq_fail(&ss, STATUS_ECANCELLED, "the call was cancelled");
        else rc = fn(&ss, arg);
        /* Before the connection goes back: no cut may reach it after. */
        cancel_wait_end(cancel);
        /* Retry only when the connection died before COMMIT was sent: the
         * server rolled the transaction back, nothing happened. */
        int retry = rc == STATUS_EUNAVAILABLE && ss.broken && !ss.commit_sent;
        pgq_end(&ss);
        if (!retry) break;
    }
    return rc;
}
