/* cache_codec: cache keys, Redis value layout, invalidation messages; see
 * cache_codec.h. */
#include "service/cache/cache_codec.h"

#include <stdio.h>
#include <string.h>

static char *join(arena *a, const char *head, size_t hlen, const char *tail, size_t tlen,
                  size_t *len) {
    char *k = arena_alloc(a, hlen + tlen + 1);
    if (!k) return NULL;
    memcpy(k, head, hlen);
    if (tlen) memcpy(k + hlen, tail, tlen);
    k[hlen + tlen] = '\0';
    *len = hlen + tlen;
    return k;
}

char *cache_key_slot(arena *a, const char *tenant, const char *owner, const char *key,
                     size_t keylen, size_t *len) {
    char head[1200];
    int n = owner ? snprintf(head, sizeof head, "memoryd:c:%zu:%s:o%zu:%s:", strlen(tenant), tenant,
                             strlen(owner), owner)
                  : snprintf(head, sizeof head, "memoryd:c:%zu:%s:s:", strlen(tenant), tenant);
    if (n < 0 || (size_t)n >= sizeof head) return NULL;
    return join(a, head, (size_t)n, key, keylen, len);
}

char *cache_key_entity(arena *a, const char *tenant, const char *id, size_t *len) {
    return cache_key_record(a, 'e', tenant, id, len);
}

char *cache_key_record(arena *a, char kind, const char *tenant, const char *id, size_t *len) {
    char head[600];
    int n = snprintf(head, sizeof head, "memoryd:%c:%zu:%s:", kind, strlen(tenant), tenant);
    if (n < 0 || (size_t)n >= sizeof head) return NULL;
    return join(a, head, (size_t)n, id, strlen(id), len);
}

static void put64(uint8_t *p, int64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)v >> (8 * i));
}

static int64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return (int64_t)v;
}

uint8_t *cache_blob_encode(arena *a, const cache_item *it, size_t *len) {
    size_t olen = strlen(it->owner);
    if (olen > 0xffff || it->label < 0 || it->label > 255) return NULL;
    size_t n = CACHE_HEADER_BYTES + olen + it->value_len;
    uint8_t *b = arena_alloc(a, n ? n : 1);
    if (!b) return NULL;
    b[0] = 'm';
    b[1] = 1;
    b[2] = (uint8_t)it->label;
    b[3] = 0;
    put64(b + 4, it->created_ms);
    put64(b + 12, it->expire_ms);
    b[20] = (uint8_t)(olen & 0xff);
    b[21] = (uint8_t)(olen >> 8);
    memcpy(b + CACHE_HEADER_BYTES, it->owner, olen);
    if (it->value_len) memcpy(b + CACHE_HEADER_BYTES + olen, it->value, it->value_len);
    *len = n;
    return b;
}

cache_item *cache_blob_decode(const uint8_t *b, size_t len) {
    if (len < CACHE_HEADER_BYTES || b[0] != 'm' || b[1] != 1 || b[3] != 0) return NULL;
    size_t olen = (size_t)b[20] | ((size_t)b[21] << 8);
    if (olen > len - CACHE_HEADER_BYTES) return NULL;
    const uint8_t *owner = b + CACHE_HEADER_BYTES;
    if (memchr(owner, '\0', olen)) return NULL;
    return cache_item_create((const char *)owner, olen, owner + olen,
                             len - CACHE_HEADER_BYTES - olen, b[2], get64(b + 4), get64(b + 12));
}

size_t cache_inval_encode(const char *replica, const char *key, size_t keylen, char *buf) {
    memcpy(buf, replica, CACHE_REPLICA_ID_LEN);
    buf[CACHE_REPLICA_ID_LEN] = ' ';
    memcpy(buf + CACHE_REPLICA_ID_LEN + 1, key, keylen);
    return CACHE_INVAL_BYTES(keylen);
}

size_t cache_inval_encode_prefix(const char *replica, const char *prefix, size_t plen, char *buf) {
    size_t n = cache_inval_encode(replica, prefix, plen, buf);
    buf[CACHE_REPLICA_ID_LEN] = '*';
    return n;
}

int cache_inval_decode(const char *msg, size_t len, const char *replica, const char **key,
                       size_t *keylen) {
    if (len <= CACHE_REPLICA_ID_LEN + 1) return -1;
    char sep = msg[CACHE_REPLICA_ID_LEN];
    if (sep != ' ' && sep != '*') return -1;
    for (size_t i = 0; i < CACHE_REPLICA_ID_LEN; i++) {
        char c = msg[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return -1;
    }
    *key = msg + CACHE_REPLICA_ID_LEN + 1;
    *keylen = len - CACHE_REPLICA_ID_LEN - 1;
    if (memcmp(msg, replica, CACHE_REPLICA_ID_LEN) == 0) return 1;
    return sep == '*' ? 2 : 0;
}
