/* tier_sql: the record rules (tier_record.h) in PostgreSQL, written once:
 * a tier's session with its deadline, the read diode as a WHERE fragment,
 * the row lock a write starts with, and COMMIT with the audit row. Tables
 * keep the columns these read under the same names: tenant, owner, label,
 * version. No gRPC; results as tier_ctx.h says. */
#ifndef MEMORYD_TIER_TIER_SQL_H
#define MEMORYD_TIER_TIER_SQL_H

#include <libpq-fe.h>

#include "service/store/apg.h"
#include "service/store/pgq.h"
#include "service/tier/tier_ctx.h"
#include "service/tier/tier_record.h"

/* Runs fn in a pgq session for c (its deadline; statement_timeout
 * max_statement_ms for calls without one), again on a fresh connection
 * when a pooled one turned out dead before anything was committed
 * (pgq_run). c->err is cleared first. */
typedef int (*tier_sql_fn)(pgq_session *ss, tier_ctx *c, void *arg);
int tier_sql_run(pg_pool *pg, tier_ctx *c, int max_statement_ms, tier_sql_fn fn, void *arg);

/* Commits the session's write with c's hooks (the audit row) around
 * COMMIT: pgq_commit. */
int tier_sql_commit(pgq_session *ss, tier_ctx *c);

/* What a PostgreSQL-backed tier's store runs with: the pool (borrowed;
 * it outlives the store) and how much one answer may carry. */
typedef struct tier_store {
    pg_pool *pg;
    apg *pga;                  /* the asynchronous pool (tier_async); borrowed */
    size_t max_response_bytes; /* bytes of records per List/Query/Traverse answer */
    const char *text_language; /* ranked text search's (tier_sql_rank.h); static */
} tier_store;

/* statement_timeout of a call without a deadline. */
#define TIER_MAX_STATEMENT_MS 30000
/* A store's answer budget when its tier does not give one. */
#define TIER_STORE_RESPONSE_BYTES ((size_t)4 << 20)

/* The store on pg and pga; max_response_bytes 0: TIER_STORE_RESPONSE_BYTES;
 * text_language "english" (a tier that ranks text sets the server's). */
tier_store tier_store_on(pg_pool *pg, apg *pga, size_t max_response_bytes);

/* For a write whose data lives outside PostgreSQL (Qdrant), once it
 * succeeded: c's audit row (c made with the write hooks), stored durably
 * on pg before the call is answered; STATUS_OK when c has no hooks. On
 * failure the code and c->err say the row could not be stored (the write
 * stands). Blocks: task-pool threads only. */
int tier_sql_audit_row(pg_pool *pg, tier_ctx *c);

/* The read diode as a WHERE fragment (no leading AND) on the table alias
 * (NULL: none): the caller's tenant, labels up to clr, and its own records
 * unless it reads with breadth :all. Values go in as parameters. */
void tier_sql_read_diode(pgq_sql *b, const tier_ctx *c, const char *alias);

/* Namespace globs (auth/nsglob.h; malformed ones are skipped) as one
 * PostgreSQL text[] literal of LIKE patterns, for `col LIKE ANY($n)`, in
 * arena a. *none = 1 (and NULL) when no glob is usable; NULL with *none =
 * 0 when out of memory. */
const char *tier_sql_ns_likes(arena *a, char *const *globs, size_t n, int *none);

/* Runs a row-lock statement (SELECT owner, label, version[, more] ...
 * FOR UPDATE) and decodes its first row into *row (exists = 0 when none).
 * begin: the transaction starts with it, in the same round trip; else it
 * runs in the session's open transaction. res may be NULL; otherwise it
 * gets the result (for the extra columns), which the caller PQclears. */
int tier_sql_lock(pgq_session *ss, tier_ctx *c, const pgq_sql *sql, int begin, tier_row *row,
                  PGresult **res);
/* The row-lock statement's first row into *row (exists = 0 when none), as
 * tier_sql_lock decodes it: for the event loop's writes. */
int tier_sql_lock_row(tier_ctx *c, const PGresult *r, tier_row *row);

/* ---- one statement on the event loop (rpc.h's execution model) ----
 *
 * The store builds the statement in op->sql and binds its continuation;
 * the caller registers its cancel (rpc_call_on_cancel) and submits, and
 * returns. The result comes to done on the loop thread. The op and c live
 * in c's arena (they outlive the handler's stack frame) until done ran. */
typedef struct tier_async tier_async;
/* Decodes the statement's result (TUPLES_OK or COMMAND_OK; the kit
 * PQclears it) into what the store keeps in op->arg: a STATUS_* code, the
 * reason in op->c->err. Runs on the loop thread. */
typedef int (*tier_async_decode_fn)(tier_async *op, const PGresult *res);
/* The caller's continuation: once, on the loop thread, with decode's code
 * (or the statement's failure, the reason in c->err). */
typedef void (*tier_async_done_fn)(void *done_arg, int rc);
struct tier_async {
    apg_query q;
    pgq_sql sql; /* the statement: the store builds it before the submit */
    tier_ctx *c;
    tier_async_decode_fn decode;
    void *arg; /* the store's */
    tier_async_done_fn done;
    void *done_arg;
    int skip; /* tier_async_built: the submit ends the op with skip_rc */
    int skip_rc;
    const tier_store *store; /* set by the submit */
    int rolling_back;        /* ending a transaction a decode failed in: */
    int rollback_rc;         /* the code done gets once the ROLLBACK ran */
    int committing;          /* tier_async_commit's statement is running */
};
/* A zeroed op for c in c's arena; what names it in errors ("get entity").
 * The store's arguments (size bytes at args; args may be NULL when size is
 * 0) are copied into the arena: op->arg. NULL when out of memory. */
tier_async *tier_async_new(tier_ctx *c, const char *what, tier_async_decode_fn decode,
                           const void *args, size_t size, tier_async_done_fn done, void *done_arg);
/* A transaction of several statements, each a round trip on the loop:
 * tier_async_begin makes op's first statement start it (begin: "BEGIN
 * ISOLATION LEVEL REPEATABLE READ READ ONLY") and keep its connection;
 * decode then builds the next statement into tier_async_next's buffer and
 * returns TIER_NEXT, and the kit runs it on the same connection (the
 * decode runs again with its result). The last one ends the transaction
 * (tier_async_next's after: "COMMIT"). A decode that fails while the
 * transaction is open gets it rolled back before done runs. */
#define TIER_NEXT 2
void tier_async_begin(tier_async *op, const char *begin);
/* The emptied statement buffer for op's next statement, named what in
 * errors; after: a command ending the transaction in the same round trip
 * ("COMMIT"), or NULL to keep it open for one more. */
pgq_sql *tier_async_next(tier_async *op, const char *what, const char *after);
/* From a write's decode, once its changes are sent: the transaction's
 * last round trip, c's commit_sql statement (the audit row) and COMMIT;
 * when it has committed the kit runs c's after_commit, then done with
 * STATUS_OK (decode does not see it). Returns TIER_NEXT for decode to
 * return, or a code (err set) when the audit row cannot be built. */
int tier_async_commit(tier_async *op);

/* What a store's statement builder returns when it knows no row can
 * match (a namespace pattern outside the token's globs): nothing to send. */
#define TIER_NO_ROWS 1
/* Takes the builder's code for op->sql and returns op: STATUS_OK sends the
 * statement at the submit; TIER_NO_ROWS sends nothing and ends the op
 * STATUS_OK with its outputs as zeroed; an error code (the reason in
 * op->c->err) ends it with that code. Both end it on the submitting
 * thread, inside tier_async_submit. NULL op: NULL. */
tier_async *tier_async_built(tier_async *op, int rc);
/* Sends op->sql on s's asynchronous pool with c's deadline (the pool's
 * default when none). Afterwards the caller touches neither op nor c's
 * arena: done may already be running. */
void tier_async_submit(const tier_store *s, tier_async *op);
/* Ends op with STATUS_ECANCELLED unless it has ended; any thread. Safe
 * before tier_async_submit (the submit then ends it at once). */
void tier_async_cancel(const tier_store *s, tier_async *op);

#endif
