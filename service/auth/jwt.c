/* jwt: EdDSA-only JWT verification. The algorithm comes from our policy,
 * never from the token: the header's alg is only checked for equality, so
 * "none" and HMAC-with-the-public-key confusions have no code path. */
#include "service/auth/jwt.h"

#include "service/auth/jws.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "service/core/text.h"

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

/* Claim name of pl in *v: JWT_OK (*v NULL when it is absent and not
 * required), or JWT_ECLAIM when a required one is missing. */
static int claim(json_t *pl, const char *name, int required, json_t **v, char *err, size_t errlen) {
    if ((*v = json_object_get(pl, name)) || !required) return JWT_OK;
    text_errf(err, errlen, "jwt: missing required claim \"%s\"", name);
    return JWT_ECLAIM;
}

/* A required (or optional, when *dst may stay NULL) non-empty string claim. */
static int take_string(json_t *pl, const char *name, int required, char **dst, char *err,
                       size_t errlen) {
    json_t *v;
    int rc = claim(pl, name, required, &v, err, errlen);
    if (rc != JWT_OK || !v) return rc;
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
    json_t *v;
    int rc = claim(pl, name, required, &v, err, errlen);
    if (rc != JWT_OK || !v) return rc;
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

int jwt_verify(const jwks *keys, const char *token, size_t len, int64_t now_s, int skew_s,
               jwt_claims **out, char *err, size_t errlen) {
    *out = NULL;
    if (skew_s < 0) skew_s = 0;
    json_t *pl = NULL;
    char *kid = NULL;
    int rc = jws_verify(keys, token, len, NULL, &pl, &kid, err, errlen);
    if (rc != JWT_OK) return rc;
    jwt_claims *c = calloc(1, sizeof *c);
    if (c == NULL) {
        text_errf(err, errlen, "jwt: out of memory");
        rc = JWT_ENOMEM;
        goto done;
    }
    rc = take_claims(pl, now_s, skew_s, c, err, errlen);
    if (rc == JWT_OK) {
        c->kid = kid;
        kid = NULL;
        *out = c;
        c = NULL;
    }
done:
    free(kid);
    jwt_claims_free(c);
    json_decref(pl);
    return rc;
}

int jwt_sign(EVP_PKEY *priv, const char *kid, const char *payload_json, char **out_token, char *err,
             size_t errlen) {
    return jws_sign(priv, kid, "JWT", payload_json, out_token, err, errlen);
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
