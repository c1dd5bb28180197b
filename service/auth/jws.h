/* jws: JWS compact serialization (RFC 7515) signed with EdDSA/Ed25519
 * only: the core of capability tokens (jwt.h) and of Forget receipts
 * (privacy/). The header is {"alg":"EdDSA","typ":<typ>,"kid":<kid>}; the
 * typ keeps the kinds apart: a token (typ "JWT" or none) is never taken
 * for a receipt, nor a receipt for a token. The signature covers the
 * base64url header and payload exactly as sent, so no canonical JSON is
 * needed: a verifier checks the bytes it holds. Pure (no files, no
 * clock). Codes are jwt.h's JWT_* codes. */
#ifndef MEMORYD_AUTH_JWS_H
#define MEMORYD_AUTH_JWS_H

#include <jansson.h>
#include <stddef.h>

#include <openssl/evp.h>

#include "service/auth/jwks.h"

/* Signs payload_json (used verbatim; must be a JSON object) with an Ed25519
 * private key under the header above. On JWT_OK *out is a malloc'd
 * NUL-terminated JWS owned by the caller (free()); on error NULL and err
 * says why (JWT_EARG, JWT_ENOMEM). */
int jws_sign(EVP_PKEY *priv, const char *kid, const char *typ, const char *payload_json, char **out,
             char *err, size_t errlen);

/* Verifies jws[0..len) (at most JWT_MAX_TOKEN bytes) against keys: exactly
 * three parts, a header with alg "EdDSA", a non-empty kid found in keys, no
 * "crit", and typ equal to typ (typ NULL: a token's, absent or "JWT"), then
 * the signature, and only then the payload, a JSON object without
 * duplicate members. On JWT_OK *payload (json_decref) and *kid (free()) are
 * the caller's; otherwise both are NULL and err says what was wrong. */
int jws_verify(const jwks *keys, const char *jws, size_t len, const char *typ, json_t **payload,
               char **kid, char *err, size_t errlen);

#endif
