/* global_bench: the direct-libpq side of the GlobalMemory benchmark
 * (bench/global.sh). It runs the very statements memoryd runs for
 * GetEntity and Traverse — built by the same functions,
 * global_sql_get_entity / global_sql_traverse(_edges) — straight through
 * libpq from this process: one prepared statement per connection, one
 * connection per thread, closed loop. What memoryd adds on top (gRPC, the
 * token check, the transaction and statement timeout around each read,
 * decoding and encoding) is the difference the driver reports.
 *
 *   global_bench --pg-url URL seed [--entities N] [--degree D]
 *       replaces tenant "bench" in the entities/relationships tables with
 *       N entities e0..e{N-1}, each linked to D others ("links"), owned by
 *       principal "bench-agent" (run memoryd once first: it creates the
 *       schema).
 *       It also writes one entry, bench:wf:node/k0 (100 bytes), for
 *       entries-read.
 *   global_bench --pg-url URL run get|traverse|entries-read [--threads T]
 *       [--duration S] [--warmup S] [--label L] [--tx]
 *       prints one human line and one JSON line ({"label":...,"qps":...,
 *       "p50_us":...,"p99_us":...,"calls":...,"errors":...}) like
 *       bench/loadgen (the loop: pg_direct.h). get reads e0; traverse walks
 *       2 hops out from e0; entries-read is Entries.Read's statement
 *       (entries_sql_read) for bench:wf:node/k0. --tx sends get as the
 *       blocking pool did (the statement timeout and the query, one
 *       pipelined round trip through pgq). */
#include <getopt.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/pg_direct.h"
#include "service/auth/jwt.h"
#include "service/auth/principal.h"
#include "service/core/arena.h"
#include "service/entries/entries_store.h"
#include "service/global/global_store.h"

#define TENANT "bench"
#define OWNER "bench-agent"
#define ENTRY_NS "bench:wf:node"
#define ENTRY_KEY "k0"

enum what { WHAT_GET, WHAT_TRAVERSE, WHAT_ENTRIES_READ };

typedef struct {
  enum what what;
  int tx; /* get: wrapped in the blocking pool's read round trip */
  principal *p;
} bench;

static principal *bench_principal(void) {
  jwt_claims *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->sub = strdup(OWNER);
  c->tenant = strdup(TENANT);
  c->iss = strdup("bench");
  c->jti = strdup("bench");
  c->scopes = calloc(2, sizeof *c->scopes);
  if (c->scopes) {
    c->scopes[0] = strdup("global:read");
    c->scopes[1] = strdup("entries:read");
  }
  c->nscopes = 2;
  c->clr = JWT_LABEL_PUBLIC;
  c->lvl = JWT_LABEL_PUBLIC;
  c->exp = INT64_MAX;
  return principal_create(c);
}

/* One GetEntity, Traverse or Entries.Read worth of SQL; 0 on success. */
static int one_call(PGconn *conn, void *arg, int *prepared, arena *a) {
  bench *w = arg;
  global_traverse_in tin = {"e0", NULL, 0, GLOBAL_DIR_OUT, 2, 100, NULL};
  pgq_sql b = {0};
  tier_ctx c; /* the caller, as the tier sees it */
  tier_ctx_make(&c, w->what == WHAT_ENTRIES_READ ? "entries" : "global", w->p, INT64_MAX, a);
  if (w->what == WHAT_ENTRIES_READ) {
    entries_sql_read(&c, ENTRY_NS, ENTRY_KEY, &b);
    if (!*prepared && pg_direct_prepare(conn, "read", &b) != 0) return -1;
    *prepared = 1;
    PGresult *r = pg_direct_exec(conn, "read", &b);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    return ok ? 0 : -1;
  }
  if (w->what == WHAT_GET && w->tx) {
    /* As the blocking pool sent it: the statement timeout and the query
     * in one pipelined round trip (one implicit transaction). */
    char err[256];
    global_sql_get_entity(&c, "e0", &b);
    pgq_session ss = {.conn = conn, .tier = "bench", .err = err, .errlen = sizeof err};
    snprintf(ss.timeout, sizeof ss.timeout, "10000");
    PGresult *r = NULL;
    int rc = pgq_pipeline(&ss, "get", NULL, &b, 1, &r);
    int ok = rc == STATUS_OK && PQntuples(r) == 1;
    PQclear(r);
    return ok ? 0 : -1;
  }
  if (w->what == WHAT_GET) {
    global_sql_get_entity(&c, "e0", &b);
    if (!*prepared && pg_direct_prepare(conn, "get", &b) != 0) return -1;
    *prepared = 1;
    PGresult *r = pg_direct_exec(conn, "get", &b);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    return ok ? 0 : -1;
  }
  if (global_sql_traverse(&c, &tin, &b) != 0) return -1;
  if (!*prepared && pg_direct_prepare(conn, "walk", &b) != 0) return -1;
  PGresult *r = pg_direct_exec(conn, "walk", &b);
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1) {
    PQclear(r);
    return -1;
  }
  size_t n = (size_t)PQntuples(r);
  const char **ids = arena_alloc(a, n * sizeof *ids);
  for (size_t i = 0; ids && i < n; i++)
    ids[i] = arena_strndup(a, PQgetvalue(r, (int)i, 1), (size_t)PQgetlength(r, (int)i, 1));
  PQclear(r);
  pgq_sql eb = {0};
  if (!ids || global_sql_traverse_edges(&c, &tin, ids, n, &eb) != 0) return -1;
  if (!*prepared && pg_direct_prepare(conn, "edges", &eb) != 0) return -1;
  *prepared = 1;
  r = pg_direct_exec(conn, "edges", &eb);
  int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
  PQclear(r);
  return ok ? 0 : -1;
}

static int sql(PGconn *c, const char *q) {
  PGresult *r = PQexec(c, q);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) fprintf(stderr, "global_bench: %s\n  in: %.200s\n", PQerrorMessage(c), q);
  PQclear(r);
  return ok ? 0 : -1;
}

/* The bench tenant's graph: entity i links to (i*k + 1) mod N for k =
 * 1..degree, a fixed pseudo-random graph with cycles. */
static int seed(const char *url, int n, int degree) {
  PGconn *c = PQconnectdb(url);
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "global_bench: %s", PQerrorMessage(c));
    PQfinish(c);
    return 1;
  }
  char q[1024];
  int rc = sql(c, "BEGIN") || sql(c, "DELETE FROM entities WHERE tenant = '" TENANT "'");
  snprintf(q, sizeof q,
           "INSERT INTO entities (tenant, id, owner, label, entity_type, name, properties,"
           " version, created_at, updated_at) SELECT '" TENANT "', 'e' || i, '" OWNER
           "', 1,"
           " 'node', 'node ' || i, jsonb_build_object('i', i, 'group', i %% 10), 1, now(),"
           " now() FROM generate_series(0, %d) i",
           n - 1);
  rc = rc || sql(c, q);
  snprintf(q, sizeof q,
           "INSERT INTO relationships (tenant, source_id, rel_type, target_id, owner, label,"
           " version, created_at, updated_at) SELECT DISTINCT '" TENANT
           "', 'e' || i, 'links',"
           " 'e' || ((i::bigint * (k * 7919) + k) %% %d), '" OWNER
           "', 1, 1, now(), now()"
           " FROM generate_series(0, %d) i, generate_series(1, %d) k",
           n, n - 1, degree);
  rc = rc || sql(c, q);
  /* The entry Entries.Read reads: 100 bytes, uncompressed, no expiry. */
  rc = rc || sql(c, "DELETE FROM entries WHERE tenant = '" TENANT "'") ||
       sql(c,
           "INSERT INTO entries (tenant, namespace, key, owner, label, value, compressed,"
           " size_bytes, content_type, search_text, version, created_at, updated_at)"
           " VALUES ('" TENANT "', '" ENTRY_NS "', '" ENTRY_KEY "', '" OWNER
           "', 1, convert_to(repeat('x', 100), 'UTF8'), false, 100, 'text/plain',"
           " '" ENTRY_KEY "', 1, now(), now())");
  rc = rc || sql(c, "COMMIT") || sql(c, "ANALYZE entities") || sql(c, "ANALYZE relationships");
  PQfinish(c);
  if (!rc) printf("global_bench: seeded %d entities, out-degree %d\n", n, degree);
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  pg_direct_options o = {.tool = "global_bench", .threads = 4, .duration = 5, .warmup = 1};
  bench b = {0};
  int entities = 10000, degree = 4;
  static const struct option longs[] = {{"pg-url", required_argument, 0, 'u'},
                                        {"threads", required_argument, 0, 't'},
                                        {"duration", required_argument, 0, 'd'},
                                        {"warmup", required_argument, 0, 'w'},
                                        {"label", required_argument, 0, 'l'},
                                        {"entities", required_argument, 0, 'n'},
                                        {"degree", required_argument, 0, 'g'},
                                        {"tx", no_argument, 0, 'x'},
                                        {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
      case 'u':
        o.url = optarg;
        break;
      case 't':
        o.threads = atoi(optarg);
        break;
      case 'd':
        o.duration = atof(optarg);
        break;
      case 'w':
        o.warmup = atof(optarg);
        break;
      case 'l':
        o.label = optarg;
        break;
      case 'n':
        entities = atoi(optarg);
        break;
      case 'g':
        degree = atoi(optarg);
        break;
      case 'x':
        b.tx = 1;
        break;
      default:
        return 64;
    }
  }
  if (!o.url || optind >= argc || o.threads < 1 || o.threads > 256 || o.duration <= 0 ||
      entities < 2 || degree < 1) {
    fprintf(stderr,
            "usage: global_bench --pg-url URL seed [--entities N] [--degree D]\n"
            "       global_bench --pg-url URL run get|traverse|entries-read [--threads T]"
            " [--duration S] [--warmup S] [--label L] [--tx]\n");
    return 64;
  }
  if (strcmp(argv[optind], "seed") == 0) return seed(o.url, entities, degree);
  if (strcmp(argv[optind], "run") != 0 || optind + 1 >= argc) {
    fprintf(stderr, "global_bench: unknown command %s\n", argv[optind]);
    return 64;
  }
  o.what = argv[optind + 1];
  if (strcmp(o.what, "get") == 0)
    b.what = WHAT_GET;
  else if (strcmp(o.what, "traverse") == 0)
    b.what = WHAT_TRAVERSE;
  else if (strcmp(o.what, "entries-read") == 0)
    b.what = WHAT_ENTRIES_READ;
  else
    return 64;
  if (!(b.p = bench_principal())) return 1;
  int rc = pg_direct_run(&o, one_call, &b);
  principal_unref(b.p);
  return rc;
}
