/* cache_records: record cache-aside for other tiers; see cache_records.h. */
#include "service/cache/cache_records.h"

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
};

cache_records *cache_records_create(cache_aside *ca, cache_l2 *l2, char kind,
                                    const ProtobufCMessageDescriptor *desc) {
    cache_records *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->ca = ca;
    r->l2 = l2;
    r->kind = kind;
    r->desc = desc;
    return r;
}

void cache_records_free(cache_records *r) { free(r); }

typedef struct {
    arena *a;
    cache_records_load_fn load;
    void *arg;
} load_call;

/* cache_aside_load_fn: the tier's record, packed into an item. */
static int load_item(void *arg, cache_item **out) {
    load_call *l = arg;
    cache_record rec;
    int rc = l->load(l->arg, l->a, &rec);
    if (rc != STATUS_OK) return rc;
    size_t n = protobuf_c_message_get_packed_size(rec.msg);
    uint8_t *buf = arena_alloc(l->a, n ? n : 1);
    if (!buf) return STATUS_ENOMEM;
    protobuf_c_message_pack(rec.msg, buf);
    *out = cache_item_create(rec.owner, strlen(rec.owner), buf, n, rec.label, rec.update_us / 1000,
                             clock_wall_ms(NULL) + RECORD_TTL_MS);
    return *out ? STATUS_OK : STATUS_ENOMEM;
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

int cache_records_get(cache_records *r, const principal *p, principal_breadth breadth,
                      const char *id, int64_t deadline_ms, arena *a, cache_records_load_fn load,
                      void *arg, ProtobufCMessage **out) {
    *out = NULL;
    size_t klen;
    const char *key = cache_key_record(a, r->kind, principal_tenant(p), id, &klen);
    if (!key) return STATUS_ENOMEM;
    load_call l = {a, load, arg};
    cache_item *it = NULL;
    int from_l1;
    int rc = cache_aside_get(r->ca, key, klen, deadline_ms, load_item, &l, &it, &from_l1);
    return rc == STATUS_OK ? hand_out(r, p, breadth, it, a, out) : rc;
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
    if (r->l2) cache_l2_publish(r->l2, key, klen, id);
}

uint64_t cache_records_loads(cache_records *r) { return cache_aside_loads(r->ca); }
