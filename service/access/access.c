/* access: WhoAmI, Attenuate and Revoke; see access.h. */
#include "service/access/access.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/v1/access.pb-c.h"
#include "service/access/access_store.h"
#include "service/audit/audit.h"
#include "service/auth/nsglob.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/uuid.h"
#include "service/pb/pbtime.h"
#include "service/tier/tier_call.h"

#define MAX_CHAIN 16 /* ancestors a token may have (the anc claim bound) */
#define MAX_SCOPE_LEN 128
#define MAX_REASON 1024

/* The tier's state: the environment it opened in and its statements' pool. */
typedef struct {
    const tier_env *env;
    tier_store store;
} access_ctx;

static Memory__V1__TokenClaims *render_claims(arena *ar, const jwt_claims *c) {
    Memory__V1__TokenClaims *out = arena_message(ar, &memory__v1__token_claims__descriptor);
    if (!out) return NULL;
    out->issuer = c->iss ? c->iss : "";
    out->principal = c->sub;
    out->tenant = c->tenant;
    out->n_scopes = c->nscopes;
    out->scopes = c->scopes;
    out->n_namespaces = c->nns;
    out->namespaces = c->ns;
    out->read_ceiling = (Memory__V1__Label)c->clr;
    out->write_floor = (Memory__V1__Label)c->lvl;
    if (c->has_iat) out->issue_time = pbtime_timestamp(ar, c->iat * 1000000);
    if (c->has_nbf) out->not_before_time = pbtime_timestamp(ar, c->nbf * 1000000);
    out->expire_time = pbtime_timestamp(ar, c->exp * 1000000);
    out->token_id = c->jti;
    out->parent_token_id = c->parent ? c->parent : "";
    return out;
}

static RPC_UNARY_HANDLER(who_am_i, access_ctx, Memory__V1__AccessWhoAmIRequest,
                         Memory__V1__AccessWhoAmIResponse) {
    const principal *p = authn_principal(call);
    Memory__V1__AccessWhoAmIResponse *out = resp;
    /* The claims live as long as the call's reference on the principal,
     * which outlives the response's encoding. */
    out->claims = render_claims(rpc_call_arena(call), principal_claims(p));
    if (!out->claims) {
        rpc_call_set_error(call, "out of memory");
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    return GRPC_STATUS_OK;
}

/* ---- Attenuate ---- */

static int scope_char_ok(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '.' || ch == ':' || ch == '*';
}

/* Shape of a scope: `name`, `tier:op`, `tier:op:own|all`, `tier:*`. */
static int scope_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > MAX_SCOPE_LEN) return 0;
    int colons = 0;
    for (size_t i = 0; i < n; i++) {
        if (!scope_char_ok(s[i])) return 0;
        if (s[i] == ':') {
            if (i == 0 || i + 1 == n || s[i + 1] == ':') return 0;
            colons++;
        }
    }
    if (colons == 0) return strchr(s, '*') == NULL;
    if (colons > 2) return 0;
    const char *op = strchr(s, ':') + 1;
    const char *breadth = strchr(op, ':');
    if (strchr(s, '*')) return strcmp(op, "*") == 0; /* only `tier:*` */
    return !breadth || strcmp(breadth, ":own") == 0 || strcmp(breadth, ":all") == 0;
}

/* 1 if the parent holds at least what child scope s grants. */
static int scope_covered(const principal *parent, const char *s) {
    const char *colon = strchr(s, ':');
    if (!colon) return principal_has(parent, s);
    if (strcmp(colon + 1, "*") == 0) return principal_has(parent, s);
    const char *breadth = strchr(colon + 1, ':');
    principal_breadth want =
        breadth && strcmp(breadth, ":all") == 0 ? PRINCIPAL_ALL : PRINCIPAL_OWN;
    char base[MAX_SCOPE_LEN + 1];
    size_t len = breadth ? (size_t)(breadth - s) : strlen(s);
    memcpy(base, s, len);
    base[len] = '\0';
    return principal_scope(parent, base) >= want;
}

/* Builds the child's claims (borrowing strings from parent and req) after
 * every check; on failure sets the call error and returns its status. */
static grpc_status_code build_child(rpc_call *call, const principal *parent,
                                    const Memory__V1__AccessAttenuateRequest *req, int64_t now_s,
                                    const char *jti, const char *iss, jwt_claims *child) {
    const jwt_claims *pc = principal_claims(parent);
    if (req->n_scopes == 0) {
        rpc_call_set_error(call, "scopes: at least one scope is required");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    if (req->n_scopes > JWT_MAX_SCOPES || req->n_namespaces > JWT_MAX_NS) {
        rpc_call_set_error(call, "at most %d scopes and %d namespaces", JWT_MAX_SCOPES, JWT_MAX_NS);
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < req->n_scopes; i++) {
        if (!scope_valid(req->scopes[i])) {
            rpc_call_set_error(call,
                               "scopes[%zu]: \"%.128s\" is not a scope (expected e.g. "
                               "`entries:read`, `episodic:write:all`, `cache:*`, `admin`)",
                               i, req->scopes[i]);
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
    }
    char why[256];
    for (size_t i = 0; i < req->n_namespaces; i++) {
        const char *g = req->namespaces[i];
        if (nsglob_check_pattern(g, strlen(g), why, sizeof why) != 0) {
            rpc_call_set_error(call, "namespaces[%zu]: \"%.200s\" is not a namespace glob: %s", i,
                               g, why);
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
    }
    int clr = req->read_ceiling ? (int)req->read_ceiling : (int)pc->clr;
    int lvl = req->write_floor ? (int)req->write_floor : (int)pc->lvl;
    if (clr < 0 || clr > 4 || lvl < 0 || lvl > 4) {
        rpc_call_set_error(call, "read_ceiling and write_floor must be memory.v1.Label values");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    if (lvl > clr) {
        rpc_call_set_error(call, "write_floor %s is above read_ceiling %s", jwt_label_name(lvl),
                           jwt_label_name(clr));
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    int64_t exp = pc->exp;
    if (req->expiration_case == MEMORY__V1__ACCESS_ATTENUATE_REQUEST__EXPIRATION_EXPIRE_TIME) {
        int64_t us;
        if (pbtime_timestamp_us(req->expire_time, &us) != 0) {
            rpc_call_set_error(call, "expire_time is not a valid timestamp");
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        exp = us / 1000000;
        if (exp <= now_s) {
            rpc_call_set_error(call, "expire_time must be in the future");
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
    } else if (req->expiration_case == MEMORY__V1__ACCESS_ATTENUATE_REQUEST__EXPIRATION_TTL) {
        int64_t us;
        if (pbtime_duration_us(req->ttl, &us) != 0 || us <= 0) {
            rpc_call_set_error(call, "ttl must be a positive duration");
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        exp = now_s + (us + 999999) / 1000000;
    }
    if (pc->nanc + 1 > MAX_CHAIN) {
        rpc_call_set_error(call, "the token is already %zu attenuations deep; at most %d", pc->nanc,
                           MAX_CHAIN);
        return GRPC_STATUS_FAILED_PRECONDITION;
    }

    /* Narrowing checks, each naming the claim that would widen. */
    for (size_t i = 0; i < req->n_scopes; i++) {
        if (!scope_covered(parent, req->scopes[i])) {
            rpc_call_set_error(call, "scope `%s` is not covered by the calling token's scopes",
                               req->scopes[i]);
            return GRPC_STATUS_PERMISSION_DENIED;
        }
    }
    for (size_t i = 0; i < req->n_namespaces; i++) {
        int covered = 0;
        for (size_t j = 0; j < pc->nns && !covered; j++)
            covered = nsglob_covers(pc->ns[j], req->namespaces[i]);
        if (!covered) {
            rpc_call_set_error(call,
                               "namespace glob `%s` reaches namespaces the calling token's "
                               "ns claim does not",
                               req->namespaces[i]);
            return GRPC_STATUS_PERMISSION_DENIED;
        }
    }
    if (clr > (int)pc->clr) {
        rpc_call_set_error(call, "read_ceiling %s is above the calling token's %s",
                           jwt_label_name(clr), jwt_label_name((int)pc->clr));
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    if (lvl < (int)pc->lvl) {
        rpc_call_set_error(call, "write_floor %s is below the calling token's %s",
                           jwt_label_name(lvl), jwt_label_name((int)pc->lvl));
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    if (exp > pc->exp) {
        rpc_call_set_error(call, "the expiry asked for is later than the calling token's");
        return GRPC_STATUS_PERMISSION_DENIED;
    }

    arena *ar = rpc_call_arena(call);
    memset(child, 0, sizeof *child);
    child->iss = (char *)iss;
    child->sub = pc->sub;
    child->tenant = pc->tenant;
    child->jti = (char *)jti;
    child->parent = pc->jti;
    child->scopes = req->scopes;
    child->nscopes = req->n_scopes;
    child->ns = req->namespaces;
    child->nns = req->n_namespaces;
    child->clr = (jwt_label)clr;
    child->lvl = (jwt_label)lvl;
    child->exp = exp;
    child->iat = now_s;
    child->has_iat = 1;
    child->anc = arena_alloc(ar, (pc->nanc + 1) * sizeof(char *));
    if (!child->anc) {
        rpc_call_set_error(call, "out of memory");
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    for (size_t i = 0; i < pc->nanc; i++) child->anc[i] = pc->anc[i];
    child->anc[pc->nanc] = pc->jti;
    child->nanc = pc->nanc + 1;
    return GRPC_STATUS_OK;
}

/* Attenuate's transaction records the new token, then commits with the
 * call's audit row; the response is built before it runs and sent once it
 * has committed. */
static int decode_recorded(tier_async *op, const PGresult *r) {
    (void)r;
    return tier_async_commit(op);
}

static grpc_status_code render_attenuated(tier_pending_call *pc) {
    const jwt_claims *child = *(const jwt_claims *const *)pc->arg;
    const principal *parent = authn_principal(pc->call);
    log_fields(LOG_INFO, "token attenuated", LOG_F_STR, "parent", principal_jti(parent), LOG_F_STR,
               "jti", child->jti, LOG_F_STR, "principal", principal_sub(parent), LOG_F_END);
    return GRPC_STATUS_OK;
}

static RPC_UNARY_HANDLER(attenuate, access_ctx, Memory__V1__AccessAttenuateRequest,
                         Memory__V1__AccessAttenuateResponse) {
    access_ctx *ctx = svc;
    arena *ar = rpc_call_arena(call);
    const principal *parent = authn_principal(call);
    const char *kid = NULL;
    EVP_PKEY *key = authn_signing_key(ctx->env->auth, &kid);
    if (!key) {
        rpc_call_set_error(call, "this memoryd has no signing key (--signing-key), so it cannot "
                                 "mint tokens");
        return GRPC_STATUS_FAILED_PRECONDITION;
    }
    char jti[UUID_TEXT_LEN];
    uuid_new(jti);
    int64_t now_s = clock_wall_us() / 1000000;
    /* In the arena: the statement borrows the claims until it has run. */
    jwt_claims *child = arena_alloc(ar, sizeof *child);
    const char *jti_copy = arena_strdup(ar, jti);
    if (!child || !jti_copy) return rpc_call_oom(call);
    grpc_status_code st =
        build_child(call, parent, req, now_s, jti_copy, authn_issuer(ctx->env->auth), child);
    if (st != GRPC_STATUS_OK) return st;

    char *payload = NULL, *token = NULL, err[512];
    if (jwt_claims_render(child, &payload) != 0 ||
        jwt_sign(key, kid, payload, &token, err, sizeof err) != JWT_OK) {
        free(payload);
        rpc_call_set_error(call, "cannot sign the new token");
        return GRPC_STATUS_INTERNAL;
    }
    free(payload);
    Memory__V1__AccessAttenuateResponse *out = resp;
    out->token = arena_strdup(ar, token);
    free(token);
    out->claims = out->token ? render_claims(ar, child) : NULL;
    if (!out->claims) return rpc_call_oom(call);
    /* Recorded so Revoke can tell descendants apart; answered once it is. */
    /* Named before the commit so its audit row (written in the
     * transaction) carries it. */
    audit_add_target(call, child->jti);
    tier_async *op =
        tier_pending_op(call, "access", ctx->env->audit, "record the new token", decode_recorded,
                        &child, sizeof child, render_attenuated, &resp->base);
    if (!op || access_store_record_sql(&op->sql, ar, child) != 0) return rpc_call_oom(call);
    tier_async_begin(op, "BEGIN");
    return tier_pending(call, &ctx->store, op);
}

/* ---- Revoke ---- */

/* Revoke's transaction: the target's ancestry when the caller revokes
 * another token than its own, the store, then the commit with the call's
 * audit row. */
typedef struct {
    authn *auth;
    const principal *p;
    const Memory__V1__AccessRevokeRequest *req;
    int checked; /* the ancestry has been read */
    int64_t at_s;
} revoke_op;

static int decode_revoke(tier_async *op, const PGresult *r) {
    revoke_op *a = op->arg;
    if (!a->checked) {
        int mine = 0, foreign = 0;
        if (access_store_ancestry(r, &mine, &foreign) != 0)
            return tier_fail(op->c, STATUS_EINTERNAL, "unexpected answer checking the ancestry");
        /* Its own descendants, or with `admin` any token not minted for
         * another tenant. */
        if (!mine && (foreign || !principal_has(a->p, "admin")))
            return tier_fail(op->c, STATUS_EDENIED,
                             "token %s is neither the calling token nor attenuated from it; "
                             "revoking other tokens needs scope `admin`",
                             a->req->token_id);
        a->checked = 1;
        authn_revoke_sql(tier_async_next(op, "store the revocation", NULL), a->req->token_id, a->p,
                         a->req->reason);
        return TIER_NEXT;
    }
    if (authn_revoked(a->auth, r, a->p, a->req->token_id, &a->at_s) != 0)
        return tier_fail(op->c, STATUS_EINTERNAL, "unexpected answer storing the revocation");
    return tier_async_commit(op);
}

static grpc_status_code render_revoked(tier_pending_call *pc) {
    const revoke_op *a = pc->arg;
    log_fields(LOG_INFO, "token revoked", LOG_F_STR, "jti", a->req->token_id, LOG_F_STR, "by",
               principal_sub(a->p), LOG_F_STR, "tenant", principal_tenant(a->p), LOG_F_STR,
               "reason", a->req->reason, LOG_F_END);
    Memory__V1__AccessRevokeResponse *out = (Memory__V1__AccessRevokeResponse *)pc->resp;
    out->revoke_time = pbtime_timestamp(pc->c->ar, a->at_s * 1000000);
    return out->revoke_time ? GRPC_STATUS_OK : rpc_call_oom(pc->call);
}

static RPC_UNARY_HANDLER(revoke, access_ctx, Memory__V1__AccessRevokeRequest,
                         Memory__V1__AccessRevokeResponse) {
    access_ctx *ctx = svc;
    const principal *p = authn_principal(call);
    if (!req->token_id[0]) {
        rpc_call_set_error(call, "token_id: required");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    if (strlen(req->token_id) > 256) {
        rpc_call_set_error(call, "token_id: at most 256 characters");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    if (strlen(req->reason) > MAX_REASON) {
        rpc_call_set_error(call, "reason: at most %d characters", MAX_REASON);
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    audit_add_target(call, req->token_id);
    revoke_op a = {.auth = ctx->env->auth, .p = p, .req = req};
    tier_async *op = tier_pending_op(call, "access", ctx->env->audit, "revoke the token",
                                     decode_revoke, &a, sizeof a, render_revoked, &resp->base);
    if (!op) return rpc_call_oom(call);
    tier_async_begin(op, "BEGIN");
    if (strcmp(req->token_id, principal_jti(p)) == 0) {
        ((revoke_op *)op->arg)->checked = 1; /* its own token: no ancestry to read */
        authn_revoke_sql(&op->sql, req->token_id, p, req->reason);
    } else {
        access_store_ancestry_sql(&op->sql, req->token_id, principal_jti(p), principal_tenant(p));
    }
    return tier_pending(call, &ctx->store, op);
}

/* ---- the tier ---- */

static int access_open(tier_env *env, void **state, char *err, size_t errlen) {
    access_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return snprintf(err, errlen, "access: out of memory"), -1;
    ctx->env = env;
    ctx->store = tier_store_on(env->pg, env->pga, 0);
    *state = ctx;
    return 0;
}

#define SVC "memory.v1.Access"
static const rpc_method methods[] = {
    /* protobuf-c names WhoAmIRequest who_am_irequest: spelled out. */
    {.path = "/" SVC "/WhoAmI",
     .kind = RPC_UNARY,
     .request = &memory__v1__access_who_am_irequest__descriptor,
     .response = &memory__v1__access_who_am_iresponse__descriptor,
     .scope = "", /* any valid token */
     .unary = who_am_i},
    RPC_METHOD_UNARY(SVC, "Attenuate", memory__v1__access_attenuate, "access:attenuate", attenuate),
    RPC_METHOD_UNARY(SVC, "Revoke", memory__v1__access_revoke, "", revoke),
};

static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG}};

const tier access_tier = {TIER_FIELDS("access", services, methods, access_open, free)};
