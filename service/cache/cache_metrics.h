/* cache_metrics: a metrics collector (metrics_add_collector) for an L1:
 * memoryd_cache_lookups_total{level="l1",result}, memoryd_cache_l1_removals_total{reason},
 * memoryd_cache_l1_entries, memoryd_cache_l1_bytes. */
#ifndef MEMORYD_CACHE_CACHE_METRICS_H
#define MEMORYD_CACHE_CACHE_METRICS_H

#include "service/cache/cache_l1.h"
#include "service/core/strbuf.h"

/* l1: the cache_l1 to report. */
void cache_metrics_collect(strbuf *out, void *l1);

#endif
