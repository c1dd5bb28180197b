/* tier_quota: limits, refusals and metrics; the accounting itself is the
 * scripts' (tier_quota.h). */
#include "service/tier/tier_quota.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "service/core/clock.h"
#include "service/metrics/metrics.h"

/* The peak of use against a limit is kept per minute: a scrape reports
 * the higher of this minute's and the last one's, so a peak stays visible
 * for one to two minutes whatever the scrape interval. */
#define PEAK_WINDOW_MS 60000

typedef struct peak {
    uint64_t window[2]; /* the minute each slot holds (atomics) */
    uint64_t ppm[2];    /* its highest use, parts per million of the limit */
} peak;

struct tier_quota {
    tier_quota_def def;
    metrics_counter refusals[TIER_QUOTA_N];
    peak peaks[TIER_QUOTA_N];
};

static const char *const quota_names[TIER_QUOTA_N] = {"count_per_tenant", "count_per_principal",
                                                      "bytes_per_tenant", "bytes_per_principal"};

/* Every tier's quotas, for the one collector (families must not repeat). */
#define MAX_QUOTAS 8
static tier_quota *all[MAX_QUOTAS];
static int nall;
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t peak_now(const peak *p, uint64_t minute) {
    uint64_t best = 0;
    for (int i = 0; i < 2; i++) {
        uint64_t w = __atomic_load_n(&p->window[i], __ATOMIC_RELAXED);
        uint64_t v = __atomic_load_n(&p->ppm[i], __ATOMIC_RELAXED);
        if ((w == minute || w + 1 == minute) && v > best) best = v;
    }
    return best;
}

static void peak_observe(peak *p, uint64_t minute, uint64_t ppm) {
    int slot = (int)(minute & 1);
    if (__atomic_exchange_n(&p->window[slot], minute, __ATOMIC_RELAXED) != minute)
        __atomic_store_n(&p->ppm[slot], 0, __ATOMIC_RELAXED); /* a new minute (a race loses a
                                                                 sample at most) */
    uint64_t cur = __atomic_load_n(&p->ppm[slot], __ATOMIC_RELAXED);
    while (ppm > cur && !__atomic_compare_exchange_n(&p->ppm[slot], &cur, ppm, 1, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED)) {}
}

static void sample(strbuf *out, const char *name, const tier_quota *q, int i, int is_float,
                   double v) {
    strbuf_printf(out, "%s{tier=\"%s\",quota=\"%s\"} ", name, q->def.tier, quota_names[i]);
    if (is_float) strbuf_printf(out, "%.6f\n", v);
    else strbuf_printf(out, "%.0f\n", v);
}

static void collect(strbuf *out, void *arg) {
    (void)arg;
    uint64_t minute = (uint64_t)(clock_wall_us() / 1000 / PEAK_WINDOW_MS);
    pthread_mutex_lock(&all_mu);
    metrics_family(out, "memoryd_quota_limit", "gauge",
                   "each tier's quota per tenant and per principal, objects or bytes (0: none)");
    for (int k = 0; k < nall; k++)
        for (int i = 0; i < TIER_QUOTA_N; i++)
            sample(out, "memoryd_quota_limit", all[k], i, 0, (double)all[k]->def.limit[i]);
    metrics_family(out, "memoryd_quota_refusals_total", "counter",
                   "changes refused RESOURCE_EXHAUSTED because they would pass the quota");
    for (int k = 0; k < nall; k++)
        for (int i = 0; i < TIER_QUOTA_N; i++)
            sample(out, "memoryd_quota_refusals_total", all[k], i, 0,
                   (double)metrics_get(&all[k]->refusals[i]));
    metrics_family(out, "memoryd_quota_use_peak_ratio", "gauge",
                   "the highest use against the quota (1: at it) of a tenant or principal after "
                   "a change this replica made in the last one to two minutes");
    for (int k = 0; k < nall; k++)
        for (int i = 0; i < TIER_QUOTA_N; i++)
            if (all[k]->def.limit[i] > 0)
                sample(out, "memoryd_quota_use_peak_ratio", all[k], i, 1,
                       (double)peak_now(&all[k]->peaks[i], minute) / 1e6);
    pthread_mutex_unlock(&all_mu);
}

tier_quota *tier_quota_create(const tier_quota_def *def) {
    tier_quota *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->def = *def;
    pthread_mutex_lock(&all_mu);
    int first = nall == 0, listed = nall < MAX_QUOTAS;
    if (listed) all[nall++] = q;
    pthread_mutex_unlock(&all_mu);
    /* Outside all_mu: a scrape holds the registry's lock, then all_mu. */
    if (first && listed && metrics_add_collector(collect, NULL) != 0) {
        tier_quota_free(q);
        return NULL;
    }
    return q;
}

void tier_quota_free(tier_quota *q) {
    if (!q) return;
    pthread_mutex_lock(&all_mu);
    for (int k = 0; k < nall; k++)
        if (all[k] == q) {
            all[k] = all[--nall];
            break;
        }
    pthread_mutex_unlock(&all_mu);
    free(q);
}

int64_t tier_quota_limit(const tier_quota *q, tier_quota_id id) { return q->def.limit[id]; }

void tier_quota_refused(tier_quota *q, int which, int64_t use, int64_t would, char *err,
                        size_t errlen) {
    if (which < 0 || which >= TIER_QUOTA_N) which = TIER_QUOTA_BYTES_PRINCIPAL;
    metrics_inc(&q->refusals[which]);
    const tier_quota_def *d = &q->def;
    const char *whose =
        which == TIER_QUOTA_COUNT_TENANT || which == TIER_QUOTA_BYTES_TENANT ? "the tenant" : "you";
    if (which == TIER_QUOTA_COUNT_TENANT || which == TIER_QUOTA_COUNT_PRINCIPAL)
        snprintf(err, errlen, "quota: %s hold%s %lld %s; at most %lld %s (%s); %s", whose,
                 which == TIER_QUOTA_COUNT_TENANT ? "s" : "", (long long)use, d->objects,
                 (long long)d->limit[which],
                 which == TIER_QUOTA_COUNT_TENANT ? "per tenant" : "per principal", d->flag[which],
                 d->freed_by);
    else
        snprintf(err, errlen,
                 "quota: this change would bring the bytes %s hold%s in %s to %lld, over the "
                 "%lld allowed (%s); %s",
                 whose, which == TIER_QUOTA_BYTES_TENANT ? "s" : "", d->objects, (long long)would,
                 (long long)d->limit[which], d->flag[which], d->freed_by);
}

void tier_quota_observe(tier_quota *q, const int64_t use[TIER_QUOTA_N]) {
    uint64_t minute = (uint64_t)(clock_wall_us() / 1000 / PEAK_WINDOW_MS);
    for (int i = 0; i < TIER_QUOTA_N; i++) {
        int64_t lim = q->def.limit[i];
        if (lim <= 0 || use[i] <= 0) continue;
        double r = (double)use[i] / (double)lim;
        peak_observe(&q->peaks[i], minute, (uint64_t)(r * 1e6));
    }
}
