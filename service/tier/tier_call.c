/* tier_call: the gRPC side of a tier call; see tier_call.h. */
#include "service/tier/tier_call.h"

#include <stdarg.h>
#include <stdio.h>

#include "service/auth/authn.h"

tier_ctx tier_ctx_for(rpc_call *call, const char *tier, audit *write_audit) {
    tier_ctx c;
    tier_ctx_make(&c, tier, authn_principal(call), rpc_call_deadline_ms(call),
                  rpc_call_arena(call));
    if (write_audit) {
        c.before_commit = audit_hook_before_commit;
        c.after_commit = audit_hook_after_commit;
        c.hook_arg = call;
    }
    return c;
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
