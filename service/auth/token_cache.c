/* token_cache: sharded verified-token cache; see token_cache.h. */
#include "service/auth/token_cache.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 16
#define BUCKETS_PER_SHARD 1024 /* power of two */

typedef struct entry {
    struct entry *next;          /* bucket chain */
    struct entry *older, *newer; /* insertion order, for eviction */
    uint64_t hash;
    size_t len;
    int64_t valid_until;
    principal *p;
    char token[];
} entry;

typedef struct {
    pthread_mutex_t lock;
    entry *buckets[BUCKETS_PER_SHARD];
    entry *oldest, *newest;
    size_t count;
} shard;

struct token_cache {
    uint64_t seed;
    size_t per_shard_max;
    shard shards[SHARDS];
};

/* A keyed 64-bit mix over 8-byte words. Not cryptographic: the seed only
 * keeps outsiders from aiming tokens at one bucket; equality is decided by
 * comparing the whole token. */
static uint64_t token_hash(uint64_t seed, const char *s, size_t n) {
    uint64_t h = seed ^ (n * 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
}

token_cache *token_cache_create(size_t max) {
    token_cache *tc = calloc(1, sizeof *tc);
    if (!tc) return NULL;
    if (RAND_bytes((unsigned char *)&tc->seed, sizeof tc->seed) != 1)
        tc->seed = (uint64_t)(uintptr_t)tc;
    tc->per_shard_max = max / SHARDS ? max / SHARDS : 1;
    for (int i = 0; i < SHARDS; i++) pthread_mutex_init(&tc->shards[i].lock, NULL);
    return tc;
}

static void unlink_entry(shard *sh, entry *e) {
    entry **pp = &sh->buckets[e->hash & (BUCKETS_PER_SHARD - 1)];
    while (*pp != e) pp = &(*pp)->next;
    *pp = e->next;
    if (e->older) e->older->newer = e->newer;
    else sh->oldest = e->newer;
    if (e->newer) e->newer->older = e->older;
    else sh->newest = e->older;
    sh->count--;
}

static void free_entry(entry *e) {
    principal_unref(e->p);
    free(e);
}

/* Caller holds sh->lock (or owns the cache alone). */
static void drop_all(shard *sh) {
    for (entry *e = sh->oldest, *next; e; e = next) {
        next = e->newer;
        free_entry(e);
    }
    memset(sh->buckets, 0, sizeof sh->buckets);
    sh->oldest = sh->newest = NULL;
    sh->count = 0;
}

void token_cache_free(token_cache *tc) {
    if (!tc) return;
    for (int i = 0; i < SHARDS; i++) {
        drop_all(&tc->shards[i]);
        pthread_mutex_destroy(&tc->shards[i].lock);
    }
    free(tc);
}

void token_cache_clear(token_cache *tc) {
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&tc->shards[i].lock);
        drop_all(&tc->shards[i]);
        pthread_mutex_unlock(&tc->shards[i].lock);
    }
}

static entry *find(shard *sh, uint64_t h, const char *token, size_t len) {
    for (entry *e = sh->buckets[h & (BUCKETS_PER_SHARD - 1)]; e; e = e->next)
        /* Plain memcmp is safe here: it only runs after a 64-bit hash under
         * a secret random seed matched, which an attacker cannot aim for,
         * so its early exit reveals nothing usable. */
        if (e->hash == h && e->len == len && memcmp(e->token, token, len) == 0) return e;
    return NULL;
}

/* The shard index uses the hash's top bits, the bucket its bottom bits. */
static shard *shard_of(token_cache *tc, uint64_t h) { return &tc->shards[h >> 60]; }

principal *token_cache_get(token_cache *tc, const char *token, size_t len, int64_t now_s) {
    uint64_t h = token_hash(tc->seed, token, len);
    shard *sh = shard_of(tc, h);
    principal *p = NULL;
    entry *stale = NULL;
    pthread_mutex_lock(&sh->lock);
    entry *e = find(sh, h, token, len);
    if (e && now_s < e->valid_until) {
        p = e->p;
        principal_ref(p);
    } else if (e) {
        unlink_entry(sh, e);
        stale = e;
    }
    pthread_mutex_unlock(&sh->lock);
    if (stale) free_entry(stale);
    return p;
}

void token_cache_put(token_cache *tc, const char *token, size_t len, principal *p,
                     int64_t valid_until) {
    entry *e = malloc(sizeof *e + len);
    if (!e) return;
    e->hash = token_hash(tc->seed, token, len);
    e->len = len;
    e->valid_until = valid_until;
    e->p = p;
    principal_ref(p);
    memcpy(e->token, token, len);
    shard *sh = shard_of(tc, e->hash);
    entry *evicted[2] = {NULL, NULL};
    pthread_mutex_lock(&sh->lock);
    entry *old = find(sh, e->hash, token, len);
    if (old) {
        unlink_entry(sh, old);
        evicted[0] = old;
    } else if (sh->count >= tc->per_shard_max) {
        evicted[1] = sh->oldest;
        unlink_entry(sh, sh->oldest);
    }
    entry **bucket = &sh->buckets[e->hash & (BUCKETS_PER_SHARD - 1)];
    e->next = *bucket;
    *bucket = e;
    e->older = sh->newest;
    e->newer = NULL;
    if (sh->newest) sh->newest->newer = e;
    else sh->oldest = e;
    sh->newest = e;
    sh->count++;
    pthread_mutex_unlock(&sh->lock);
    for (int i = 0; i < 2; i++)
        if (evicted[i]) free_entry(evicted[i]);
}

size_t token_cache_count(token_cache *tc) {
    size_t n = 0;
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&tc->shards[i].lock);
        n += tc->shards[i].count;
        pthread_mutex_unlock(&tc->shards[i].lock);
    }
    return n;
}
