/* tier_meta: the server-kept metadata every stored record carries
 * (common.proto RecordMeta): tenant, owner, label, version, times and the
 * PII kinds it holds. Stores fill it from their rows; tier_meta_render is
 * the one place it becomes a memory.v1.RecordMeta. */
#ifndef MEMORYD_TIER_TIER_META_H
#define MEMORYD_TIER_TIER_META_H

#include <stddef.h>
#include <stdint.h>

#include "memory/v1/common.pb-c.h"
#include "service/core/arena.h"

typedef struct tier_meta {
    const char *tenant;
    const char *owner; /* principal that wrote the record */
    int label;         /* memory.v1.Label, 1..4 */
    int64_t version;   /* 1 on create, +1 on every change; 0 = not versioned */
    int64_t create_us; /* Unix microseconds */
    int64_t update_us;
    int has_expire; /* records that expire (entries, cache) */
    int64_t expire_us;
    const char **pii_kinds; /* what the record holds, when written with pii:write */
    size_t npii;
} tier_meta;

/* A time range [start, end) with either end open (common.proto TimeRange,
 * as tier_check_time_range reads it). */
typedef struct tier_time_range {
    int has_start, has_end;
    int64_t start_us, end_us;
} tier_time_range;

/* Whether us falls in r (NULL: no range, every time does). */
static inline int tier_time_in(const tier_time_range *r, int64_t us) {
    return !r || ((!r->has_start || us >= r->start_us) && (!r->has_end || us < r->end_us));
}

/* m as a RecordMeta in arena a (strings and the kinds array are borrowed,
 * not copied: they must live as long as the response). NULL when out of
 * memory. */
Memory__V1__RecordMeta *tier_meta_render(arena *a, const tier_meta *m);

#endif
