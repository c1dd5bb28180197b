/* lexical_bench: what ranked text recall costs in memoryd's process, beside
 * what the exact vector search costs at the same size (the search a text
 * query makes when an embedder turns it into a vector), measured in the
 * same run (bench/recall.sh drives it; bench/README.md).
 *
 * The corpus is synthetic and fixed by a seed: N texts of 10 to 40 words
 * drawn from a 30000-word vocabulary with Zipf's law (s = 1.07, as word
 * frequencies in English run), like the turns of a conversation; queries
 * are 8 words, half of them from one text (so each has a true answer) and
 * half drawn from the vocabulary. The vectors are N unit vectors of 384
 * dims (a common embedding size), random.
 *
 *   lexical_bench [--docs N,N...] [--queries Q] [--rounds R] [--k K]
 *
 * For each N: building the index (analysis + put per text; episodic_index_put per
 * vector), bytes per point (episodic_index_bytes), and R rounds of Q searches per
 * side, one thread, the sides' order turning every round: lexical (each
 * candidate through the read diode's owner test, as memoryd runs it),
 * vector, and lexical with the scores computed over the visible points
 * only (what a caller who does not see everything gets: one pass over
 * the slots' interned owner and label keys); p50 and p99 per side (medians
 * over rounds), and the ratios at p50. Prints a human line and a JSON
 * line per figure. Never fails on a figure: exit 1 only on bad usage or
 * out of memory. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/episodic/episodic_index.h"
#include "service/lexical/lex_text.h"

#define VOCAB 30000
#define DIMS 384
#define QUERY_WORDS 8

static uint64_t rng = 42;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static double uniform(void) { return (double)(next_rand() >> 11) / (double)(1ull << 53); }

static double zipf_cdf[VOCAB];
static void zipf_init(void) {
  double sum = 0;
  for (int i = 0; i < VOCAB; i++) sum += 1.0 / pow(i + 1, 1.07);
  double acc = 0;
  for (int i = 0; i < VOCAB; i++) zipf_cdf[i] = (acc += 1.0 / pow(i + 1, 1.07) / sum);
}
static int zipf_word(void) {
  double u = uniform();
  int lo = 0, hi = VOCAB - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (zipf_cdf[mid] < u)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Word i as letters (a pseudo-word; the stemmer leaves most alone). */
static void word_text(int i, char *out) {
  int n = 0;
  out[n++] = 'q';
  for (int v = i + 1; v; v /= 21) out[n++] = "bcdfghjklmnpqrstvwxyz"[v % 21], out[n++] = 'a';
  out[n] = '\0';
}

/* A text of words: from[0..nfrom) first, then Zipf draws; the word ids go
 * to ids (NULL: not kept). */
static char *make_text(int words, const int *from, int nfrom, int *ids) {
  char *t = malloc((size_t)words * 16 + 1), w[16];
  size_t len = 0;
  for (int i = 0; i < words; i++) {
    int id = from && i < nfrom ? from[i] : zipf_word();
    if (ids) ids[i] = id;
    word_text(id, w);
    len += (size_t)sprintf(t + len, "%s%s", i ? " " : "", w);
  }
  return t;
}

/* The read diode's shape for a caller who sees only its own points: the
 * owner compared, as tier_may_read does (every point is the bench's). */
static int own_point(const episodic_index *x, size_t slot, void *arg) {
  return strcmp(episodic_index_meta(x, slot)->owner, (const char *)arg) == 0;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[(int)(p * (n - 1))];
}

static void report(const char *label, int docs, const char *what, double value) {
  printf("%-28s docs=%-7d %-16s %.1f\n", label, docs, what, value);
  printf("{\"label\":\"%s\",\"docs\":%d,\"figure\":\"%s\",\"value\":%.3f}\n", label, docs, what,
         value);
}

static int run(int ndocs, int nq, int rounds, int k) {
  tier_meta meta = {.owner = "bench", .label = 1, .version = 1};
  lex_analyzer *an = lex_analyzer_create("english");
  lex_terms t = {0};
  episodic_index *lx = episodic_index_create(0, VS_DOT), *vx = episodic_index_create(DIMS, VS_DOT);
  float *vec = malloc(DIMS * sizeof *vec);
  char **texts = malloc((size_t)ndocs * sizeof *texts);
  int *words = malloc((size_t)ndocs * 40 * sizeof *words); /* each text's word ids */
  if (!an || !lx || !vx || !vec || !texts || !words) return 1;
  for (int i = 0; i < ndocs; i++)
    texts[i] = make_text(10 + (int)(next_rand() % 31), NULL, 0, words + (size_t)i * 40);

  double t0 = now_us();
  for (int i = 0; i < ndocs; i++) {
    vs_id id = {.num = (uint64_t)i};
    if (lex_analyze(an, texts[i], strlen(texts[i]), &t) != 0 ||
        episodic_index_put(lx, &id, NULL, texts[i], &t, NULL, &meta) != 0)
      return 1;
  }
  double lex_build = now_us() - t0;
  t0 = now_us();
  for (int i = 0; i < ndocs; i++) {
    vs_id id = {.num = (uint64_t)i};
    for (int d = 0; d < DIMS; d++) vec[d] = (float)(uniform() - 0.5);
    episodic_index_normalize(vec, DIMS);
    if (episodic_index_put(vx, &id, vec, NULL, NULL, NULL, &meta) != 0) return 1;
  }
  double vec_build = now_us() - t0;
  report("lexical build", ndocs, "texts_per_s", ndocs / (lex_build / 1e6));
  report("vector build (384 dims)", ndocs, "vectors_per_s", ndocs / (vec_build / 1e6));
  report("lexical bytes", ndocs, "bytes_per_point",
         (double)episodic_index_bytes(lx) / ndocs); /* texts + terms + postings */
  report("vector bytes", ndocs, "bytes_per_point", (double)episodic_index_bytes(vx) / ndocs);

  /* Queries: half the words of one text, half from the vocabulary. */
  char **qs = malloc((size_t)nq * sizeof *qs);
  float *qv = malloc((size_t)nq * DIMS * sizeof *qv);
  for (int q = 0; q < nq; q++) {
    int from[QUERY_WORDS / 2];
    const int *src = words + (next_rand() % (uint64_t)ndocs) * 40;
    for (int j = 0; j < QUERY_WORDS / 2; j++) from[j] = src[j * 2]; /* every other word */
    qs[q] = make_text(QUERY_WORDS, from, QUERY_WORDS / 2, NULL);
    for (int d = 0; d < DIMS; d++) qv[(size_t)q * DIMS + d] = (float)(uniform() - 0.5);
    episodic_index_normalize(qv + (size_t)q * DIMS, DIMS);
  }
  episodic_index_hit *hits = malloc((size_t)k * sizeof *hits);
  double *lat = malloc((size_t)nq * sizeof *lat);
  double *l50 = malloc((size_t)rounds * sizeof *l50), *l99 = malloc((size_t)rounds * sizeof *l99);
  double *v50 = malloc((size_t)rounds * sizeof *v50), *v99 = malloc((size_t)rounds * sizeof *v99);
  double *o50 = malloc((size_t)rounds * sizeof *o50), *o99 = malloc((size_t)rounds * sizeof *o99);
  long found = 0;
  const episodic_index_reader reader = {"bench", 1}; /* the owner's points, PUBLIC */
  for (int r = 0; r < rounds; r++) {
    for (int side = 0; side < 3; side++) {
      /* lexical, vector, lexical scored over the caller's own points; who
       * goes first turns every round */
      int which = (r + side) % 3, lexical = which != 1;
      for (int q = 0; q < nq; q++) {
        double s = now_us();
        long n;
        if (lexical) {
          lex_analyze(an, qs[q], strlen(qs[q]), &t);
          /* both filter by the diode's owner test; the third side also
           * scores over the visible points only */
          n = episodic_index_search_text(lx, &t, (size_t)k, 0, 0, own_point,
                                         which == 2 ? &reader : NULL, (void *)"bench", hits);
          found += n > 0;
        } else {
          n = episodic_index_search(vx, qv + (size_t)q * DIMS, (size_t)k, 0, 0, NULL, NULL, hits);
        }
        lat[q] = now_us() - s;
        if (n < 0) return 1;
      }
      double p50 = pct(lat, nq, 0.5), p99 = pct(lat, nq, 0.99);
      if (which == 0) {
        l50[r] = p50, l99[r] = p99;
      } else if (which == 1) {
        v50[r] = p50, v99[r] = p99;
      } else {
        o50[r] = p50, o99[r] = p99;
      }
    }
  }
  double lp50 = pct(l50, rounds, 0.5), vp50 = pct(v50, rounds, 0.5), op50 = pct(o50, rounds, 0.5);
  report("lexical search (k=10)", ndocs, "p50_us", lp50);
  report("lexical search (k=10)", ndocs, "p99_us", pct(l99, rounds, 0.5));
  report("lexical, own points (k=10)", ndocs, "p50_us", op50);
  report("lexical, own points (k=10)", ndocs, "p99_us", pct(o99, rounds, 0.5));
  report("vector search (384 dims)", ndocs, "p50_us", vp50);
  report("vector search (384 dims)", ndocs, "p99_us", pct(v99, rounds, 0.5));
  report("lexical / vector", ndocs, "p50_ratio", lp50 / vp50);
  report("own points / lexical", ndocs, "p50_ratio", op50 / lp50);
  report("queries with a hit", ndocs, "fraction", (double)found / (2.0 * nq * rounds));
  for (int i = 0; i < ndocs; i++) free(texts[i]);
  for (int q = 0; q < nq; q++) free(qs[q]);
  free(texts), free(words), free(qs), free(qv), free(vec), free(hits), free(lat);
  free(l50), free(l99), free(v50), free(v99), free(o50), free(o99);
  episodic_index_free(lx), episodic_index_free(vx);
  lex_terms_free(&t);
  lex_analyzer_free(an);
  return 0;
}

int main(int argc, char **argv) {
  const char *docs = "10000,100000";
  int nq = 500, rounds = 5, k = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--docs") == 0)
      docs = argv[i + 1];
    else if (strcmp(argv[i], "--queries") == 0)
      nq = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--rounds") == 0)
      rounds = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--k") == 0)
      k = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: lexical_bench [--docs N,N] [--queries Q] [--rounds R] [--k K]\n");
      return 1;
    }
  }
  if (nq < 1 || rounds < 1 || k < 1 || k > 1000) return 1;
  zipf_init();
  for (const char *p = docs; *p;) {
    int n = atoi(p);
    if (n < 1 || run(n, nq, rounds, k) != 0) return 1;
    p += strcspn(p, ",");
    if (*p) p++;
  }
  return 0;
}
