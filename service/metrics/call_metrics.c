/* call_metrics: see call_metrics.h. */
#include "service/metrics/call_metrics.h"

#include <grpc/status.h>
#include <stdlib.h>

#include "service/core/clock.h"
#include "service/metrics/metrics.h"

#define NCODES 17 /* OK .. UNAUTHENTICATED */

struct call_metrics {
    rpc_server *srv;
    size_t nrows;                 /* registered methods + "other" */
    metrics_counter *calls;       /* [nrows][NCODES] */
    metrics_histogram *durations; /* [nrows] */
};

static void observe(rpc_call *call, grpc_status_code status, const char *message, void *arg) {
    (void)message;
    call_metrics *m = arg;
    int idx = rpc_call_method_index(call);
    size_t row = idx < 0 ? m->nrows - 1 : (size_t)idx;
    size_t code = status >= 0 && status < NCODES ? (size_t)status : GRPC_STATUS_UNKNOWN;
    metrics_inc(&m->calls[row * NCODES + code]);
    int64_t us = clock_mono_us() - rpc_call_start_us(call);
    metrics_observe_us(&m->durations[row], us > 0 ? (uint64_t)us : 0);
}

static const char *row_name(const call_metrics *m, size_t row) {
    return row + 1 == m->nrows ? "other" : rpc_server_method_path(m->srv, row);
}

static void method_label(strbuf *labels, const call_metrics *m, size_t row) {
    labels->len = 0;
    strbuf_puts(labels, "method=\"");
    metrics_label_value(labels, row_name(m, row));
    strbuf_puts(labels, "\"");
}

static void collect(strbuf *out, void *arg) {
    call_metrics *m = arg;
    strbuf labels = {0};
    metrics_family(out, "memoryd_calls_total", "counter",
                   "gRPC calls finished, by method and status code.");
    for (size_t row = 0; row < m->nrows; row++)
        for (size_t code = 0; code < NCODES; code++) {
            uint64_t n = metrics_get(&m->calls[row * NCODES + code]);
            if (n == 0) continue; /* a series appears with its first call */
            method_label(&labels, m, row);
            strbuf_printf(&labels, ",code=\"%s\"", rpc_status_name((grpc_status_code)code));
            metrics_sample_u64(out, "memoryd_calls_total", labels.p, n);
        }
    metrics_family(out, "memoryd_call_duration_seconds", "histogram",
                   "Time from a call's arrival to its final status, by method.");
    for (size_t row = 0; row < m->nrows; row++) {
        const metrics_histogram *h = &m->durations[row];
        uint64_t n = 0;
        for (size_t b = 0; b <= METRICS_LATENCY_BUCKETS; b++) n += metrics_get(&h->bucket[b]);
        if (n == 0) continue;
        method_label(&labels, m, row);
        metrics_sample_histogram(out, "memoryd_call_duration_seconds", labels.p, h);
    }
    strbuf_free(&labels);
    rpc_server_stats st;
    rpc_server_get_stats(m->srv, &st);
    metrics_family(out, "memoryd_calls_in_flight", "gauge", "gRPC calls being handled now.");
    metrics_sample_i64(out, "memoryd_calls_in_flight", NULL, st.calls_in_flight);
    metrics_family(out, "memoryd_streams_open", "gauge",
                   "Server streams being served now (Watch, Subscribe, QueryStream, Export).");
    metrics_sample_i64(out, "memoryd_streams_open", NULL, st.streams_open);
}

int call_metrics_create(rpc_server *srv, call_metrics **out) {
    call_metrics *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->srv = srv;
    m->nrows = rpc_server_method_count(srv) + 1;
    m->calls = calloc(m->nrows * NCODES, sizeof *m->calls);
    m->durations = calloc(m->nrows, sizeof *m->durations);
    if (!m->calls || !m->durations || rpc_server_add_observer(srv, observe, m) != 0 ||
        metrics_add_collector(collect, m) != 0) {
        call_metrics_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

void call_metrics_free(call_metrics *m) {
    if (!m) return;
    free(m->calls);
    free(m->durations);
    free(m);
}
