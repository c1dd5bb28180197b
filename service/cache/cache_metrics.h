/* cache_metrics: a metrics collector (metrics_add_collector) for the
 * cache's two levels: memoryd_cache_lookups_total{level,result},
 * memoryd_cache_l1_removals_total{reason}, memoryd_cache_l1_entries,
 * memoryd_cache_l1_bytes. */
#ifndef MEMORYD_CACHE_CACHE_METRICS_H
#define MEMORYD_CACHE_CACHE_METRICS_H

#include "service/cache/cache_l1.h"
#include "service/cache/cache_l2.h"
#include "service/core/strbuf.h"

/* What the collector reports; both borrowed, l2 NULL without Redis. */
typedef struct cache_metrics_src {
    cache_l1 *l1;
    const cache_l2 *l2;
} cache_metrics_src;

/* src: a cache_metrics_src that outlives the registration. */
void cache_metrics_collect(strbuf *out, void *src);

#endif
