/* cache_aside: get-or-load with single flight, without waiting; see
 * cache_aside.h. */
#include "service/cache/cache_aside.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FLIGHT_BUCKETS 64

/* A waiter's state (under ca->lock). */
enum { W_NEW = 0, W_WAITING, W_ANSWERED, W_CANCELLED };

/* One load in progress and the callers waiting on it (the loader among
 * them). */
struct cache_aside_flight {
    cache_aside_flight *next;
    cache_aside_wait *waiters;
    int use_l1;
    uint64_t mark; /* L1's invalidation mark taken before the load began */
    size_t klen;
    char key[];
};

struct cache_aside {
    cache_l1 *l1;
    cache_sub *sub;
    pthread_mutex_t lock; /* buckets and every waiter's private fields */
    cache_aside_flight *buckets[FLIGHT_BUCKETS];
    atomic_uint_fast64_t loads;
};

cache_aside *cache_aside_create(cache_l1 *l1, cache_sub *sub) {
    cache_aside *ca = calloc(1, sizeof *ca);
    if (!ca) return NULL;
    ca->l1 = l1;
    ca->sub = sub;
    pthread_mutex_init(&ca->lock, NULL);
    atomic_init(&ca->loads, 0);
    return ca;
}

void cache_aside_free(cache_aside *ca) {
    if (!ca) return;
    pthread_mutex_destroy(&ca->lock);
    free(ca);
}

static size_t bucket_of(const char *key, size_t klen) {
    size_t h = 5381;
    for (size_t i = 0; i < klen; i++) h = h * 33 + (unsigned char)key[i];
    return h % FLIGHT_BUCKETS;
}

static int l1_usable(cache_aside *ca) {
    return cache_l1_enabled(ca->l1) && (!ca->sub || cache_sub_live(ca->sub));
}

cache_item *cache_aside_peek(cache_aside *ca, const char *key, size_t klen) {
    return l1_usable(ca) ? cache_l1_get(ca->l1, key, klen) : NULL;
}

/* Caller holds the lock. Adds w to the flight loading its key, or starts
 * one with w as its loader (*lead = 1: the caller calls w->start once the
 * lock is released). STATUS_OK or STATUS_ENOMEM. */
static int join_locked(cache_aside *ca, cache_aside_wait *w, int *lead) {
    size_t b = bucket_of(w->key, w->klen);
    cache_aside_flight *f = ca->buckets[b];
    while (f && !(f->klen == w->klen && memcmp(f->key, w->key, w->klen) == 0)) f = f->next;
    *lead = 0;
    if (!f) {
        if (!(f = calloc(1, sizeof *f + w->klen))) return STATUS_ENOMEM;
        f->klen = w->klen;
        memcpy(f->key, w->key, w->klen);
        /* Taken before the load reads the source: an invalidation that
         * comes in meanwhile keeps the loaded copy out of L1. */
        f->use_l1 = l1_usable(ca);
        f->mark = f->use_l1 ? cache_l1_mark(ca->l1, w->key, w->klen) : 0;
        f->next = ca->buckets[b];
        ca->buckets[b] = f;
        atomic_fetch_add(&ca->loads, 1);
        *lead = 1;
    }
    w->loader = *lead;
    w->flight = f;
    w->state = W_WAITING;
    w->next = f->waiters;
    f->waiters = w;
    return STATUS_OK;
}

int cache_aside_fetch(cache_aside *ca, cache_aside_wait *w, cache_item **out) {
    *out = NULL;
    if (l1_usable(ca) && (*out = cache_l1_get(ca->l1, w->key, w->klen)) != NULL) return STATUS_OK;
    int lead = 0, rc;
    pthread_mutex_lock(&ca->lock);
    rc = w->state == W_CANCELLED ? STATUS_ECANCELLED : join_locked(ca, w, &lead);
    pthread_mutex_unlock(&ca->lock);
    if (rc != STATUS_OK) return rc;
    if (lead) w->start(w->start_arg, w->flight);
    return CACHE_ASIDE_PENDING;
}

void cache_aside_loaded(cache_aside *ca, cache_aside_flight *fl, int rc, cache_item *it) {
    if (rc == STATUS_OK && fl->use_l1 && l1_usable(ca))
        cache_l1_put(ca->l1, fl->key, fl->klen, it, fl->mark);
    /* A found or absent record answers everyone; a failure of the load's
     * own answers its loader, and the others join or start a new load. */
    int shared = rc == STATUS_OK || rc == STATUS_ENOTFOUND;
    cache_aside_wait *answer = NULL, *start = NULL;
    pthread_mutex_lock(&ca->lock);
    cache_aside_flight **pp = &ca->buckets[bucket_of(fl->key, fl->klen)];
    while (*pp != fl) pp = &(*pp)->next;
    *pp = fl->next;
    cache_aside_wait *w = fl->waiters, *next;
    for (; w; w = next) {
        next = w->next;
        w->flight = NULL;
        int lead = 0, requeued = 0;
        if (shared || w->loader) w->rc = rc;
        else requeued = (w->rc = join_locked(ca, w, &lead)) == STATUS_OK;
        if (!requeued) {
            w->state = W_ANSWERED;
            w->also = answer;
            answer = w;
        } else if (lead) {
            w->also = start;
            start = w;
        }
    }
    pthread_mutex_unlock(&ca->lock);
    free(fl);
    /* Outside the lock: a done may free its waiter, a start may end its
     * load (and call back in) at once. */
    for (w = answer; w; w = next) {
        next = w->also;
        cache_item *mine = NULL;
        if (w->rc == STATUS_OK && it) cache_item_ref(mine = it);
        w->done(w->done_arg, w->rc == STATUS_OK && !mine ? STATUS_ENOMEM : w->rc, mine);
    }
    for (w = start; w; w = next) {
        next = w->also;
        w->start(w->start_arg, w->flight);
    }
    cache_item_unref(it); /* the flight's reference */
}

int cache_aside_cancel(cache_aside *ca, cache_aside_wait *w) {
    int res = 0;
    pthread_mutex_lock(&ca->lock);
    if (w->state == W_NEW) {
        w->state = W_CANCELLED; /* the fetch to come reports it */
    } else if (w->state == W_WAITING && w->loader) {
        res = CACHE_ASIDE_LOADING;
    } else if (w->state == W_WAITING) {
        cache_aside_wait **pp = &w->flight->waiters;
        while (*pp != w) pp = &(*pp)->next;
        *pp = w->next;
        w->flight = NULL;
        w->state = W_CANCELLED;
        res = CACHE_ASIDE_LEFT;
    }
    pthread_mutex_unlock(&ca->lock);
    return res;
}

void cache_aside_invalidate(cache_aside *ca, const char *key, size_t klen) {
    cache_l1_delete(ca->l1, key, klen);
}

void cache_aside_invalidate_all(cache_aside *ca) { cache_l1_clear(ca->l1); }

uint64_t cache_aside_loads(cache_aside *ca) { return atomic_load(&ca->loads); }
