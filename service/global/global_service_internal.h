/* global_service_internal: what the GlobalMemory handlers
 * (global_rpc_entities.c, global_rpc_graph.c, global_rpc_tasks.c) share
 * with global_service.c (the tier, the PII rule, rendering). Not for other
 * modules. */
#ifndef MEMORYD_GLOBAL_GLOBAL_SERVICE_INTERNAL_H
#define MEMORYD_GLOBAL_GLOBAL_SERVICE_INTERNAL_H

#include "memory/v1/global_memory.pb-c.h"
#include "service/cache/cache_records.h"
#include "service/global/global_service.h"
#include "service/global/global_store.h"
#include "service/pii/pii_policy.h"
#include "service/tier/tier.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_page.h"

#define GLOBAL_TYPE_MAX 128 /* characters of an entity, relationship or task type */

typedef struct global_service {
    const tier_env *env;     /* audit trail, PII policy, answer budget */
    int max_depth;           /* Traverse max_depth ceiling, 1..10 */
    cache_records *entities; /* GetEntity through the cache; NULL: straight to the store */
    global_store store;
} global_service;

/* The tier's eraser and exporter (global_erase.c; tier_erase_fn,
 * tier_export_fn). */
int global_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count);
int global_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                  void *emit_arg);

/* The PII policy over what a write stores: the field naming the record
 * (id_path / *id: never redacted), then the fields f[0..n). With
 * `pii:write` the kinds found go to *kinds. */
grpc_status_code global_pii(rpc_call *call, const global_service *svc, const char *id_path,
                            const char **id, pii_field *f, size_t n, const char *const **kinds,
                            size_t *nkinds);

/* An entity query's criteria, checked (errors name prefix + the field:
 * "graph_query.type"), into in's type, text_query and predicates (with
 * their operands as JSON text). */
grpc_status_code global_check_query(rpc_call *call, const char *prefix, const char *type,
                                    const char *text_query,
                                    Memory__V1__PropertyPredicate *const *pps, size_t npreds,
                                    global_query_in *in);
/* A traversal's start, relationship types, direction and depth, checked
 * (errors name prefix + the field), into in. */
grpc_status_code global_check_traverse(rpc_call *call, const global_service *svc,
                                       const char *prefix, const char *start_id, char *const *types,
                                       size_t ntypes, int direction, int max_depth,
                                       global_traverse_in *in);
Memory__V1__Entity *global_render_entity(arena *a, const global_entity *e);
Memory__V1__Relationship *global_render_rel(arena *a, const global_rel *r);
Memory__V1__Task *global_render_task(arena *a, const global_task *t);
/* Pages of entities and of tasks (tier_page_fill). */
extern const tier_page_kind global_entity_page, global_task_page;
/* Its part of a routed query (global_router.c). */
extern const tier_route global_route;

/* The handlers. */
RPC_UNARY_FN(global_do_put_entity);
RPC_UNARY_FN(global_do_get_entity);
RPC_UNARY_FN(global_do_delete_entity);
RPC_UNARY_FN(global_do_query_entities);
RPC_UNARY_FN(global_do_put_rel);
RPC_UNARY_FN(global_do_delete_rel);
RPC_UNARY_FN(global_do_traverse);
RPC_UNARY_FN(global_do_record_task);
RPC_UNARY_FN(global_do_list_tasks);

#endif
