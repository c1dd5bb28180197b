/* jwk_private: memoryd's own Ed25519 signing key as a private JWK
 * (RFC 8037: {"kty":"OKP","crv":"Ed25519","kid":..,"x":..,"d":..}). Used
 * by Access.Attenuate to sign the tokens it mints and by
 * `memoryd token` to mint operator tokens. The parser takes bytes so tests
 * need no files. */
#ifndef MEMORYD_AUTH_JWK_PRIVATE_H
#define MEMORYD_AUTH_JWK_PRIVATE_H
#include <openssl/evp.h>
#include <stddef.h>

/* Renders key (with its private half) as a compact private JWK. On 0
 * *json is malloc'd and owned by the caller (free(); it is a secret: wipe
 * or keep it short-lived); on -1 (not Ed25519, OOM) *json is NULL. */
int jwk_private_render(EVP_PKEY *key, const char *kid, char **json);

/* Parses a private JWK from json[0..len). Rejects a kty/crv other than
 * OKP/Ed25519, a missing or empty kid, x or d that are not base64url of 32
 * bytes, and a d whose public key is not x. On 0, *key (EVP_PKEY_free)
 * and *kid (free) are owned by the caller; on -1 both are NULL and err
 * says what is wrong. */
int jwk_private_parse(const char *json, size_t len, EVP_PKEY **key, char **kid, char *err,
                      size_t errlen);

/* Reads path and calls jwk_private_parse; same contract. A file readable
 * by group or others is refused: it holds a signing key. */
int jwk_private_load_file(const char *path, EVP_PKEY **key, char **kid, char *err, size_t errlen);

#endif
