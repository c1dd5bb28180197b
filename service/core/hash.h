/* hash: FNV-1a, the one byte-string hash memoryd's in-memory tables and
 * sets use. Not keyed: for keys the tables themselves scope (a tenant's
 * collection, a tenant-prefixed cache key), not for an attacker to aim at
 * a bucket of someone else's. Tables that need their low bits spread mix
 * the result further (cache_l1, episodic_index's ids). */
#ifndef MEMORYD_CORE_HASH_H
#define MEMORYD_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_SEED 0xcbf29ce484222325ULL /* the 64-bit offset basis */

static inline uint64_t hash_fnv1a(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = HASH_FNV1A_SEED;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* Of a NUL-terminated string, without its NUL. */
static inline uint64_t hash_fnv1a_str(const char *s) {
    uint64_t h = HASH_FNV1A_SEED;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

#endif
