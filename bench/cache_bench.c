/* cache_bench: the direct-hiredis side of the Cache benchmark
 * (bench/cache.sh). It GETs one Redis key from this process — the very
 * key memoryd's Cache.Get reads from L2 — with no gRPC, no token check and
 * no decoding: T threads, one redisContext each, closed loop. What memoryd
 * adds on top of one Redis round trip is the difference the driver
 * reports. The URL is parsed by memoryd's own parser (redis_url_parse), and
 * the connection is set up as memoryd's (AUTH when the URL has a password,
 * SELECT when it names a database).
 *
 *   cache_bench --redis-url URL find PATTERN [--contains TEXT]
 *       SCANs the keyspace for keys matching the glob PATTERN and prints
 *       the first whose value contains TEXT (any, without --contains), one
 *       line. Exit 1 when there is none. The driver uses it to learn the
 *       Redis key memoryd stored its Cache.Set under, whatever the layout.
 *   cache_bench --redis-url URL set KEY [--size N] [--ttl S]
 *       SET KEY to N bytes ('x', default 100) with EX S (default 600).
 *   cache_bench --redis-url URL run KEY [--threads T] [--duration S]
 *       [--warmup S] [--label L]
 *       prints one human line and one JSON line ({"label":...,"qps":...,
 *       "p50_us":...,"p99_us":...,"calls":...,"errors":...}) like
 *       bench/loadgen. A GET that does not return a string (a missing key
 *       returns nil) counts as an error.
 *
 * Latencies: every successful call's latency (CLOCK_MONOTONIC around
 * redisCommand) in a per-thread growing array, merged and sorted at the
 * end; percentiles are nearest-rank over the exact samples. A call counts
 * when it completes inside the measured window, as in loadgen. Every
 * connection is open before the clock starts. SIGINT/SIGTERM end the
 * window early and still report.
 *
 * Exit: 0 with at least one successful GET (run) or on success (find,
 * set); 1 Redis unreachable, key not found (find) or out of memory; 2 every
 * GET in the window failed; 64 bad usage. */
#include <getopt.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "service/store/redis_url.h"

#define MAX_THREADS 1024
#define TIMEOUT_S 10

typedef struct {
  const char *url;
  int threads;
  double duration, warmup;
  const char *label;
  const char *contains;
  long size, ttl;
} options;

typedef struct {
  redisContext *c;
  const char *key;
  size_t keylen;
  uint64_t measure_ns, end_ns;
  uint64_t *lat; /* ns, successful calls in the window */
  size_t n, cap;
  uint64_t errors;
  long long value_bytes; /* length of the last value read, -1 if none */
  int oom;
  char err[256]; /* the first error, "" if none */
} worker;

static volatile sig_atomic_t stop_now;

static void on_signal(int sig) {
  (void)sig;
  stop_now = 1;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A connection set up as memoryd's redis_pool does; NULL with err set. */
static redisContext *connect_url(const redis_url *u, char *err, size_t errlen) {
  struct timeval tv = {TIMEOUT_S, 0};
  redisContext *c = redisConnectWithTimeout(u->host, u->port, tv);
  if (!c || c->err) {
    snprintf(err, errlen, "Redis unavailable at %s:%d: %s", u->host, u->port,
             c ? c->errstr : "out of memory");
    if (c) redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  const char *what[2] = {"AUTH", "SELECT"};
  for (int i = 0; i < 2; i++) {
    redisReply *r = NULL;
    if (i == 0 && u->password[0])
      r = redisCommand(c, "AUTH %s", u->password);
    else if (i == 1 && u->db)
      r = redisCommand(c, "SELECT %d", u->db);
    else
      continue;
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok)
      snprintf(err, errlen, "Redis %s failed: %s", what[i],
               !r       ? c->errstr
               : r->str ? r->str
                        : "unexpected reply");
    if (r) freeReplyObject(r);
    if (!ok) {
      redisFree(c);
      return NULL;
    }
  }
  return c;
}

static redisContext *open_or_complain(const char *url) {
  redis_url u;
  char err[512];
  if (redis_url_parse(url, &u, err, sizeof err) != 0) {
    fprintf(stderr, "cache_bench: --redis-url: %s\n", err);
    return NULL;
  }
  redisContext *c = connect_url(&u, err, sizeof err);
  if (!c) fprintf(stderr, "cache_bench: %s\n", err);
  return c;
}

/* ---- run ------------------------------------------------------------------ */

static void note_error(worker *w, const char *fmt, const char *detail) {
  w->errors++;
  if (!w->err[0]) snprintf(w->err, sizeof w->err, fmt, detail);
}

static int record(worker *w, uint64_t v) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 1 << 16;
    uint64_t *lat = realloc(w->lat, cap * sizeof *lat);
    if (!lat) return -1;
    w->lat = lat;
    w->cap = cap;
  }
  w->lat[w->n++] = v;
  return 0;
}

static void *work(void *arg) {
  worker *w = arg;
  while (!stop_now) {
    uint64_t t0 = now_ns();
    if (t0 >= w->end_ns) break;
    redisReply *r = redisCommand(w->c, "GET %b", w->key, w->keylen);
    uint64_t t1 = now_ns();
    if (!r) {
      /* The context is unusable after an I/O error: this thread ends. */
      if (t1 >= w->measure_ns) note_error(w, "I/O error: %s", w->c->errstr);
      break;
    }
    int ok = r->type == REDIS_REPLY_STRING;
    if (ok) w->value_bytes = (long long)r->len;
    if (t1 >= w->measure_ns && t1 < w->end_ns) {
      if (!ok)
        note_error(w, "%s",
                   r->type == REDIS_REPLY_NIL     ? "key not found (nil reply)"
                   : r->type == REDIS_REPLY_ERROR ? r->str
                                                  : "reply is not a string");
      else if (record(w, t1 - t0) != 0) {
        w->oom = 1;
        freeReplyObject(r);
        break;
      }
    }
    freeReplyObject(r);
  }
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest sample with at least p% of them at or below. */
static double percentile_us(const uint64_t *sorted, size_t n, double p) {
  if (n == 0) return 0;
  double exact = p / 100.0 * (double)n;
  size_t rank = (size_t)exact;
  if ((double)rank < exact) rank++;
  if (rank < 1) rank = 1;
  return (double)sorted[rank - 1] / 1e3;
}

/* s as the contents of a JSON string (quotes and control characters). */
static void json_str(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
}

static int run(const options *o, const char *key) {
  worker *ws = calloc((size_t)o->threads, sizeof *ws);
  pthread_t *tid = calloc((size_t)o->threads, sizeof *tid);
  int rc = 1, started = 0;
  if (!ws || !tid) {
    fprintf(stderr, "cache_bench: out of memory\n");
    goto out;
  }
  for (int i = 0; i < o->threads; i++) {
    ws[i] = (worker){.key = key, .keylen = strlen(key), .value_bytes = -1};
    if (!(ws[i].c = open_or_complain(o->url))) goto out;
  }
  /* The clock starts once every connection is open. */
  uint64_t start = now_ns();
  uint64_t measure = start + (uint64_t)(o->warmup * 1e9);
  uint64_t end = measure + (uint64_t)(o->duration * 1e9);
  for (; started < o->threads; started++) {
    ws[started].measure_ns = measure;
    ws[started].end_ns = end;
    if (pthread_create(&tid[started], NULL, work, &ws[started]) != 0) {
      fprintf(stderr, "cache_bench: pthread_create failed\n");
      stop_now = 1;
      break;
    }
  }
  size_t total = 0;
  uint64_t errors = 0;
  long long value_bytes = -1;
  int oom = 0;
  const char *first_error = NULL;
  for (int i = 0; i < started; i++) {
    pthread_join(tid[i], NULL);
    total += ws[i].n;
    errors += ws[i].errors;
    oom |= ws[i].oom;
    if (ws[i].value_bytes >= 0) value_bytes = ws[i].value_bytes;
    if (!first_error && ws[i].err[0]) first_error = ws[i].err;
  }
  if (started < o->threads || oom) {
    fprintf(stderr, "cache_bench: %s\n", oom ? "out of memory" : "could not start threads");
    goto out;
  }
  /* The window actually measured (shorter when a signal ended it). */
  uint64_t stopped = now_ns();
  double window_s = stopped >= end      ? o->duration
                    : stopped > measure ? (double)(stopped - measure) / 1e9
                                        : 0;
  uint64_t *all = malloc((total ? total : 1) * sizeof *all);
  if (!all) {
    fprintf(stderr, "cache_bench: out of memory\n");
    goto out;
  }
  size_t k = 0;
  for (int i = 0; i < o->threads; i++) {
    if (ws[i].n) memcpy(all + k, ws[i].lat, ws[i].n * sizeof *all);
    k += ws[i].n;
  }
  qsort(all, total, sizeof *all, cmp_u64);
  double qps = window_s > 0 ? (double)total / window_s : 0;
  double p50 = percentile_us(all, total, 50), p99 = percentile_us(all, total, 99);
  double mean = 0;
  for (size_t i = 0; i < total; i++) mean += (double)all[i];
  mean = total ? mean / (double)total / 1e3 : 0;
  double max = total ? (double)all[total - 1] / 1e3 : 0;
  const char *label = o->label ? o->label : "direct-get";
  printf(
      "cache_bench GET t=%d: %.2fs %zu calls %llu errors %.1f qps | us mean %.1f p50 %.1f "
      "p99 %.1f max %.1f | value %lld bytes\n",
      o->threads, window_s, total + (size_t)errors, (unsigned long long)errors, qps, mean, p50, p99,
      max, value_bytes);
  printf("{\"label\":\"");
  json_str(stdout, label);
  printf("\",\"what\":\"redis-get\",\"key\":\"");
  json_str(stdout, key);
  printf(
      "\",\"threads\":%d,\"duration_s\":%.2f,\"calls\":%zu,\"errors\":%llu,"
      "\"value_bytes\":%lld,",
      o->threads, window_s, total + (size_t)errors, (unsigned long long)errors, value_bytes);
  /* Figures are null when nothing succeeded, as in loadgen. */
  if (total)
    printf("\"qps\":%.1f,\"mean_us\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,", qps,
           mean, p50, p99, max);
  else
    printf("\"qps\":null,\"mean_us\":null,\"p50_us\":null,\"p99_us\":null,\"max_us\":null,");
  if (first_error) {
    printf("\"first_error\":\"");
    json_str(stdout, first_error);
    printf("\"}\n");
    fprintf(stderr, "cache_bench: first error: %s\n", first_error);
  } else {
    printf("\"first_error\":null}\n");
  }
  fflush(stdout);
  free(all);
  rc = total ? 0 : 2;
out:
  for (int i = 0; ws && i < o->threads; i++) {
    if (ws[i].c) redisFree(ws[i].c);
    free(ws[i].lat);
  }
  free(ws);
  free(tid);
  return rc;
}

/* ---- find, set ------------------------------------------------------------ */

/* 1 when the value at key contains o->contains (or o->contains is NULL),
 * 0 when not, -1 on an I/O error. */
static int value_matches(redisContext *c, const char *key, size_t keylen, const char *contains) {
  if (!contains) return 1;
  redisReply *r = redisCommand(c, "GET %b", key, keylen);
  if (!r) return -1;
  int hit =
      r->type == REDIS_REPLY_STRING && memmem(r->str, r->len, contains, strlen(contains)) != NULL;
  freeReplyObject(r);
  return hit;
}

static int find(const options *o, const char *pattern) {
  redisContext *c = open_or_complain(o->url);
  if (!c) return 1;
  char cursor[32] = "0";
  int found = 0, rc = 1;
  do {
    redisReply *r = redisCommand(c, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
      fprintf(stderr, "cache_bench: SCAN failed: %s\n",
              !r                             ? c->errstr
              : r->type == REDIS_REPLY_ERROR ? r->str
                                             : "unexpected reply");
      if (r) freeReplyObject(r);
      goto out;
    }
    snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
    redisReply *keys = r->element[1];
    for (size_t i = 0; i < keys->elements && !found; i++) {
      redisReply *k = keys->element[i];
      if (k->type != REDIS_REPLY_STRING) continue;
      int m = value_matches(c, k->str, k->len, o->contains);
      if (m < 0) {
        fprintf(stderr, "cache_bench: GET failed: %s\n", c->errstr);
        freeReplyObject(r);
        goto out;
      }
      if (m) {
        fwrite(k->str, 1, k->len, stdout);
        putchar('\n');
        found = 1;
      }
    }
    freeReplyObject(r);
  } while (!found && strcmp(cursor, "0") != 0);
  if (!found)
    fprintf(stderr, "cache_bench: no key matches %s%s%s\n", pattern,
            o->contains ? " with a value containing " : "", o->contains ? o->contains : "");
  rc = found ? 0 : 1;
out:
  redisFree(c);
  return rc;
}

static int set(const options *o, const char *key) {
  redisContext *c = open_or_complain(o->url);
  if (!c) return 1;
  char *v = malloc((size_t)o->size + 1);
  if (!v) {
    redisFree(c);
    return 1;
  }
  memset(v, 'x', (size_t)o->size);
  redisReply *r = redisCommand(c, "SET %s %b EX %ld", key, v, (size_t)o->size, o->ttl);
  int ok = r && r->type == REDIS_REPLY_STATUS;
  if (!ok)
    fprintf(stderr, "cache_bench: SET failed: %s\n",
            !r                             ? c->errstr
            : r->type == REDIS_REPLY_ERROR ? r->str
                                           : "unexpected reply");
  else
    printf("cache_bench: set %s to %ld bytes, ttl %lds\n", key, o->size, o->ttl);
  if (r) freeReplyObject(r);
  free(v);
  redisFree(c);
  return ok ? 0 : 1;
}

static const char usage[] =
    "usage: cache_bench --redis-url URL find PATTERN [--contains TEXT]\n"
    "       cache_bench --redis-url URL set KEY [--size N] [--ttl S]\n"
    "       cache_bench --redis-url URL run KEY [--threads T] [--duration S] [--warmup S]"
    " [--label L]\n";

int main(int argc, char **argv) {
  options o = {.threads = 4, .duration = 5, .warmup = 1, .size = 100, .ttl = 600};
  static const struct option longs[] = {{"redis-url", required_argument, 0, 'u'},
                                        {"threads", required_argument, 0, 't'},
                                        {"duration", required_argument, 0, 'd'},
                                        {"warmup", required_argument, 0, 'w'},
                                        {"label", required_argument, 0, 'l'},
                                        {"contains", required_argument, 0, 'c'},
                                        {"size", required_argument, 0, 's'},
                                        {"ttl", required_argument, 0, 'e'},
                                        {"help", no_argument, 0, 'h'},
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
      case 'c':
        o.contains = optarg;
        break;
      case 's':
        o.size = atol(optarg);
        break;
      case 'e':
        o.ttl = atol(optarg);
        break;
      case 'h':
        fputs(usage, stdout);
        return 0;
      default:
        fputs(usage, stderr);
        return 64;
    }
  }
  if (!o.url || optind + 2 != argc || o.threads < 1 || o.threads > MAX_THREADS || o.duration <= 0 ||
      o.warmup < 0 || o.size < 0 || o.size > (64L << 20) || o.ttl < 1) {
    fputs(usage, stderr);
    return 64;
  }
  const char *cmd = argv[optind], *arg = argv[optind + 1];
  if (strcmp(cmd, "find") == 0) return find(&o, arg);
  if (strcmp(cmd, "set") == 0) return set(&o, arg);
  if (strcmp(cmd, "run") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return run(&o, arg);
  }
  fprintf(stderr, "cache_bench: unknown command %s\n%s", cmd, usage);
  return 64;
}
