/* qdrant_json_internal: what the files behind qdrant_json.h share: the
 * request-body writer (qdrant_wbuf.c) that qdrant_filter.c and
 * qdrant_json.c write with, and the failure helpers of qdrant_parse.c that
 * qdrant_points.c reads with. Not for other modules. */
#ifndef MEMORYD_QDRANT_QDRANT_JSON_INTERNAL_H
#define MEMORYD_QDRANT_QDRANT_JSON_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "service/core/strbuf.h"
#include "service/core/text.h"
#include "service/qdrant/qdrant_json.h"

/* A body being written. The first failure sticks (STATUS_EINVALID for
 * input Qdrant cannot take, STATUS_ENOMEM) with its reason in err; later
 * writes are no-ops, so a builder checks once, at qdrant_json_w_finish. */
typedef struct wbuf {
    strbuf text;
    int rc; /* first failure: STATUS_EINVALID or STATUS_ENOMEM; later writes are no-ops */
    char *err;
    size_t errlen;
} wbuf;

void qdrant_json_w_init(wbuf *b, char *err, size_t errlen);
/* The body (malloc'd, caller frees) or the first failure's code. */
int qdrant_json_w_finish(wbuf *b, char **out, size_t *len);
void qdrant_json_w_fail(wbuf *b, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void qdrant_json_w_mem(wbuf *b, const char *s, size_t n);
void qdrant_json_w_lit(wbuf *b, const char *s);
void qdrant_json_w_fmt(wbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string; what names the field in the failure message. */
void qdrant_json_w_str(wbuf *b, const char *s, const char *what);
void qdrant_json_w_number(wbuf *b, const char *fmt, double v, const char *what);
void qdrant_json_w_f32(wbuf *b, float v, const char *what);
void qdrant_json_w_f64(wbuf *b, double v, const char *what);
void qdrant_json_w_id(wbuf *b, const vs_id *id);
void qdrant_json_w_bool(wbuf *b, int v);
void qdrant_json_w_json(wbuf *b, const json_t *j, const char *what);

/* qdrant_filter.c: a set of ids ({"has_id": [...]}, sorted, distinct), and
 * the read diode as `must` with the user filter nested as one more
 * condition. */
void qdrant_json_w_id_set(wbuf *b, const vs_id *ids, size_t n);
void qdrant_json_w_scoped_filter(wbuf *b, const qdrant_json_scope *s, const Memory__V1__Filter *f);

/* qdrant_parse.c, for qdrant_points.c: an integer member of o within
 * [lo, hi] (0) or -1. */
int qdrant_json_int_member(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *v);

#endif
