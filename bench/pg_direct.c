/* pg_direct: the direct sides' closed loop; see pg_direct.h. */
#include "bench/pg_direct.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SAMPLES (1 << 22)

typedef struct {
  const pg_direct_options *o;
  pg_direct_fn one;
  void *arg;
  uint64_t *lat; /* ns, this thread's samples */
  size_t n;
  uint64_t errors;
} worker;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int pg_direct_prepare(PGconn *conn, const char *name, const pgq_sql *b) {
  PGresult *r = PQprepare(conn, name, b->buf, b->params.n, b->params.types);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) fprintf(stderr, "prepare %s: %s", name, PQerrorMessage(conn));
  PQclear(r);
  return ok ? 0 : -1;
}

PGresult *pg_direct_exec(PGconn *conn, const char *name, const pgq_sql *b) {
  const pgq_params *q = &b->params;
  return PQexecPrepared(conn, name, q->n, q->vals, q->lens, q->fmts, 1);
}

static void *work(void *arg) {
  worker *w = arg;
  PGconn *conn = PQconnectdb(w->o->url);
  if (PQstatus(conn) != CONNECTION_OK) {
    fprintf(stderr, "%s: %s", w->o->tool, PQerrorMessage(conn));
    PQfinish(conn);
    w->errors = 1;
    return NULL;
  }
  arena *a = arena_create();
  int prepared = 0;
  uint64_t start = now_ns(), measure = start + (uint64_t)(w->o->warmup * 1e9),
           end = measure + (uint64_t)(w->o->duration * 1e9);
  for (uint64_t t0; a && (t0 = now_ns()) < end;) {
    int rc = w->one(conn, w->arg, &prepared, a);
    uint64_t t1 = now_ns();
    arena_reset(a);
    if (t0 < measure) continue;
    if (rc != 0)
      w->errors++;
    else if (w->n < MAX_SAMPLES)
      w->lat[w->n++] = t1 - t0;
  }
  if (!a) w->errors = 1;
  arena_free(a);
  PQfinish(conn);
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int pg_direct_run(const pg_direct_options *o, pg_direct_fn one, void *arg) {
  worker *ws = calloc((size_t)o->threads, sizeof *ws);
  pthread_t *tid = calloc((size_t)o->threads, sizeof *tid);
  if (!ws || !tid) return 1;
  for (int i = 0; i < o->threads; i++) {
    ws[i] = (worker){.o = o, .one = one, .arg = arg};
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
  printf("%s direct %s t=%d: %.2fs %zu calls %llu errors %.1f qps | us p50 %.1f p99 %.1f\n",
         o->tool, o->what, o->threads, o->duration, total, (unsigned long long)errors, qps, p50,
         p99);
  printf(
      "{\"label\":\"%s\",\"what\":\"%s\",\"threads\":%d,\"calls\":%zu,\"errors\":%llu,"
      "\"qps\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f}\n",
      o->label ? o->label : o->what, o->what, o->threads, total, (unsigned long long)errors, qps,
      p50, p99);
  free(all);
  free(ws);
  free(tid);
  return errors ? 2 : 0;
}
