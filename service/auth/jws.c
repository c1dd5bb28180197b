/* jws: EdDSA-only JWS compact serialization; see jws.h. The algorithm
 * comes from our policy, never from the input: the header's alg is only
 * checked for equality, so "none" and HMAC-with-the-public-key confusions
 * have no code path. */
#include "service/auth/jws.h"

#include <stdlib.h>
#include <string.h>

#include "service/auth/jwt.h"
#include "service/core/b64url.h"
#include "service/core/text.h"

#define ED25519_SIGLEN 64

static json_t *decode_json_part(const char *p, size_t n, const char *what, char *err,
                                size_t errlen) {
    unsigned char *raw = NULL;
    size_t rawlen = 0;
    if (b64url_decode_alloc(p, n, &raw, &rawlen) != 0) {
        text_errf(err, errlen, "jwt: %s is not valid base64url", what);
        return NULL;
    }
    json_error_t jerr;
    /* Duplicate members are rejected: two "alg"s or two "exp"s would let
     * different parsers see different tokens. */
    json_t *j = json_loadb((const char *)raw, rawlen, JSON_REJECT_DUPLICATES, &jerr);
    free(raw);
    if (j == NULL) {
        text_errf(err, errlen, "jwt: %s is not valid JSON: %s", what, jerr.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        text_errf(err, errlen, "jwt: %s is not a JSON object", what);
        return NULL;
    }
    return j;
}

/* Checks the header; on success *kid points into hdr (valid while hdr is). */
static int check_header(json_t *hdr, const char *typ, const char **kid, char *err, size_t errlen) {
    json_t *alg = json_object_get(hdr, "alg");
    if (!json_is_string(alg)) {
        text_errf(err, errlen, "jwt: header has no string \"alg\"");
        return JWT_EHEADER;
    }
    if (strcmp(json_string_value(alg), "EdDSA") != 0) {
        text_errf(err, errlen, "jwt: alg \"%.32s\" not accepted (only EdDSA)",
                  json_string_value(alg));
        return JWT_EHEADER;
    }
    json_t *t = json_object_get(hdr, "typ");
    if (typ == NULL && t != NULL &&
        (!json_is_string(t) || strcmp(json_string_value(t), "JWT") != 0)) {
        text_errf(err, errlen, "jwt: header typ must be \"JWT\" when present");
        return JWT_EHEADER;
    }
    if (typ != NULL && (!json_is_string(t) || strcmp(json_string_value(t), typ) != 0)) {
        text_errf(err, errlen, "jws: header typ must be \"%s\"", typ);
        return JWT_EHEADER;
    }
    /* RFC 7515 §4.1.11: extensions listed in crit must be understood; we
     * understand none. */
    if (json_object_get(hdr, "crit") != NULL) {
        text_errf(err, errlen, "jwt: header \"crit\" extensions are not supported");
        return JWT_EHEADER;
    }
    json_t *k = json_object_get(hdr, "kid");
    if (!json_is_string(k) || json_string_length(k) == 0) {
        text_errf(err, errlen, "jwt: header has no non-empty string \"kid\"");
        return JWT_EHEADER;
    }
    *kid = json_string_value(k);
    return JWT_OK;
}

static int verify_sig(EVP_PKEY *key, const char *signed_part, size_t signed_len, const char *sig64,
                      size_t sig64_len, char *err, size_t errlen) {
    unsigned char sig[ED25519_SIGLEN + 3];
    size_t siglen = 0;
    /* 86 characters is the only unpadded encoding of 64 bytes. */
    if (sig64_len != 86 || b64url_decode(sig64, sig64_len, sig, &siglen) != 0 ||
        siglen != ED25519_SIGLEN) {
        text_errf(err, errlen, "jwt: signature is not base64url of 64 bytes");
        return JWT_ESIG;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) {
        text_errf(err, errlen, "jwt: out of memory");
        return JWT_ENOMEM;
    }
    int ok =
        EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) == 1 &&
        EVP_DigestVerify(ctx, sig, siglen, (const unsigned char *)signed_part, signed_len) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok) {
        text_errf(err, errlen, "jwt: signature does not verify");
        return JWT_ESIG;
    }
    return JWT_OK;
}

int jws_verify(const jwks *keys, const char *token, size_t len, const char *typ, json_t **payload,
               char **kid_out, char *err, size_t errlen) {
    *payload = NULL;
    *kid_out = NULL;
    if (token == NULL || len == 0) {
        text_errf(err, errlen, "jwt: empty token");
        return JWT_EMALFORMED;
    }
    if (len > JWT_MAX_TOKEN) {
        text_errf(err, errlen, "jwt: token is %zu bytes, at most %d", len, JWT_MAX_TOKEN);
        return JWT_EMALFORMED;
    }
    const char *dot1 = memchr(token, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (dot2 == NULL || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)) != NULL) {
        text_errf(err, errlen, "jwt: token must have exactly three dot-separated parts");
        return JWT_EMALFORMED;
    }
    size_t hlen = (size_t)(dot1 - token);
    size_t plen = (size_t)(dot2 - dot1 - 1);
    size_t slen = len - (size_t)(dot2 + 1 - token);
    if (hlen == 0 || plen == 0) {
        text_errf(err, errlen, "jwt: empty header or payload part");
        return JWT_EMALFORMED;
    }

    json_t *hdr = decode_json_part(token, hlen, "header", err, errlen);
    if (hdr == NULL) return JWT_EMALFORMED;
    const char *kid = NULL;
    int rc = check_header(hdr, typ, &kid, err, errlen);
    if (rc != JWT_OK) goto done;
    EVP_PKEY *key = jwks_find(keys, kid);
    if (key == NULL) {
        text_errf(err, errlen, "jwt: unknown kid \"%.64s\"", kid);
        rc = JWT_EKID;
        goto done;
    }
    rc = verify_sig(key, token, (size_t)(dot2 - token), dot2 + 1, slen, err, errlen);
    if (rc != JWT_OK) goto done;
    *payload = decode_json_part(dot1 + 1, plen, "payload", err, errlen);
    if (*payload == NULL) {
        rc = JWT_EMALFORMED;
        goto done;
    }
    if (!(*kid_out = strdup(kid))) {
        json_decref(*payload);
        *payload = NULL;
        text_errf(err, errlen, "jwt: out of memory");
        rc = JWT_ENOMEM;
    }
done:
    json_decref(hdr);
    return rc;
}

int jws_sign(EVP_PKEY *priv, const char *kid, const char *typ, const char *payload_json,
             char **out_token, char *err, size_t errlen) {
    *out_token = NULL;
    if (priv == NULL || kid == NULL || typ == NULL || payload_json == NULL ||
        EVP_PKEY_get_id(priv) != EVP_PKEY_ED25519) {
        text_errf(err, errlen, "jwt_sign: need an Ed25519 key, a kid and a payload");
        return JWT_EARG;
    }
    json_error_t jerr;
    json_t *probe = json_loads(payload_json, JSON_REJECT_DUPLICATES, &jerr);
    int is_obj = json_is_object(probe);
    json_decref(probe);
    if (!is_obj) {
        text_errf(err, errlen, "jwt_sign: payload is not a JSON object");
        return JWT_EARG;
    }
    json_t *hobj = json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "typ", typ, "kid", kid);
    char *hjson = hobj ? json_dumps(hobj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(hobj);
    if (hjson == NULL) {
        text_errf(err, errlen, "jwt_sign: out of memory");
        return JWT_ENOMEM;
    }
    size_t hl = b64url_encoded_len(strlen(hjson));
    size_t pl = b64url_encoded_len(strlen(payload_json));
    size_t total = hl + 1 + pl + 1 + b64url_encoded_len(ED25519_SIGLEN);
    char *tok = malloc(total + 1);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = JWT_ENOMEM;
    if (tok == NULL || ctx == NULL) {
        text_errf(err, errlen, "jwt_sign: out of memory");
        goto done;
    }
    b64url_encode((const unsigned char *)hjson, strlen(hjson), tok);
    tok[hl] = '.';
    b64url_encode((const unsigned char *)payload_json, strlen(payload_json), tok + hl + 1);
    tok[hl + 1 + pl] = '.';
    unsigned char sig[ED25519_SIGLEN];
    size_t siglen = sizeof sig;
    if (EVP_DigestSignInit(ctx, NULL, NULL, NULL, priv) != 1 ||
        EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)tok, hl + 1 + pl) != 1 ||
        siglen != ED25519_SIGLEN) {
        text_errf(err, errlen, "jwt_sign: signing failed (is it a private key?)");
        rc = JWT_EARG;
        goto done;
    }
    b64url_encode(sig, siglen, tok + hl + 1 + pl + 1);
    *out_token = tok;
    tok = NULL;
    rc = JWT_OK;
done:
    EVP_MD_CTX_free(ctx);
    free(tok);
    free(hjson);
    return rc;
}
