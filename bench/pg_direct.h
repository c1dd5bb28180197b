/* pg_direct: the closed loop of the benchmarks' direct-libpq sides
 * (global_bench): threads, each on a connection of its own, run one call
 * back to back for warm-up + duration seconds; the measured window's
 * latencies are printed as bench/loadgen prints them (a human line and a
 * JSON line with label, qps, p50_us, p99_us, calls, errors), so the
 * drivers compare the two sides line for line. */
#ifndef MEMORYD_BENCH_PG_DIRECT_H
#define MEMORYD_BENCH_PG_DIRECT_H

#include <libpq-fe.h>

#include "service/core/arena.h"
#include "service/store/pgq.h"

typedef struct pg_direct_options {
  const char *tool;  /* "global_bench": messages */
  const char *url;   /* libpq URL */
  const char *what;  /* "get": the JSON's "what" */
  const char *label; /* NULL: what */
  int threads;
  double duration, warmup; /* seconds */
} pg_direct_options;

/* One call on conn: 0 when it did what it should. *prepared starts 0 on
 * each connection (for the call's own PQprepare); a is reset after each. */
typedef int (*pg_direct_fn)(PGconn *conn, void *arg, int *prepared, arena *a);

/* Runs the loop and prints; 0, 1 (could not run) or 2 (calls failed). */
int pg_direct_run(const pg_direct_options *o, pg_direct_fn one, void *arg);

/* PQprepare of b's text as name: 0, or -1 (printed). */
int pg_direct_prepare(PGconn *conn, const char *name, const pgq_sql *b);
/* PQexecPrepared of name with b's parameters, binary results. */
PGresult *pg_direct_exec(PGconn *conn, const char *name, const pgq_sql *b);

#endif
