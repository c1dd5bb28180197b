/* cache_item: one cached value with the metadata the read diode needs
 * (owner, label) and its times. Immutable once created and reference
 * counted, so L1 can hand the same bytes to many calls at once without
 * copying and without holding its lock while they are serialized.
 *
 * An item may also be an "absent" marker: L1 remembers that a slot is empty
 * in L2 (so a lookup can go on to the next slot without asking Redis). */
#ifndef MEMORYD_CACHE_CACHE_ITEM_H
#define MEMORYD_CACHE_CACHE_ITEM_H

#include <stddef.h>
#include <stdint.h>

typedef struct cache_item {
    int refs;           /* private: changed atomically by cache_item_ref / unref */
    int absent;         /* 1: the slot is known to be empty; no value */
    int label;          /* memory.v1.Label of the value */
    int64_t created_ms; /* Unix ms the value was written */
    int64_t expire_ms;  /* Unix ms it expires */
    const char *owner;  /* NUL-terminated, inside the item */
    const uint8_t *value;
    size_t value_len;
    /* owner and value bytes follow */
} cache_item;

/* A new item holding copies of owner[0..olen) and value[0..len), one
 * reference owned by the caller. NULL when out of memory. */
cache_item *cache_item_create(const char *owner, size_t olen, const void *value, size_t len,
                              int label, int64_t created_ms, int64_t expire_ms);
/* An absent marker valid until expire_ms; NULL when out of memory. */
cache_item *cache_item_absent(int64_t expire_ms);
void cache_item_ref(cache_item *it);
void cache_item_unref(cache_item *it); /* frees with the last reference; accepts NULL */
/* Bytes the item occupies (what L1's byte bound counts). */
size_t cache_item_size(const cache_item *it);

#endif
