/* jwks: the set of Ed25519 public keys that may sign memoryd capability
 * tokens, parsed from a JWKS document (RFC 7517; OKP keys per RFC 8037).
 * Keys are selected by `kid`; rotation means adding a key to the file. The
 * parser takes bytes so tests and fuzzers need no files. */
#ifndef MEMORYD_AUTH_JWKS_H
#define MEMORYD_AUTH_JWKS_H

#include <stddef.h>

#include <openssl/evp.h>

typedef struct jwks jwks;

/* Upper bounds that keep a hostile or mistaken file from costing much. */
#define JWKS_MAX_KEYS 256
#define JWKS_MAX_KID 256
#define JWKS_MAX_DOC (1024 * 1024) /* bytes, jwks_load_file only */

/* Parses json[0..len) (need not be NUL-terminated), which must be an object
 * with a "keys" array. Each {"kty":"OKP","crv":"Ed25519","x":...,"kid":...}
 * becomes a key; other kty values and other OKP curves are skipped and
 * counted (a shared JWKS may also carry RSA/EC keys for other services).
 * Rejected with a message in err: malformed JSON, missing/empty/duplicate
 * kid on an Ed25519 key, x not base64url of exactly 32 bytes, an Ed25519
 * key whose "alg" or "use" is present but not "EdDSA"/"sig", a private
 * part ("d") in the file, and zero usable keys.
 * On 0, *out is a new set the caller frees with jwks_free; on error *out
 * is NULL and nothing is left allocated. */
int jwks_parse(const char *json, size_t len, jwks **out, char *err, size_t errlen);

/* Reads path (at most JWKS_MAX_DOC bytes) and calls jwks_parse. Same
 * ownership and error contract; err also names I/O failures. */
int jwks_load_file(const char *path, jwks **out, char *err, size_t errlen);

/* Accepts NULL. Frees every key the set owns. */
void jwks_free(jwks *set);

/* The key with this kid, or NULL. The EVP_PKEY stays owned by the set and
 * lives until jwks_free; callers must not free it. */
EVP_PKEY *jwks_find(const jwks *set, const char *kid);

size_t jwks_count(const jwks *set); /* usable Ed25519 keys */
/* The kid of usable key i (< jwks_count). */
const char *jwks_kid(const jwks *set, size_t i);
size_t jwks_skipped(const jwks *set); /* entries skipped as not Ed25519 */

/* Generates a fresh Ed25519 key pair. On 0, *out is owned by the caller
 * (EVP_PKEY_free); on -1 *out is NULL. */
int jwks_generate_ed25519(EVP_PKEY **out);

/* Renders the public half of an Ed25519 key as a compact JWK object,
 * {"kty":"OKP","crv":"Ed25519","kid":...,"x":...,"alg":"EdDSA","use":"sig"},
 * the form jwks_parse accepts inside "keys". On 0, *json is malloc'd and
 * owned by the caller (free()); on -1 (not Ed25519, OOM) *json is NULL. */
int jwks_render_public(EVP_PKEY *key, const char *kid, char **json);

#endif
