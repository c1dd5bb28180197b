/* cache_l1: sharded TTL-LRU; see cache_l1.h. */
#include "service/cache/cache_l1.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/core/clock.h"
#include "service/core/hash.h"

#define MAX_SHARDS 16
#define ENTRIES_PER_SHARD_MIN 64 /* fewer entries than this share one shard */
#define INITIAL_BUCKETS 64       /* power of two; doubles as the shard fills */
#define ENTRY_OVERHEAD 64        /* what a bound counts per entry beyond key + item */

typedef struct entry {
    struct entry *next;                /* bucket chain */
    struct entry *prev_lru, *next_lru; /* most recently used first */
    uint64_t hash;
    int64_t expire_mono_ms;
    size_t bytes;
    cache_item *item;
    size_t klen;
    unsigned char key[];
} entry;

typedef struct {
    pthread_mutex_t lock;
    entry **buckets;
    size_t nbuckets;
    entry *mru, *lru;
    size_t count, bytes;
    uint64_t mark; /* bumped by every delete and clear */
    uint64_t hits, misses, evictions, expirations, invalidations;
} shard;

struct cache_l1 {
    size_t nshards, max_entries, max_bytes; /* per shard */
    int ttl_ms;
    int enabled;
    clock_src clock; /* arg/fns NULL: the system's */
    shard shards[MAX_SHARDS];
};

/* FNV-1a folded through a final mix: keys are ours (tenant-prefixed), not
 * an attacker's choice of bucket beyond their own tenant's share. */
static uint64_t key_hash(const unsigned char *k, size_t n) {
    uint64_t h = hash_fnv1a(k, n);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static shard *shard_of(cache_l1 *l1, uint64_t h) { return &l1->shards[(h >> 56) % l1->nshards]; }

cache_l1 *cache_l1_create(const cache_l1_options *o) {
    cache_l1 *l1 = calloc(1, sizeof *l1);
    if (!l1) return NULL;
    size_t n = 1;
    while (n * 2 <= MAX_SHARDS && n * 2 * ENTRIES_PER_SHARD_MIN <= o->max_entries) n *= 2;
    l1->nshards = n;
    l1->enabled = o->max_entries > 0;
    l1->max_entries = (o->max_entries + n - 1) / n;
    l1->max_bytes = o->max_bytes ? (o->max_bytes + n - 1) / n : SIZE_MAX;
    l1->ttl_ms = o->ttl_ms > 0 ? o->ttl_ms : 60000;
    if (o->clock) l1->clock = *o->clock;
    for (size_t i = 0; i < n; i++) {
        shard *s = &l1->shards[i];
        pthread_mutex_init(&s->lock, NULL);
        s->nbuckets = INITIAL_BUCKETS;
        s->buckets = calloc(s->nbuckets, sizeof *s->buckets);
        if (!s->buckets) {
            l1->nshards = i + 1;
            cache_l1_free(l1);
            return NULL;
        }
    }
    return l1;
}

static void entry_free(entry *e) {
    cache_item_unref(e->item);
    free(e);
}

static void shard_drop_all(shard *s) {
    for (entry *e = s->mru, *next; e; e = next) {
        next = e->next_lru;
        entry_free(e);
    }
    memset(s->buckets, 0, s->nbuckets * sizeof *s->buckets);
    s->mru = s->lru = NULL;
    s->count = s->bytes = 0;
}

void cache_l1_free(cache_l1 *l1) {
    if (!l1) return;
    for (size_t i = 0; i < l1->nshards; i++) {
        shard *s = &l1->shards[i];
        if (s->buckets) shard_drop_all(s);
        free(s->buckets);
        pthread_mutex_destroy(&s->lock);
    }
    free(l1);
}

int cache_l1_enabled(const cache_l1 *l1) { return l1 && l1->enabled; }

static entry **find_slot(shard *s, uint64_t h, const void *key, size_t klen) {
    entry **pp = &s->buckets[h & (s->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->klen == klen && memcmp((*pp)->key, key, klen) == 0)
            return pp;
    return pp;
}

static void lru_unlink(shard *s, entry *e) {
    if (e->prev_lru) e->prev_lru->next_lru = e->next_lru;
    else s->mru = e->next_lru;
    if (e->next_lru) e->next_lru->prev_lru = e->prev_lru;
    else s->lru = e->prev_lru;
    e->prev_lru = e->next_lru = NULL;
}

static void lru_push_front(shard *s, entry *e) {
    e->prev_lru = NULL;
    e->next_lru = s->mru;
    if (s->mru) s->mru->prev_lru = e;
    s->mru = e;
    if (!s->lru) s->lru = e;
}

/* Unlinks *pp (bucket chain and LRU) and frees it. */
static void remove_at(shard *s, entry **pp) {
    entry *e = *pp;
    *pp = e->next;
    lru_unlink(s, e);
    s->count--;
    s->bytes -= e->bytes;
    entry_free(e);
}

static void remove_entry(shard *s, entry *e) {
    entry **pp = &s->buckets[e->hash & (s->nbuckets - 1)];
    while (*pp != e) pp = &(*pp)->next;
    remove_at(s, pp);
}

/* Doubles the bucket array; on OOM the chains just grow longer. */
static void maybe_grow(shard *s) {
    if (s->count < s->nbuckets) return;
    size_t n = s->nbuckets * 2;
    entry **b = calloc(n, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < s->nbuckets; i++)
        for (entry *e = s->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    free(s->buckets);
    s->buckets = b;
    s->nbuckets = n;
}

cache_item *cache_l1_get(cache_l1 *l1, const void *key, size_t klen) {
    if (!l1->enabled) return NULL;
    uint64_t h = key_hash(key, klen);
    shard *s = shard_of(l1, h);
    int64_t now = clock_mono_ms(&l1->clock);
    cache_item *it = NULL;
    pthread_mutex_lock(&s->lock);
    entry **pp = find_slot(s, h, key, klen);
    entry *e = *pp;
    if (e && e->expire_mono_ms <= now) {
        remove_at(s, pp);
        s->expirations++;
        e = NULL;
    }
    if (e) {
        if (s->mru != e) {
            lru_unlink(s, e);
            lru_push_front(s, e);
        }
        it = e->item;
        cache_item_ref(it);
        s->hits++;
    } else {
        s->misses++;
    }
    pthread_mutex_unlock(&s->lock);
    return it;
}

uint64_t cache_l1_mark(cache_l1 *l1, const void *key, size_t klen) {
    if (!l1->enabled) return 0;
    shard *s = shard_of(l1, key_hash(key, klen));
    pthread_mutex_lock(&s->lock);
    uint64_t m = s->mark;
    pthread_mutex_unlock(&s->lock);
    return m;
}

int cache_l1_put(cache_l1 *l1, const void *key, size_t klen, cache_item *it, uint64_t mark) {
    if (!l1->enabled) return 0;
    int64_t left = it->expire_ms - clock_wall_ms(&l1->clock);
    if (left <= 0) return 0;
    if (left > l1->ttl_ms) left = l1->ttl_ms;
    size_t bytes = ENTRY_OVERHEAD + klen + cache_item_size(it);
    if (bytes > l1->max_bytes) return 0;
    entry *e = malloc(sizeof *e + klen);
    if (!e) return 0;
    e->hash = key_hash(key, klen);
    e->expire_mono_ms = clock_mono_ms(&l1->clock) + left;
    e->bytes = bytes;
    e->item = it;
    e->klen = klen;
    memcpy(e->key, key, klen);
    e->prev_lru = e->next_lru = NULL;
    shard *s = shard_of(l1, e->hash);
    pthread_mutex_lock(&s->lock);
    if (mark != CACHE_L1_UNCONDITIONAL && mark != s->mark) {
        pthread_mutex_unlock(&s->lock);
        free(e);
        return 0;
    }
    cache_item_ref(it);
    entry **pp = find_slot(s, e->hash, key, klen);
    if (*pp) remove_at(s, pp);
    maybe_grow(s);
    pp = &s->buckets[e->hash & (s->nbuckets - 1)];
    e->next = *pp;
    *pp = e;
    lru_push_front(s, e);
    s->count++;
    s->bytes += bytes;
    while (s->count > l1->max_entries || s->bytes > l1->max_bytes) {
        remove_entry(s, s->lru);
        s->evictions++;
    }
    pthread_mutex_unlock(&s->lock);
    return 1;
}

int cache_l1_delete(cache_l1 *l1, const void *key, size_t klen) {
    if (!l1->enabled) return 0;
    uint64_t h = key_hash(key, klen);
    shard *s = shard_of(l1, h);
    pthread_mutex_lock(&s->lock);
    s->mark++;
    entry **pp = find_slot(s, h, key, klen);
    int found = *pp != NULL;
    if (found) {
        remove_at(s, pp);
        s->invalidations++;
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

void cache_l1_clear(cache_l1 *l1) {
    for (size_t i = 0; i < l1->nshards; i++) {
        shard *s = &l1->shards[i];
        pthread_mutex_lock(&s->lock);
        s->mark++;
        shard_drop_all(s);
        pthread_mutex_unlock(&s->lock);
    }
}

static int entry_matches(const entry *e, const void *prefix, size_t plen, const char *owner) {
    return e->klen >= plen && memcmp(e->key, prefix, plen) == 0 && !e->item->absent &&
           (!owner || strcmp(e->item->owner, owner) == 0);
}

size_t cache_l1_erase(cache_l1 *l1, const void *prefix, size_t plen, const char *owner,
                      int dry_run) {
    if (!l1->enabled) return 0;
    size_t n = 0;
    for (size_t i = 0; i < l1->nshards; i++) {
        shard *s = &l1->shards[i];
        pthread_mutex_lock(&s->lock);
        if (!dry_run) s->mark++;
        for (entry *e = s->mru, *next; e; e = next) {
            next = e->next_lru;
            if (!entry_matches(e, prefix, plen, owner)) continue;
            n++;
            if (dry_run) continue;
            remove_entry(s, e);
            s->invalidations++;
        }
        /* Absent markers under the prefix go too (without counting): a
         * marker is no record, but it must not outlive what it shadowed. */
        if (!dry_run && !owner)
            for (entry *e = s->mru, *next; e; e = next) {
                next = e->next_lru;
                if (e->klen >= plen && memcmp(e->key, prefix, plen) == 0) remove_entry(s, e);
            }
        pthread_mutex_unlock(&s->lock);
    }
    return n;
}

void cache_l1_get_stats(cache_l1 *l1, cache_l1_stats *out) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < l1->nshards; i++) {
        shard *s = &l1->shards[i];
        pthread_mutex_lock(&s->lock);
        out->hits += s->hits;
        out->misses += s->misses;
        out->evictions += s->evictions;
        out->expirations += s->expirations;
        out->invalidations += s->invalidations;
        out->entries += s->count;
        out->bytes += s->bytes;
        pthread_mutex_unlock(&s->lock);
    }
}
