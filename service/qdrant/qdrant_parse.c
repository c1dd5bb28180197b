/* qdrant_parse: Qdrant answers read apart from any I/O (see
 * qdrant_json.h): JSON loaded with its numbers checked before jansson sees
 * them, envelopes, errors, versions, collections, counts and points with
 * their memoryd metadata. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/array.h"
#include "service/core/text.h"
#include "service/qdrant/qdrant_json_internal.h"

/* ------------------------------------------------------------------ */
/* loading answers                                                      */

/* An integer token jansson would refuse (beyond int64) and how to rewrite
 * it. */
typedef struct bigint {
    size_t off, len;
    int as_string;
} bigint;

/* Compares the digit string d[0..n) (no sign, no leading zeros) with the
 * decimal limit lim. */
static int digits_cmp(const char *d, size_t n, const char *lim) {
    size_t m = strlen(lim);
    if (n != m) return n < m ? -1 : 1;
    return memcmp(d, lim, n);
}

/* One pass over the bytes as a JSON lexer sees them (strings with their
 * escapes, containers, numbers), without building anything: checks the
 * nesting depth before jansson recurses, and finds integers beyond int64.
 * Those become strings outside "payload" objects (ids, scroll offsets:
 * exact, and qdrant_json_parse_id reads them back) and reals inside (user data that
 * memoryd writes as doubles anyway). Malformed input is left for jansson to
 * reject: a rewrite only ever turns one valid number token into another
 * valid token. */
static int scan(const char *s, size_t n, bigint **out, size_t *nout, char *err, size_t errlen) {
    unsigned char kind[QDRANT_JSON_MAX_DEPTH + 1];
    int depth = 0, payload_depth = 0, after_colon = 0, key_payload = 0;
    bigint *list = NULL;
    size_t count = 0, cap = 0;
    size_t i = 0;
    kind[0] = 0;
    while (i < n) {
        char c = s[i];
        if (c == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
            if (j >= n) break; /* unterminated: jansson says so */
            if (depth > 0 && kind[depth] == '{' && !after_colon)
                key_payload = j - i - 1 == 7 && memcmp(s + i + 1, "payload", 7) == 0;
            after_colon = 0;
            i = j + 1;
        } else if (c == ':') {
            after_colon = 1;
            i++;
        } else if (c == '{' || c == '[') {
            if (depth >= QDRANT_JSON_MAX_DEPTH) {
                free(list);
                return text_fail(err, errlen, STATUS_EINTERNAL,
                                 "qdrant's answer nests deeper than %d levels",
                                 QDRANT_JSON_MAX_DEPTH);
            }
            int opens_payload = after_colon && key_payload && kind[depth] == '{';
            kind[++depth] = (unsigned char)c;
            if (opens_payload && payload_depth == 0) payload_depth = depth;
            after_colon = 0;
            i++;
        } else if (c == '}' || c == ']') {
            if (depth > 0) {
                if (payload_depth == depth) payload_depth = 0;
                depth--;
            }
            after_colon = 0;
            i++;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            while (j < n && ((s[j] >= '0' && s[j] <= '9') || s[j] == '-' || s[j] == '+' ||
                             s[j] == '.' || s[j] == 'e' || s[j] == 'E'))
                j++;
            int neg = s[i] == '-';
            const char *d = s + i + neg;
            size_t nd = j - i - (size_t)neg, k = 0;
            while (k < nd && d[k] >= '0' && d[k] <= '9') k++;
            int integer = nd > 0 && k == nd && (d[0] != '0' || nd == 1);
            if (integer &&
                digits_cmp(d, nd, neg ? "9223372036854775808" : "9223372036854775807") > 0) {
                bigint *grown = array_grow(list, &cap, count + 1, sizeof *grown, 8);
                if (!grown) {
                    free(list);
                    return text_fail(err, errlen, STATUS_ENOMEM,
                                     "out of memory reading qdrant's answer");
                }
                list = grown;
                list[count].off = i;
                list[count].len = j - i;
                list[count].as_string =
                    !neg && payload_depth == 0 && digits_cmp(d, nd, "18446744073709551615") <= 0;
                count++;
            }
            after_colon = 0;
            i = j;
        } else {
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') after_colon = 0;
            i++;
        }
    }
    *out = list;
    *nout = count;
    return STATUS_OK;
}

int qdrant_json_load(const char *body, size_t len, json_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (!body) len = 0;
    bigint *big = NULL;
    size_t nbig = 0;
    int rc = scan(body ? body : "", len, &big, &nbig, err, errlen);
    if (rc != STATUS_OK) return rc;
    const char *text = body ? body : "";
    size_t tlen = len;
    char *copy = NULL;
    if (nbig) {
        /* Each rewrite adds two bytes: quotes, or ".0". */
        copy = malloc(len + 2 * nbig + 1);
        if (!copy) {
            free(big);
            return text_fail(err, errlen, STATUS_ENOMEM, "out of memory reading qdrant's answer");
        }
        size_t at = 0, w = 0;
        for (size_t i = 0; i < nbig; i++) {
            memcpy(copy + w, body + at, big[i].off - at);
            w += big[i].off - at;
            if (big[i].as_string) copy[w++] = '"';
            memcpy(copy + w, body + big[i].off, big[i].len);
            w += big[i].len;
            if (big[i].as_string) copy[w++] = '"';
            else {
                copy[w++] = '.';
                copy[w++] = '0';
            }
            at = big[i].off + big[i].len;
        }
        memcpy(copy + w, body + at, len - at);
        w += len - at;
        copy[w] = '\0';
        text = copy;
        tlen = w;
    }
    free(big);
    json_error_t jerr;
    json_t *j = json_loadb(text, tlen, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    free(copy);
    if (!j) {
        char text_err[sizeof jerr.text];
        qdrant_json_error_text(jerr.text, strnlen(jerr.text, sizeof jerr.text), text_err,
                               sizeof text_err);
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "qdrant's answer is not JSON: %s (at byte %d)", text_err, jerr.position);
    }
    *out = j;
    return STATUS_OK;
}

/* Keeps printable ASCII of s[0..n) in out: '?' for other bytes, spaces for
 * line breaks and tabs, "..." when cut. Returns the length written. */
static size_t sanitize(const char *s, size_t n, char *out, size_t outlen) {
    if (!outlen) return 0;
    while (n && (s[0] == ' ' || s[0] == '\n' || s[0] == '\r' || s[0] == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == '\t')) n--;
    size_t room = outlen - 1, w = 0;
    int cut = n > room;
    size_t keep = cut ? (room >= 3 ? room - 3 : 0) : n;
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = (unsigned char)s[i];
        out[w++] = c >= 0x20 && c < 0x7f                 ? (char)c
                   : c == '\n' || c == '\r' || c == '\t' ? ' '
                                                         : '?';
    }
    if (cut)
        for (size_t i = 0; i < 3 && w < room; i++) out[w++] = '.';
    out[w] = '\0';
    return w;
}

void qdrant_json_error_text(const char *body, size_t len, char *out, size_t outlen) {
    if (!out || !outlen) return;
    out[0] = '\0';
    if (!body) len = 0;
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
        i++;
    if (i < len && body[i] == '{') {
        json_t *j = NULL;
        if (qdrant_json_load(body, len, &j, NULL, 0) == STATUS_OK) {
            json_t *st = json_object_get(j, "status");
            json_t *e = json_is_object(st) ? json_object_get(st, "error") : NULL;
            if (json_is_string(e)) {
                sanitize(json_string_value(e), json_string_length(e), out, outlen);
                json_decref(j);
                if (out[0]) return;
                snprintf(out, outlen, "(empty error)");
                return;
            }
            json_decref(j);
        }
    }
    if (sanitize(body ? body : "", len, out, outlen) == 0) snprintf(out, outlen, "(empty body)");
}

int qdrant_json_parse_envelope(const char *body, size_t len, json_t **result, char *err,
                               size_t errlen) {
    *result = NULL;
    json_t *j = NULL;
    int rc = qdrant_json_load(body, len, &j, err, errlen);
    if (rc != STATUS_OK) return rc;
    if (!json_is_object(j)) {
        json_decref(j);
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant's answer is not a JSON object");
    }
    json_t *st = json_object_get(j, "status");
    json_t *e = json_is_object(st) ? json_object_get(st, "error") : NULL;
    if (json_is_string(e)) {
        char text[256];
        sanitize(json_string_value(e), json_string_length(e), text, sizeof text);
        json_decref(j);
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant reported an error: %s", text);
    }
    /* "ok"; "accepted" is what Qdrant says of queued work (its result then
     * says more). */
    const char *sv = json_string_value(st);
    if (!sv || (strcmp(sv, "ok") != 0 && strcmp(sv, "accepted") != 0)) {
        json_decref(j);
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant's answer has no \"ok\" status");
    }
    json_t *r = json_object_get(j, "result");
    if (!r) {
        json_decref(j);
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant's answer has no result");
    }
    *result = json_incref(r);
    json_decref(j);
    return STATUS_OK;
}

/* Digits at *p into *v (at most 9 of them). */
static int version_part(const char **p, int *v) {
    const char *s = *p;
    int n = 0, x = 0;
    while (*s >= '0' && *s <= '9' && n < 9) x = x * 10 + (*s++ - '0'), n++;
    if (n == 0 || (*s >= '0' && *s <= '9')) return -1;
    *v = x;
    *p = s;
    return 0;
}

int qdrant_json_parse_version(const char *body, size_t len, qdrant_json_version *v, char *err,
                              size_t errlen) {
    json_t *j = NULL;
    int rc = qdrant_json_load(body, len, &j, err, errlen);
    if (rc != STATUS_OK) return rc;
    const char *s = json_string_value(json_object_get(j, "version"));
    if (!s) {
        json_decref(j);
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant's GET / has no version string");
    }
    qdrant_json_version x = {0, 0, 0};
    const char *p = s;
    if (*p == 'v') p++;
    /* major.minor[.patch], then anything ("-dev", "+build") after a
     * non-digit. */
    int ok = version_part(&p, &x.major) == 0 && *p++ == '.' && version_part(&p, &x.minor) == 0;
    if (ok && *p == '.') {
        p++;
        ok = version_part(&p, &x.patch) == 0;
    }
    if (!ok) {
        char text[64];
        sanitize(s, strlen(s), text, sizeof text);
        json_decref(j);
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "qdrant's version \"%s\" is not major.minor.patch", text);
    }
    json_decref(j);
    *v = x;
    return STATUS_OK;
}

/* An integer member in [lo, hi]. */
int qdrant_json_int_member(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *v) {
    json_t *x = json_object_get(o, key);
    if (!json_is_integer(x)) return -1;
    json_int_t i = json_integer_value(x);
    if (i < lo || i > hi) return -1;
    *v = (int64_t)i;
    return 0;
}

/* The envelope's result, handed to fn (which fills out); freed after. */
static int parse_result(const char *body, size_t len,
                        int (*fn)(json_t *r, void *out, char *err, size_t errlen), void *out,
                        char *err, size_t errlen) {
    json_t *r = NULL;
    int rc = qdrant_json_parse_envelope(body, len, &r, err, errlen);
    if (rc == STATUS_OK) rc = fn(r, out, err, errlen);
    json_decref(r);
    return rc;
}

typedef struct {
    int *dims, *distance;
} collection_out;

static int collection_result(json_t *r, void *arg, char *err, size_t errlen) {
    collection_out *o = arg;
    json_t *vec =
        json_object_get(json_object_get(json_object_get(r, "config"), "params"), "vectors");
    int64_t size = 0;
    if (!json_is_object(vec))
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "qdrant's collection info has no config.params.vectors");
    if (!json_object_get(vec, "size"))
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "the qdrant collection has named vectors (not one memoryd made)");
    if (qdrant_json_int_member(vec, "size", 1, VS_MAX_DIMS, &size) != 0)
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "the qdrant collection's vector size is not 1..%d", VS_MAX_DIMS);
    int d = qdrant_json_distance_parse(json_string_value(json_object_get(vec, "distance")));
    if (!d)
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "the qdrant collection's distance is not Cosine, Dot or Euclid");
    *o->dims = (int)size;
    *o->distance = d;
    return STATUS_OK;
}

int qdrant_json_parse_collection(const char *body, size_t len, int *dims, int *distance, char *err,
                                 size_t errlen) {
    collection_out o = {dims, distance};
    return parse_result(body, len, collection_result, &o, err, errlen);
}

static int bool_result(json_t *r, void *value, char *err, size_t errlen) {
    if (!json_is_boolean(r))
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant's result is not a boolean");
    *(int *)value = json_is_true(r);
    return STATUS_OK;
}

int qdrant_json_parse_bool(const char *body, size_t len, int *value, char *err, size_t errlen) {
    return parse_result(body, len, bool_result, value, err, errlen);
}

static int update_result(json_t *r, void *unused, char *err, size_t errlen) {
    (void)unused;
    const char *st = json_string_value(json_object_get(r, "status"));
    if (!json_is_object(r) || !st)
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant's update result has no status");
    if (strcmp(st, "wait_timeout") == 0)
        return text_fail(err, errlen, STATUS_ETIMEOUT,
                         "qdrant took the change but did not apply it within its wait timeout");
    if (strcmp(st, "completed") != 0 && strcmp(st, "acknowledged") != 0)
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant's update status is not completed");
    return STATUS_OK;
}

int qdrant_json_parse_update(const char *body, size_t len, char *err, size_t errlen) {
    return parse_result(body, len, update_result, NULL, err, errlen);
}

static int count_result(json_t *r, void *count, char *err, size_t errlen) {
    if (!json_is_object(r) || qdrant_json_int_member(r, "count", 0, INT64_MAX, count) != 0)
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant's count result has no count");
    return STATUS_OK;
}

int qdrant_json_parse_count(const char *body, size_t len, int64_t *count, char *err,
                            size_t errlen) {
    return parse_result(body, len, count_result, count, err, errlen);
}
