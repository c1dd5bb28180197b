/* b64url: strict base64url (RFC 4648 §5) without padding, as JWS compact
 * serialisation requires (RFC 7515 §2). Pure functions, no I/O. */
#ifndef MEMORYD_CORE_B64URL_H
#define MEMORYD_CORE_B64URL_H

#include <stddef.h>

/* Bytes needed to encode n bytes, excluding the terminating NUL. */
size_t b64url_encoded_len(size_t n);

/* Upper bound on the bytes a decode of n characters produces. */
size_t b64url_decoded_max(size_t n);

/* Encodes in[0..n) into out (caller-owned, at least b64url_encoded_len(n)+1
 * bytes) and NUL-terminates it. Returns the length written (without NUL). */
size_t b64url_encode(const unsigned char *in, size_t n, char *out);

/* Decodes in[0..n) into out (caller-owned, at least b64url_decoded_max(n)
 * bytes); *outlen receives the decoded length. Rejected (returns -1, out
 * contents unspecified): '=' padding, characters outside [A-Za-z0-9_-], a
 * length of 1 mod 4, and non-zero unused trailing bits (so each byte string
 * has exactly one accepted encoding — signatures cannot be malleated). */
int b64url_decode(const char *in, size_t n, unsigned char *out, size_t *outlen);

/* Convenience: malloc'd decode; *out is owned by the caller (free()) and is
 * NULL on error. Returns 0 or -1 (invalid input or out of memory). */
int b64url_decode_alloc(const char *in, size_t n, unsigned char **out, size_t *outlen);

/* Convenience: malloc'd, NUL-terminated encode; caller frees. NULL on OOM. */
char *b64url_encode_alloc(const unsigned char *in, size_t n);

#endif
