/* wm_rpc_read: the WorkingMemory handlers that read: Read, List and
 * Render. Only documents actually returned are named in the audit trail
 * (Render names the memory it rendered). */
#include <string.h>

#include "service/auth/authn.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_page.h"
#include "service/working/wm_path.h"
#include "service/working/wm_render.h"
#include "service/working/wm_service_internal.h"

/* ------------------------------------------------------------ Read */

typedef struct {
    wm_record rec;
    wm_addr m;
} read_pending;

static grpc_status_code render_read(tier_pending_call *pc) {
    read_pending *rp = pc->out;
    Memory__V1__WorkingMemoryReadResponse *resp = (Memory__V1__WorkingMemoryReadResponse *)pc->resp;
    if (!(resp->document = wm_render_document(pc->c->ar, &rp->rec))) return rpc_call_oom(pc->call);
    wm_target(pc->call, &rp->m, rp->rec.path);
    return GRPC_STATUS_OK;
}

/* On the event loop (rpc.h's execution model), as every handler here. */
RPC_UNARY_HANDLER(wm_do_read, wm_service, Memory__V1__WorkingMemoryReadRequest,
                  Memory__V1__WorkingMemoryReadResponse) {
    wm_memory_ref ref;
    const char *path;
    RPC_CHECK(wm_check_memory(call, req->memory, &ref));
    RPC_CHECK(wm_check_path(call, "path", req->path, 0, &path));
    tier_pending_call *pc =
        tier_pending_new(call, "working", NULL, sizeof(read_pending), render_read, &resp->base);
    if (!pc) return rpc_call_oom(call);
    read_pending *rp = pc->out;
    rp->m = ref.m;
    tier_async *op =
        wm_store_read_async(&svc->store, pc->c, &ref.m, path, &rp->rec, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

/* ------------------------------------------------------------ List */

typedef struct {
    wm_page page;
    tier_page pg;
    wm_addr m;
} list_pending;

static ProtobufCMessage *render_one(arena *a, const void *rec) {
    Memory__V1__WorkingDocument *d = wm_render_document(a, rec);
    return d ? &d->base : NULL;
}

/* tier_page_kind's name: the path alone (the memory is the call's). */
static const char *name_one(arena *a, const void *rec) {
    return arena_strdup(a, ((const wm_record *)rec)->path);
}

static grpc_status_code render_list(tier_pending_call *pc) {
    static const tier_page_kind docs = {sizeof(wm_record), render_one, name_one};
    list_pending *lp = pc->out;
    const wm_service *svc = pc->arg;
    Memory__V1__WorkingMemoryListResponse *resp = (Memory__V1__WorkingMemoryListResponse *)pc->resp;
    ProtobufCMessage **msgs;
    int cut;
    RPC_CHECK(tier_page_fill(pc->call, &docs, lp->page.recs, lp->page.n,
                             svc->env->max_response_bytes, &msgs, &resp->n_documents, &cut));
    resp->documents = (Memory__V1__WorkingDocument **)msgs;
    size_t last = resp->n_documents;
    if ((lp->page.more || cut) && last > 0) {
        const char *next[1] = {lp->page.recs[last - 1].path};
        if (!(resp->next_page_token = tier_page_seal(pc->call, &lp->pg, next, 1)))
            return rpc_call_oom(pc->call);
    }
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(wm_do_list, wm_service, Memory__V1__WorkingMemoryListRequest,
                  Memory__V1__WorkingMemoryListResponse) {
    wm_memory_ref ref;
    wm_list_in in = {0};
    RPC_CHECK(wm_check_memory(call, req->memory, &ref));
    RPC_CHECK(wm_check_path(call, "path", req->path, WM_PATH_ROOT_OK, &in.dir));
    RPC_CHECK(tier_page_size(call, req->page_size, &in.limit));
    in.m = ref.m;
    tier_pending_call *pc =
        tier_pending_new(call, "working", NULL, sizeof(list_pending), render_list, &resp->base);
    if (!pc) return rpc_call_oom(call);
    list_pending *lp = pc->out;
    lp->m = ref.m;
    pc->arg = svc;
    RPC_CHECK(tier_page_bind(call, authn_principal(call), &req->base, &lp->pg));
    const char *fields[1];
    int present;
    RPC_CHECK(tier_page_open(call, &lp->pg, req->page_token, fields, 1, 1, &present));
    if (present) in.after = fields[0];
    tier_async *op = wm_store_list_async(&svc->store, pc->c, &in, &lp->page, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

/* ------------------------------------------------------------ Render */

typedef struct {
    wm_memory mem;
    wm_memory_ref ref;
    int want_tree;
    int64_t max_chars;
} render_pending;

static grpc_status_code render_render(tier_pending_call *pc) {
    render_pending *rp = pc->out;
    Memory__V1__WorkingMemoryRenderResponse *resp =
        (Memory__V1__WorkingMemoryRenderResponse *)pc->resp;
    wm_rendered out;
    if (wm_render(pc->c->ar, rp->mem.docs, rp->mem.n, rp->want_tree, rp->max_chars, &out) != 0)
        return rpc_call_oom(pc->call);
    resp->text = (char *)out.text;
    resp->content = out.tree ? MEMORY__V1__WORKING_MEMORY_CONTENT__WORKING_MEMORY_CONTENT_TREE
                             : MEMORY__V1__WORKING_MEMORY_CONTENT__WORKING_MEMORY_CONTENT_FULL;
    int global = !rp->ref.per_thread || rp->mem.fell_back;
    resp->scope = global ? MEMORY__V1__WORKING_MEMORY_SCOPE__WORKING_MEMORY_SCOPE_GLOBAL
                         : MEMORY__V1__WORKING_MEMORY_SCOPE__WORKING_MEMORY_SCOPE_PER_THREAD;
    resp->tree_fallback = out.tree_fallback;
    resp->global_fallback = rp->mem.fell_back;
    resp->truncated = out.truncated;
    resp->document_count = (int64_t)rp->mem.n;
    resp->omitted_count = out.omitted;
    resp->chars = out.chars;
    wm_addr rendered = {rp->ref.m.node, rp->mem.fell_back ? "" : rp->ref.m.thread};
    wm_target(pc->call, &rendered, "/");
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(wm_do_render, wm_service, Memory__V1__WorkingMemoryRenderRequest,
                  Memory__V1__WorkingMemoryRenderResponse) {
    wm_memory_ref ref;
    RPC_CHECK(wm_check_memory(call, req->memory, &ref));
    int want_tree;
    switch (req->content) {
    case MEMORY__V1__WORKING_MEMORY_CONTENT__WORKING_MEMORY_CONTENT_UNSPECIFIED:
    case MEMORY__V1__WORKING_MEMORY_CONTENT__WORKING_MEMORY_CONTENT_FULL: want_tree = 0; break;
    case MEMORY__V1__WORKING_MEMORY_CONTENT__WORKING_MEMORY_CONTENT_TREE: want_tree = 1; break;
    default:
        return rpc_call_invalid(call, "content: %d is not a memory.v1.WorkingMemoryContent",
                                (int)req->content);
    }
    int64_t max_chars = req->max_chars ? req->max_chars : WM_RENDER_DEFAULT_CHARS;
    if (max_chars < 1 || max_chars > WM_RENDER_MAX_CHARS)
        return rpc_call_invalid(call, "max_chars: %d; must be 1 to %d (0 = %d)", req->max_chars,
                                WM_RENDER_MAX_CHARS, WM_RENDER_DEFAULT_CHARS);
    tier_pending_call *pc =
        tier_pending_new(call, "working", NULL, sizeof(render_pending), render_render, &resp->base);
    if (!pc) return rpc_call_oom(call);
    render_pending *rp = pc->out;
    rp->ref = ref;
    rp->want_tree = want_tree;
    rp->max_chars = max_chars;
    wm_render_in in = {
        .m = ref.m, .global_fallback = ref.per_thread, .full_budget = want_tree ? 0 : max_chars};
    tier_async *op =
        wm_store_render_async(&svc->store, pc->c, &in, &rp->mem, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}
