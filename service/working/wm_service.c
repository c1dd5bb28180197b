/* wm_service: the WorkingMemory tier (descriptor, state), the request
 * checks its handlers share and document rendering; the handlers are in
 * wm_rpc_read.c and wm_rpc_write.c. */
#include <stdlib.h>
#include <string.h>

#include "service/auth/authn.h"
#include "service/auth/nsglob.h"
#include "service/core/text.h"
#include "service/tier/tier_check.h"
#include "service/working/wm_path.h"
#include "service/working/wm_service_internal.h"

/* ------------------------------------------------------------ checks */

grpc_status_code wm_check_memory(rpc_call *call, const Memory__V1__WorkingMemoryAddress *mem,
                                 wm_memory_ref *out) {
    char why[256];
    if (!mem) return rpc_call_invalid(call, "memory: required (node and scope)");
    if (!mem->node[0]) return rpc_call_invalid(call, "memory.node: required (agent:workflow:node)");
    if (nsglob_check_namespace(mem->node, strlen(mem->node), why, sizeof why) != 0)
        return rpc_call_invalid(call, "memory.node: \"%s\" is not a namespace: %s",
                                text_quote(rpc_call_arena(call), mem->node), why);
    switch (mem->scope) {
    case MEMORY__V1__WORKING_MEMORY_SCOPE__WORKING_MEMORY_SCOPE_UNSPECIFIED:
    case MEMORY__V1__WORKING_MEMORY_SCOPE__WORKING_MEMORY_SCOPE_GLOBAL:
        if (mem->thread_id[0])
            return rpc_call_invalid(call, "memory.thread_id: only with"
                                          " WORKING_MEMORY_SCOPE_PER_THREAD");
        out->per_thread = 0;
        break;
    case MEMORY__V1__WORKING_MEMORY_SCOPE__WORKING_MEMORY_SCOPE_PER_THREAD:
        RPC_CHECK(
            tier_check_name(call, "memory.thread_id", mem->thread_id, WM_THREAD_MAX_CHARS, 1));
        out->per_thread = 1;
        break;
    default:
        return rpc_call_invalid(call, "memory.scope: %d is not a memory.v1.WorkingMemoryScope",
                                (int)mem->scope);
    }
    out->m.node = mem->node;
    out->m.thread = mem->thread_id;
    if (principal_ns_allows(authn_principal(call), mem->node)) return GRPC_STATUS_OK;
    rpc_call_set_error(call, "node \"%s\" is outside the token's ns claim", mem->node);
    return GRPC_STATUS_PERMISSION_DENIED;
}

grpc_status_code wm_check_path(rpc_call *call, const char *field, const char *path, unsigned flags,
                               const char **out) {
    char why[256];
    char *buf = arena_alloc(rpc_call_arena(call), WM_PATH_MAX + 1);
    if (!buf) return rpc_call_oom(call);
    if (wm_path_normalize(path, strlen(path), flags, buf, why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s: \"%s\" is not a path: %s", field,
                                text_quote(rpc_call_arena(call), path), why);
    *out = buf;
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ rendering */

const char *wm_name(arena *a, const wm_addr *m, const char *path) {
    return arena_printf(a, "%s%s%s%s", m->node, m->thread[0] ? "@" : "", m->thread, path);
}

void wm_target(rpc_call *call, const wm_addr *m, const char *path) {
    tier_target(call, "%s%s%s%s", m->node, m->thread[0] ? "@" : "", m->thread, path);
}

Memory__V1__WorkingDocument *wm_render_document(arena *a, const wm_record *rec) {
    Memory__V1__WorkingDocument *d = arena_message(a, &memory__v1__working_document__descriptor);
    if (!d) return NULL;
    d->path = (char *)rec->path;
    if (rec->content) d->content = (char *)rec->content;
    d->chars = rec->chars;
    if (!(d->meta = tier_meta_render(a, &rec->meta))) return NULL;
    return d;
}

/* ------------------------------------------------------------ the tier */

static int wm_open(tier_env *env, void **state, char *err, size_t errlen) {
    wm_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    if (!svc) return -1;
    svc->env = env;
    svc->store = tier_store_on(env->pg, env->pga, env->max_response_bytes);
    return 0;
}

#define SVC "memory.v1.WorkingMemory"
static const rpc_method methods[] = {
    RPC_METHOD_UNARY(SVC, "Read", memory__v1__working_memory_read, "working:read", wm_do_read),
    RPC_METHOD_UNARY(SVC, "List", memory__v1__working_memory_list, "working:read", wm_do_list),
    RPC_METHOD_UNARY(SVC, "Render", memory__v1__working_memory_render, "working:read",
                     wm_do_render),
    RPC_METHOD_UNARY(SVC, "Append", memory__v1__working_memory_append, "working:write",
                     wm_do_append),
    RPC_METHOD_UNARY(SVC, "Update", memory__v1__working_memory_update, "working:write",
                     wm_do_update),
    RPC_METHOD_UNARY(SVC, "DeleteDocument", memory__v1__working_memory_delete_document,
                     "working:write", wm_do_delete),
};

static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG}};

static const tier_records records = TIER_RECORDS(
    MEMORY__V1__TIER__TIER_WORKING, TIER_ORDER_RECORDS + 30, wm_erase, wm_export, "working_memory");

const tier working_tier = {TIER_FIELDS("working", services, methods, wm_open, free),
                           .records = &records};
