/* cache_records: record cache-aside for other tiers; see cache_records.h. */
#include "service/cache/cache_records.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/cache/cache_codec.h"
#include "service/core/clock.h"
#include "service/core/log.h"

/* How long a loaded record may stay in L1 (L1's own TTL caps it too). */
#define RECORD_TTL_MS (3600 * 1000)

struct cache_records {
    cache_aside *ca;
    cache_l2 *l2;
    char kind;
    const ProtobufCMessageDescriptor *desc;
    int64_t l2_ttl_ms; /* > 0 with l2: records are kept in L2 too */
};

cache_records *cache_records_create(cache_aside *ca, cache_l2 *l2, char kind,
                                    const ProtobufCMessageDescriptor *desc, int64_t l2_ttl_ms) {
    cache_records *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->ca = ca;
    r->l2 = l2;
    r->kind = kind;
    r->desc = desc;
    r->l2_ttl_ms = l2 ? l2_ttl_ms : 0;
    return r;
}

/* A record's generation key: its kind in upper case, so no record's own
 * key can equal another's generation key. */
static char *generation_key(arena *a, const cache_records *r, const char *tenant, const char *id,
                            size_t *len) {
    return cache_key_record(a, (char)toupper((unsigned char)r->kind), tenant, id, len);
}

void cache_records_free(cache_records *r) { free(r); }

/* The record packed into an item (the wire bytes pass through arena a;
 * NULL when out of memory). */
static cache_item *pack(arena *a, const cache_record *rec) {
    size_t n = protobuf_c_message_get_packed_size(rec->msg);
    uint8_t *buf = arena_alloc(a, n ? n : 1);
    if (!buf) return NULL;
    protobuf_c_message_pack(rec->msg, buf);
    int64_t expire = clock_wall_ms(NULL) + RECORD_TTL_MS;
    if (rec->expire_ms > 0 && rec->expire_ms < expire) expire = rec->expire_ms;
    return cache_item_create(rec->owner, strlen(rec->owner), buf, n, rec->label,
                             rec->update_us / 1000, expire);
}

/* The copy it (whose reference this takes) as p may see it: the read
 * diode on every copy, since the cache is shared by the tenant. */
static int hand_out(cache_records *r, const principal *p, principal_breadth breadth, cache_item *it,
                    arena *a, ProtobufCMessage **out) {
    int visible = principal_may_read(p, breadth, principal_tenant(p), it->owner, it->label);
    if (visible)
        *out = protobuf_c_message_unpack(r->desc, arena_protobuf_allocator(a), it->value_len,
                                         it->value);
    cache_item_unref(it);
    if (!visible) return STATUS_ENOTFOUND;
    return *out ? STATUS_OK : STATUS_ENOMEM;
}

/* The L2 lookup answered (loop thread): a copy there ends the load;
 * otherwise the tier loads, and what it loads fills L2 if the generation
 * read here still holds then. A cancelled lookup ends the load. */
static void l2_looked(cache_l2_record_get *g, int status) {
    cache_records_fetch *f = g->arg;
    if (status == STATUS_OK && g->item) {
        f->level = CACHE_RECORDS_FROM_L2;
        cache_aside_loaded(f->r->ca, f->flight, STATUS_OK, g->item);
        return;
    }
    if (status == STATUS_ECANCELLED) {
        cache_aside_loaded(f->r->ca, f->flight, status, NULL);
        return;
    }
    /* Redis down or slow: the store answers, and L2 is left alone. */
    __atomic_store_n(&f->l2_state, status == STATUS_OK ? 2 : 0, __ATOMIC_RELEASE);
    f->level = CACHE_RECORDS_FROM_STORE;
    f->start(f->start_arg, f);
}

/* cache_aside_start_fn: this fetch loads: from L2 when the kind is kept
 * there, else (or then) the tier starts its load. */
static void start_load(void *arg, cache_aside_flight *fl) {
    cache_records_fetch *f = arg;
    cache_records *r = f->r;
    f->flight = fl;
    if (f->gkey) {
        f->l2get.done = l2_looked;
        f->l2get.arg = f;
        __atomic_store_n(&f->l2_state, 1, __ATOMIC_RELEASE);
        cache_l2_record_get_start(r->l2, &f->l2get, f->w.key, f->w.klen, f->gkey, f->gklen,
                                  f->deadline_ms);
        return;
    }
    f->level = CACHE_RECORDS_FROM_STORE;
    f->start(f->start_arg, f);
}

/* cache_aside_done_fn: this fetch's answer, through its diode. */
static void fetched(void *arg, int rc, cache_item *it) {
    cache_records_fetch *f = arg;
    ProtobufCMessage *m = NULL;
    if (!f->flight) f->level = CACHE_RECORDS_FROM_L1; /* another lookup's load */
    if (rc == STATUS_OK) rc = hand_out(f->r, f->p, f->breadth, it, f->a, &m);
    f->done(f->done_arg, rc, m);
}

int cache_records_get(cache_records *r, cache_records_fetch *f, const char *id,
                      ProtobufCMessage **out) {
    *out = NULL;
    size_t klen;
    const char *key = cache_key_record(f->a, r->kind, principal_tenant(f->p), id, &klen);
    if (!key) return STATUS_ENOMEM;
    if (r->l2_ttl_ms > 0 &&
        !(f->gkey = generation_key(f->a, r, principal_tenant(f->p), id, &f->gklen)))
        return STATUS_ENOMEM;
    f->r = r;
    f->level = CACHE_RECORDS_FROM_L1;
    f->w.key = key;
    f->w.klen = klen;
    f->w.start = start_load;
    f->w.start_arg = f;
    f->w.done = fetched;
    f->w.done_arg = f;
    cache_item *it = NULL;
    int rc = cache_aside_fetch(r->ca, &f->w, &it);
    if (rc == CACHE_ASIDE_PENDING) return CACHE_RECORDS_PENDING;
    return rc == STATUS_OK ? hand_out(r, f->p, f->breadth, it, f->a, out) : rc;
}

/* Keeps it in L2 for the rest of its life there (the kind's TTL, or its
 * own expiry if sooner), unless it changed since the lookup. */
static void fill_l2(cache_records_fetch *f, const cache_item *it) {
    int64_t ttl = f->r->l2_ttl_ms, left = it->expire_ms - clock_wall_ms(NULL);
    if (left < ttl) ttl = left;
    size_t blen;
    uint8_t *blob = ttl > 0 ? cache_blob_encode(f->a, it, &blen) : NULL;
    if (blob)
        cache_l2_record_fill(f->r->l2, f->w.key, f->w.klen, f->gkey, f->gklen, blob, blen, ttl,
                             f->l2get.gen);
}

void cache_records_loaded(cache_records_fetch *f, int rc, const cache_record *rec) {
    cache_item *it = NULL;
    if (rc == STATUS_OK && !(it = pack(f->a, rec))) rc = STATUS_ENOMEM;
    if (it && __atomic_load_n(&f->l2_state, __ATOMIC_ACQUIRE) == 2) fill_l2(f, it);
    cache_aside_loaded(f->r->ca, f->flight, rc, it);
}

int cache_records_cancel(cache_records *r, cache_records_fetch *f) {
    int rc = cache_aside_cancel(r->ca, &f->w);
    /* The load may still be in L2: end that too (the caller ends its own). */
    if (rc == CACHE_ASIDE_LOADING && __atomic_load_n(&f->l2_state, __ATOMIC_ACQUIRE) == 1)
        cache_l2_record_get_cancel(r->l2, &f->l2get);
    return rc;
}

int cache_records_peek(cache_records *r, const principal *p, principal_breadth breadth,
                       const char *id, arena *a, ProtobufCMessage **out) {
    *out = NULL;
    size_t klen;
    const char *key = cache_key_record(a, r->kind, principal_tenant(p), id, &klen);
    if (!key) return STATUS_ENOMEM;
    cache_item *it = cache_aside_peek(r->ca, key, klen);
    return it ? hand_out(r, p, breadth, it, a, out) : CACHE_RECORDS_MISS;
}

void cache_records_changed(cache_records *r, arena *a, const char *tenant, const char *id) {
    size_t klen;
    const char *key = cache_key_record(a, r->kind, tenant, id, &klen);
    if (!key) {
        /* Without the key nothing can be dropped: flush this replica. */
        log_fields(LOG_WARN, "record invalidation: out of memory; L1 of this replica cleared",
                   LOG_F_STR, "id", id, LOG_F_END);
        cache_aside_invalidate_all(r->ca);
        return;
    }
    cache_aside_invalidate(r->ca, key, klen);
    if (!r->l2) return;
    size_t gklen;
    const char *gkey = r->l2_ttl_ms > 0 ? generation_key(a, r, tenant, id, &gklen) : NULL;
    if (gkey) cache_l2_record_changed(r->l2, key, klen, gkey, gklen, id);
    else cache_l2_publish(r->l2, key, klen, id);
}

uint64_t cache_records_loads(cache_records *r) { return cache_aside_loads(r->ca); }

void cache_records_fetch_init(cache_records_fetch *f, const principal *p, principal_breadth breadth,
                              arena *a, int64_t deadline_ms,
                              void (*start)(void *arg, cache_records_fetch *f),
                              void (*done)(void *arg, int rc, ProtobufCMessage *m), void *arg) {
    f->p = p;
    f->breadth = breadth;
    f->a = a;
    f->deadline_ms = deadline_ms;
    f->start = start;
    f->start_arg = arg;
    f->done = done;
    f->done_arg = arg;
}
