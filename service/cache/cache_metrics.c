/* cache_metrics: the in-process cache's (L1's) figures as Prometheus
 * metrics. L1 holds the Cache tier's values and the entity and entry
 * copies the record caches keep. */
#include "service/cache/cache_metrics.h"

#include "service/metrics/metrics.h"

void cache_metrics_collect(strbuf *out, void *arg) {
    const cache_metrics_src *src = arg;
    cache_l1_stats st;
    cache_l1_get_stats(src->l1, &st);
    metrics_family(out, "memoryd_cache_lookups_total", "counter",
                   "Keys looked up in this replica's in-process cache (l1) and in Redis (l2), by "
                   "result.");
    metrics_sample_u64(out, "memoryd_cache_lookups_total", "level=\"l1\",result=\"hit\"", st.hits);
    metrics_sample_u64(out, "memoryd_cache_lookups_total", "level=\"l1\",result=\"miss\"",
                       st.misses);
    if (src->l2) {
        uint64_t hits, misses;
        cache_l2_get_stats(src->l2, &hits, &misses);
        metrics_sample_u64(out, "memoryd_cache_lookups_total", "level=\"l2\",result=\"hit\"", hits);
        metrics_sample_u64(out, "memoryd_cache_lookups_total", "level=\"l2\",result=\"miss\"",
                           misses);
    }
    metrics_family(out, "memoryd_cache_l1_removals_total", "counter",
                   "Entries L1 dropped, by reason: evicted for a bound, expired, invalidated.");
    metrics_sample_u64(out, "memoryd_cache_l1_removals_total", "reason=\"evicted\"", st.evictions);
    metrics_sample_u64(out, "memoryd_cache_l1_removals_total", "reason=\"expired\"",
                       st.expirations);
    metrics_sample_u64(out, "memoryd_cache_l1_removals_total", "reason=\"invalidated\"",
                       st.invalidations);
    metrics_family(out, "memoryd_cache_l1_entries", "gauge", "Entries in L1 now.");
    metrics_sample_u64(out, "memoryd_cache_l1_entries", NULL, st.entries);
    metrics_family(out, "memoryd_cache_l1_bytes", "gauge", "Bytes of the values in L1 now.");
    metrics_sample_u64(out, "memoryd_cache_l1_bytes", NULL, st.bytes);
}
