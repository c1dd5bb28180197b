/* audit: the audit trail (protos/memory/v1/audit.proto). An observer turns
 * every finished call of an authenticated method into one audit_log row
 * (principal, token id, tenant, method, target ids, status, duration,
 * request id, time). Every write stores its row before it is answered:
 * inside its own transaction (audit_write_in_tx, the tier kit's commit
 * hooks) so data and audit commit together, or, for data outside
 * PostgreSQL (Redis, Qdrant), in a statement of its own right after (the
 * tier kit's tier_pending_audit_row / tier_sql_audit_row). Every other
 * call (reads, failures) goes through a bounded in-memory queue drained by
 * a writer thread in batches, whose drops are counted and logged. Calls
 * that end before a token is verified are counted and logged (at most once
 * a second), never queued, so a flood of them cannot crowd real records
 * out. Health and reflection (methods without a scope) and unknown methods
 * are not audited. Reading the trail is the Audit service's
 * (audit_service.h).
 *
 * The writer thread drains the queue with one COPY per batch on pgq (a
 * statement timeout bounds each), retrying with backoff while PostgreSQL
 * is down. The observer only copies the record into the queue: it never
 * waits for PostgreSQL.
 *
 * Limits: durations are measured from rpc_call_start_ms, so they may read
 * up to 1 ms long. */
#ifndef MEMORYD_AUDIT_AUDIT_H
#define MEMORYD_AUDIT_AUDIT_H
#include <stddef.h>
#include <stdint.h>

#include "service/core/strbuf.h"
#include "service/rpc/rpc.h"
#include "service/store/pg_pool.h"
#include "service/store/pgq.h"

typedef struct audit audit;

/* Zero fields take the default shown. */
typedef struct audit_options {
    size_t queue_capacity; /* records waiting for the writer (65536); beyond: dropped */
    size_t batch_max;      /* rows per COPY (512) */
    int flush_timeout_ms;  /* how long audit_free waits for the queue to drain (5000) */
    /* Group commit: after the first record arrives the writer waits up to
     * this long (or until batch_max records are queued) before writing, so
     * a busy server writes hundreds of rows per COPY instead of one per
     * call. Records reach the table (and Watch) this much later; writes'
     * own rows (audit_write_in_tx) are not delayed. 0 = write at once. */
    int linger_ms;
} audit_options;

/* Starts the writer. pg is borrowed (must outlive the audit); o may be NULL
 * (all defaults). PostgreSQL need not be reachable: the writer retries. On
 * 0 *out is owned by the caller (audit_free); on -1 (out of memory, thread
 * creation) err says why and nothing is left. */
int audit_create(pg_pool *pg, const audit_options *o, audit **out, char *err, size_t errlen);
/* Flushes what is queued (waiting up to flush_timeout_ms; what is still
 * queued then is counted as dropped and logged), stops the writer, frees;
 * accepts NULL. Call after the rpc server is shut down. */
void audit_free(audit *a);

/* Registers the observer that records every finished call. One audit per
 * server. Returns 0, or -1 (out of memory). */
int audit_observe(rpc_server *srv, audit *a);

/* Handlers name the records a call addressed ("namespace/key", entity id,
 * token id, ...) or, for reads, returned. id is copied into the call's
 * arena (invalid UTF-8 replaced by '?', cut at 1024 bytes; at most 1024
 * ids per call, more are ignored). Call it from the thread running the
 * handler of a unary or server-streaming call, before the handler returns
 * (the arena is not thread-safe). On bidi streams it does nothing: their
 * arena is per message. */
void audit_add_target(rpc_call *call, const char *id);

/* Inside a write handler's open transaction in session ss: inserts this
 * call's row with status OK (time = now, duration so far, the targets added
 * so far). After a successful COMMIT the handler calls audit_committed so
 * the observer does not record the call again; if the transaction fails
 * (or the handler never calls audit_committed, or the call ends with an
 * error status anyway) the observer records the call as usual. Returns 0,
 * or -1 with err (the transaction is then aborted: roll it back). Handler
 * thread only, like audit_add_target. */
int audit_write_in_tx(pgq_session *ss, rpc_call *call, char *err, size_t errlen);
/* The same row as a statement in b (no I/O), for a transaction that sends
 * it itself (the event loop's writes, with COMMIT in the same round trip);
 * its strings live in the call's arena. 0, or -1 (out of memory; err). */
int audit_sql_in_tx(rpc_call *call, pgq_sql *b, char *err, size_t errlen);
void audit_committed(rpc_call *call);

/* The two calls above as a tier's commit hooks (pgq_commit's
 * before_commit and after_commit), arg being the rpc_call. */
int audit_hook_before_commit(pgq_session *ss, void *call, char *err, size_t errlen);
void audit_hook_after_commit(void *call);
/* audit_sql_in_tx as a tier's commit_sql hook (tier_ctx.h). */
int audit_hook_commit_sql(void *call, pgq_sql *b, char *err, size_t errlen);

/* Waits until every record queued so far is written (or given up on) or
 * deadline_ms (CLOCK_MONOTONIC ms) passes. Returns 0, or -1 on timeout.
 * For tests and orderly shutdown; never call it from a handler. */
int audit_flush(audit *a, int64_t deadline_ms);

/* Records dropped because the queue was full (or still queued when
 * audit_free gave up), since start. */
uint64_t audit_dropped(const audit *a);

typedef struct audit_stats {
    uint64_t queued;          /* records accepted into the queue */
    uint64_t written;         /* rows the writer inserted */
    uint64_t dropped;         /* = audit_dropped */
    uint64_t failed;          /* rows PostgreSQL refused for good (not a connection problem) */
    uint64_t batches;         /* COPY statements that succeeded */
    uint64_t unauthenticated; /* calls that ended before a token was verified: not audited */
    size_t queue_depth;       /* records waiting for the writer now */
    size_t queue_capacity;
} audit_stats;
void audit_get_stats(const audit *a, audit_stats *out);

/* A metrics collector (metrics_add_collector) for the audit trail a:
 * memoryd_audit_rows_total{outcome=written|dropped|failed},
 * memoryd_audit_unaudited_calls_total, memoryd_audit_queue_depth and
 * _capacity. */
void audit_metrics_collect(strbuf *out, void *a);

#endif
