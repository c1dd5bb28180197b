/* jwks: JWKS parsing into Ed25519 EVP_PKEYs. Only OKP/Ed25519 is accepted
 * because token verification hard-codes EdDSA; keys for other algorithms
 * are skipped rather than rejected so one JWKS can serve several services. */
#include "service/auth/jwks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "service/core/b64url.h"
#include "service/core/text.h"

#define ED25519_KEYLEN 32

typedef struct jwks_key {
    char *kid;
    EVP_PKEY *pkey;
} jwks_key;

struct jwks {
    jwks_key *keys;
    size_t nkeys;
    size_t skipped;
};

void jwks_free(jwks *set) {
    if (set == NULL) return;
    for (size_t i = 0; i < set->nkeys; i++) {
        free(set->keys[i].kid);
        EVP_PKEY_free(set->keys[i].pkey);
    }
    free(set->keys);
    free(set);
}

/* Optional string member: absent is fine, present must be `want`. */
static int check_optional(json_t *key, const char *name, const char *want, size_t idx,
                          const char *kid, char *err, size_t errlen) {
    json_t *v = json_object_get(key, name);
    if (v == NULL) return 0;
    if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0) {
        text_errf(err, errlen, "jwks: keys[%zu] (kid \"%s\"): \"%s\" must be \"%s\"", idx, kid,
                  name, want);
        return -1;
    }
    return 0;
}

/* Adds keys[idx] to set if it is Ed25519; returns 1 if skipped, 0 if added,
 * -1 on error. */
static int add_key(jwks *set, json_t *key, size_t idx, char *err, size_t errlen) {
    if (!json_is_object(key)) {
        text_errf(err, errlen, "jwks: keys[%zu] is not an object", idx);
        return -1;
    }
    json_t *kty = json_object_get(key, "kty");
    if (!json_is_string(kty)) {
        text_errf(err, errlen, "jwks: keys[%zu] has no string \"kty\"", idx);
        return -1;
    }
    if (strcmp(json_string_value(kty), "OKP") != 0) return 1;
    json_t *crv = json_object_get(key, "crv");
    if (!json_is_string(crv)) {
        text_errf(err, errlen, "jwks: keys[%zu] (OKP) has no string \"crv\"", idx);
        return -1;
    }
    if (strcmp(json_string_value(crv), "Ed25519") != 0) return 1; /* X25519, Ed448 */

    json_t *kid = json_object_get(key, "kid");
    if (!json_is_string(kid) || json_string_length(kid) == 0) {
        text_errf(err, errlen, "jwks: keys[%zu] (Ed25519) needs a non-empty string \"kid\"", idx);
        return -1;
    }
    const char *kids = json_string_value(kid);
    if (json_string_length(kid) > JWKS_MAX_KID) {
        text_errf(err, errlen, "jwks: keys[%zu]: kid longer than %d bytes", idx, JWKS_MAX_KID);
        return -1;
    }
    /* A private key in the verification file means it leaked somewhere it
     * should not be; refuse rather than quietly ignore. */
    if (json_object_get(key, "d") != NULL) {
        text_errf(err, errlen, "jwks: keys[%zu] (kid \"%s\") contains a private part \"d\"", idx,
                  kids);
        return -1;
    }
    if (check_optional(key, "alg", "EdDSA", idx, kids, err, errlen) != 0) return -1;
    if (check_optional(key, "use", "sig", idx, kids, err, errlen) != 0) return -1;
    if (jwks_find(set, kids) != NULL) {
        text_errf(err, errlen, "jwks: duplicate kid \"%s\" (keys[%zu])", kids, idx);
        return -1;
    }
    json_t *x = json_object_get(key, "x");
    if (!json_is_string(x)) {
        text_errf(err, errlen, "jwks: keys[%zu] (kid \"%s\") has no string \"x\"", idx, kids);
        return -1;
    }
    unsigned char raw[ED25519_KEYLEN + 3];
    size_t rawlen = 0;
    size_t xlen = json_string_length(x);
    /* 43 characters is the only unpadded encoding of 32 bytes; checking
     * first also keeps the decode within raw[]. */
    if (xlen != 43 || b64url_decode(json_string_value(x), xlen, raw, &rawlen) != 0 ||
        rawlen != ED25519_KEYLEN) {
        text_errf(err, errlen, "jwks: keys[%zu] (kid \"%s\"): \"x\" is not base64url of 32 bytes",
                  idx, kids);
        return -1;
    }
    EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, rawlen);
    if (pkey == NULL) {
        text_errf(err, errlen, "jwks: keys[%zu] (kid \"%s\"): OpenSSL rejected the key", idx, kids);
        return -1;
    }
    char *kidcopy = strdup(kids);
    jwks_key *grown = realloc(set->keys, (set->nkeys + 1) * sizeof *grown);
    if (kidcopy == NULL || grown == NULL) {
        free(kidcopy);
        if (grown != NULL) set->keys = grown;
        EVP_PKEY_free(pkey);
        text_errf(err, errlen, "jwks: out of memory");
        return -1;
    }
    set->keys = grown;
    set->keys[set->nkeys].kid = kidcopy;
    set->keys[set->nkeys].pkey = pkey;
    set->nkeys++;
    return 0;
}

int jwks_parse(const char *json, size_t len, jwks **out, char *err, size_t errlen) {
    *out = NULL;
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL) {
        text_errf(err, errlen, "jwks: malformed JSON at line %d column %d: %s", jerr.line,
                  jerr.column, jerr.text);
        return -1;
    }
    int rc = -1;
    jwks *set = NULL;
    json_t *keys = json_object_get(doc, "keys");
    if (!json_is_object(doc) || !json_is_array(keys)) {
        text_errf(err, errlen, "jwks: document must be an object with a \"keys\" array");
        goto done;
    }
    if (json_array_size(keys) > JWKS_MAX_KEYS) {
        text_errf(err, errlen, "jwks: %zu keys, at most %d allowed", json_array_size(keys),
                  JWKS_MAX_KEYS);
        goto done;
    }
    set = calloc(1, sizeof *set);
    if (set == NULL) {
        text_errf(err, errlen, "jwks: out of memory");
        goto done;
    }
    for (size_t i = 0; i < json_array_size(keys); i++) {
        int r = add_key(set, json_array_get(keys, i), i, err, errlen);
        if (r < 0) goto done;
        if (r == 1) set->skipped++;
    }
    if (set->nkeys == 0) {
        text_errf(err, errlen, "jwks: no Ed25519 keys (%zu other keys skipped)", set->skipped);
        goto done;
    }
    *out = set;
    set = NULL;
    rc = 0;
done:
    jwks_free(set);
    json_decref(doc);
    return rc;
}

int jwks_load_file(const char *path, jwks **out, char *err, size_t errlen) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        text_errf(err, errlen, "jwks: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = malloc(JWKS_MAX_DOC + 1);
    if (buf == NULL) {
        fclose(f);
        text_errf(err, errlen, "jwks: out of memory");
        return -1;
    }
    size_t n = fread(buf, 1, JWKS_MAX_DOC + 1, f);
    int rerr = ferror(f);
    fclose(f);
    int rc = -1;
    if (rerr) {
        text_errf(err, errlen, "jwks: cannot read %s", path);
    } else if (n > JWKS_MAX_DOC) {
        text_errf(err, errlen, "jwks: %s is larger than %d bytes", path, JWKS_MAX_DOC);
    } else {
        rc = jwks_parse(buf, n, out, err, errlen);
    }
    free(buf);
    return rc;
}

EVP_PKEY *jwks_find(const jwks *set, const char *kid) {
    if (set == NULL || kid == NULL) return NULL;
    for (size_t i = 0; i < set->nkeys; i++) {
        if (strcmp(set->keys[i].kid, kid) == 0) return set->keys[i].pkey;
    }
    return NULL;
}

size_t jwks_count(const jwks *set) { return set == NULL ? 0 : set->nkeys; }

const char *jwks_kid(const jwks *set, size_t i) { return set->keys[i].kid; }

size_t jwks_skipped(const jwks *set) { return set == NULL ? 0 : set->skipped; }

int jwks_generate_ed25519(EVP_PKEY **out) {
    *out = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    return *out == NULL ? -1 : 0;
}

int jwks_render_public(EVP_PKEY *key, const char *kid, char **json) {
    *json = NULL;
    unsigned char raw[ED25519_KEYLEN];
    size_t rawlen = sizeof raw;
    if (key == NULL || kid == NULL || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519 ||
        EVP_PKEY_get_raw_public_key(key, raw, &rawlen) != 1 || rawlen != ED25519_KEYLEN)
        return -1;
    char x[64];
    b64url_encode(raw, rawlen, x);
    json_t *obj = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kty", "OKP", "crv", "Ed25519", "kid",
                            kid, "x", x, "alg", "EdDSA", "use", "sig");
    if (obj == NULL) return -1;
    *json = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    return *json == NULL ? -1 : 0;
}
