/* qdrant_wbuf: the writer Qdrant request bodies are built with (see
 * qdrant_json_internal.h). Bodies are written as text rather than built as
 * jansson trees because jansson integers are signed 64-bit: point ids
 * above INT64_MAX (valid in Qdrant and in the API) have no json_t form, and
 * text lets vectors be written with the 9 significant digits a float needs
 * instead of 17. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/strbuf.h"
#include "service/core/text.h"
#include "service/qdrant/qdrant_json_internal.h"

void qdrant_json_w_fail(wbuf *b, int rc, const char *fmt, ...) {
    if (b->rc) return;
    b->rc = rc;
    va_list ap;
    va_start(ap, fmt);
    text_verrf(b->err, b->errlen, fmt, ap);
    va_end(ap);
}

void qdrant_json_w_mem(wbuf *b, const char *s, size_t n) {
    if (!b->rc && strbuf_put(&b->text, s, n) != 0)
        qdrant_json_w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant request");
}

void qdrant_json_w_lit(wbuf *b, const char *s) { qdrant_json_w_mem(b, s, strlen(s)); }

/* Numbers and escapes only: short, so a failure is memory. */
void qdrant_json_w_fmt(wbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (!b->rc && strbuf_vprintf(&b->text, fmt, ap) != 0)
        qdrant_json_w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant request");
    va_end(ap);
}

/* A JSON string literal. what names the value in the error message. */
void qdrant_json_w_str(wbuf *b, const char *s, const char *what) {
    if (b->rc) return;
    size_t n = strlen(s);
    if (!text_utf8_valid((const uint8_t *)s, n)) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "%s is not valid UTF-8", what);
        return;
    }
    qdrant_json_w_mem(b, "\"", 1);
    size_t run = 0; /* bytes copied as they are, flushed before each escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        qdrant_json_w_mem(b, s + run, i - run);
        run = i + 1;
        if (c == '"') qdrant_json_w_lit(b, "\\\"");
        else if (c == '\\') qdrant_json_w_lit(b, "\\\\");
        else qdrant_json_w_fmt(b, "\\u%04x", c);
    }
    qdrant_json_w_mem(b, s + run, n - run);
    qdrant_json_w_mem(b, "\"", 1);
}

/* printf's %g honours LC_NUMERIC; JSON wants '.' whatever the locale. */
void qdrant_json_w_number(wbuf *b, const char *fmt, double v, const char *what) {
    if (!isfinite(v)) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "%s is not a finite number", what);
        return;
    }
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "%s does not format", what);
        return;
    }
    for (int i = 0; i < n; i++)
        if (tmp[i] == ',') tmp[i] = '.';
    qdrant_json_w_mem(b, tmp, (size_t)n);
}

/* 9 significant digits read back as the same float; 17 for a double. */
void qdrant_json_w_f32(wbuf *b, float v, const char *what) {
    qdrant_json_w_number(b, "%.9g", v, what);
}
void qdrant_json_w_f64(wbuf *b, double v, const char *what) {
    qdrant_json_w_number(b, "%.17g", v, what);
}

/* Ids above INT64_MAX are why this is text: PRIu64 writes all 64 bits. */
void qdrant_json_w_id(wbuf *b, const vs_id *id) {
    if (id->uuid[0]) qdrant_json_w_str(b, id->uuid, "point id");
    else qdrant_json_w_fmt(b, "%" PRIu64, id->num);
}

void qdrant_json_w_bool(wbuf *b, int v) { qdrant_json_w_lit(b, v ? "true" : "false"); }

static int dump_cb(const char *s, size_t n, void *data) {
    wbuf *b = data;
    qdrant_json_w_mem(b, s, n);
    return b->rc ? -1 : 0;
}

/* A jansson value as compact JSON; reals with 17 digits so every double
 * comes back bit for bit (what pbjson does for stored payloads). */
void qdrant_json_w_json(wbuf *b, const json_t *j, const char *what) {
    if (b->rc) return;
    if (json_dump_callback(j, dump_cb, b,
                           JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)) != 0)
        qdrant_json_w_fail(b, STATUS_EINVALID, "%s cannot be written as JSON", what);
}

int qdrant_json_w_finish(wbuf *b, char **out, size_t *len) {
    if (b->rc) {
        strbuf_free(&b->text);
        *out = NULL;
        if (len) *len = 0;
        return b->rc;
    }
    if (!(*out = strbuf_take(&b->text, len)))
        return qdrant_json_w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant request"),
               b->rc;
    return STATUS_OK;
}

void qdrant_json_w_init(wbuf *b, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    b->err = err;
    b->errlen = errlen;
    if (err && errlen) err[0] = '\0';
}
