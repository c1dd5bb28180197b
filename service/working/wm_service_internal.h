/* wm_service_internal: what the WorkingMemory handlers (wm_rpc_*.c) share
 * with wm_service.c (the tier, the request checks, rendering) and the
 * eraser. Not for other modules. */
#ifndef MEMORYD_WORKING_WM_SERVICE_INTERNAL_H
#define MEMORYD_WORKING_WM_SERVICE_INTERNAL_H

#include "memory/v1/working_memory.pb-c.h"
#include "service/tier/tier.h"
#include "service/tier/tier_call.h"
#include "service/working/wm_store.h"

#define WM_THREAD_MAX_CHARS 128
#define WM_RENDER_DEFAULT_CHARS 4000
#define WM_RENDER_MAX_CHARS 500000
#define WM_FIND_MAX_CHARS 65536

typedef struct wm_service {
    const tier_env *env; /* audit trail, PII policy, answer budget */
    wm_store store;
} wm_service;

/* A request's memory, checked and resolved: its node, its thread ("" for
 * the node's global memory) and whether PER_THREAD was asked for. */
typedef struct wm_memory_ref {
    wm_addr m;
    int per_thread;
} wm_memory_ref;

/* The request's `memory` (INVALID_ARGUMENT naming memory.node,
 * memory.scope or memory.thread_id) within the token's ns claim
 * (PERMISSION_DENIED otherwise). */
grpc_status_code wm_check_memory(rpc_call *call, const Memory__V1__WorkingMemoryAddress *mem,
                                 wm_memory_ref *out);
/* A path normalized (wm_path) into the call's arena: INVALID_ARGUMENT
 * naming field otherwise. flags: wm_path's. */
grpc_status_code wm_check_path(rpc_call *call, const char *field, const char *path, unsigned flags,
                               const char **out);

/* A document's name in the audit trail and messages: node, "@thread" for
 * a thread's memory, then the path. NULL when out of memory. */
const char *wm_name(arena *a, const wm_addr *m, const char *path);
/* The document in the call's audit row. */
void wm_target(rpc_call *call, const wm_addr *m, const char *path);
/* rec as a memory.v1.WorkingDocument in a (borrowing its strings). */
Memory__V1__WorkingDocument *wm_render_document(arena *a, const wm_record *rec);

/* The tier's eraser and exporter (wm_erase.c). */
int wm_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count);
int wm_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
              void *emit_arg);

/* The handlers. */
RPC_UNARY_FN(wm_do_read);
RPC_UNARY_FN(wm_do_list);
RPC_UNARY_FN(wm_do_render);
RPC_UNARY_FN(wm_do_append);
RPC_UNARY_FN(wm_do_update);
RPC_UNARY_FN(wm_do_delete);

#endif
