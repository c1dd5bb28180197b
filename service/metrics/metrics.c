/* metrics: the collector registry and the text exposition format. */
#include "service/metrics/metrics.h"

#include <pthread.h>
#include <stdlib.h>

#include "service/metrics/metrics_internal.h"

const double metrics_latency_bounds[METRICS_LATENCY_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   10.0};

#define MAX_COLLECTORS 64

static struct {
    metrics_collect_fn fn;
    void *arg;
} collectors[MAX_COLLECTORS];
static size_t ncollectors;
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;

void metrics_observe_us(metrics_histogram *h, uint64_t us) {
    double s = (double)us / 1e6;
    size_t i = 0;
    while (i < METRICS_LATENCY_BUCKETS && s > metrics_latency_bounds[i]) i++;
    metrics_inc(&h->bucket[i]);
    metrics_add(&h->sum_us, us);
}

int metrics_add_collector(metrics_collect_fn fn, void *arg) {
    pthread_mutex_lock(&registry_mu);
    int rc = -1;
    if (ncollectors < MAX_COLLECTORS) {
        collectors[ncollectors].fn = fn;
        collectors[ncollectors].arg = arg;
        ncollectors++;
        rc = 0;
    }
    pthread_mutex_unlock(&registry_mu);
    return rc;
}

void metrics_reset_collectors(void) {
    pthread_mutex_lock(&registry_mu);
    ncollectors = 0;
    pthread_mutex_unlock(&registry_mu);
    backend_metrics_reset();
}

char *metrics_render(size_t *len) {
    strbuf out = {0};
    pthread_mutex_lock(&registry_mu);
    for (size_t i = 0; i < ncollectors; i++) collectors[i].fn(&out, collectors[i].arg);
    pthread_mutex_unlock(&registry_mu);
    return strbuf_take(&out, len);
}

void metrics_family(strbuf *out, const char *name, const char *type, const char *help) {
    strbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_name(strbuf *out, const char *name, const char *labels) {
    strbuf_puts(out, name);
    if (labels && *labels) strbuf_printf(out, "{%s}", labels);
}

void metrics_sample_u64(strbuf *out, const char *name, const char *labels, uint64_t v) {
    sample_name(out, name, labels);
    strbuf_printf(out, " %llu\n", (unsigned long long)v);
}

void metrics_sample_i64(strbuf *out, const char *name, const char *labels, int64_t v) {
    sample_name(out, name, labels);
    strbuf_printf(out, " %lld\n", (long long)v);
}

void metrics_sample_f64(strbuf *out, const char *name, const char *labels, double v) {
    sample_name(out, name, labels);
    strbuf_printf(out, " %.17g\n", v);
}

void metrics_samples_by_label(strbuf *out, const char *name, const char *key,
                              const char *const *values, const metrics_counter *counters,
                              size_t n) {
    for (size_t i = 0; i < n; i++)
        strbuf_printf(out, "%s{%s=\"%s\"} %llu\n", name, key, values[i],
                      (unsigned long long)metrics_get(&counters[i]));
}

void metrics_sample_histogram(strbuf *out, const char *name, const char *labels,
                              const metrics_histogram *h) {
    const char *sep = labels && *labels ? "," : "";
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= METRICS_LATENCY_BUCKETS; i++) {
        cumulative += metrics_get(&h->bucket[i]);
        strbuf_printf(out, "%s_bucket{%s%sle=\"", name, labels ? labels : "", sep);
        if (i < METRICS_LATENCY_BUCKETS) strbuf_printf(out, "%g", metrics_latency_bounds[i]);
        else strbuf_puts(out, "+Inf");
        strbuf_printf(out, "\"} %llu\n", (unsigned long long)cumulative);
    }
    sample_name(out, name, NULL);
    strbuf_puts(out, "_sum");
    if (labels && *labels) strbuf_printf(out, "{%s}", labels);
    strbuf_printf(out, " %.6f\n", (double)metrics_get(&h->sum_us) / 1e6);
    strbuf_printf(out, "%s_count", name);
    if (labels && *labels) strbuf_printf(out, "{%s}", labels);
    strbuf_printf(out, " %llu\n", (unsigned long long)cumulative);
}

void metrics_label_value(strbuf *out, const char *s) {
    for (; *s; s++) {
        if (*s == '\\') strbuf_puts(out, "\\\\");
        else if (*s == '"') strbuf_puts(out, "\\\"");
        else if (*s == '\n') strbuf_puts(out, "\\n");
        else strbuf_put(out, s, 1);
    }
}
