/* cache_records: cache-aside for records another tier keeps in its own
 * store (GlobalMemory's entities), behind an API that speaks records, not
 * bytes: the tier hands over a record as the protobuf message it answers
 * with, plus its owner and label, and gets one back. This module keys it
 * per tenant, packs it, keeps it in L1 with single flight (cache_aside.h),
 * applies the caller's read diode to every copy it hands out, and
 * announces changes to every replica (cache_l2_publish). */
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
} cache_record;

/* Loads the record for the cache whatever its owner and label (the cache
 * is tenant-wide; the diode is applied to each copy): STATUS_OK with *out
 * filled (in arena a), STATUS_ENOTFOUND, or another code: a failure of
 * this caller only (its deadline, its backend). */
typedef int (*cache_records_load_fn)(void *arg, arena *a, cache_record *out);

/* Records of one kind ('e': entities), whose messages are of type desc.
 * ca and l2 are borrowed (l2 may be NULL: no Redis, one replica). NULL when
 * out of memory. */
cache_records *cache_records_create(cache_aside *ca, cache_l2 *l2, char kind,
                                    const ProtobufCMessageDescriptor *desc);
void cache_records_free(cache_records *r); /* accepts NULL */

/* Record id of p's tenant as p may see it (reading with breadth): from L1,
 * or loaded by this call or a concurrent one. STATUS_OK with *out (a
 * message in arena a); STATUS_ENOTFOUND when absent or hidden from p;
 * STATUS_ETIMEOUT, STATUS_ENOMEM, or the loader's code. */
int cache_records_get(cache_records *r, const principal *p, principal_breadth breadth,
                      const char *id, int64_t deadline_ms, arena *a, cache_records_load_fn load,
                      void *arg, ProtobufCMessage **out);

/* cache_records_get from L1 alone, never waiting (for a completion-queue
 * thread): STATUS_OK or STATUS_ENOTFOUND as there, or CACHE_RECORDS_MISS
 * when L1 does not hold the record (then cache_records_get, which may
 * block). */
#define CACHE_RECORDS_MISS 1
int cache_records_peek(cache_records *r, const principal *p, principal_breadth breadth,
                       const char *id, arena *a, ProtobufCMessage **out);
/* After a change of record id committed: this replica's L1 forgets it now,
 * the others when the announcement reaches them (sent on the event loop
 * without waiting; a failed one is logged: they drop their L1 when their
 * subscription recovers). The key is built in arena a. Never blocks. */
void cache_records_changed(cache_records *r, arena *a, const char *tenant, const char *id);

/* How many loads ran (for tests of single flight). */
uint64_t cache_records_loads(cache_records *r);

#endif
