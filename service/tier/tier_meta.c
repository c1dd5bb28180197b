/* tier_meta: RecordMeta rendering; see tier_meta.h. */
#include "service/tier/tier_meta.h"

#include "service/pb/pbtime.h"

Memory__V1__RecordMeta *tier_meta_render(arena *a, const tier_meta *r) {
    Memory__V1__RecordMeta *m = arena_message(a, &memory__v1__record_meta__descriptor);
    if (!m) return NULL;
    m->tenant = (char *)r->tenant;
    m->owner = (char *)r->owner;
    m->label = (Memory__V1__Label)r->label;
    m->version = r->version;
    m->create_time = pbtime_timestamp(a, r->create_us);
    m->update_time = pbtime_timestamp(a, r->update_us);
    if (!m->create_time || !m->update_time) return NULL;
    if (r->has_expire && !(m->expire_time = pbtime_timestamp(a, r->expire_us))) return NULL;
    m->n_pii_kinds = r->npii;
    m->pii_kinds = (char **)r->pii_kinds;
    return m;
}
