/* bb_render: see bb_render.h. */
#include "service/blackboard/bb_render.h"

#include <stdio.h>
#include <string.h>

#include "service/core/log.h"
#include "service/pb/pbjson.h"
#include "service/pb/pbtime.h"
#include "service/pii/pii.h"
#include "service/tier/tier_meta.h"

int bb_visible(const bb_caller *c, const bb_header *h) {
    if (h->label < 1 || h->label > c->clr) return 0;
    if (c->read_all) return 1;
    return strlen(c->sub) == h->owner_len && memcmp(c->sub, h->owner, h->owner_len) == 0;
}

int bb_check_visible(const bb_caller *c, const bb_header *h, const char *key, size_t key_len) {
    if (bb_visible(c, h)) return 1;
    char k[300];
    snprintf(k, sizeof k, "%.*s", (int)(key_len < 256 ? key_len : 256), key);
    log_fields(LOG_ERROR,
               "blackboard: a Redis script returned a key the caller may not read; dropped "
               "(a bug)",
               LOG_F_STR, "key", k, LOG_F_STR, "caller", c->sub, LOG_F_END);
    return 0;
}

Google__Protobuf__Timestamp *bb_render_time(arena *a, int64_t unix_ms) {
    return pbtime_timestamp(a, unix_ms * 1000);
}

int bb_render_tier_meta(arena *a, const char *tenant, const bb_header *h, int64_t board_expire_ms,
                        tier_meta *out) {
    const char *names[PII_KIND_COUNT];
    size_t npii = pii_kind_names(h->pii, names, PII_KIND_COUNT);
    const char **kinds = arena_alloc(a, (npii ? npii : 1) * sizeof *kinds);
    *out = (tier_meta){.tenant = tenant,
                       .owner = arena_strndup(a, h->owner, h->owner_len),
                       .label = h->label,
                       .version = h->version,
                       .create_us = h->create_ms * 1000,
                       .update_us = h->update_ms * 1000,
                       .has_expire = board_expire_ms > 0,
                       .expire_us = board_expire_ms * 1000,
                       .pii_kinds = kinds,
                       .npii = npii};
    if (!out->owner || !kinds) return -1;
    memcpy(kinds, names, npii * sizeof *kinds);
    return 0;
}

Memory__V1__RecordMeta *bb_render_meta(arena *a, const char *tenant, const bb_header *h,
                                       int64_t board_expire_ms) {
    tier_meta m;
    if (bb_render_tier_meta(a, tenant, h, board_expire_ms, &m) != 0) return NULL;
    return tier_meta_render(a, &m);
}

Memory__V1__BlackboardItem *bb_render_item(arena *a, const char *tenant, const char *key,
                                           size_t key_len, const bb_header *h, const char *json,
                                           size_t json_len, int64_t board_expire_ms) {
    Memory__V1__BlackboardItem *it = arena_message(a, &memory__v1__blackboard_item__descriptor);
    if (!it || !(it->key = arena_strndup(a, key, key_len)) ||
        !(it->meta = bb_render_meta(a, tenant, h, board_expire_ms)))
        return NULL;
    if (json_len && pbjson_to_value(a, json, json_len, &it->value) != 0) {
        log_fields(LOG_ERROR, "blackboard: a stored value is not JSON", LOG_F_STR, "key", it->key,
                   LOG_F_END);
        return NULL;
    }
    if (h->lease_ms && !(it->lease_expire_time = bb_render_time(a, h->lease_ms))) return NULL;
    return it;
}
