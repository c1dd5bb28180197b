/* b64url: strict unpadded base64url. Hand-written rather than EVP_DecodeBlock
 * because that one speaks the '+/' alphabet, wants padding and silently
 * accepts non-canonical trailing bits. */
#include "service/core/b64url.h"

#include <stdint.h>
#include <stdlib.h>

static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* -1 for every byte outside the URL alphabet, including '=' and NUL. */
static int sextet(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

size_t b64url_encoded_len(size_t n) { return (n / 3) * 4 + (n % 3 == 0 ? 0 : n % 3 + 1); }

size_t b64url_decoded_max(size_t n) { return (n / 4) * 3 + 2; }

size_t b64url_encode(const unsigned char *in, size_t n, char *out) {
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
        out[o++] = ALPHABET[(v >> 18) & 63];
        out[o++] = ALPHABET[(v >> 12) & 63];
        out[o++] = ALPHABET[(v >> 6) & 63];
        out[o++] = ALPHABET[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = ALPHABET[(v >> 18) & 63];
        out[o++] = ALPHABET[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8);
        out[o++] = ALPHABET[(v >> 18) & 63];
        out[o++] = ALPHABET[(v >> 12) & 63];
        out[o++] = ALPHABET[(v >> 6) & 63];
    }
    out[o] = '\0';
    return o;
}

int b64url_decode(const char *in, size_t n, unsigned char *out, size_t *outlen) {
    /* One leftover character carries only 6 bits: never a whole byte. */
    if (n % 4 == 1) return -1;
    size_t o = 0, i = 0;
    for (; i + 4 <= n; i += 4) {
        int a = sextet((unsigned char)in[i]), b = sextet((unsigned char)in[i + 1]);
        int c = sextet((unsigned char)in[i + 2]), d = sextet((unsigned char)in[i + 3]);
        if ((a | b | c | d) < 0) return -1;
        uint32_t v = ((uint32_t)a << 18) | ((uint32_t)b << 12) | ((uint32_t)c << 6) | (uint32_t)d;
        out[o++] = (unsigned char)(v >> 16);
        out[o++] = (unsigned char)(v >> 8);
        out[o++] = (unsigned char)v;
    }
    size_t rest = n - i;
    if (rest == 2) {
        int a = sextet((unsigned char)in[i]), b = sextet((unsigned char)in[i + 1]);
        if ((a | b) < 0) return -1;
        if (b & 0x0f) return -1; /* low 4 bits unused: must be zero */
        out[o++] = (unsigned char)((a << 2) | (b >> 4));
    } else if (rest == 3) {
        int a = sextet((unsigned char)in[i]), b = sextet((unsigned char)in[i + 1]);
        int c = sextet((unsigned char)in[i + 2]);
        if ((a | b | c) < 0) return -1;
        if (c & 0x03) return -1; /* low 2 bits unused: must be zero */
        uint32_t v = ((uint32_t)a << 18) | ((uint32_t)b << 12) | ((uint32_t)c << 6);
        out[o++] = (unsigned char)(v >> 16);
        out[o++] = (unsigned char)(v >> 8);
    }
    *outlen = o;
    return 0;
}

int b64url_decode_alloc(const char *in, size_t n, unsigned char **out, size_t *outlen) {
    *out = NULL;
    /* +1 so zero-length input still gets a distinct allocation and callers
     * may NUL-terminate decoded JSON in place. */
    unsigned char *buf = malloc(b64url_decoded_max(n) + 1);
    if (buf == NULL) return -1;
    if (b64url_decode(in, n, buf, outlen) != 0) {
        free(buf);
        return -1;
    }
    buf[*outlen] = '\0';
    *out = buf;
    return 0;
}

char *b64url_encode_alloc(const unsigned char *in, size_t n) {
    char *s = malloc(b64url_encoded_len(n) + 1);
    if (s != NULL) b64url_encode(in, n, s);
    return s;
}
