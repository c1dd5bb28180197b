/* embed_json: the OpenAI embeddings API's bodies; see embed_json.h. */
#include "service/embed/embed_json.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/status.h"
#include "service/core/text.h"

char *embed_json_request(const char *model, const char *const *texts, size_t n, size_t *len) {
    json_t *input = json_array();
    json_t *body = input ? json_pack("{s:s, s:o, s:s}", "model", model, "input", input,
                                     "encoding_format", "float")
                         : NULL;
    if (!body) return NULL; /* json_pack's "o" took input even on failure */
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        json_t *t = json_string(texts[i]); /* NULL for invalid UTF-8 */
        bad = !t || json_array_append_new(input, t) != 0;
    }
    char *out = bad ? NULL : json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (out) *len = strlen(out);
    return out;
}

/* One element of `data`: its index, checked against n and seen. */
static int element_index(const json_t *e, size_t i, size_t n, unsigned char *seen, size_t *index,
                         char *err, size_t errlen) {
    if (!json_is_object(e))
        return text_fail(err, errlen, STATUS_EINTERNAL, "the embedder's data[%zu] is not an object",
                         i);
    const json_t *jx = json_object_get(e, "index");
    /* Servers that omit index answer in input order. */
    json_int_t ix = jx ? (json_is_integer(jx) ? json_integer_value(jx) : -1) : (json_int_t)i;
    if (ix < 0 || (size_t)ix >= n)
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "the embedder's data[%zu].index is not an integer from 0 to %zu", i,
                         n - 1);
    if (seen[ix])
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "the embedder answered index %lld more than once", (long long)ix);
    seen[ix] = 1;
    *index = (size_t)ix;
    return STATUS_OK;
}

/* data[i].embedding into v (dims floats). */
static int element_vector(const json_t *emb, size_t i, int dims, float *v, char *err,
                          size_t errlen) {
    for (int k = 0; k < dims; k++) {
        const json_t *x = json_array_get(emb, (size_t)k);
        double d = json_is_number(x) ? json_number_value(x) : NAN;
        if (!isfinite(d) || fabs(d) > FLT_MAX)
            return text_fail(err, errlen, STATUS_EINTERNAL,
                             "the embedder's data[%zu].embedding[%d] is not a finite float", i, k);
        v[k] = (float)d;
    }
    return STATUS_OK;
}

static int parse_data(const json_t *data, size_t n, int dims_want, size_t body_len, arena *a,
                      float **out, int *dims, char *err, size_t errlen) {
    if (!json_is_array(data))
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "the embedder's answer has no `data` array");
    if (json_array_size(data) != n)
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "the embedder answered %zu embeddings for %zu inputs",
                         json_array_size(data), n);
    unsigned char *seen = arena_zalloc(a, n);
    if (!seen) return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
    float *vecs = NULL;
    int d = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(data, i);
        size_t ix = 0;
        int rc = element_index(e, i, n, seen, &ix, err, errlen);
        if (rc != STATUS_OK) return rc;
        const json_t *emb = json_object_get(e, "embedding");
        if (json_is_string(emb))
            return text_fail(err, errlen, STATUS_EINTERNAL,
                             "the embedder's data[%zu].embedding is a string (base64?) though "
                             "encoding_format float was asked",
                             i);
        if (!json_is_array(emb) || json_array_size(emb) == 0)
            return text_fail(err, errlen, STATUS_EINTERNAL,
                             "the embedder's data[%zu].embedding is not an array of numbers", i);
        size_t len = json_array_size(emb);
        if (i == 0) {
            if (dims_want > 0 && len != (size_t)dims_want) {
                *dims = len > EMBED_MAX_DIMS ? EMBED_MAX_DIMS + 1 : (int)len;
                return text_fail(err, errlen, STATUS_EPRECONDITION,
                                 "the embedder returned %zu-dimensional vectors; %d expected", len,
                                 dims_want);
            }
            if (len > EMBED_MAX_DIMS)
                return text_fail(err, errlen, STATUS_EINTERNAL,
                                 "the embedder returned %zu-dimensional vectors; at most %d", len,
                                 EMBED_MAX_DIMS);
            d = (int)len;
            /* Every component takes at least two bytes of the answer
             * ("0,"): an answer too short for n of these is refused before
             * its vectors are allocated. */
            if (n * (size_t)d > body_len / 2)
                return text_fail(err, errlen, STATUS_EINTERNAL,
                                 "the embedder's answer is too short for %zu vectors of %d "
                                 "dimensions",
                                 n, d);
            if (!(vecs = arena_alloc(a, n * (size_t)d * sizeof *vecs)))
                return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
        } else if (len != (size_t)d) {
            return text_fail(err, errlen, STATUS_EINTERNAL,
                             "the embedder returned vectors of %d and of %zu dimensions in one "
                             "answer",
                             d, len);
        }
        rc = element_vector(emb, i, d, vecs + ix * (size_t)d, err, errlen);
        if (rc != STATUS_OK) return rc;
    }
    *out = vecs;
    *dims = d;
    return STATUS_OK;
}

int embed_json_parse(const char *body, size_t len, size_t n, int dims_want, arena *a, float **out,
                     int *dims, char *err, size_t errlen) {
    *out = NULL;
    *dims = 0;
    if (n == 0) return text_fail(err, errlen, STATUS_EINTERNAL, "no inputs");
    json_error_t je;
    json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return text_fail(err, errlen, STATUS_EINTERNAL, "the embedder's answer is not JSON: %s",
                         je.text);
    int rc = json_is_object(root) ? parse_data(json_object_get(root, "data"), n, dims_want, len, a,
                                               out, dims, err, errlen)
                                  : text_fail(err, errlen, STATUS_EINTERNAL,
                                              "the embedder's answer is not a JSON object");
    json_decref(root);
    if (rc != STATUS_OK && rc != STATUS_EPRECONDITION) *dims = 0;
    if (rc != STATUS_OK) *out = NULL;
    return rc;
}

/* s as printable ASCII into out at *at; 1 when it had to be cut. */
static int put(char *out, size_t outlen, size_t *at, const char *s, size_t n) {
    size_t i = 0;
    for (; i < n && *at + 1 < outlen; i++) out[(*at)++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    out[*at] = '\0';
    return i < n;
}

void embed_json_error_text(const char *body, size_t len, char *out, size_t outlen) {
    if (outlen == 0) return;
    size_t at = 0;
    int cut = 0;
    out[0] = '\0';
    json_t *root = body && len ? json_loadb(body, len, 0, NULL) : NULL;
    const json_t *e = json_object_get(root, "error");
    const char *msg = json_string_value(json_is_object(e) ? json_object_get(e, "message") : e);
    if (msg && msg[0]) {
        cut = put(out, outlen, &at, msg, strlen(msg));
        const char *type = json_string_value(json_object_get(e, "type"));
        const json_t *jc = json_object_get(e, "code");
        const char *code = json_string_value(jc);
        char num[32];
        if (!code && json_is_integer(jc)) {
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(jc));
            code = num;
        }
        if (type || code) {
            char tail[200];
            int k =
                snprintf(tail, sizeof tail, " (%s%s%s%s)", type ? "type " : "", type ? type : "",
                         type && code ? ", code "
                         : code       ? "code "
                                      : "",
                         code ? code : "");
            /* snprintf says what it would have written: only what fits. */
            size_t tn = k < 0 ? 0 : (size_t)k < sizeof tail ? (size_t)k : sizeof tail - 1;
            cut |= put(out, outlen, &at, tail, tn);
        }
    } else if (body && len) {
        cut = put(out, outlen, &at, body, len);
    } else {
        put(out, outlen, &at, "(empty body)", 12);
    }
    json_decref(root);
    if (cut && outlen > 4) memcpy(out + outlen - 4, "...", 4);
}
