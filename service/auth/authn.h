/* authn: the authentication and authorization step of the interceptor
 * chain. It reads `authorization: Bearer <jwt>`, verifies the token (or
 * finds it in the verified-token cache, keyed by the token's SHA-256 and
 * kept until `exp`), rejects revoked tokens (jti or any ancestor, from
 * Postgres, refreshed in the background), checks the method's declared
 * scope, and leaves the principal on the call for handlers and the audit
 * observer. UNAUTHENTICATED = no usable token; PERMISSION_DENIED = a valid
 * token that lacks what the method needs. */
#ifndef MEMORYD_AUTH_AUTHN_H
#define MEMORYD_AUTH_AUTHN_H
#include "service/auth/principal.h"
#include "service/core/strbuf.h"
#include "service/rpc/rpc.h"
#include "service/store/pg_pool.h"
#include "service/store/pgq.h"
#include <grpc/status.h>
#include <stddef.h>
#include <stdint.h>

typedef struct authn authn;

typedef struct authn_options {
    const char *jwks_path;        /* verification keys (required) */
    const char *signing_key_path; /* memoryd's own private JWK for Attenuate; NULL/"" = none */
    const char *issuer;           /* `iss` of tokens memoryd mints */
    int skew_s;                   /* allowed clock difference on exp/nbf */
    int open_infra;               /* health and reflection callable without a token */
    size_t cache_max;             /* verified tokens kept */
    int revocation_poll_ms;       /* how often the revocation set is re-checked */
    int jwks_reload_ms;           /* how often the JWKS file is checked for changes */
    /* Under mutual TLS: a token is accepted only from a client whose
     * certificate names its sub (rpc_call_client_identity). */
    int bind_to_client_certificate;
} authn_options;

/* Loads keys and the revocation set (pg may be NULL in unit tests: no
 * revocation store). On 0 *out is owned by the caller (authn_free); on -1
 * err says what is wrong (unreadable JWKS, signing key not Ed25519, ...). */
int authn_create(const authn_options *o, pg_pool *pg, authn **out, char *err, size_t errlen);
/* Stops the background refresh and frees everything; accepts NULL. */
void authn_free(authn *a);

/* The interceptor (rpc_server_add_interceptor(srv, authn_interceptor, a)). */
grpc_status_code authn_interceptor(rpc_call *call, void *arg);

/* The call's principal, or NULL on an open method called without a token. */
const principal *authn_principal(const rpc_call *call);

/* The token cache's lookups and size, calls refused by reason and the
 * revoked tokens known: a metrics collector (metrics.h; arg: the authn). */
void authn_metrics_collect(strbuf *out, void *arg);

/* 0 if p's token is still usable now (not expired, not revoked): long
 * streams call this periodically and end with UNAUTHENTICATED otherwise.
 * On -1 err says why. */
int authn_check_live(authn *a, const principal *p, char *err, size_t errlen);

/* Revoking token jti of by's tenant on behalf of by (a revocation never
 * reaches another tenant's tokens): the statement that records it in
 * PostgreSQL, then, with that statement's answer, the local set updated at
 * once (revocation.h's revocation_store_sql and revocation_stored). */
void authn_revoke_sql(pgq_sql *b, const char *jti, const principal *by, const char *reason);
int authn_revoked(authn *a, const PGresult *res, const principal *by, const char *jti,
                  int64_t *revoked_at_s);

/* memoryd's signing key and kid for minted tokens; NULL if none. */
EVP_PKEY *authn_signing_key(const authn *a, const char **kid);
const char *authn_issuer(const authn *a);
int authn_skew_s(const authn *a);

#endif
