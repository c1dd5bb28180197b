/* cache_l2: the shared cache level in Redis, every command on the event
 * loop (store/aredis.h).
 * Values are cache_codec blobs; Set and Delete run as one Lua script each
 * that checks the stored label against the caller's read ceiling, writes,
 * and publishes the invalidation for every replica's L1, all in one round
 * trip and atomically (another writer cannot slip in between the check and
 * the write). Every command ends by the call's deadline or
 * CACHE_L2_COMMAND_MS, whichever is first; a Set or Delete once sent
 * waits for Redis's answer (aredis_cmd.wait_reply: its audit row follows
 * it) or for the connection to be taken for stalled. */
#ifndef MEMORYD_CACHE_CACHE_L2_H
#define MEMORYD_CACHE_CACHE_L2_H

#include <stddef.h>
#include <stdint.h>

#include "service/cache/cache_item.h"
#include "service/core/arena.h"
#include "service/core/status.h"
#include "service/store/aredis.h"

/* Results: STATUS_OK; STATUS_EDENIED (the stored entry is labelled above
 * max_label); STATUS_ENOTFOUND (delete: nothing stored under the key);
 * STATUS_EUNAVAILABLE (Redis unreachable, timed out or refused). */

typedef struct cache_l2 cache_l2;

/* ar (Redis on the event loop) is borrowed and must outlive the L2;
 * replica (CACHE_REPLICA_ID_LEN hex digits) is copied. NULL when out of
 * memory. */
cache_l2 *cache_l2_create(aredis *ar, const char *replica);
void cache_l2_free(cache_l2 *l2); /* accepts NULL */

/* Keys looked up in Redis since the start: found, or not (a lookup that
 * failed counts as neither: the backend metrics count it). */
void cache_l2_get_stats(const cache_l2 *l2, uint64_t *hits, uint64_t *misses);

/* One MGET of n keys on the event loop (rpc.h's execution model): the
 * lookup lives in memory that outlives the command (the call's arena);
 * keys and out too. done(lk, status) runs once on the loop thread: on
 * STATUS_OK out[i] holds a new item (the caller's reference) or NULL when
 * absent or not a well-formed value; otherwise every out[i] is NULL and
 * the reason is in lk->cmd.err (UNAVAILABLE, TIMEOUT, CANCELLED, BUSY). */
typedef struct cache_l2_lookup cache_l2_lookup;
struct cache_l2_lookup {
    aredis_cmd cmd;
    cache_item **out;
    size_t n;
    void (*done)(cache_l2_lookup *lk, int status);
    void *arg;    /* the caller's */
    cache_l2 *l2; /* cache_l2's */
};
/* A command Redis has not answered in this long is given up (the call then
 * answers from L1, or writes L1 alone), whatever is left of the call's
 * deadline: a hung Redis costs a cache call this much, not its deadline. */
#define CACHE_L2_COMMAND_MS 1000
/* Starts the lookup (deadline_ms capped at CACHE_L2_COMMAND_MS from now;
 * the command's words go in arena a): 0, or -1 when out of memory (done
 * never runs). */
int cache_l2_mget_start(cache_l2 *l2, cache_l2_lookup *lk, arena *a, const char *const *keys,
                        const size_t *klens, size_t n, int64_t deadline_ms, cache_item **out);
/* Ends a started lookup now (CANCELLED) unless it has ended; any thread. */
void cache_l2_mget_cancel(cache_l2 *l2, cache_l2_lookup *lk);
/* A Set or a Delete on the event loop, each one Lua script (above): the
 * write lives in memory that outlives the command (the call's arena);
 * done(w, code) runs once on the loop thread: STATUS_OK, STATUS_EDENIED,
 * STATUS_ENOTFOUND (delete: nothing stored under the key), or another
 * code with the reason in w->cmd.err (EUNAVAILABLE, ETIMEOUT after
 * CACHE_L2_COMMAND_MS, ECANCELLED). */
typedef struct cache_l2_write cache_l2_write;
struct cache_l2_write {
    aredis_cmd cmd; /* first: done finds the write from it */
    void (*done)(cache_l2_write *w, int status);
    void *arg;        /* the caller's */
    int stored_label; /* a set's answer: the label Redis stored (never below the old value's) */
    /* cache_l2's */
    int is_delete;
    const char *args[3];
    size_t arg_lens[3];
    const char *argv[10];
    size_t lens[10];
    char ttl[24], label[8];
};
/* Start the write (the invalidation message is built in arena a): 0, or
 * -1 when out of memory (done never runs). */
int cache_l2_set_start(cache_l2 *l2, cache_l2_write *w, arena *a, const char *key, size_t klen,
                       const uint8_t *blob, size_t blen, int64_t ttl_ms, int max_label,
                       int64_t deadline_ms);
int cache_l2_delete_start(cache_l2 *l2, cache_l2_write *w, arena *a, const char *key, size_t klen,
                          int max_label, int64_t deadline_ms);
/* Ends a started write now (CANCELLED) unless it has ended; any thread.
 * Whether Redis ran it is then unknown. */
void cache_l2_write_cancel(cache_l2 *l2, cache_l2_write *w);

/* Publishes the invalidation of key alone (for records cached from another
 * store, e.g. entities, whose writes do not go through Redis), on the event
 * loop without waiting (any thread): a failure is logged naming id (the
 * other replicas then drop their L1 when their subscription recovers). */
void cache_l2_publish(cache_l2 *l2, const char *key, size_t klen, const char *id);

/* ---- records kept in L2 too (cache_records.h) ----
 *
 * A record's value lives under its key, beside a generation counter under
 * its generation key that every change bumps. A load reads both; it fills
 * L2 only if the generation is still the one it read (one script), so a
 * load racing a write never leaves the old record in L2. */
typedef struct cache_l2_record_get cache_l2_record_get;
struct cache_l2_record_get {
    aredis_cmd cmd;
    const char *argv[3];
    size_t lens[3];
    /* The answer: the stored record (a new item, the caller's reference)
     * or NULL, and the generation ("" when none). */
    cache_item *item;
    char gen[24];
    void (*done)(cache_l2_record_get *g, int status);
    void *arg;    /* the caller's */
    cache_l2 *l2; /* cache_l2's */
};
/* One MGET of key and gkey (borrowed until done) on the event loop, ended
 * by deadline_ms or CACHE_L2_COMMAND_MS; done(g, status) runs once on the
 * loop thread, STATUS_OK or the reason in g->cmd.err. */
void cache_l2_record_get_start(cache_l2 *l2, cache_l2_record_get *g, const char *key, size_t klen,
                               const char *gkey, size_t gklen, int64_t deadline_ms);
void cache_l2_record_get_cancel(cache_l2 *l2, cache_l2_record_get *g);
/* Stores blob under key for ttl_ms if gkey still holds gen (the lookup's);
 * sent without waiting (the words are copied). */
void cache_l2_record_fill(cache_l2 *l2, const char *key, size_t klen, const char *gkey,
                          size_t gklen, const uint8_t *blob, size_t blen, int64_t ttl_ms,
                          const char *gen);
/* After a change of record id committed: bumps gkey, deletes key and
 * publishes key's invalidation, in one script sent without waiting (a
 * failure is logged). */
void cache_l2_record_changed(cache_l2 *l2, const char *key, size_t klen, const char *gkey,
                             size_t gklen, const char *id);

#endif
