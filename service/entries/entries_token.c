/* entries_token: sealed keyset cursors; see entries_token.h.
 *
 * Layout before base64url: version (1) | ns length (1 byte) | ns |
 * key length (2 bytes, big-endian) | key | 16-byte seal, the seal being
 * the first 16 bytes of SHA-256 over a domain string, the length-prefixed
 * binding fields and everything before it. */
#include "service/entries/entries_token.h"

#include <openssl/evp.h>
#include <string.h>

#include "service/auth/b64url.h"

#define VERSION 1
#define SEAL_LEN 16
#define NS_MAX 255
#define KEY_MAX 1024

static void put_field(EVP_MD_CTX *md, const void *p, size_t n) {
    unsigned char len[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 8), (unsigned char)n};
    EVP_DigestUpdate(md, len, 4);
    if (n) EVP_DigestUpdate(md, p, n);
}

static int seal(const entries_token_binding *b, const unsigned char *body, size_t n,
                unsigned char out[SEAL_LEN]) {
    static const char domain[] = "memoryd entries page token v1";
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
    if (ok) {
        put_field(md, domain, sizeof domain - 1);
        put_field(md, b->tenant, strlen(b->tenant));
        put_field(md, b->principal, strlen(b->principal));
        put_field(md, b->ns_pattern, strlen(b->ns_pattern));
        put_field(md, b->key_pattern, strlen(b->key_pattern));
        put_field(md, body, n);
        ok = EVP_DigestFinal_ex(md, digest, &dlen) == 1 && dlen >= SEAL_LEN;
    }
    EVP_MD_CTX_free(md);
    if (ok) memcpy(out, digest, SEAL_LEN);
    return ok ? 0 : -1;
}

char *entries_token_encode(arena *a, const entries_token_binding *b, const char *ns,
                           const char *key) {
    size_t nl = strlen(ns), kl = strlen(key);
    if (nl > NS_MAX || kl > KEY_MAX) return NULL;
    size_t n = 1 + 1 + nl + 2 + kl;
    unsigned char *raw = arena_alloc(a, n + SEAL_LEN);
    if (!raw) return NULL;
    unsigned char *w = raw;
    *w++ = VERSION;
    *w++ = (unsigned char)nl;
    memcpy(w, ns, nl);
    w += nl;
    *w++ = (unsigned char)(kl >> 8);
    *w++ = (unsigned char)kl;
    memcpy(w, key, kl);
    if (seal(b, raw, n, raw + n) != 0) return NULL;
    char *out = arena_alloc(a, b64url_encoded_len(n + SEAL_LEN) + 1);
    if (!out) return NULL;
    b64url_encode(raw, n + SEAL_LEN, out);
    return out;
}

int entries_token_decode(arena *a, const entries_token_binding *b, const char *token,
                         const char **ns, const char **key) {
    size_t tl = strnlen(token, ENTRIES_TOKEN_MAX + 1);
    if (tl == 0 || tl > ENTRIES_TOKEN_MAX) return -1;
    unsigned char *raw = arena_alloc(a, b64url_decoded_max(tl) + 1);
    size_t n = 0;
    if (!raw || b64url_decode(token, tl, raw, &n) != 0) return -1;
    if (n < 1 + 1 + 2 + SEAL_LEN || raw[0] != VERSION) return -1;
    size_t body = n - SEAL_LEN, nl = raw[1];
    if (2 + nl + 2 > body) return -1;
    size_t kl = ((size_t)raw[2 + nl] << 8) | raw[3 + nl];
    if (4 + nl + kl != body) return -1;
    unsigned char want[SEAL_LEN];
    if (seal(b, raw, body, want) != 0) return -1;
    /* Constant time is not needed (the seal is not a secret MAC), but it
     * costs nothing. */
    unsigned char diff = 0;
    for (size_t i = 0; i < SEAL_LEN; i++) diff |= (unsigned char)(want[i] ^ raw[body + i]);
    if (diff) return -1;
    const char *nsp = (const char *)raw + 2, *kp = (const char *)raw + 4 + nl;
    if (memchr(nsp, 0, nl) || memchr(kp, 0, kl) || nl == 0 || kl == 0) return -1;
    *ns = arena_strndup(a, nsp, nl);
    *key = arena_strndup(a, kp, kl);
    return *ns && *key ? 0 : -1;
}
