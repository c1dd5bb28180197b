/* tier_call: the gRPC side of a tier call: the storage context built from
 * the call, the store's code turned into the call's status, and the
 * records the call touched named in the audit trail. */
#ifndef MEMORYD_TIER_TIER_CALL_H
#define MEMORYD_TIER_TIER_CALL_H

#include "service/audit/audit.h"
#include "service/rpc/rpc.h"
#include "service/tier/tier_ctx.h"
#include "service/tier/tier_sql.h"

/* The context for call in tier ("entries": scopes "<tier>:read" and
 * "<tier>:write"): the call's principal, deadline and arena. With
 * write_audit (the audit trail, for writes) the call's audit row is
 * written inside the write's transaction, so data and audit commit
 * together; NULL for reads. */
tier_ctx tier_ctx_for(rpc_call *call, const char *tier, audit *write_audit);
/* Gives c (made for call) the audit hooks of a write: tier_ctx_for's with
 * write_audit, for a context made before the call was known to write. */
void tier_ctx_audit_writes(tier_ctx *c, rpc_call *call, audit *write_audit);

/* For a handler that blocks its thread (a method marked .blocking): gives
 * c a cancel token (c->cancel, in the call's arena) that the client's
 * cancel or the call's passing deadline fires, so blocking clients can end
 * their wait at once. Takes the call's one cancel registration
 * (rpc_call_on_cancel). GRPC_STATUS_OK, or CANCELLED (set on the call)
 * when the client is gone already, or RESOURCE_EXHAUSTED. */
grpc_status_code tier_ctx_watch_cancel(tier_ctx *c, rpc_call *call);

/* The call's status for a store's code: `return tier_status(call, rc, &c);`
 * (GRPC_STATUS_OK for STATUS_OK; else the message is c->err or the code's
 * text). */
grpc_status_code tier_status(rpc_call *call, int rc, const tier_ctx *c);
/* Returns from a handler with that status when a store call fails:
 * TIER_CHECK(call, &c, entries_store_write(svc->store, &c, &in, &rec)); */
#define TIER_CHECK(call, c, expr)                                                                  \
    do {                                                                                           \
        int tier_rc_ = (expr);                                                                     \
        if (tier_rc_ != STATUS_OK) return tier_status((call), tier_rc_, (c));                      \
    } while (0)

/* Names a record the call addressed or returned in its audit row
 * ("entity:ada", "point:docs/42"). Dropped silently when out of memory. */
void tier_target(rpc_call *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- a call answered from the event loop (rpc.h's execution model) ---- */

/* A pending call and what its store answers into, in the call's arena (a
 * pending call outlives its handler's frame):
 *     tier_pending_call *pc = tier_pending_new(call, "global", NULL, NULL, sizeof(global_entity),
 *                                              render_entity, &resp->base);
 *     tier_async *op = global_get_entity_async(&svc->store, pc->c, id, pc->out,
 *                                              tier_pending_done, pc);
 *     return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call); */
typedef struct tier_pending_call tier_pending_call;
struct tier_pending_call {
    rpc_call *call;
    tier_ctx *c;            /* tier_ctx_for's context (audit hooks for writes) */
    void *out;              /* zeroed room for the store's result */
    ProtobufCMessage *resp; /* the handler's response */
    void *arg;              /* the handler's (its service, its page) */
    /* On the loop thread once the store answered STATUS_OK: fills resp
     * from out (and names the audit targets); the call's status, as a
     * handler returns it (RPC_CHECK, TIER_CHECK and rpc_call_oom work). */
    grpc_status_code (*render)(tier_pending_call *pc);
};
/* write_audit: as tier_ctx_for's (the audit row goes in the write's
 * transaction); NULL for reads. NULL when out of memory. */
tier_pending_call *tier_pending_new(rpc_call *call, const char *tier, audit *write_audit,
                                    size_t out_size,
                                    grpc_status_code (*render)(tier_pending_call *pc),
                                    ProtobufCMessage *resp);
/* For a handler that builds its statements itself (no store function):
 * tier_pending_new (nothing in out; write_audit as there: a write's decode
 * ends its transaction with tier_async_commit, which adds the audit row)
 * and tier_async_new(what, decode, args, size) in one step, with pc->arg
 * set to the op's copy of args so render sees what decode filled. The
 * caller builds op->sql, then returns tier_pending(call, s, op). NULL when
 * out of memory. */
tier_async *tier_pending_op(rpc_call *call, const char *tier, audit *write_audit, const char *what,
                            tier_async_decode_fn decode, const void *args, size_t size,
                            grpc_status_code (*render)(tier_pending_call *pc),
                            ProtobufCMessage *resp);

/* For a write whose data lives outside PostgreSQL (Redis), once it
 * succeeded and its response is filled: stores the call's audit row on s's
 * asynchronous pool (tier_pending_durable: the write stands, so its row
 * is stored whatever the client does) and answers the call OK when it is
 * durable, or
 * UNAVAILABLE saying the row could not be stored (the write stands: the
 * client retries an idempotent write). Returns RPC_PENDING, or a status
 * to answer at once. Any thread the call's arena may be used on. */
grpc_status_code tier_pending_audit_row(rpc_call *call, const tier_store *s, audit *write_audit,
                                        ProtobufCMessage *resp);

/* The render of a call whose response carries nothing (a delete). */
grpc_status_code tier_render_nothing(tier_pending_call *pc);
/* The store's done for a tier_pending_call (arg): renders on STATUS_OK,
 * then ends the call with the code (tier_status's mapping). */
void tier_pending_done(void *arg, int rc);
/* Lets the client's cancel (or passed deadline) end op, submits op, and
 * returns RPC_PENDING for the handler to return; CANCELLED (nothing
 * submitted) when the client is gone already. op's done ends the call
 * (tier_pending_done). */
grpc_status_code tier_pending(rpc_call *call, const tier_store *s, tier_async *op);
/* tier_pending for what must follow a write another backend has applied
 * (its audit row, a durable copy): the client's cancel does not end op,
 * and its deadline is the call's or TIER_DURABLE_MS from now, whichever is
 * later, so a short deadline cannot leave the write without them. The
 * answer goes to a client that may have gone. */
#define TIER_DURABLE_MS 10000
grpc_status_code tier_pending_durable(rpc_call *call, const tier_store *s, tier_async *op);

#endif
