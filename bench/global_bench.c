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
 *   global_bench --pg-url URL run get|traverse [--threads T] [--duration S]
 *       [--warmup S] [--label L] [--tx]
 *       prints one human line and one JSON line ({"label":...,"qps":...,
 *       "p50_us":...,"p99_us":...,"calls":...,"errors":...}) like
 *       bench/loadgen. get reads e0; traverse walks 2 hops out from e0.
 *       --tx sends get as memoryd does (the statement timeout and the
 *       query, one pipelined round trip through pgq). */
#include <getopt.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/auth/jwt.h"
#include "service/auth/principal.h"
#include "service/core/arena.h"
#include "service/global/global_store.h"

#define TENANT "bench"
#define OWNER "bench-agent"
#define MAX_SAMPLES (1 << 22)

typedef struct {
  const char *url;
  int traverse;
  int tx; /* get: wrapped in memoryd's read transaction */
  int threads;
  double duration, warmup;
  const char *label;
} options;

typedef struct {
  const options *o;
  principal *p;
  uint64_t *lat; /* ns, this thread's samples */
  size_t n;
  uint64_t errors;
  double window_s;
  char err[256];
} worker;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static principal *bench_principal(void) {
  jwt_claims *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->sub = strdup(OWNER);
  c->tenant = strdup(TENANT);
  c->iss = strdup("bench");
  c->jti = strdup("bench");
  c->scopes = calloc(1, sizeof *c->scopes);
  if (c->scopes) c->scopes[0] = strdup("global:read");
  c->nscopes = 1;
  c->clr = JWT_LABEL_PUBLIC;
  c->lvl = JWT_LABEL_PUBLIC;
  c->exp = INT64_MAX;
  return principal_create(c);
}

static PGresult *exec_q(PGconn *conn, const char *name, const pgq_sql *b) {
  const pgq_params *q = &b->params;
  return PQexecPrepared(conn, name, q->n, q->vals, q->lens, q->fmts, 1);
}

static int prepare(PGconn *conn, const char *name, const pgq_sql *b) {
  PGresult *r = PQprepare(conn, name, b->buf, b->params.n, b->params.types);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) fprintf(stderr, "global_bench: prepare %s: %s", name, PQerrorMessage(conn));
  PQclear(r);
  return ok ? 0 : -1;
}

/* One GetEntity or Traverse worth of SQL; 0 on success. */
static int one_call(PGconn *conn, worker *w, int *prepared, arena *a) {
  global_traverse_in tin = {"e0", NULL, 0, GLOBAL_DIR_OUT, 2, 100};
  pgq_sql b = {0};
  tier_ctx c; /* the caller, as the tier sees it */
  tier_ctx_make(&c, "global", w->p, INT64_MAX, a);
  if (!w->o->traverse && w->o->tx) {
    /* As memoryd sends it: the statement timeout and the query
     * in one pipelined round trip (one implicit transaction). */
    global_sql_get_entity(&c, "e0", &b);
    pgq_session ss = {.conn = conn, .tier = "bench", .err = w->err, .errlen = sizeof w->err};
    snprintf(ss.timeout, sizeof ss.timeout, "10000");
    PGresult *r = NULL;
    int rc = pgq_pipeline(&ss, "get", NULL, &b, 1, &r);
    int ok = rc == STATUS_OK && PQntuples(r) == 1;
    PQclear(r);
    return ok ? 0 : -1;
  }
  if (!w->o->traverse) {
    global_sql_get_entity(&c, "e0", &b);
    if (!*prepared && prepare(conn, "get", &b) != 0) return -1;
    *prepared = 1;
    PGresult *r = exec_q(conn, "get", &b);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    return ok ? 0 : -1;
  }
  if (global_sql_traverse(&c, &tin, &b) != 0) return -1;
  if (!*prepared && prepare(conn, "walk", &b) != 0) return -1;
  PGresult *r = exec_q(conn, "walk", &b);
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
  if (!*prepared && prepare(conn, "edges", &eb) != 0) return -1;
  *prepared = 1;
  r = exec_q(conn, "edges", &eb);
  int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
  PQclear(r);
  return ok ? 0 : -1;
}

static void *work(void *arg) {
  worker *w = arg;
  PGconn *conn = PQconnectdb(w->o->url);
  if (PQstatus(conn) != CONNECTION_OK) {
    fprintf(stderr, "global_bench: %s", PQerrorMessage(conn));
    PQfinish(conn);
    w->errors = 1;
    return NULL;
  }
  arena *a = arena_create();
  int prepared = 0;
  uint64_t start = now_ns(), measure = start + (uint64_t)(w->o->warmup * 1e9),
           end = measure + (uint64_t)(w->o->duration * 1e9);
  for (;;) {
    uint64_t t0 = now_ns();
    if (t0 >= end) break;
    int rc = one_call(conn, w, &prepared, a);
    uint64_t t1 = now_ns();
    arena_reset(a);
    if (t0 < measure) continue;
    if (rc != 0)
      w->errors++;
    else if (w->n < MAX_SAMPLES)
      w->lat[w->n++] = t1 - t0;
  }
  w->window_s = w->o->duration;
  arena_free(a);
  PQfinish(conn);
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int run(const options *o) {
  principal *p = bench_principal();
  worker *ws = calloc((size_t)o->threads, sizeof *ws);
  pthread_t *tid = calloc((size_t)o->threads, sizeof *tid);
  if (!p || !ws || !tid) return 1;
  for (int i = 0; i < o->threads; i++) {
    ws[i] = (worker){.o = o, .p = p};
    if (!(ws[i].lat = malloc(MAX_SAMPLES * sizeof *ws[i].lat))) return 1;
    pthread_create(&tid[i], NULL, work, &ws[i]);
  }
  size_t total = 0;
  uint64_t errors = 0;
  for (int i = 0; i < o->threads; i++) {
    pthread_join(tid[i], NULL);
    total += ws[i].n;
    errors += ws[i].errors;
  }
  uint64_t *all = malloc((total ? total : 1) * sizeof *all);
  if (!all) return 1;
  size_t k = 0;
  for (int i = 0; i < o->threads; i++) {
    memcpy(all + k, ws[i].lat, ws[i].n * sizeof *all);
    k += ws[i].n;
    free(ws[i].lat);
  }
  qsort(all, total, sizeof *all, cmp_u64);
  double p50 = total ? (double)all[total / 2] / 1e3 : 0;
  double p99 = total ? (double)all[(size_t)((double)total * 0.99)] / 1e3 : 0;
  double qps = (double)total / o->duration;
  const char *what = o->traverse ? "traverse" : "get";
  printf(
      "global_bench direct %s t=%d: %.2fs %zu calls %llu errors %.1f qps | us p50 %.1f "
      "p99 %.1f\n",
      what, o->threads, o->duration, total, (unsigned long long)errors, qps, p50, p99);
  printf(
      "{\"label\":\"%s\",\"what\":\"%s\",\"threads\":%d,\"calls\":%zu,\"errors\":%llu,"
      "\"qps\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f}\n",
      o->label ? o->label : what, what, o->threads, total, (unsigned long long)errors, qps, p50,
      p99);
  free(all);
  free(ws);
  free(tid);
  principal_unref(p);
  return errors ? 2 : 0;
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
  rc = rc || sql(c, q) || sql(c, "COMMIT") || sql(c, "ANALYZE entities") ||
       sql(c, "ANALYZE relationships");
  PQfinish(c);
  if (!rc) printf("global_bench: seeded %d entities, out-degree %d\n", n, degree);
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  options o = {.threads = 4, .duration = 5, .warmup = 1};
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
        o.tx = 1;
        break;
      default:
        return 64;
    }
  }
  if (!o.url || optind >= argc || o.threads < 1 || o.threads > 256 || o.duration <= 0 ||
      entities < 2 || degree < 1) {
    fprintf(stderr,
            "usage: global_bench --pg-url URL seed [--entities N] [--degree D]\n"
            "       global_bench --pg-url URL run get|traverse [--threads T]"
            " [--duration S] [--warmup S] [--label L]\n");
    return 64;
  }
  if (strcmp(argv[optind], "seed") == 0) return seed(o.url, entities, degree);
  if (strcmp(argv[optind], "run") == 0 && optind + 1 < argc) {
    o.traverse = strcmp(argv[optind + 1], "traverse") == 0;
    if (!o.traverse && strcmp(argv[optind + 1], "get") != 0) return 64;
    return run(&o);
  }
  fprintf(stderr, "global_bench: unknown command %s\n", argv[optind]);
  return 64;
}
