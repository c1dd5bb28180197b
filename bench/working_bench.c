/* working_bench: the direct side of the WorkingMemory benchmark
 * (bench/working.sh). It runs Render's very statement (wm_sql_render),
 * decodes it as memoryd does (wm_decode_render) and renders the text
 * (wm_render), straight through libpq from this process: one prepared
 * statement per connection, one connection per thread, closed loop. What
 * memoryd adds on top (gRPC, the token check, encoding) is the difference
 * the driver reports.
 *
 *   working_bench --pg-url URL seed
 *       replaces tenant "bench"'s working memory with two of node
 *       bench:wf:big's memories: its global one, 1000 documents of 200
 *       characters under 50 directories (FULL is ~214000 characters: Render
 *       at 4000 falls back to a cut TREE), and thread "t1"'s, 20 documents of
 *       150 characters (FULL fits in 4000). Run memoryd once first: it
 *       creates the schema.
 *   working_bench --pg-url URL run big|small [--threads T] [--duration S]
 *       [--warmup S] [--label L]
 *       prints one human line and one JSON line like bench/loadgen
 *       (pg_direct.h): Render at 4000 characters of the big memory or of
 *       the thread's. */
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
#include "service/working/wm_render.h"
#include "service/working/wm_store.h"

#define TENANT "bench"
#define OWNER "bench-agent"
#define NODE "bench:wf:big"
#define BUDGET 4000

typedef struct {
  wm_render_in in;
  principal *p;
} bench;

static principal *bench_principal(void) {
  jwt_claims *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->sub = strdup(OWNER);
  c->tenant = strdup(TENANT);
  c->iss = strdup("bench");
  c->jti = strdup("bench");
  c->scopes = calloc(1, sizeof *c->scopes);
  if (c->scopes) c->scopes[0] = strdup("working:read");
  c->nscopes = 1;
  c->ns = calloc(1, sizeof *c->ns);
  if (c->ns) c->ns[0] = strdup("bench:*:*");
  c->nns = 1;
  c->clr = JWT_LABEL_PUBLIC;
  c->lvl = JWT_LABEL_PUBLIC;
  c->exp = INT64_MAX;
  return principal_create(c);
}

/* One Render worth of SQL and rendering; 0 when it rendered. */
static int one_call(PGconn *conn, void *arg, int *prepared, arena *a) {
  bench *w = arg;
  pgq_sql b = {0};
  tier_ctx c;
  tier_ctx_make(&c, "working", w->p, INT64_MAX, a);
  wm_sql_render(&c, &w->in, &b);
  if (!*prepared && pg_direct_prepare(conn, "render", &b) != 0) return -1;
  *prepared = 1;
  PGresult *r = pg_direct_exec(conn, "render", &b);
  wm_memory mem;
  wm_rendered out;
  int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
           wm_decode_render(&c, &w->in, r, &mem) == STATUS_OK &&
           wm_render(a, mem.docs, mem.n, 0, BUDGET, &out) == 0 && out.chars > 0;
  PQclear(r);
  return ok ? 0 : -1;
}

static int sql(PGconn *c, const char *q) {
  PGresult *r = PQexec(c, q);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) fprintf(stderr, "working_bench: %s\n  in: %.200s\n", PQerrorMessage(c), q);
  PQclear(r);
  return ok ? 0 : -1;
}

static int seed(const char *url) {
  PGconn *c = PQconnectdb(url);
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "working_bench: %s", PQerrorMessage(c));
    PQfinish(c);
    return 1;
  }
  int rc = sql(c, "BEGIN") || sql(c, "DELETE FROM working_memory WHERE tenant = '" TENANT "'") ||
           sql(c,
               "INSERT INTO working_memory (tenant, node, thread, path, owner, label, content,"
               " chars, version, created_at, updated_at) SELECT '" TENANT "', '" NODE
               "', '', '/topic-' || (i % 50) || '/note-' || i, '" OWNER
               "', 1, rpad('note ' || i || ' ', 200, 'lorem ipsum '), 200, 1, now(), now()"
               " FROM generate_series(1, 1000) i") ||
           sql(c,
               "INSERT INTO working_memory (tenant, node, thread, path, owner, label, content,"
               " chars, version, created_at, updated_at) SELECT '" TENANT "', '" NODE
               "', 't1', '/step-' || i, '" OWNER
               "', 1, rpad('step ' || i || ' ', 150, 'dolor sit '), 150, 1, now(), now()"
               " FROM generate_series(1, 20) i") ||
           sql(c, "COMMIT") || sql(c, "ANALYZE working_memory");
  PQfinish(c);
  if (!rc) printf("working_bench: seeded 1000 + 20 documents\n");
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  pg_direct_options o = {.tool = "working_bench", .threads = 4, .duration = 5, .warmup = 1};
  bench b = {.in = {.m = {NODE, ""}, .full_budget = BUDGET}};
  static const struct option longs[] = {
      {"pg-url", required_argument, 0, 'u'},   {"threads", required_argument, 0, 't'},
      {"duration", required_argument, 0, 'd'}, {"warmup", required_argument, 0, 'w'},
      {"label", required_argument, 0, 'l'},    {0, 0, 0, 0}};
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
      default:
        return 64;
    }
  }
  if (!o.url || optind >= argc || o.threads < 1 || o.threads > 256 || o.duration <= 0) {
    fprintf(stderr,
            "usage: working_bench --pg-url URL seed\n"
            "       working_bench --pg-url URL run big|small [--threads T] [--duration S]"
            " [--warmup S] [--label L]\n");
    return 64;
  }
  if (strcmp(argv[optind], "seed") == 0) return seed(o.url);
  if (strcmp(argv[optind], "run") != 0 || optind + 1 >= argc) {
    fprintf(stderr, "working_bench: unknown command %s\n", argv[optind]);
    return 64;
  }
  o.what = argv[optind + 1];
  if (strcmp(o.what, "small") == 0) {
    b.in.m.thread = "t1";
    b.in.global_fallback = 1;
  } else if (strcmp(o.what, "big") != 0) {
    return 64;
  }
  if (!(b.p = bench_principal())) return 1;
  int rc = pg_direct_run(&o, one_call, &b);
  principal_unref(b.p);
  return rc;
}
