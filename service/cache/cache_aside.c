/* cache_aside: get-or-load with single flight; see cache_aside.h. */
#include "service/cache/cache_aside.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/clock.h"

#define FLIGHT_BUCKETS 64

/* One load in progress, shared by the caller running it and its waiters. */
typedef struct flight {
    struct flight *next;
    int refs; /* under ca->lock */
    int done; /* under ca->lock */
    int rc;
    cache_item *item;
    size_t klen;
    char key[];
} flight;

struct cache_aside {
    cache_l1 *l1;
    cache_sub *sub;
    pthread_mutex_t lock;
    pthread_cond_t done; /* CLOCK_MONOTONIC; broadcast when any flight lands */
    flight *buckets[FLIGHT_BUCKETS];
    atomic_uint_fast64_t loads;
};

cache_aside *cache_aside_create(cache_l1 *l1, cache_sub *sub) {
    cache_aside *ca = calloc(1, sizeof *ca);
    if (!ca) return NULL;
    ca->l1 = l1;
    ca->sub = sub;
    pthread_mutex_init(&ca->lock, NULL);
    clock_cond_init(&ca->done);
    atomic_init(&ca->loads, 0);
    return ca;
}

void cache_aside_free(cache_aside *ca) {
    if (!ca) return;
    pthread_cond_destroy(&ca->done);
    pthread_mutex_destroy(&ca->lock);
    free(ca);
}

static size_t bucket_of(const char *key, size_t klen) {
    size_t h = 5381;
    for (size_t i = 0; i < klen; i++) h = h * 33 + (unsigned char)key[i];
    return h % FLIGHT_BUCKETS;
}

static flight *find(cache_aside *ca, size_t b, const char *key, size_t klen) {
    for (flight *f = ca->buckets[b]; f; f = f->next)
        if (!f->done && f->klen == klen && memcmp(f->key, key, klen) == 0) return f;
    return NULL;
}

/* Caller holds the lock. */
static void flight_release(cache_aside *ca, flight *f, size_t b) {
    if (--f->refs > 0) return;
    flight **pp = &ca->buckets[b];
    while (*pp != f) pp = &(*pp)->next;
    *pp = f->next;
    cache_item_unref(f->item);
    free(f);
}

static int l1_usable(cache_aside *ca) {
    return cache_l1_enabled(ca->l1) && (!ca->sub || cache_sub_live(ca->sub));
}

cache_item *cache_aside_peek(cache_aside *ca, const char *key, size_t klen) {
    return l1_usable(ca) ? cache_l1_get(ca->l1, key, klen) : NULL;
}

int cache_aside_get(cache_aside *ca, const char *key, size_t klen, int64_t deadline_ms,
                    cache_aside_load_fn load, void *arg, cache_item **out, int *from_l1) {
    *out = NULL;
    *from_l1 = 0;
    int use_l1 = l1_usable(ca);
    if (use_l1 && (*out = cache_l1_get(ca->l1, key, klen)) != NULL) {
        *from_l1 = 1;
        return STATUS_OK;
    }
    size_t b = bucket_of(key, klen);
    pthread_mutex_lock(&ca->lock);
    for (;;) {
        flight *f = find(ca, b, key, klen);
        if (!f) break;
        /* Someone is loading it: wait for their answer. */
        f->refs++;
        struct timespec ts = clock_cond_deadline(deadline_ms);
        while (!f->done) {
            if (deadline_ms == INT64_MAX) pthread_cond_wait(&ca->done, &ca->lock);
            else if (pthread_cond_timedwait(&ca->done, &ca->lock, &ts) == ETIMEDOUT) break;
        }
        if (!f->done) {
            flight_release(ca, f, b);
            pthread_mutex_unlock(&ca->lock);
            return STATUS_ETIMEOUT;
        }
        int rc = f->rc;
        if (rc == STATUS_OK) cache_item_ref(*out = f->item);
        flight_release(ca, f, b);
        if (rc == STATUS_OK || rc == STATUS_ENOTFOUND) {
            pthread_mutex_unlock(&ca->lock);
            return rc;
        }
        /* The loader failed for its own reason: try again, maybe loading. */
    }
    size_t fsize = sizeof(flight) + klen;
    flight *f = calloc(1, fsize);
    if (!f) {
        pthread_mutex_unlock(&ca->lock);
        return STATUS_ENOMEM;
    }
    f->refs = 1;
    f->klen = klen;
    memcpy(f->key, key, klen);
    f->next = ca->buckets[b];
    ca->buckets[b] = f;
    pthread_mutex_unlock(&ca->lock);

    uint64_t mark = use_l1 ? cache_l1_mark(ca->l1, key, klen) : 0;
    atomic_fetch_add(&ca->loads, 1);
    cache_item *it = NULL;
    int rc = load(arg, &it);
    if (rc == STATUS_OK && use_l1 && l1_usable(ca)) cache_l1_put(ca->l1, key, klen, it, mark);

    pthread_mutex_lock(&ca->lock);
    f->done = 1;
    f->rc = rc;
    f->item = it; /* the flight's reference, dropped with the flight */
    if (it) cache_item_ref(*out = it);
    flight_release(ca, f, b);
    pthread_cond_broadcast(&ca->done);
    pthread_mutex_unlock(&ca->lock);
    return rc;
}

void cache_aside_invalidate(cache_aside *ca, const char *key, size_t klen) {
    cache_l1_delete(ca->l1, key, klen);
}

void cache_aside_invalidate_all(cache_aside *ca) { cache_l1_clear(ca->l1); }

uint64_t cache_aside_loads(cache_aside *ca) { return atomic_load(&ca->loads); }
