/* principal: a verified caller and its scope, namespace and label rules;
 * see principal.h. */
#include "service/auth/principal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/nsglob.h"

struct principal {
    atomic_int refs;
    jwt_claims *claims;
};

principal *principal_create(jwt_claims *claims) {
    principal *p = malloc(sizeof *p);
    if (!p) {
        jwt_claims_free(claims);
        return NULL;
    }
    atomic_init(&p->refs, 1);
    p->claims = claims;
    return p;
}

void principal_ref(principal *p) { atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed); }

void principal_unref(principal *p) {
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
    jwt_claims_free(p->claims);
    free(p);
}

void principal_release(void *p) { principal_unref(p); }

const jwt_claims *principal_claims(const principal *p) { return p->claims; }
const char *principal_tenant(const principal *p) { return p->claims->tenant; }
const char *principal_sub(const principal *p) { return p->claims->sub; }
const char *principal_jti(const principal *p) { return p->claims->jti; }
jwt_label principal_clr(const principal *p) { return p->claims->clr; }
jwt_label principal_lvl(const principal *p) { return p->claims->lvl; }

int principal_has(const principal *p, const char *scope) {
    for (size_t i = 0; i < p->claims->nscopes; i++)
        if (strcmp(p->claims->scopes[i], scope) == 0) return 1;
    return 0;
}

/* Splits "tier:op[:breadth]" into its tier length, op and breadth. Returns
 * 0 for a scope without that shape (admin: matched exactly). */
typedef struct {
    const char *tier;
    size_t tier_len;
    const char *op; /* "read", "write", "*", ... */
    size_t op_len;
    principal_breadth breadth; /* OWN unless ":all" */
    int explicit_breadth;
} scope_parts;

static int split_scope(const char *s, scope_parts *out) {
    const char *c1 = strchr(s, ':');
    if (!c1 || c1 == s) return 0;
    const char *op = c1 + 1;
    const char *c2 = strchr(op, ':');
    out->tier = s;
    out->tier_len = (size_t)(c1 - s);
    out->op = op;
    out->op_len = c2 ? (size_t)(c2 - op) : strlen(op);
    out->breadth = PRINCIPAL_OWN;
    out->explicit_breadth = 0;
    if (out->op_len == 0) return 0;
    if (c2) {
        if (strcmp(c2 + 1, "all") == 0) out->breadth = PRINCIPAL_ALL;
        else if (strcmp(c2 + 1, "own") != 0) return 0;
        out->explicit_breadth = 1;
    }
    return 1;
}

principal_breadth principal_scope(const principal *p, const char *needed) {
    if (!needed[0]) return PRINCIPAL_OWN;
    scope_parts want;
    if (!split_scope(needed, &want))
        return principal_has(p, needed) ? PRINCIPAL_OWN : PRINCIPAL_DENY;
    principal_breadth best = PRINCIPAL_DENY;
    for (size_t i = 0; i < p->claims->nscopes && best != PRINCIPAL_ALL; i++) {
        scope_parts have;
        if (!split_scope(p->claims->scopes[i], &have)) continue;
        if (have.tier_len != want.tier_len || memcmp(have.tier, want.tier, want.tier_len) != 0)
            continue;
        principal_breadth b;
        if (have.op_len == 1 && have.op[0] == '*' && !have.explicit_breadth)
            b = PRINCIPAL_ALL; /* `<tier>:*` */
        else if (have.op_len == want.op_len && memcmp(have.op, want.op, want.op_len) == 0)
            b = have.breadth;
        else continue;
        if (b > best) best = b;
    }
    /* A method that needs the `:all` breadth is not satisfied by `:own`. */
    if (want.explicit_breadth && want.breadth == PRINCIPAL_ALL && best != PRINCIPAL_ALL)
        return PRINCIPAL_DENY;
    return best;
}

int principal_ns_allows(const principal *p, const char *ns) {
    for (size_t i = 0; i < p->claims->nns; i++)
        if (nsglob_match(p->claims->ns[i], ns)) return 1;
    return 0;
}

int principal_may_read(const principal *p, principal_breadth breadth, const char *tenant,
                       const char *owner, int label) {
    if (breadth == PRINCIPAL_DENY || !tenant || strcmp(tenant, p->claims->tenant) != 0) return 0;
    if (breadth != PRINCIPAL_ALL && (!owner || strcmp(owner, p->claims->sub) != 0)) return 0;
    return label >= JWT_LABEL_PUBLIC && label <= (int)p->claims->clr;
}

int principal_stamp_label(const principal *p, int requested, int existing) {
    int label = (int)p->claims->lvl;
    if (requested > label) label = requested;
    if (existing > label) label = existing;
    return label;
}
