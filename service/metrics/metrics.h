/* metrics: the process's Prometheus metrics, in the text exposition format
 * (version 0.0.4).
 *
 * Recording is each module's business and costs a relaxed atomic add: a
 * module keeps its counters (metrics_counter, metrics_histogram) in its
 * own state and registers a collector, which writes them out when
 * /metrics is scraped. Nothing on the hot path takes a lock or allocates.
 * Label values are fixed sets (methods, status codes, backends, levels):
 * never a tenant, key or other unbounded value.
 *
 * Collectors are registered at start-up, before metrics_render can run;
 * the registry is process-wide. */
#ifndef MEMORYD_METRICS_METRICS_H
#define MEMORYD_METRICS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/strbuf.h"

/* The counters use the GCC/Clang __atomic builtins, relaxed: the same
 * header serves C and the C++ tests (C++17 has no <stdatomic.h>). */

/* A monotonically increasing count. Zeroed = 0. */
typedef struct metrics_counter {
    uint64_t v;
} metrics_counter;

static inline void metrics_add(metrics_counter *c, uint64_t n) {
    __atomic_fetch_add(&c->v, n, __ATOMIC_RELAXED);
}
static inline void metrics_inc(metrics_counter *c) { metrics_add(c, 1); }
static inline uint64_t metrics_get(const metrics_counter *c) {
    return __atomic_load_n(&c->v, __ATOMIC_RELAXED);
}

/* Latency buckets in seconds shared by every duration histogram: 100 us to
 * 10 s. */
#define METRICS_LATENCY_BUCKETS 15
extern const double metrics_latency_bounds[METRICS_LATENCY_BUCKETS];

/* A duration histogram over metrics_latency_bounds (cumulative buckets
 * are computed when rendered; each observation bumps one bucket). */
typedef struct metrics_histogram {
    metrics_counter bucket[METRICS_LATENCY_BUCKETS + 1]; /* last: above every bound */
    metrics_counter sum_us;                              /* sum of observations, microseconds */
} metrics_histogram;

/* Records one duration. */
void metrics_observe_us(metrics_histogram *h, uint64_t us);

/* A collector appends its families to out. */
typedef void (*metrics_collect_fn)(strbuf *out, void *arg);

/* Registers a collector (at start-up, before any scrape). Returns 0, or -1
 * when the registry is full. */
int metrics_add_collector(metrics_collect_fn fn, void *arg);
/* Forgets every collector (tests, shutdown). */
void metrics_reset_collectors(void);

/* The whole exposition: every collector in registration order. Returns
 * the text (malloc'd; free()) and its length in *len, or NULL when out of
 * memory. */
char *metrics_render(size_t *len);

/* Exposition helpers for collectors. name is the full metric name
 * ("memoryd_calls_total"); labels are written as given, already formatted
 * without braces ("method=\"/a/B\",code=\"OK\""), or NULL/"" for none. */
void metrics_family(strbuf *out, const char *name, const char *type, const char *help);
void metrics_sample_u64(strbuf *out, const char *name, const char *labels, uint64_t v);
void metrics_sample_i64(strbuf *out, const char *name, const char *labels, int64_t v);
void metrics_sample_f64(strbuf *out, const char *name, const char *labels, double v);
/* One sample of name per counter, labelled key="values[i]" (counters and
 * values have n entries; values are fixed strings, written as they are). */
void metrics_samples_by_label(strbuf *out, const char *name, const char *key,
                              const char *const *values, const metrics_counter *counters, size_t n);
/* A histogram's _bucket, _sum and _count samples (name without suffix). */
void metrics_sample_histogram(strbuf *out, const char *name, const char *labels,
                              const metrics_histogram *h);

/* Writes s as a label value, escaped as the format wants (\\, \", \n). */
void metrics_label_value(strbuf *out, const char *s);

#endif
