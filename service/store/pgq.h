/* pgq: the query discipline every PostgreSQL-backed tier shares (entries,
 * global): parameterized statements prepared once per connection, binary
 * results, a statement_timeout taken from the call's deadline, reads sent
 * as one pipelined round trip, writes in explicit transactions, and
 * connection loss classified as "unavailable" (the pooled connection is
 * dropped and re-opened later) rather than a crash or a hang.
 *
 * Codes: every function returns STATUS_OK or a negative STATUS_E* code
 * (core/status.h) with a message in the session's err buffer, so a code
 * passes through a tier unchanged.
 *
 * Thread-safety: a session is used by one thread; everything else is
 * stateless. Per-connection statement caches ride on the PGconn (libpq
 * instance data) and die with it. */
#ifndef MEMORYD_STORE_PGQ_H
#define MEMORYD_STORE_PGQ_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "service/core/arena.h"
#include "service/core/cancel.h"
#include "service/core/status.h"
#include "service/store/pg_pool.h"

/* PostgreSQL type oids used for parameters. */
#define PGQ_OID_BOOL 16
#define PGQ_OID_BYTEA 17
#define PGQ_OID_INT8 20
#define PGQ_OID_INT4 23
#define PGQ_OID_TEXT 25
#define PGQ_OID_JSONB 3802
#define PGQ_OID_FLOAT4 700
#define PGQ_OID_TEXT_ARRAY 1009
#define PGQ_OID_TIMESTAMPTZ 1184

#define PGQ_MAX_PARAMS 64

/* ---- a statement: SQL text built from fixed fragments (values never
 * enter it) and its parameters ---- */

typedef struct pgq_params {
    int n;
    const char *vals[PGQ_MAX_PARAMS];
    int lens[PGQ_MAX_PARAMS];
    int fmts[PGQ_MAX_PARAMS];
    Oid types[PGQ_MAX_PARAMS];
    unsigned char bin[PGQ_MAX_PARAMS][8];
} pgq_params;

typedef struct pgq_sql {
    char buf[8192];
    size_t len;
    int overflow; /* reported as STATUS_EINTERNAL when the statement is run */
    pgq_params params;
} pgq_sql;

void pgq_sql_add(pgq_sql *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parameters: each adder returns the parameter's $number for the text.
 * Numbers are handed out in call order, and C leaves the order in which
 * one call's arguments are evaluated unspecified: always put the returned
 * numbers in the SQL, never assume "$1". Strings are borrowed until the
 * statement has run. More than PGQ_MAX_PARAMS parameters is a programming
 * error (queries have bounded shapes) and aborts. */
int pgq_text(pgq_sql *b, const char *s);
int pgq_jsonb(pgq_sql *b, const char *json);         /* sent as text, typed jsonb */
int pgq_text_array(pgq_sql *b, const char *literal); /* from pgq_array_literal */
int pgq_bytes(pgq_sql *b, const void *p, size_t n);
int pgq_int8(pgq_sql *b, int64_t v);
int pgq_int4(pgq_sql *b, int32_t v);
int pgq_bool(pgq_sql *b, int v);
int pgq_ts(pgq_sql *b, int64_t unix_us);
int pgq_null(pgq_sql *b, Oid type);

/* A PostgreSQL array literal {"a","b"} in the arena: every element quoted
 * with `"` and `\` escaped, so any text is carried as is. NULL when out of
 * memory. */
char *pgq_array_literal(arena *a, const char *const *strs, size_t n);

/* ---- sessions ---- */

typedef struct pgq_session {
    pg_pool *pool;
    PGconn *conn;
    const char *tier;    /* "entries", "global": log lines */
    int64_t deadline_ms; /* CLOCK_MONOTONIC ms; INT64_MAX = none */
    int broken;          /* release the connection as broken */
    int commit_sent;     /* COMMIT went out: a failure now has an unknown outcome */
    char sqlstate[6];    /* of the last failure pgq_pg_fail classified ("" if none) */
    char timeout[24];    /* statement_timeout in ms, as text */
    char *err;           /* the caller's message buffer */
    size_t errlen;
    cancel_token *cancel; /* pgq_run's: fired, it cuts the connection */
} pgq_session;

/* Acquires a connection for a call with deadline_ms (INT64_MAX: none, then
 * max_statement_ms bounds each statement). STATUS_ETIMEOUT when the deadline
 * has passed, STATUS_EUNAVAILABLE when PostgreSQL cannot be reached. */
int pgq_begin(pgq_session *ss, pg_pool *pool, const char *tier, int64_t deadline_ms,
              int max_statement_ms, char *err, size_t errlen);
/* Rolls back anything left open and returns the connection. */
void pgq_end(pgq_session *ss);

/* Formats err and returns code. */
int pgq_fail(pgq_session *ss, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Classifies a failed result (res may be NULL: no answer), marks the
 * connection broken when it is, logs, fills err: STATUS_ETIMEOUT for a
 * statement cancelled at the deadline, else STATUS_EUNAVAILABLE. */
int pgq_pg_fail(pgq_session *ss, const PGresult *res, const char *what);
/* 1 when res failed with SQLSTATE state (e.g. "23503"). */
int pgq_sqlstate_is(const PGresult *res, const char *state);

/* Runs one statement inside the session's open transaction (prepared on
 * first use on this connection). Returns libpq's result (check it). */
PGresult *pgq_exec(pgq_session *ss, const pgq_sql *sql);
/* pgq_exec that classifies failure: STATUS_OK with *out (TUPLES_OK or
 * COMMAND_OK, owned by the caller), or a STATUS_E* code (as pgq_pg_fail)
 * naming what in the message. */
int pgq_exec_ok(pgq_session *ss, const pgq_sql *sql, const char *what, PGresult **out);

/* One round trip: `begin` ("BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE
 * READ READ ONLY"...), the statement timeout, sql, and with commit a
 * COMMIT; without commit the transaction stays open (a write or a
 * multi-statement read continues in it). begin NULL with commit: sql
 * alone in the pipeline's implicit transaction, the cheapest form of a
 * one-statement read — or, when an earlier pgq_pipeline of the session
 * left a transaction open, sql and that transaction's COMMIT in one round
 * trip (the last statement of a multi-statement read). On STATUS_OK *res is
 * sql's result (TUPLES_OK or COMMAND_OK), owned by the caller. */
int pgq_pipeline(pgq_session *ss, const char *what, const char *begin, const pgq_sql *sql,
                 int commit, PGresult **res);

/* Commits the session's transaction: STATUS_ETIMEOUT (rolled back) when the
 * deadline has passed; runs before_commit (may be NULL; it may run
 * statements in the session; non-zero aborts with STATUS_EUNAVAILABLE),
 * COMMIT, then after_commit (may be NULL). */
typedef int (*pgq_before_commit_fn)(pgq_session *ss, void *arg, char *err, size_t errlen);
int pgq_commit(pgq_session *ss, pgq_before_commit_fn before_commit, void (*after_commit)(void *),
               void *hook_arg);

/* Bulk load in one transaction: BEGIN, the statement timeout, copy_sql
 * ("COPY t (cols) FROM STDIN"), data[0..len) in COPY text format, COMMIT.
 * Failures as pgq_pg_fail (ss->sqlstate tells a refused row from a lost
 * connection). */
int pgq_copy_in(pgq_session *ss, const char *what, const char *copy_sql, const char *data,
                size_t len);

/* Runs fn in a session, again on a fresh connection (up to 3 tries) when a
 * pooled connection turned out dead before anything was committed. When
 * cancel (NULL: none) fires meanwhile, the session's connection is cut at
 * once (the watchdog's shutdown: the server ends the statement and rolls
 * its transaction back) and fn's wait ends STATUS_ECANCELLED. */
typedef int (*pgq_fn)(pgq_session *ss, void *arg);
int pgq_run(pg_pool *pool, const char *tier, int64_t deadline_ms, int max_statement_ms,
            cancel_token *cancel, char *err, size_t errlen, pgq_fn fn, void *arg);

/* ---- decoding binary results ---- */

int pgq_col_int(const PGresult *r, int row, int col, int64_t *out); /* int2/4/8 */
int pgq_col_float4(const PGresult *r, int row, int col, float *out);
int pgq_col_ts(const PGresult *r, int row, int col, int64_t *unix_us);
int pgq_col_bool(const PGresult *r, int row, int col, int *out);
/* NULL when SQL NULL or out of memory. */
const char *pgq_col_str(arena *a, const PGresult *r, int row, int col);
/* jsonb's binary form is a version byte and the text: the text, or NULL. */
const char *pgq_col_jsonb(arena *a, const PGresult *r, int row, int col);
/* A one-dimensional text[] (no NULL elements) into the arena. */
int pgq_col_text_array(arena *a, const PGresult *r, int row, int col, const char ***out, size_t *n);

#endif
