/* backend_metrics: one collector renders every registered backend client,
 * so each family's samples stay together as the exposition format wants. */
#include "service/metrics/backend_metrics.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "service/metrics/metrics_internal.h"

#define MAX_CLIENTS 16

typedef struct {
    const char *backend, *pool;
    const backend_stats *st;
    int measures;
    backend_gauges_fn gauges;
    void *client;
} client;

static client clients[MAX_CLIENTS];
static size_t nclients;
static pthread_mutex_t clients_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *const outcome_names[BACKEND_OUTCOMES] = {
    [BACKEND_OK] = "ok",           [BACKEND_REFUSED] = "refused",
    [BACKEND_TIMEOUT] = "timeout", [BACKEND_UNAVAILABLE] = "unavailable",
    [BACKEND_BUSY] = "busy",       [BACKEND_CANCELLED] = "cancelled",
    [BACKEND_ERROR] = "error",
};

static void labels(char *buf, size_t n, const client *c) {
    snprintf(buf, n, "backend=\"%s\",pool=\"%s\"", c->backend, c->pool);
}

static void collect(strbuf *out, void *arg) {
    (void)arg;
    pthread_mutex_lock(&clients_mu);
    backend_gauges g[MAX_CLIENTS];
    for (size_t i = 0; i < nclients; i++) {
        g[i] = (backend_gauges){-1, -1, -1, -1};
        if (clients[i].gauges) clients[i].gauges(clients[i].client, &g[i]);
    }
    char l[128], lo[160];
    metrics_family(out, "memoryd_backend_requests_total", "counter",
                   "Requests to a backend by outcome: ok; refused (the backend said no to the "
                   "request); timeout; unavailable; busy (a bounded queue was full); cancelled; "
                   "error.");
    for (size_t i = 0; i < nclients; i++) {
        labels(l, sizeof l, &clients[i]);
        for (int o = 0; o < BACKEND_OUTCOMES; o++) {
            snprintf(lo, sizeof lo, "%s,outcome=\"%s\"", l, outcome_names[o]);
            metrics_sample_u64(out, "memoryd_backend_requests_total", lo,
                               metrics_get(&clients[i].st->outcome[o]));
        }
    }
    static const struct {
        int flag;
        const char *name, *help;
    } hists[] = {
        {BACKEND_HAS_WAIT, "memoryd_backend_wait_seconds",
         "Time a request waited for a free connection."},
        {BACKEND_HAS_DURATION, "memoryd_backend_request_duration_seconds",
         "Time from a request's submission to its answer, waiting included."},
    };
    for (size_t h = 0; h < sizeof hists / sizeof hists[0]; h++) {
        int family = 0;
        for (size_t i = 0; i < nclients; i++) {
            if (!(clients[i].measures & hists[h].flag)) continue;
            if (!family++) metrics_family(out, hists[h].name, "histogram", hists[h].help);
            labels(l, sizeof l, &clients[i]);
            metrics_sample_histogram(out, hists[h].name, l,
                                     h == 0 ? &clients[i].st->wait : &clients[i].st->duration);
        }
    }
    static const struct {
        size_t off;
        const char *name, *help;
    } gauges[] = {
        {offsetof(backend_gauges, size), "memoryd_backend_pool_size",
         "Connections the pool may open."},
        {offsetof(backend_gauges, open), "memoryd_backend_pool_open", "Connections open now."},
        {offsetof(backend_gauges, in_use), "memoryd_backend_pool_in_use",
         "Connections running a request now."},
        {offsetof(backend_gauges, waiting), "memoryd_backend_pool_waiting",
         "Requests waiting for a connection now."},
    };
    for (size_t k = 0; k < sizeof gauges / sizeof gauges[0]; k++) {
        int family = 0;
        for (size_t i = 0; i < nclients; i++) {
            int64_t v = *(const int64_t *)((const char *)&g[i] + gauges[k].off);
            if (v < 0) continue;
            if (!family++) metrics_family(out, gauges[k].name, "gauge", gauges[k].help);
            labels(l, sizeof l, &clients[i]);
            metrics_sample_i64(out, gauges[k].name, l, v);
        }
    }
    pthread_mutex_unlock(&clients_mu);
}

int backend_metrics_add(const char *backend, const char *pool, const backend_stats *st,
                        int measures, backend_gauges_fn gauges, void *cl) {
    /* The collector is registered outside clients_mu: a scrape takes the
     * registry's lock, then clients_mu. */
    pthread_mutex_lock(&clients_mu);
    int full = nclients == MAX_CLIENTS, first = nclients == 0;
    if (!full) clients[nclients++] = (client){backend, pool, st, measures, gauges, cl};
    pthread_mutex_unlock(&clients_mu);
    if (full) return -1;
    return first ? metrics_add_collector(collect, NULL) : 0;
}

void backend_metrics_reset(void) {
    pthread_mutex_lock(&clients_mu);
    nclients = 0;
    pthread_mutex_unlock(&clients_mu);
}
