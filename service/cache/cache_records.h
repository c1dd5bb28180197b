/* cache_records: cache-aside for records another tier keeps in its own
 * store (GlobalMemory's entities), behind an API that speaks records, not
 * bytes: the tier hands over a record as the protobuf message it answers
 * with, plus its owner and label, and gets one back. This module keys it
 * per tenant, packs it, keeps it in L1 with single flight (cache_aside.h),
 * applies the caller's read diode to every copy it hands out, and
 * announces changes to every replica (cache_l2_publish).
 *
 * A kind may be kept in L2 (Redis) too: a lookup that misses L1 then reads
 * L2 before the tier's store, and what the store returns fills L2 unless a
 * change came meanwhile (cache_l2_record_fill's generation check); a change
 * bumps the generation, deletes the L2 copy and announces it, in one
 * script. A change whose script cannot reach Redis is logged: L2 may then
 * serve the old copy until its TTL (l2_ttl_ms) ends. */
#ifndef MEMORYD_CACHE_CACHE_RECORDS_H
#define MEMORYD_CACHE_CACHE_RECORDS_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

#include "service/auth/principal.h"
#include "service/cache/cache_aside.h"
#include "service/cache/cache_l2.h"
#include "service/core/arena.h"

typedef struct cache_records cache_records;

/* A record as its tier loads it. */
typedef struct cache_record {
    const ProtobufCMessage *msg; /* what the tier answers with */
    const char *owner;
    int label;
    int64_t update_us; /* Unix µs of its last change */
    int64_t expire_ms; /* Unix ms it expires at; 0 = never */
} cache_record;

/* Records of one kind (a lower-case letter; 'e': entities, 'n': entries),
 * whose messages are of type desc. ca and l2 are borrowed (l2 may be NULL:
 * no Redis, one replica). l2_ttl_ms > 0 keeps them in L2 too, that long at
 * most. NULL when out of memory. */
cache_records *cache_records_create(cache_aside *ca, cache_l2 *l2, char kind,
                                    const ProtobufCMessageDescriptor *desc, int64_t l2_ttl_ms);
void cache_records_free(cache_records *r); /* accepts NULL */

/* Record id of p's tenant as p may see it (reading with breadth), from L1
 * alone: STATUS_OK with *out (a message in arena a), STATUS_ENOTFOUND
 * (L1's copy is hidden from p), or CACHE_RECORDS_MISS when L1 does not
 * hold the record (then cache_records_get). */
#define CACHE_RECORDS_MISS 1
int cache_records_peek(cache_records *r, const principal *p, principal_breadth breadth,
                       const char *id, arena *a, ProtobufCMessage **out);

/* ---- a fetch through the cache, without waiting ----
 *
 * One caller's fetch of record id of its tenant as it may see it: from
 * L1, or loaded by this caller (the tier's start) or a concurrent one.
 * The caller fills the fetch (zeroed, in its call's arena) and calls
 * cache_records_get; when it is the loader, start(start_arg, f) begins
 * the tier's load whatever the record's owner and label (the cache is
 * tenant-wide; the diode is applied to each copy), which ends with
 * cache_records_loaded. The answer comes to done once (on the thread that
 * ended the load): STATUS_OK with a message in f->a, STATUS_ENOTFOUND
 * (absent, or hidden from f->p), STATUS_ENOMEM, or the load's own failure
 * when this caller ran it. */
typedef struct cache_records_fetch cache_records_fetch;
/* Where a fetch's answer came from (f->level, set before done). */
#define CACHE_RECORDS_FROM_L1 1    /* L1, or a concurrent lookup's load */
#define CACHE_RECORDS_FROM_L2 2    /* Redis */
#define CACHE_RECORDS_FROM_STORE 3 /* the tier's load */
struct cache_records_fetch {
    cache_aside_wait w;         /* private */
    cache_records *r;           /* private */
    cache_aside_flight *flight; /* private: the load this fetch runs */
    cache_l2_record_get l2get;  /* private: its L2 lookup */
    const char *gkey;           /* private: the generation key */
    size_t gklen;               /* private */
    int l2_state;               /* private (atomic): 1 looking in L2, 2 generation known */
    int64_t deadline_ms;        /* the caller's (bounds the L2 lookup) */
    int level;                  /* CACHE_RECORDS_FROM_*, set before done */
    const principal *p;
    principal_breadth breadth;
    arena *a;
    void (*start)(void *start_arg, cache_records_fetch *f);
    void *start_arg;
    void (*done)(void *done_arg, int rc, ProtobufCMessage *m);
    void *done_arg;
};

/* Sets up f for a caller p reading with breadth (its copies in a), whose
 * deadline bounds the L2 lookup: start(arg, f) loads the record when no
 * level has it, done(arg, rc, m) answers. */
void cache_records_fetch_init(cache_records_fetch *f, const principal *p, principal_breadth breadth,
                              arena *a, int64_t deadline_ms,
                              void (*start)(void *arg, cache_records_fetch *f),
                              void (*done)(void *arg, int rc, ProtobufCMessage *m), void *arg);

/* STATUS_OK or STATUS_ENOTFOUND with *out at once (from L1; done not
 * called), CACHE_RECORDS_PENDING (done will be called, perhaps before
 * this returns), or STATUS_ECANCELLED (cache_records_cancel came first)
 * or STATUS_ENOMEM (done not called). */
#define CACHE_RECORDS_PENDING 2
int cache_records_get(cache_records *r, cache_records_fetch *f, const char *id,
                      ProtobufCMessage **out);
/* The end of f's load: STATUS_OK with rec (its message is packed at once;
 * rec may live in the loader's arena), STATUS_ENOTFOUND, or the load's
 * own failure. */
void cache_records_loaded(cache_records_fetch *f, int rc, const cache_record *rec);
/* The caller's client is gone (any thread; also before the fetch, which
 * then returns STATUS_ECANCELLED): cache_aside_cancel's answer
 * (CACHE_ASIDE_LEFT: end the call yourself; CACHE_ASIDE_LOADING: cancel
 * your load; 0: done has run or is running, or the fetch is yet to come). */
int cache_records_cancel(cache_records *r, cache_records_fetch *f);

/* After a change of record id committed: this replica's L1 forgets it now,
 * the others when the announcement reaches them (sent on the event loop
 * without waiting; a failed one is logged: they drop their L1 when their
 * subscription recovers). The key is built in arena a. Never blocks. */
void cache_records_changed(cache_records *r, arena *a, const char *tenant, const char *id);

/* How many loads ran (for tests of single flight). */
uint64_t cache_records_loads(cache_records *r);

#endif
