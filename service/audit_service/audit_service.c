/* audit_service: the Audit service's state and its tier; see
 * audit_service.h. */
#include <stdio.h>
#include <stdlib.h>

#include "service/audit_service/audit_service_internal.h"
#include "service/auth/authn.h"

#define DEFAULT_WATCHERS 1024

int audit_service_create(pg_pool *pg, apg *pga, const audit_service_options *o, audit_service **out,
                         char *err, size_t errlen) {
    audit_service *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, errlen, "audit: out of memory"), -1;
    s->pg = pg;
    s->store = tier_store_on(pg, pga, 0);
    if (o) s->o = *o;
    if (!s->o.max_watchers) s->o.max_watchers = DEFAULT_WATCHERS;
    if (audit_watch_start(s, err, errlen) != 0) {
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void audit_service_free(audit_service *s) {
    if (!s) return;
    audit_watch_stop(s);
    free(s);
}

size_t audit_service_watchers(audit_service *s) { return audit_watch_count(s); }

grpc_status_code audit_caller_filter(rpc_call *call, const char *what,
                                     const Memory__V1__AuditFilter *in, const principal **p,
                                     audit_filter *f) {
    *p = rpc_call_principal(call);
    if (!*p) {
        rpc_call_set_error(call, "audit: %s needs a verified token", what);
        return GRPC_STATUS_UNAUTHENTICATED;
    }
    principal_breadth breadth = principal_scope(*p, AUDIT_SCOPE);
    if (breadth == PRINCIPAL_DENY) {
        rpc_call_set_error(call, "audit: %s needs the audit:read scope", what);
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    char err[512];
    int rc = audit_codec_filter(in, principal_sub(*p), breadth, rpc_call_arena(call), f, err,
                                sizeof err);
    return rc == STATUS_OK ? GRPC_STATUS_OK : rpc_call_fail(call, rc, err);
}

#define SVC "memory.v1.Audit"
static const rpc_method methods[] = {
    RPC_METHOD_UNARY(SVC, "List", memory__v1__audit_list, AUDIT_SCOPE, audit_list_handler),
    RPC_METHOD_SERVER_STREAM(SVC, "Watch", memory__v1__audit_watch, AUDIT_SCOPE,
                             audit_watch_handler),
};

int audit_service_register(rpc_server *srv, audit_service *s) {
    return rpc_server_add_methods(srv, methods, TIER_COUNT(methods), s);
}

/* ---- the tier ---- */

/* Watch ends streams whose token died; authn knows. */
static int check_live_authn(void *ctx, const principal *p, char *err, size_t errlen) {
    return authn_check_live(ctx, p, err, errlen);
}

static int audit_open(tier_env *env, void **state, char *err, size_t errlen) {
    audit_service_options o = {.check_live = env->auth ? check_live_authn : NULL,
                               .check_live_ctx = env->auth};
    return audit_service_create(env->pg, env->pga, &o, (audit_service **)state, err, errlen);
}

static void audit_close(void *state) { audit_service_free(state); }

static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG}};

const tier audit_tier = {TIER_FIELDS("audit", services, methods, audit_open, audit_close)};
