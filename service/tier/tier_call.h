/* tier_call: the gRPC side of a tier call: the storage context built from
 * the call, the store's code turned into the call's status, and the
 * records the call touched named in the audit trail. */
#ifndef MEMORYD_TIER_TIER_CALL_H
#define MEMORYD_TIER_TIER_CALL_H

#include "service/audit/audit.h"
#include "service/rpc/rpc.h"
#include "service/tier/tier_ctx.h"

/* The context for call in tier ("entries": scopes "<tier>:read" and
 * "<tier>:write"): the call's principal, deadline and arena. With
 * write_audit (the audit trail, for writes) the call's audit row is
 * written inside the write's transaction, so data and audit commit
 * together; NULL for reads. */
tier_ctx tier_ctx_for(rpc_call *call, const char *tier, audit *write_audit);

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

#endif
