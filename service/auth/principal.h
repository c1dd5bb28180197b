/* principal: the verified caller of a call (its token's claims) and the
 * rules that turn those claims into decisions: which scopes it holds and
 * how broadly, which namespaces it may touch, which labels it may read and
 * what label its writes get. Tier modules read a principal to build their
 * diode predicates (SQL WHERE, Qdrant filter, cache-key prefix) and to run
 * the final read filter; nothing here knows about gRPC.
 *
 * Scope grammar (DESIGN §5): `<tier>:<op>` with an optional breadth
 * `:own` (the default) or `:all`; `<tier>:*` holds every scope of that tier
 * at breadth `:all`; other scopes (`admin`, `pii:write`,
 * `access:attenuate`) are matched exactly. `admin` does not imply tier
 * scopes. */
#ifndef MEMORYD_AUTH_PRINCIPAL_H
#define MEMORYD_AUTH_PRINCIPAL_H
#include "service/auth/jwt.h"
#include <stddef.h>

typedef struct principal principal;

/* How much of a scope a principal holds. */
typedef enum principal_breadth {
    PRINCIPAL_DENY = 0, /* not held */
    PRINCIPAL_OWN = 1,  /* only records the principal owns */
    PRINCIPAL_ALL = 2,  /* every record of the tenant */
} principal_breadth;

/* Wraps verified claims; takes ownership of claims (also on error).
 * Returns NULL on OOM. The principal starts with one reference. */
principal *principal_create(jwt_claims *claims);
/* Reference counting (thread-safe): the token cache keeps one reference,
 * each call using the principal another. unref accepts NULL and frees the
 * claims with the last reference. */
void principal_ref(principal *p);
void principal_unref(principal *p);
/* Same as principal_unref with a void* for rpc_call_set_principal. */
void principal_release(void *p);

/* The claims; owned by the principal, valid while a reference is held. */
const jwt_claims *principal_claims(const principal *p);
const char *principal_tenant(const principal *p);
const char *principal_sub(const principal *p);
const char *principal_jti(const principal *p);
jwt_label principal_clr(const principal *p); /* read ceiling */
jwt_label principal_lvl(const principal *p); /* write floor */

/* How broadly p holds `needed` ("entries:read", "episodic:write:all",
 * "admin", ...). A needed scope with breadth `:all` is held only at
 * PRINCIPAL_ALL. An empty needed scope ("any valid token") yields
 * PRINCIPAL_OWN. */
principal_breadth principal_scope(const principal *p, const char *needed);
/* 1 if p holds the scope exactly as written (e.g. "admin", "pii:write"). */
int principal_has(const principal *p, const char *scope);

/* 1 if namespace ns (no wildcards) is matched by one of the token's `ns`
 * globs; a token without an `ns` claim may touch no namespace. */
int principal_ns_allows(const principal *p, const char *ns);

/* Final read filter (defence in depth behind the backend predicates): 1 if
 * a record with this tenant, owner and label may leave the service for a
 * caller holding the read scope at `breadth`. */
int principal_may_read(const principal *p, principal_breadth breadth, const char *tenant,
                       const char *owner, int label);
/* Write diode: label to stamp on a write. requested and existing are
 * memory.v1.Label values (0 = unspecified / no existing record); the result
 * is max(requested, lvl, existing). */
int principal_stamp_label(const principal *p, int requested, int existing);

#endif
