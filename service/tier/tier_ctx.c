/* tier_ctx: the per-call context of storage code; see tier_ctx.h. */
#include "service/tier/tier_ctx.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tier_ctx_make(tier_ctx *c, const char *tier, const principal *p, int64_t deadline_ms,
                   arena *ar) {
    memset(c, 0, sizeof *c);
    char scope[64];
    c->tier = tier;
    c->p = p;
    snprintf(scope, sizeof scope, "%s:read", tier);
    c->read_breadth = principal_scope(p, scope);
    snprintf(scope, sizeof scope, "%s:write", tier);
    c->write_breadth = principal_scope(p, scope);
    c->deadline_ms = deadline_ms;
    c->ar = ar;
}

int tier_fail(tier_ctx *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return code;
}
