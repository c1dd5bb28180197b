/* cache_item: reference-counted immutable cache values; see cache_item.h. */
#include "service/cache/cache_item.h"

#include <stdlib.h>
#include <string.h>

cache_item *cache_item_create(const char *owner, size_t olen, const void *value, size_t len,
                              int label, int64_t created_ms, int64_t expire_ms) {
    cache_item *it = malloc(sizeof *it + olen + 1 + len);
    if (!it) return NULL;
    it->refs = 1;
    it->absent = 0;
    it->label = label;
    it->created_ms = created_ms;
    it->expire_ms = expire_ms;
    char *o = (char *)(it + 1);
    if (olen) memcpy(o, owner, olen);
    o[olen] = '\0';
    it->owner = o;
    uint8_t *v = (uint8_t *)o + olen + 1;
    if (len) memcpy(v, value, len);
    it->value = v;
    it->value_len = len;
    return it;
}

cache_item *cache_item_absent(int64_t expire_ms) {
    cache_item *it = cache_item_create(NULL, 0, NULL, 0, 0, 0, expire_ms);
    if (it) it->absent = 1;
    return it;
}

void cache_item_ref(cache_item *it) { __atomic_fetch_add(&it->refs, 1, __ATOMIC_RELAXED); }

void cache_item_unref(cache_item *it) {
    if (it && __atomic_fetch_sub(&it->refs, 1, __ATOMIC_ACQ_REL) == 1) free(it);
}

size_t cache_item_size(const cache_item *it) {
    return sizeof *it + strlen(it->owner) + 1 + it->value_len;
}
