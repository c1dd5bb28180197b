/* cache_aside: get-or-load over L1 for tiers whose records live elsewhere
 * (GlobalMemory.GetEntity over PostgreSQL), with single flight: when many
 * calls miss the same key at once, one of them loads it and the others
 * wait for that result instead of sending the same query. Nothing here
 * blocks a thread: a miss registers the caller and returns; the answer
 * comes through the caller's done when the load ends (on the thread that
 * ends it: the event loop's).
 *
 * A load that fails for a reason of its own (the loader's deadline or
 * cancel, a backend error) fails only the loader: the callers waiting on
 * it try again, one of them loading anew. A loaded item is kept in L1
 * only if no invalidation of its shard came in while loading
 * (cache_l1_mark) and only while the invalidation subscriber is live (see
 * cache_sub.h): otherwise another replica's write could leave a stale
 * record here. */
#ifndef MEMORYD_CACHE_CACHE_ASIDE_H
#define MEMORYD_CACHE_CACHE_ASIDE_H

#include <stddef.h>
#include <stdint.h>

#include "service/cache/cache_l1.h"
#include "service/cache/cache_sub.h"
#include "service/core/status.h"

typedef struct cache_aside cache_aside;
typedef struct cache_aside_flight cache_aside_flight;

/* Starts loading the flight's key for the caller that registered it, and
 * returns; the load ends with cache_aside_loaded (any thread, once; it may
 * be called before start returns). */
typedef void (*cache_aside_start_fn)(void *arg, cache_aside_flight *fl);

/* One caller's answer, once: STATUS_OK with it (a reference the callee
 * releases), STATUS_ENOTFOUND, STATUS_ENOMEM, or the load's own failure
 * when this caller ran it. */
typedef void (*cache_aside_done_fn)(void *arg, int rc, cache_item *it);

/* One caller of cache_aside_fetch: its storage (a call's arena; zeroed
 * before the fetch), untouched by the caller until done ran or
 * cache_aside_cancel said it left. */
typedef struct cache_aside_wait {
    struct cache_aside_wait *next; /* private: the flight's waiters */
    struct cache_aside_wait *also; /* private: a list being answered or started */
    cache_aside_flight *flight;    /* private */
    int state;                     /* private, under the cache's lock */
    int loader;                    /* private: this caller runs the load */
    int rc;                        /* private: its answer */
    const char *key;
    size_t klen;
    cache_aside_start_fn start;
    void *start_arg;
    cache_aside_done_fn done;
    void *done_arg;
} cache_aside_wait;

/* l1 and sub are borrowed (sub may be NULL: no Redis, so no other replica
 * to hear from and L1 is always safe). NULL when out of memory. */
cache_aside *cache_aside_create(cache_l1 *l1, cache_sub *sub);
void cache_aside_free(cache_aside *ca); /* no load may be in flight; accepts NULL */

/* The record under key when L1 holds it (and may be trusted): a
 * reference the caller releases; NULL otherwise. Never waits. */
cache_item *cache_aside_peek(cache_aside *ca, const char *key, size_t klen);

/* The record under key (w->key, w->klen: borrowed until done ran), for
 * the caller described by w: STATUS_OK with *out (a reference the caller
 * releases) when L1 holds it, and done is not called; CACHE_ASIDE_PENDING
 * when the caller now waits for a load, its own (w->start(w->start_arg)
 * is called before this returns) or a concurrent one's: done will be
 * called once, perhaps before this returns. STATUS_ECANCELLED (done not
 * called) when cache_aside_cancel came first; STATUS_ENOMEM. */
#define CACHE_ASIDE_PENDING 1
int cache_aside_fetch(cache_aside *ca, cache_aside_wait *w, cache_item **out);

/* The end of fl's load (it: one reference, passed on; NULL unless
 * STATUS_OK). Answers every caller waiting on it. */
void cache_aside_loaded(cache_aside *ca, cache_aside_flight *fl, int rc, cache_item *it);

/* The caller's client is gone: CACHE_ASIDE_LEFT when w waited on another
 * caller's load and is now forgotten (done will not be called: the caller
 * ends itself); CACHE_ASIDE_LOADING when w runs the load (the caller
 * cancels its load, which then ends through cache_aside_loaded and done);
 * 0 when done has run or is running. Any thread. */
#define CACHE_ASIDE_LEFT 1
#define CACHE_ASIDE_LOADING 2
int cache_aside_cancel(cache_aside *ca, cache_aside_wait *w);

/* Drops key from this replica's L1 (a write; others hear of it by pub/sub). */
void cache_aside_invalidate(cache_aside *ca, const char *key, size_t klen);
/* Drops everything from this replica's L1 (when a key could not be built). */
void cache_aside_invalidate_all(cache_aside *ca);
/* How many loads ran (for tests of single flight). */
uint64_t cache_aside_loads(cache_aside *ca);

#endif
