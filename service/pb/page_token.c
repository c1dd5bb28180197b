/* page_token: sealed keyset cursors; see page_token.h.
 *
 * Layout before base64url: version (1) | field count (1) | for each field
 * its length (2 bytes, big-endian) and bytes | 16-byte seal, the seal
 * being the first 16 bytes of HMAC-SHA-256 under the key over the domain,
 * the binding strings (each length-prefixed) and everything before it. */
#include "service/pb/page_token.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/b64url.h"

#define VERSION 3
#define SEAL_LEN 16

/* Written once before serving (page_token_set_key), read after; the
 * HMAC implementation is looked up once too, not on every List call. */
static unsigned char seal_key[PAGE_TOKEN_KEY_LEN];
static EVP_MAC *hmac;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void init_seal(void) {
    if (RAND_bytes(seal_key, sizeof seal_key) != 1) abort(); /* no entropy: no seal */
    hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);                /* NULL: every seal fails */
}

void page_token_set_key(const unsigned char key[PAGE_TOKEN_KEY_LEN]) {
    pthread_once(&key_once, init_seal);
    memcpy(seal_key, key, sizeof seal_key);
}

static void put_field(EVP_MAC_CTX *mac, const void *p, size_t n) {
    unsigned char len[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 8), (unsigned char)n};
    EVP_MAC_update(mac, len, 4);
    if (n) EVP_MAC_update(mac, p, n);
}

static int seal(const char *domain, const char *const *bind, size_t nbind,
                const unsigned char *body, size_t n, unsigned char out[SEAL_LEN]) {
    pthread_once(&key_once, init_seal);
    unsigned char digest[EVP_MAX_MD_SIZE];
    size_t dlen = 0;
    EVP_MAC_CTX *mac = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
                           OSSL_PARAM_construct_end()};
    int ok = mac && EVP_MAC_init(mac, seal_key, sizeof seal_key, params) == 1;
    if (ok) {
        put_field(mac, domain, strlen(domain));
        for (size_t i = 0; i < nbind; i++) put_field(mac, bind[i], strlen(bind[i]));
        put_field(mac, body, n);
        ok = EVP_MAC_final(mac, digest, &dlen, sizeof digest) == 1 && dlen >= SEAL_LEN;
    }
    EVP_MAC_CTX_free(mac);
    if (ok) memcpy(out, digest, SEAL_LEN);
    return ok ? 0 : -1;
}

char *page_token_encode(arena *a, const char *domain, const char *const *bind, size_t nbind,
                        const char *const *fields, size_t nfields) {
    if (nfields == 0 || nfields > PAGE_TOKEN_FIELDS_MAX) return NULL;
    size_t n = 2;
    for (size_t i = 0; i < nfields; i++) {
        size_t l = strlen(fields[i]);
        if (l > PAGE_TOKEN_FIELD_MAX) return NULL;
        n += 2 + l;
    }
    unsigned char *raw = arena_alloc(a, n + SEAL_LEN);
    if (!raw) return NULL;
    unsigned char *w = raw;
    *w++ = VERSION;
    *w++ = (unsigned char)nfields;
    for (size_t i = 0; i < nfields; i++) {
        size_t l = strlen(fields[i]);
        *w++ = (unsigned char)(l >> 8);
        *w++ = (unsigned char)l;
        memcpy(w, fields[i], l);
        w += l;
    }
    if (seal(domain, bind, nbind, raw, n, raw + n) != 0) return NULL;
    char *out = arena_alloc(a, b64url_encoded_len(n + SEAL_LEN) + 1);
    if (!out) return NULL;
    b64url_encode(raw, n + SEAL_LEN, out);
    return out;
}

int page_token_decode(arena *a, const char *domain, const char *const *bind, size_t nbind,
                      const char *token, const char **fields, size_t nfields) {
    size_t tl = strnlen(token, PAGE_TOKEN_MAX + 1);
    if (tl == 0 || tl > PAGE_TOKEN_MAX || nfields == 0 || nfields > PAGE_TOKEN_FIELDS_MAX)
        return -1;
    unsigned char *raw = arena_alloc(a, b64url_decoded_max(tl) + 1);
    size_t n = 0;
    if (!raw || b64url_decode(token, tl, raw, &n) != 0) return -1;
    if (n < 2 + SEAL_LEN || raw[0] != VERSION || raw[1] != nfields) return -1;
    size_t body = n - SEAL_LEN;
    unsigned char want[SEAL_LEN];
    if (seal(domain, bind, nbind, raw, body, want) != 0) return -1;
    /* Compared in constant time: the seal is a MAC. */
    unsigned char diff = 0;
    for (size_t i = 0; i < SEAL_LEN; i++) diff |= (unsigned char)(want[i] ^ raw[body + i]);
    if (diff) return -1;
    size_t off = 2;
    for (size_t i = 0; i < nfields; i++) {
        if (body - off < 2) return -1;
        size_t l = ((size_t)raw[off] << 8) | raw[off + 1];
        off += 2;
        if (l > body - off || memchr(raw + off, 0, l)) return -1;
        if (!(fields[i] = arena_strndup(a, (const char *)raw + off, l))) return -1;
        off += l;
    }
    return off == body ? 0 : -1;
}
