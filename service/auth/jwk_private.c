/* jwk_private: Ed25519 private JWKs; see jwk_private.h. */
#include "service/auth/jwk_private.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "service/core/b64url.h"
#include "service/core/text.h"

#define KEYLEN 32
#define MAX_FILE (64 * 1024)

int jwk_private_render(EVP_PKEY *key, const char *kid, char **json) {
    *json = NULL;
    unsigned char pub[KEYLEN], priv[KEYLEN];
    size_t publen = sizeof pub, privlen = sizeof priv;
    if (!key || !kid || !kid[0] || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519 ||
        EVP_PKEY_get_raw_public_key(key, pub, &publen) != 1 ||
        EVP_PKEY_get_raw_private_key(key, priv, &privlen) != 1 || publen != KEYLEN ||
        privlen != KEYLEN)
        return -1;
    char x[64], d[64];
    b64url_encode(pub, KEYLEN, x);
    b64url_encode(priv, KEYLEN, d);
    OPENSSL_cleanse(priv, sizeof priv);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "kty", "OKP", "crv", "Ed25519",
                          "kid", kid, "x", x, "d", d, "alg", "EdDSA", "use", "sig");
    OPENSSL_cleanse(d, sizeof d);
    if (!o) return -1;
    *json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return *json ? 0 : -1;
}

static int decode_32(json_t *o, const char *name, unsigned char out[KEYLEN], char *err,
                     size_t errlen) {
    json_t *v = json_object_get(o, name);
    size_t n = 0;
    if (!json_is_string(v) || json_string_length(v) != 43 ||
        b64url_decode(json_string_value(v), 43, out, &n) != 0 || n != KEYLEN) {
        text_errf(err, errlen, "private JWK: \"%s\" must be base64url of 32 bytes", name);
        return -1;
    }
    return 0;
}

int jwk_private_parse(const char *json, size_t len, EVP_PKEY **key, char **kid, char *err,
                      size_t errlen) {
    *key = NULL;
    *kid = NULL;
    json_error_t jerr;
    json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(o)) {
        text_errf(err, errlen, "private JWK: not a JSON object (%s)", o ? "wrong type" : jerr.text);
        json_decref(o);
        return -1;
    }
    int rc = -1;
    unsigned char x[KEYLEN + 2], d[KEYLEN + 2], derived[KEYLEN];
    size_t dlen = sizeof derived;
    const char *kty = json_string_value(json_object_get(o, "kty"));
    const char *crv = json_string_value(json_object_get(o, "crv"));
    const char *k = json_string_value(json_object_get(o, "kid"));
    if (!kty || strcmp(kty, "OKP") != 0 || !crv || strcmp(crv, "Ed25519") != 0) {
        text_errf(err, errlen, "private JWK: only kty \"OKP\" with crv \"Ed25519\" is supported");
        goto out;
    }
    if (!k || !k[0]) {
        text_errf(err, errlen, "private JWK: \"kid\" is missing or empty");
        goto out;
    }
    if (decode_32(o, "x", x, err, errlen) != 0 || decode_32(o, "d", d, err, errlen) != 0) goto out;
    *key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, d, KEYLEN);
    if (!*key || EVP_PKEY_get_raw_public_key(*key, derived, &dlen) != 1 || dlen != KEYLEN ||
        memcmp(derived, x, KEYLEN) != 0) {
        text_errf(err, errlen, "private JWK: \"d\" does not belong to public key \"x\"");
        EVP_PKEY_free(*key);
        *key = NULL;
        goto out;
    }
    *kid = strdup(k);
    if (!*kid) {
        text_errf(err, errlen, "out of memory");
        EVP_PKEY_free(*key);
        *key = NULL;
        goto out;
    }
    rc = 0;
out:
    OPENSSL_cleanse(d, sizeof d);
    json_decref(o);
    return rc;
}

int jwk_private_load_file(const char *path, EVP_PKEY **key, char **kid, char *err, size_t errlen) {
    *key = NULL;
    *kid = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        text_errf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        text_errf(err, errlen,
                  "%s holds a signing key but is readable by group or others "
                  "(chmod 600 %s)",
                  path, path);
        fclose(f);
        return -1;
    }
    char *buf = malloc(MAX_FILE);
    size_t n = buf ? fread(buf, 1, MAX_FILE, f) : 0;
    int too_big = buf && n == MAX_FILE;
    fclose(f);
    if (!buf || too_big) {
        text_errf(err, errlen, too_big ? "%s: larger than a key file can be" : "out of memory",
                  path);
        free(buf);
        return -1;
    }
    char why[256];
    int rc = jwk_private_parse(buf, n, key, kid, why, sizeof why);
    if (rc != 0) text_errf(err, errlen, "%s: %s", path, why);
    OPENSSL_cleanse(buf, n);
    free(buf);
    return rc;
}
