/* apg: asynchronous PostgreSQL on an event loop (evloop.h). A fixed set of
 * non-blocking libpq connections lives on the loop thread; a query is
 * submitted from any thread and answered by a callback on the loop thread,
 * so no thread ever waits for PostgreSQL.
 *
 * Deadlines and cancellation reach the server: every query carries a
 * deadline (the pool's default when the caller has none). When it passes,
 * or the caller cancels, the query is answered at once (STATUS_ETIMEOUT /
 * STATUS_ECANCELLED) and, if it was running, its connection is closed: the
 * server notices within client_connection_check_interval (set on every
 * connection) and ends the statement, and the pool opens a fresh
 * connection. A query waits for a connection at most until its deadline,
 * behind at most max_queue others (more: STATUS_EBUSY). Connecting is
 * non-blocking too and bounded by connect_timeout_ms; while PostgreSQL is
 * unreachable, queries fail fast with STATUS_EUNAVAILABLE and the
 * connections retry with backoff.
 *
 * Statements are prepared once per connection (pgq's statement cache) and
 * sent with their Parse in one pipeline; results come in binary.
 *
 * Ownership: the caller owns each apg_query and keeps it (and the
 * statement it points to) valid until its done callback has run; done
 * owns the result it is handed (PQclear it). apg_free answers whatever is
 * still queued or running with STATUS_EUNAVAILABLE before it returns. */
#ifndef MEMORYD_STORE_APG_H
#define MEMORYD_STORE_APG_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "service/core/dlist.h"
#include "service/metrics/backend_metrics.h"
#include "service/store/evloop.h"
#include "service/store/pgq.h"

typedef struct apg apg;
typedef struct apg_query apg_query;

typedef struct apg_options {
    const char *url;            /* libpq URI or key=value string */
    int size;                   /* connections (>= 1) */
    int max_queue;              /* queries waiting for a connection; more: STATUS_EBUSY */
    int connect_timeout_ms;     /* one connection attempt */
    int64_t default_timeout_ms; /* a query submitted without a deadline */
} apg_options;

/* Called once per query on the loop thread. status is STATUS_OK with res
 * (TUPLES_OK or COMMAND_OK; done owns it), or a STATUS_E* code with the
 * reason in q->err and res NULL. The query's memory is the caller's again
 * when done returns (done may free it). */
typedef void (*apg_done_fn)(apg_query *q, int status, PGresult *res);

struct apg_query {
    /* set by the caller before apg_submit */
    const pgq_sql *sql;
    const char *what;    /* "get entity": errors and logs */
    int64_t deadline_ms; /* CLOCK_MONOTONIC ms; INT64_MAX: the pool's default */
    apg_done_fn done;
    void *arg;
    int first; /* 1: ahead of the wait queue and outside its bound (health) */
    /* Statements of one transaction, each a round trip on the loop: before
     * and after are commands sent ahead of and after sql in its round trip
     * ("BEGIN ...", "COMMIT"; NULL: none); hold keeps the connection,
     * once sql answered OK, for this query's next statement: the caller
     * must submit q again (new sql; hold 0 to let go, ending the
     * transaction with after = "COMMIT" or sql "ROLLBACK") and it runs on
     * that connection. A resubmitted query no longer wanted (cancelled,
     * deadline) or whose connection was lost is answered with the error
     * and the connection closed (its transaction dies with it); a failed
     * statement never holds. */
    const char *before, *after;
    int hold;
    /* set by apg */
    char err[256];
    char sqlstate[6]; /* of a statement PostgreSQL refused ("" otherwise) */
    /* the pool's */
    evloop_task task;
    apg *pool;
    dlist link; /* in the wait queue */
    int64_t submit_ms;
    int64_t submit_us;     /* the same instant, for the metrics' histograms */
    int started;           /* it got a connection (or kept its transaction's) */
    struct apg_conn *held; /* the connection q holds between its statements */
    int cancelled;         /* set by apg_cancel on any thread: read with __atomic builtins */
};

/* Creates the pool on loop and starts connecting (without waiting). 0 with
 * *out, or -1 with the reason in err (a bad URL, out of memory). */
int apg_create(evloop *loop, const apg_options *o, apg **out, char *err, size_t errlen);
/* Answers what is queued or running (STATUS_EUNAVAILABLE), closes every
 * connection on the loop thread, waits for that, frees. Call before
 * evloop_free, from a thread other than the loop's. Accepts NULL. */
void apg_free(apg *p);

/* Queues q (any thread; allocates nothing). q starts zeroed but for the
 * caller's fields: a cancel that came before the submit ends it at once. */
void apg_submit(apg *p, apg_query *q);
/* Asks that q end now with STATUS_ECANCELLED (any thread; before or after
 * apg_submit). A query already answered is not affected; the caller must still keep q valid until
 * done has run (it may run before or after this returns). */
void apg_cancel(apg *p, apg_query *q);

/* "SELECT 1" with deadline_ms, waiting for the answer: 0 when PostgreSQL
 * answered, else a STATUS_E* code (STATUS_ETIMEOUT when it did not answer
 * in time: a frozen server is noticed, not waited for). For threads that
 * may block (the health probe); never on the loop thread. */
int apg_ping(apg *p, int64_t deadline_ms);

/* Connections open and idle or busy right now; a racy snapshot for health
 * and logs. */
int apg_connected(const apg *p);

/* The pool's request counts and times (backend_metrics.h), for
 * backend_metrics_add with apg_gauges: a snapshot of the connections and
 * the queue, taken on the loop thread (the caller waits up to a second,
 * then reports them unknown; never on the loop thread). */
const backend_stats *apg_stats(const apg *p);
void apg_gauges(void *p, backend_gauges *out);

#endif
