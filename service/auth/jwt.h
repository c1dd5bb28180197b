/* jwt: verification (and, for tests and the token tool, signing) of
 * memoryd capability tokens — JWS compact JWTs (RFC 7519) signed with
 * EdDSA/Ed25519 only. Pure: the caller supplies the key set and the clock,
 * so tests and fuzzers need neither files nor time. */
#ifndef MEMORYD_AUTH_JWT_H
#define MEMORYD_AUTH_JWT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "service/auth/jwks.h"

/* Return codes of jwt_verify / jwt_sign. Distinct so the interceptor can
 * count causes; every one maps to UNAUTHENTICATED on the wire. */
/* Return codes of their own, in a range apart from core/status.h's (a
 * JWT code passed on as a status would otherwise read as another). */
#define JWT_OK 0
#define JWT_EMALFORMED (-101) /* not three base64url parts, too long, bad JSON */
#define JWT_EHEADER (-102)    /* header unusable: alg not "EdDSA", no kid, typ, crit */
#define JWT_EKID (-103)       /* kid not in the key set */
#define JWT_ESIG (-104)       /* signature does not verify */
#define JWT_EEXPIRED (-105)   /* now - skew >= exp */
#define JWT_ENOTYET (-106)    /* now + skew < nbf */
#define JWT_ECLAIM (-107)     /* required claim missing, or a claim invalid */
#define JWT_ENOMEM (-108)
#define JWT_EARG (-109) /* jwt_sign: bad key or payload */

#define JWT_MAX_TOKEN 8192 /* bytes; bounds every allocation verify makes */
#define JWT_MAX_SCOPES 64
#define JWT_MAX_NS 64
#define JWT_MAX_ANC 16 /* attenuation depth */
#define JWT_DEFAULT_SKEW_S 60

/* Values match memory.v1.Label in the protos (0 is UNSPECIFIED there and
 * never appears in a verified token). */
typedef enum jwt_label {
    JWT_LABEL_PUBLIC = 1,
    JWT_LABEL_INTERNAL = 2,
    JWT_LABEL_CONFIDENTIAL = 3,
    JWT_LABEL_SECRET = 4,
} jwt_label;

/* Verified claims. Owned by the caller and freed with jwt_claims_free,
 * which frees every string and array below.
 * - sub, tenant, jti: non-empty, always set.
 * - iss, parent: NULL when absent.
 * - scopes: the "scope" claim split on single spaces (no empty elements);
 *   nscopes >= 1.
 * - ns: namespace globs from the "ns" string array; nns == 0 (ns NULL)
 *   when absent — what that permits is the interceptor's decision.
 * - lvl defaults to PUBLIC when absent; clr defaults to lvl when absent
 *   (a "plain" token reads and writes at one level, DESIGN §5). lvl <= clr.
 * - exp is always set; nbf and iat are 0 when absent (has_* say which).
 * - anc: ids of the tokens this one was attenuated from, root first and
 *   parent last (memoryd's own claim, written by Access.Attenuate so a
 *   revocation reaches every descendant without a lookup); when present
 *   its last element equals parent.
 * - kid: the key (of the key set) the signature was verified with. */
typedef struct jwt_claims {
    char *kid;
    char *iss;
    char *sub;
    char *tenant;
    char *jti;
    char *parent;
    char **scopes;
    size_t nscopes;
    char **ns;
    size_t nns;
    char **anc; /* ancestor token ids, root first (claim "anc"); NULL when absent */
    size_t nanc;
    jwt_label clr;
    jwt_label lvl;
    int64_t exp;
    int64_t nbf;
    int64_t iat;
    int has_nbf;
    int has_iat;
} jwt_claims;

/* Verifies token[0..len) against keys at time now_s (Unix seconds),
 * allowing skew_s seconds of clock difference on exp and nbf (negative
 * treated as 0). The header must be {"alg":"EdDSA","kid":...} with an
 * optional "typ":"JWT" and no "crit"; the signature is checked before
 * the payload is parsed. Time claims are JSON integers.
 * On JWT_OK, *out is a new jwt_claims owned by the caller. On any other
 * code *out is NULL, err holds what was wrong, nothing stays allocated. */
int jwt_verify(const jwks *keys, const char *token, size_t len, int64_t now_s, int skew_s,
               jwt_claims **out, char *err, size_t errlen);

/* Accepts NULL. */
void jwt_claims_free(jwt_claims *c);

/* Signs payload_json (used verbatim, must be a JSON object) with an
 * Ed25519 private key under header {"alg":"EdDSA","typ":"JWT","kid":kid}.
 * Does not check claims: tests need to mint invalid ones. On JWT_OK,
 * *out_token is a malloc'd NUL-terminated token owned by the caller
 * (free()); on error it is NULL and err says why. */
int jwt_sign(EVP_PKEY *priv, const char *kid, const char *payload_json, char **out_token, char *err,
             size_t errlen);

/* Renders c as the payload JSON jwt_verify accepts (iss and parent only
 * when set, scope space-joined, labels by name, nbf/iat when has_*). On 0
 * *json is malloc'd and owned by the caller (free()); on -1 (OOM) NULL. */
int jwt_claims_render(const jwt_claims *c, char **json);

/* "PUBLIC" .. "SECRET" for 1..4, "UNSPECIFIED" for 0, "?" otherwise. */
const char *jwt_label_name(int label);

/* The name of a return code, e.g. "JWT_ESIG", for logs and test output. */
const char *jwt_strerror(int code);

#endif
