/* jwt: EdDSA-only JWT verification. The algorithm comes from our policy,
 * never from the token: the header's alg is only checked for equality, so
 * "none" and HMAC-with-the-public-key confusions have no code path. */
#include "service/auth/jwt.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "service/core/b64url.h"
#include "service/core/text.h"

#define ED25519_SIGLEN 64

const char *jwt_strerror(int code) {
    switch (code) {
    case JWT_OK: return "JWT_OK";
    case JWT_EMALFORMED: return "JWT_EMALFORMED";
    case JWT_EHEADER: return "JWT_EHEADER";
    case JWT_EKID: return "JWT_EKID";
    case JWT_ESIG: return "JWT_ESIG";
    case JWT_EEXPIRED: return "JWT_EEXPIRED";
    case JWT_ENOTYET: return "JWT_ENOTYET";
    case JWT_ECLAIM: return "JWT_ECLAIM";
    case JWT_ENOMEM: return "JWT_ENOMEM";
    case JWT_EARG: return "JWT_EARG";
    default: return "JWT_E?";
    }
}

static void free_strv(char **v, size_t n) {
    if (v == NULL) return;
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

void jwt_claims_free(jwt_claims *c) {
    if (c == NULL) return;
    free(c->kid);
    free(c->iss);
    free(c->sub);
    free(c->tenant);
    free(c->jti);
    free(c->parent);
    free_strv(c->scopes, c->nscopes);
    free_strv(c->ns, c->nns);
    free_strv(c->anc, c->nanc);
    free(c);
}

/* Decodes a base64url JSON object part. Returns NULL with err set. */
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
static int check_header(json_t *hdr, const char **kid, char *err, size_t errlen) {
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
    json_t *typ = json_object_get(hdr, "typ");
    if (typ != NULL && (!json_is_string(typ) || strcmp(json_string_value(typ), "JWT") != 0)) {
        text_errf(err, errlen, "jwt: header typ must be \"JWT\" when present");
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

/* A required (or optional, when *dst may stay NULL) non-empty string claim. */
static int take_string(json_t *pl, const char *name, int required, char **dst, char *err,
                       size_t errlen) {
    json_t *v = json_object_get(pl, name);
    if (v == NULL) {
        if (!required) return JWT_OK;
        text_errf(err, errlen, "jwt: missing required claim \"%s\"", name);
        return JWT_ECLAIM;
    }
    if (!json_is_string(v) || json_string_length(v) == 0) {
        text_errf(err, errlen, "jwt: claim \"%s\" must be a non-empty string", name);
        return JWT_ECLAIM;
    }
    *dst = strdup(json_string_value(v));
    if (*dst == NULL) {
        text_errf(err, errlen, "jwt: out of memory");
        return JWT_ENOMEM;
    }
    return JWT_OK;
}

static int take_time(json_t *pl, const char *name, int required, int64_t *dst, int *has, char *err,
                     size_t errlen) {
    json_t *v = json_object_get(pl, name);
    if (v == NULL) {
        if (!required) return JWT_OK;
        text_errf(err, errlen, "jwt: missing required claim \"%s\"", name);
        return JWT_ECLAIM;
    }
    /* Bounded so later arithmetic with now and skew cannot overflow. */
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > ((json_int_t)1 << 40)) {
        text_errf(err, errlen, "jwt: claim \"%s\" must be a non-negative integer (seconds)", name);
        return JWT_ECLAIM;
    }
    *dst = (int64_t)json_integer_value(v);
    if (has != NULL) *has = 1;
    return JWT_OK;
}

static int take_label(json_t *pl, const char *name, jwt_label *dst, int *present, char *err,
                      size_t errlen) {
    static const char *const names[] = {"PUBLIC", "INTERNAL", "CONFIDENTIAL", "SECRET"};
    json_t *v = json_object_get(pl, name);
    *present = 0;
    if (v == NULL) return JWT_OK;
    if (json_is_string(v)) {
        for (int i = 0; i < 4; i++) {
            if (strcmp(json_string_value(v), names[i]) == 0) {
                *dst = (jwt_label)(i + 1);
                *present = 1;
                return JWT_OK;
            }
        }
    }
    text_errf(err, errlen,
              "jwt: claim \"%s\" must be one of PUBLIC, INTERNAL, CONFIDENTIAL, SECRET", name);
    return JWT_ECLAIM;
}

/* Splits "scope" on single spaces. Empty elements (leading, trailing or
 * doubled spaces) are refused rather than skipped: the minting tool never
 * writes them, so they indicate a hand-edited or foreign token. */
static int take_scopes(json_t *pl, jwt_claims *c, char *err, size_t errlen) {
    json_t *v = json_object_get(pl, "scope");
    if (v == NULL) {
        text_errf(err, errlen, "jwt: missing required claim \"scope\"");
        return JWT_ECLAIM;
    }
    if (!json_is_string(v) || json_string_length(v) == 0) {
        text_errf(err, errlen, "jwt: claim \"scope\" must be a non-empty string");
        return JWT_ECLAIM;
    }
    const char *s = json_string_value(v);
    size_t n = 1;
    for (const char *p = s; *p; p++) n += (*p == ' ');
    if (n > JWT_MAX_SCOPES) {
        text_errf(err, errlen, "jwt: claim \"scope\" has %zu scopes, at most %d", n,
                  JWT_MAX_SCOPES);
        return JWT_ECLAIM;
    }
    c->scopes = calloc(n, sizeof *c->scopes);
    if (c->scopes == NULL) {
        text_errf(err, errlen, "jwt: out of memory");
        return JWT_ENOMEM;
    }
    const char *start = s;
    for (;;) {
        const char *end = strchr(start, ' ');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        if (len == 0) {
            text_errf(err, errlen, "jwt: claim \"scope\" has an empty scope (stray space)");
            return JWT_ECLAIM;
        }
        c->scopes[c->nscopes] = strndup(start, len);
        if (c->scopes[c->nscopes] == NULL) {
            text_errf(err, errlen, "jwt: out of memory");
            return JWT_ENOMEM;
        }
        c->nscopes++;
        if (end == NULL) break;
        start = end + 1;
    }
    return JWT_OK;
}

/* An optional array claim of min..max non-empty strings into *dst (NULL
 * and *n 0 when absent or empty). */
static int take_strings(json_t *pl, const char *name, size_t min, size_t max, char ***dst,
                        size_t *n, char *err, size_t errlen) {
    json_t *v = json_object_get(pl, name);
    if (v == NULL) return JWT_OK;
    if (!json_is_array(v)) {
        text_errf(err, errlen, "jwt: claim \"%s\" must be an array of %zu to %zu strings", name,
                  min, max);
        return JWT_ECLAIM;
    }
    size_t len = json_array_size(v);
    if (len < min || len > max) {
        text_errf(err, errlen, "jwt: claim \"%s\" has %zu entries; %zu to %zu allowed", name, len,
                  min, max);
        return JWT_ECLAIM;
    }
    if (len == 0) return JWT_OK;
    if ((*dst = calloc(len, sizeof **dst)) == NULL) {
        text_errf(err, errlen, "jwt: out of memory");
        return JWT_ENOMEM;
    }
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || json_string_length(e) == 0) {
            text_errf(err, errlen, "jwt: claim \"%s\"[%zu] must be a non-empty string", name, i);
            return JWT_ECLAIM;
        }
        if (((*dst)[i] = strdup(json_string_value(e))) == NULL) {
            text_errf(err, errlen, "jwt: out of memory");
            return JWT_ENOMEM;
        }
        (*n)++;
    }
    return JWT_OK;
}

/* "anc": ancestor token ids, the last of which must be "parent". */
static int take_anc(json_t *pl, jwt_claims *c, char *err, size_t errlen) {
    int rc = take_strings(pl, "anc", 1, JWT_MAX_ANC, &c->anc, &c->nanc, err, errlen);
    if (rc != JWT_OK || c->nanc == 0) return rc;
    if (c->parent == NULL || strcmp(c->parent, c->anc[c->nanc - 1]) != 0) {
        text_errf(err, errlen, "jwt: the last element of claim \"anc\" must equal \"parent\"");
        return JWT_ECLAIM;
    }
    return JWT_OK;
}

static int take_claims(json_t *pl, int64_t now_s, int skew_s, jwt_claims *c, char *err,
                       size_t errlen) {
    int rc;
    if ((rc = take_string(pl, "sub", 1, &c->sub, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_string(pl, "tenant", 1, &c->tenant, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_string(pl, "jti", 1, &c->jti, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_string(pl, "iss", 0, &c->iss, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_string(pl, "parent", 0, &c->parent, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_time(pl, "exp", 1, &c->exp, NULL, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_time(pl, "nbf", 0, &c->nbf, &c->has_nbf, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_time(pl, "iat", 0, &c->iat, &c->has_iat, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_scopes(pl, c, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_strings(pl, "ns", 0, JWT_MAX_NS, &c->ns, &c->nns, err, errlen)) != JWT_OK)
        return rc;
    if ((rc = take_anc(pl, c, err, errlen)) != JWT_OK) return rc;

    int has_lvl, has_clr;
    c->lvl = JWT_LABEL_PUBLIC;
    if ((rc = take_label(pl, "lvl", &c->lvl, &has_lvl, err, errlen)) != JWT_OK) return rc;
    if ((rc = take_label(pl, "clr", &c->clr, &has_clr, err, errlen)) != JWT_OK) return rc;
    if (!has_clr) c->clr = c->lvl;
    if (c->lvl > c->clr) {
        text_errf(err, errlen,
                  "jwt: lvl (%d) above clr (%d): a token may not write above what it "
                  "reads",
                  (int)c->lvl, (int)c->clr);
        return JWT_ECLAIM;
    }

    /* Time last: a structurally bad token should say so even when old. */
    if (now_s - skew_s >= c->exp) {
        text_errf(err, errlen, "jwt: token expired at %lld (now %lld, skew %d s)",
                  (long long)c->exp, (long long)now_s, skew_s);
        return JWT_EEXPIRED;
    }
    if (c->has_nbf && now_s + skew_s < c->nbf) {
        text_errf(err, errlen, "jwt: token not valid before %lld (now %lld, skew %d s)",
                  (long long)c->nbf, (long long)now_s, skew_s);
        return JWT_ENOTYET;
    }
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

int jwt_verify(const jwks *keys, const char *token, size_t len, int64_t now_s, int skew_s,
               jwt_claims **out, char *err, size_t errlen) {
    *out = NULL;
    if (skew_s < 0) skew_s = 0;
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
    int rc = check_header(hdr, &kid, err, errlen);
    json_t *pl = NULL;
    jwt_claims *c = NULL;
    if (rc != JWT_OK) goto done;
    EVP_PKEY *key = jwks_find(keys, kid);
    if (key == NULL) {
        text_errf(err, errlen, "jwt: unknown kid \"%.64s\"", kid);
        rc = JWT_EKID;
        goto done;
    }
    rc = verify_sig(key, token, (size_t)(dot2 - token), dot2 + 1, slen, err, errlen);
    if (rc != JWT_OK) goto done;

    pl = decode_json_part(dot1 + 1, plen, "payload", err, errlen);
    if (pl == NULL) {
        rc = JWT_EMALFORMED;
        goto done;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        text_errf(err, errlen, "jwt: out of memory");
        rc = JWT_ENOMEM;
        goto done;
    }
    rc = take_claims(pl, now_s, skew_s, c, err, errlen);
    if (rc == JWT_OK && !(c->kid = strdup(kid))) {
        text_errf(err, errlen, "jwt: out of memory");
        rc = JWT_ENOMEM;
    }
    if (rc == JWT_OK) {
        *out = c;
        c = NULL;
    }
done:
    jwt_claims_free(c);
    json_decref(pl);
    json_decref(hdr);
    return rc;
}

int jwt_sign(EVP_PKEY *priv, const char *kid, const char *payload_json, char **out_token, char *err,
             size_t errlen) {
    *out_token = NULL;
    if (priv == NULL || kid == NULL || payload_json == NULL ||
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
    json_t *hobj = json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "typ", "JWT", "kid", kid);
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

static json_t *string_array(char *const *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (json_array_append_new(a, json_string(v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

const char *jwt_label_name(int label) {
    static const char *const names[] = {"UNSPECIFIED", "PUBLIC", "INTERNAL", "CONFIDENTIAL",
                                        "SECRET"};
    return label >= 0 && label <= 4 ? names[label] : "?";
}

void jwt_new_id(char out[37]) {
    unsigned char b[16];
    if (RAND_bytes(b, sizeof b) != 1) abort(); /* no entropy: never mint guessable ids */
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

int jwt_claims_render(const jwt_claims *c, char **json) {
    *json = NULL;
    if (c->lvl < JWT_LABEL_PUBLIC || c->lvl > JWT_LABEL_SECRET || c->clr < JWT_LABEL_PUBLIC ||
        c->clr > JWT_LABEL_SECRET)
        return -1;
    size_t len = 0;
    for (size_t i = 0; i < c->nscopes; i++) len += strlen(c->scopes[i]) + 1;
    char *scope = malloc(len + 1);
    if (scope == NULL) return -1;
    scope[0] = '\0';
    for (size_t i = 0, at = 0; i < c->nscopes; i++)
        at += (size_t)sprintf(scope + at, "%s%s", i ? " " : "", c->scopes[i]);
    json_t *o = json_object();
    int bad = o == NULL;
    if (!bad && c->iss) bad |= json_object_set_new(o, "iss", json_string(c->iss));
    bad |= !o || json_object_set_new(o, "sub", json_string(c->sub)) ||
           json_object_set_new(o, "tenant", json_string(c->tenant)) ||
           json_object_set_new(o, "jti", json_string(c->jti)) ||
           json_object_set_new(o, "scope", json_string(scope)) ||
           json_object_set_new(o, "clr", json_string(jwt_label_name(c->clr))) ||
           json_object_set_new(o, "lvl", json_string(jwt_label_name(c->lvl))) ||
           json_object_set_new(o, "exp", json_integer(c->exp));
    if (!bad && c->nns) bad |= json_object_set_new(o, "ns", string_array(c->ns, c->nns));
    if (!bad && c->has_nbf) bad |= json_object_set_new(o, "nbf", json_integer(c->nbf));
    if (!bad && c->has_iat) bad |= json_object_set_new(o, "iat", json_integer(c->iat));
    if (!bad && c->parent) bad |= json_object_set_new(o, "parent", json_string(c->parent));
    if (!bad && c->nanc) bad |= json_object_set_new(o, "anc", string_array(c->anc, c->nanc));
    free(scope);
    if (!bad) *json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return *json ? 0 : -1;
}
