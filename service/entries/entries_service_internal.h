/* entries_service_internal: what the Entries handlers (entries_rpc_read.c,
 * entries_rpc_write.c) share with entries_service.c (the tier, the request
 * checks, rendering). Not for other modules. */
#ifndef MEMORYD_ENTRIES_ENTRIES_SERVICE_INTERNAL_H
#define MEMORYD_ENTRIES_ENTRIES_SERVICE_INTERNAL_H

#include "memory/v1/entries.pb-c.h"
#include "service/cache/cache_records.h"
#include "service/entries/entries_service.h"
#include "service/entries/entries_store.h"
#include "service/tier/tier.h"
#include "service/tier/tier_call.h"

#define ENTRIES_TAGS_MAX 32
#define ENTRIES_TAG_MAX_CHARS 64
#define ENTRIES_CONTENT_TYPE_MAX 128 /* characters */

typedef struct entries_service {
    const tier_env *env;    /* audit trail, PII policy, answer budget */
    cache_records *records; /* the router's copies (env->entry_cache); NULL: none */
    entries_store store;
} entries_service;

/* The id of entry ns/key in the record cache (the namespace's length
 * first, so no two entries share one), in arena a; NULL when out of
 * memory. */
const char *entries_cache_id(arena *a, const char *ns, const char *key);
/* After a change of ns/key committed: every replica's copy is dropped. */
void entries_changed(const entries_service *svc, tier_ctx *c, const char *ns, const char *key);

/* Request checks naming the field. An empty namespace pattern becomes
 * "*:*:*", an empty key pattern "*". */
grpc_status_code entries_check_namespace(rpc_call *call, const char *field, const char *ns);
grpc_status_code entries_check_key(rpc_call *call, const char *field, const char *key);
grpc_status_code entries_check_ns_pattern(rpc_call *call, const char *field, const char **pat);
grpc_status_code entries_check_key_pattern(rpc_call *call, const char **pat);
/* PERMISSION_DENIED when ns is outside the token's ns claim. */
grpc_status_code entries_check_ns_allowed(rpc_call *call, const principal *p, const char *ns);
/* Both of a single-entry call (namespace, key) and the ns claim. */
grpc_status_code entries_check_address(rpc_call *call, const char *ns, const char *key);

/* Its part of a routed query (entries_recent.c). */
extern const tier_route entries_route;

/* The entry (ns/key) in the call's audit row. */
void entries_target(rpc_call *call, const char *ns, const char *key);
Memory__V1__Entry *entries_render(arena *a, const entries_record *r);

/* The tier's eraser and exporter (entries_erase.c; tier_erase_fn,
 * tier_export_fn). */
int entries_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count);
int entries_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                   void *emit_arg);
/* The handlers. */
RPC_UNARY_FN(entries_do_write);
RPC_UNARY_FN(entries_do_read);
RPC_UNARY_FN(entries_do_list);
RPC_UNARY_FN(entries_do_search);
RPC_UNARY_FN(entries_do_delete);
RPC_UNARY_FN(entries_do_stats);
RPC_UNARY_FN(entries_do_append);
RPC_UNARY_FN(entries_do_replace);
RPC_UNARY_FN(entries_do_purge);

#endif
