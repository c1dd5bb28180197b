/* tier_call: the gRPC side of a tier call; see tier_call.h. */
#include "service/tier/tier_call.h"

#include <stdarg.h>
#include <stdio.h>

#include "service/auth/authn.h"
#include "service/core/cancel.h"

tier_ctx tier_ctx_for(rpc_call *call, const char *tier, audit *write_audit) {
    tier_ctx c;
    tier_ctx_make(&c, tier, authn_principal(call), rpc_call_deadline_ms(call),
                  rpc_call_arena(call));
    c.traceparent = rpc_call_traceparent(call);
    c.fresh = rpc_call_wants_fresh(call);
    tier_ctx_audit_writes(&c, call, write_audit);
    return c;
}

void tier_ctx_audit_writes(tier_ctx *c, rpc_call *call, audit *write_audit) {
    if (!write_audit) return;
    c->before_commit = audit_hook_before_commit;
    c->after_commit = audit_hook_after_commit;
    c->commit_sql = audit_hook_commit_sql;
    c->hook_arg = call;
}

/* The audit row's statement ran (autocommitted): the observer must not
 * record the call again. */
static int decode_audit_row(tier_async *op, const PGresult *r) {
    (void)r;
    op->c->after_commit(op->c->hook_arg);
    return STATUS_OK;
}

grpc_status_code tier_pending_audit_row(rpc_call *call, const tier_store *s, audit *write_audit,
                                        ProtobufCMessage *resp) {
    tier_pending_call *pc =
        tier_pending_new(call, "audit", write_audit, 0, tier_render_nothing, resp);
    tier_async *op = pc ? tier_async_new(pc->c, "store the write's audit row", decode_audit_row,
                                         NULL, 0, tier_pending_done, pc)
                        : NULL;
    if (!op || !pc->c->commit_sql) return rpc_call_oom(call);
    char why[256] = "";
    if (pc->c->commit_sql(pc->c->hook_arg, &op->sql, why, sizeof why) != 0) {
        rpc_call_set_error(call, "cannot build the write's audit row: %s", why);
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    return tier_pending_durable(call, s, op);
}

static void fire_cancel(rpc_call *call, void *arg) {
    (void)call;
    cancel_fire(arg);
}

grpc_status_code tier_ctx_watch_cancel(tier_ctx *c, rpc_call *call) {
    cancel_token *t = arena_alloc(rpc_call_arena(call), sizeof *t);
    if (!t) return rpc_call_oom(call);
    cancel_init(t);
    if (rpc_call_on_cancel(call, fire_cancel, t) != 0) return GRPC_STATUS_CANCELLED;
    c->cancel = t;
    return GRPC_STATUS_OK;
}

grpc_status_code tier_status(rpc_call *call, int rc, const tier_ctx *c) {
    return rpc_call_fail(call, rc, c->err);
}

void tier_target(rpc_call *call, const char *fmt, ...) {
    char buf[1100];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n >= 0) audit_add_target(call, buf);
}

/* ---- a call answered from the event loop ---- */

tier_pending_call *tier_pending_new(rpc_call *call, const char *tier, audit *write_audit,
                                    size_t out_size,
                                    grpc_status_code (*render)(tier_pending_call *pc),
                                    ProtobufCMessage *resp) {
    arena *a = rpc_call_arena(call);
    tier_pending_call *pc = arena_zalloc(a, sizeof *pc);
    tier_ctx *c = pc ? arena_alloc(a, sizeof *c) : NULL;
    void *out = c ? arena_zalloc(a, out_size ? out_size : 1) : NULL;
    if (!out) return NULL;
    *c = tier_ctx_for(call, tier, write_audit);
    *pc = (tier_pending_call){call, c, out, resp, NULL, render};
    return pc;
}

tier_async *tier_pending_op(rpc_call *call, const char *tier, audit *write_audit, const char *what,
                            tier_async_decode_fn decode, const void *args, size_t size,
                            grpc_status_code (*render)(tier_pending_call *pc),
                            ProtobufCMessage *resp) {
    tier_pending_call *pc = tier_pending_new(call, tier, write_audit, 0, render, resp);
    tier_async *op =
        pc ? tier_async_new(pc->c, what, decode, args, size, tier_pending_done, pc) : NULL;
    if (op) pc->arg = op->arg;
    return op;
}

grpc_status_code tier_render_nothing(tier_pending_call *pc) {
    (void)pc;
    return GRPC_STATUS_OK;
}

void tier_pending_done(void *arg, int rc) {
    tier_pending_call *pc = arg;
    rpc_call_complete(pc->call,
                      rc == STATUS_OK ? pc->render(pc) : tier_status(pc->call, rc, pc->c));
}

typedef struct {
    const tier_store *s;
    tier_async *op;
} pending_op;

static void cancel_pending(rpc_call *call, void *arg) {
    (void)call;
    pending_op *p = arg;
    tier_async_cancel(p->s, p->op);
}

grpc_status_code tier_pending(rpc_call *call, const tier_store *s, tier_async *op) {
    pending_op *p = arena_alloc(rpc_call_arena(call), sizeof *p);
    if (!p) return rpc_call_oom(call);
    *p = (pending_op){s, op};
    /* Registered before the submit: once submitted, the call may complete
     * on the loop thread at any moment. */
    if (rpc_call_on_cancel(call, cancel_pending, p) != 0) return GRPC_STATUS_CANCELLED;
    tier_async_submit(s, op);
    return RPC_PENDING;
}

grpc_status_code tier_pending_durable(rpc_call *call, const tier_store *s, tier_async *op) {
    (void)call; /* not watched: its cancel must not end op */
    int64_t floor = rpc_now_ms() + TIER_DURABLE_MS;
    if (op->c->deadline_ms < floor) op->c->deadline_ms = floor;
    op->c->cancel = NULL;
    tier_async_submit(s, op);
    return RPC_PENDING;
}
