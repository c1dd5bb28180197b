/* qdrant_json: Qdrant request bodies and answer parsers (see the header).
 * Bodies are written as text rather than built as jansson trees because
 * jansson integers are signed 64-bit: point ids above INT64_MAX (valid in
 * Qdrant and in the API) have no json_t form, and text lets vectors be
 * written with the 9 significant digits a float needs instead of 17. */
#include "service/episodic/qdrant_json.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/text.h"

/* ------------------------------------------------------------------ */
/* body writer                                                          */

typedef struct wbuf {
    char *p;
    size_t len, cap;
    int rc; /* first failure: STATUS_EINVALID or STATUS_ENOMEM; later writes are no-ops */
    char *err;
    size_t errlen;
} wbuf;

static void w_fail(wbuf *b, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void w_fail(wbuf *b, int rc, const char *fmt, ...) {
    if (b->rc) return;
    b->rc = rc;
    if (b->err && b->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err, b->errlen, fmt, ap);
        va_end(ap);
    }
}

static void w_mem(wbuf *b, const char *s, size_t n) {
    if (b->rc) return;
    if (n >= SIZE_MAX / 2 - b->len) {
        w_fail(b, STATUS_ENOMEM, "request body too large");
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant request");
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void w_lit(wbuf *b, const char *s) { w_mem(b, s, strlen(s)); }

static void w_fmt(wbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void w_fmt(wbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        w_fail(b, STATUS_EINVALID, "number does not format");
        return;
    }
    w_mem(b, tmp, (size_t)n);
}

/* A JSON string literal. what names the value in the error message. */
static void w_str(wbuf *b, const char *s, const char *what) {
    if (b->rc) return;
    size_t n = strlen(s);
    if (!text_utf8_valid((const uint8_t *)s, n)) {
        w_fail(b, STATUS_EINVALID, "%s is not valid UTF-8", what);
        return;
    }
    w_mem(b, "\"", 1);
    size_t run = 0; /* bytes copied as they are, flushed before each escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        w_mem(b, s + run, i - run);
        run = i + 1;
        if (c == '"')
            w_lit(b, "\\\"");
        else if (c == '\\')
            w_lit(b, "\\\\");
        else
            w_fmt(b, "\\u%04x", c);
    }
    w_mem(b, s + run, n - run);
    w_mem(b, "\"", 1);
}

/* printf's %g honours LC_NUMERIC; JSON wants '.' whatever the locale. */
static void w_number(wbuf *b, const char *fmt, double v, const char *what) {
    if (!isfinite(v)) {
        w_fail(b, STATUS_EINVALID, "%s is not a finite number", what);
        return;
    }
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        w_fail(b, STATUS_EINVALID, "%s does not format", what);
        return;
    }
    for (int i = 0; i < n; i++)
        if (tmp[i] == ',') tmp[i] = '.';
    w_mem(b, tmp, (size_t)n);
}

/* 9 significant digits read back as the same float; 17 for a double. */
static void w_f32(wbuf *b, float v, const char *what) { w_number(b, "%.9g", v, what); }
static void w_f64(wbuf *b, double v, const char *what) { w_number(b, "%.17g", v, what); }

/* Ids above INT64_MAX are why this is text: PRIu64 writes all 64 bits. */
static void w_id(wbuf *b, const vs_id *id) {
    if (id->uuid[0])
        w_str(b, id->uuid, "point id");
    else
        w_fmt(b, "%" PRIu64, id->num);
}

static void w_bool(wbuf *b, int v) { w_lit(b, v ? "true" : "false"); }

static int dump_cb(const char *s, size_t n, void *data) {
    wbuf *b = data;
    w_mem(b, s, n);
    return b->rc ? -1 : 0;
}

/* A jansson value as compact JSON; reals with 17 digits so every double
 * comes back bit for bit (what pbjson does for stored payloads). */
static void w_json(wbuf *b, const json_t *j, const char *what) {
    if (b->rc) return;
    if (json_dump_callback(j, dump_cb, b,
                           JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)) != 0)
        w_fail(b, STATUS_EINVALID, "%s cannot be written as JSON", what);
}

static int w_finish(wbuf *b, char **out, size_t *len) {
    if (!b->rc && !b->p) w_mem(b, "", 0);
    if (b->rc) {
        free(b->p);
        *out = NULL;
        if (len) *len = 0;
        return b->rc;
    }
    *out = b->p;
    if (len) *len = b->len;
    return STATUS_OK;
}

static void w_init(wbuf *b, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    b->err = err;
    b->errlen = errlen;
    if (err && errlen) err[0] = '\0';
}

/* ------------------------------------------------------------------ */
/* filters                                                              */

static int cmp_id(const void *a, const void *b) { return vs_id_cmp(a, b); }

/* has_id lists are sets (the spec marks them uniqueItems): sorted and
 * without duplicates. */
static void w_id_set(wbuf *b, const vs_id *ids, size_t n) {
    if (b->rc) return;
    vs_id *s = NULL;
    if (n) {
        s = malloc(n * sizeof *s);
        if (!s) {
            w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant filter");
            return;
        }
        memcpy(s, ids, n * sizeof *s);
        qsort(s, n, sizeof *s, cmp_id);
    }
    w_lit(b, "[");
    for (size_t i = 0, k = 0; i < n; i++) {
        if (i && vs_id_cmp(&s[i - 1], &s[i]) == 0) continue;
        if (k++) w_lit(b, ",");
        w_id(b, &s[i]);
    }
    w_lit(b, "]");
    free(s);
}

static void w_key(wbuf *b, const char *key) {
    if (!key || !key[0]) {
        w_fail(b, STATUS_EINVALID, "a filter condition has an empty key");
        return;
    }
    size_t n = strlen(key);
    char *k = malloc(n + sizeof "payload.");
    if (!k) {
        w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant filter");
        return;
    }
    memcpy(k, "payload.", 8);
    memcpy(k + 8, key, n + 1);
    w_str(b, k, "filter key");
    free(k);
}

/* 1 for a number Qdrant takes as an integer match value. */
static int integral(double v) {
    return isfinite(v) && v == trunc(v) && fabs(v) <= 9007199254740992.0;
}

static void w_match_value(wbuf *b, const Google__Protobuf__Value *v, const char *key) {
    if (!v) {
        w_fail(b, STATUS_EINVALID, "filter key %.64s: match_value is missing", key);
        return;
    }
    switch (v->kind_case) {
    case GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE:
        w_str(b, v->string_value ? v->string_value : "", "match value");
        return;
    case GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE:
        w_bool(b, v->bool_value);
        return;
    case GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE:
        if (!integral(v->number_value)) {
            w_fail(b, STATUS_EINVALID, "filter key %.64s: Qdrant matches only integers, not %g", key,
                   v->number_value);
            return;
        }
        w_fmt(b, "%lld", (long long)v->number_value);
        return;
    default:
        w_fail(b, STATUS_EINVALID,
               "filter key %.64s: a match value must be a string, a bool or an integer", key);
    }
}

/* 1 for a string, 2 for an integer: the two element kinds Qdrant's
 * any/except lists take (its AnyVariants); -1 for anything else. */
static int list_kind(const Google__Protobuf__Value *v) {
    if (!v) return -1;
    if (v->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE) return 1;
    if (v->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE && integral(v->number_value))
        return 2;
    return -1;
}

/* A list of strings or a list of integers, not both; duplicates are
 * dropped (the spec marks the lists uniqueItems). */
static void w_match_list(wbuf *b, const Google__Protobuf__ListValue *l, const char *key,
                         const char *op) {
    size_t n = l ? l->n_values : 0;
    int kind = 0;
    for (size_t i = 0; i < n; i++) {
        int k = list_kind(l->values[i]);
        if (k < 0 || (kind && k != kind)) {
            w_fail(b, STATUS_EINVALID,
                   "filter key %.64s: Qdrant's match %s takes only strings or only integers", key,
                   op);
            return;
        }
        kind = k;
    }
    w_lit(b, "[");
    for (size_t i = 0, k = 0; i < n; i++) {
        const Google__Protobuf__Value *v = l->values[i];
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++) {
            const Google__Protobuf__Value *u = l->values[j];
            dup = kind == 1 ? strcmp(u->string_value ? u->string_value : "",
                                     v->string_value ? v->string_value : "") == 0
                            : u->number_value == v->number_value;
        }
        if (dup) continue;
        if (k++) w_lit(b, ",");
        w_match_value(b, v, key);
    }
    w_lit(b, "]");
}

static void w_range(wbuf *b, const Memory__V1__Range *r, const char *key) {
    if (!r || (r->lower_case == MEMORY__V1__RANGE__LOWER__NOT_SET &&
               r->upper_case == MEMORY__V1__RANGE__UPPER__NOT_SET)) {
        w_fail(b, STATUS_EINVALID, "filter key %.64s: a range needs a bound", key);
        return;
    }
    int first = 1;
    w_lit(b, "{");
    if (r->lower_case == MEMORY__V1__RANGE__LOWER_GT ||
        r->lower_case == MEMORY__V1__RANGE__LOWER_GTE) {
        int gt = r->lower_case == MEMORY__V1__RANGE__LOWER_GT;
        w_lit(b, gt ? "\"gt\":" : "\"gte\":");
        w_f64(b, gt ? r->gt : r->gte, "range bound");
        first = 0;
    }
    if (r->upper_case == MEMORY__V1__RANGE__UPPER_LT ||
        r->upper_case == MEMORY__V1__RANGE__UPPER_LTE) {
        int lt = r->upper_case == MEMORY__V1__RANGE__UPPER_LT;
        if (!first) w_lit(b, ",");
        w_lit(b, lt ? "\"lt\":" : "\"lte\":");
        w_f64(b, lt ? r->lt : r->lte, "range bound");
    }
    w_lit(b, "}");
}

static void w_field(wbuf *b, const Memory__V1__FieldCondition *f) {
    if (!f) {
        w_fail(b, STATUS_EINVALID, "a field condition is missing");
        return;
    }
    const char *key = f->key ? f->key : "";
    w_lit(b, "{\"key\":");
    w_key(b, key);
    switch (f->condition_case) {
    case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_VALUE:
        w_lit(b, ",\"match\":{\"value\":");
        w_match_value(b, f->match_value, key);
        w_lit(b, "}");
        break;
    case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_ANY:
        w_lit(b, ",\"match\":{\"any\":");
        w_match_list(b, f->match_any, key, "any");
        w_lit(b, "}");
        break;
    case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_EXCEPT:
        w_lit(b, ",\"match\":{\"except\":");
        w_match_list(b, f->match_except, key, "except");
        w_lit(b, "}");
        break;
    case MEMORY__V1__FIELD_CONDITION__CONDITION_RANGE:
        w_lit(b, ",\"range\":");
        w_range(b, f->range, key);
        break;
    default:
        w_fail(b, STATUS_EINVALID, "filter key %.64s: the field condition has no test set", key);
        return;
    }
    w_lit(b, "}");
}

static int filter_empty(const Memory__V1__Filter *f) {
    return !f || (f->n_must == 0 && f->n_should == 0 && f->n_must_not == 0);
}

static void w_filter(wbuf *b, const Memory__V1__Filter *f, int depth);

static void w_condition(wbuf *b, const Memory__V1__Condition *c, int depth) {
    if (!c) {
        w_fail(b, STATUS_EINVALID, "a filter condition is missing");
        return;
    }
    switch (c->condition_case) {
    case MEMORY__V1__CONDITION__CONDITION_FIELD:
        w_field(b, c->field);
        return;
    case MEMORY__V1__CONDITION__CONDITION_IS_EMPTY:
        w_lit(b, "{\"is_empty\":{\"key\":");
        w_key(b, c->is_empty ? c->is_empty->key : NULL);
        w_lit(b, "}}");
        return;
    case MEMORY__V1__CONDITION__CONDITION_HAS_ID: {
        size_t n = c->has_id ? c->has_id->n_ids : 0;
        vs_id *ids = n ? calloc(n, sizeof *ids) : NULL;
        if (n && !ids) {
            w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant filter");
            return;
        }
        for (size_t i = 0; i < n && !b->rc; i++) {
            const Memory__V1__PointId *p = c->has_id->ids[i];
            if (p && p->kind_case == MEMORY__V1__POINT_ID__KIND_NUM)
                ids[i].num = p->num;
            else if (!p || p->kind_case != MEMORY__V1__POINT_ID__KIND_UUID || !p->uuid ||
                     vs_uuid_parse(p->uuid, &ids[i]) != 0)
                w_fail(b, STATUS_EINVALID, "has_id: id %zu is neither an integer nor a UUID", i);
        }
        w_lit(b, "{\"has_id\":");
        w_id_set(b, ids, n);
        w_lit(b, "}");
        free(ids);
        return;
    }
    case MEMORY__V1__CONDITION__CONDITION_FILTER:
        /* A Filter is itself a Qdrant condition: (a AND b) OR (c AND d). */
        w_filter(b, c->filter, depth + 1);
        return;
    default:
        w_fail(b, STATUS_EINVALID, "a filter condition has nothing set");
    }
}

static void w_clause(wbuf *b, const char *name, Memory__V1__Condition *const *cs, size_t n,
                     int depth, int *first) {
    if (n == 0) return; /* omitted, never [] (an empty should would match nothing) */
    if (!*first) w_lit(b, ",");
    *first = 0;
    w_fmt(b, "\"%s\":[", name);
    for (size_t i = 0; i < n; i++) {
        if (i) w_lit(b, ",");
        w_condition(b, cs[i], depth);
    }
    w_lit(b, "]");
}

static void w_filter(wbuf *b, const Memory__V1__Filter *f, int depth) {
    if (depth > QJ_MAX_FILTER_DEPTH) {
        w_fail(b, STATUS_EINVALID, "filter nests deeper than %d levels", QJ_MAX_FILTER_DEPTH);
        return;
    }
    int first = 1;
    w_lit(b, "{");
    if (f) {
        w_clause(b, "must", f->must, f->n_must, depth, &first);
        w_clause(b, "should", f->should, f->n_should, depth, &first);
        w_clause(b, "must_not", f->must_not, f->n_must_not, depth, &first);
    }
    w_lit(b, "}");
}

/* The read diode as `must`, the user filter nested as one more condition. */
static void w_scoped_filter(wbuf *b, const qj_scope *s, const Memory__V1__Filter *f) {
    if (!s || !s->tenant || !s->tenant[0]) {
        w_fail(b, STATUS_EINVALID, "the read diode needs a tenant");
        return;
    }
    w_lit(b, "{\"must\":[{\"key\":\"memoryd.tenant\",\"match\":{\"value\":");
    w_str(b, s->tenant, "tenant");
    w_lit(b, "}}");
    if (s->owner) {
        w_lit(b, ",{\"key\":\"memoryd.owner\",\"match\":{\"value\":");
        w_str(b, s->owner, "owner");
        w_lit(b, "}}");
    }
    w_fmt(b, ",{\"key\":\"memoryd.label\",\"range\":{\"lte\":%d}}", s->clr);
    if (s->nids) {
        w_lit(b, ",{\"has_id\":");
        w_id_set(b, s->ids, s->nids);
        w_lit(b, "}");
    }
    if (!filter_empty(f)) {
        w_lit(b, ",");
        w_filter(b, f, 1);
    }
    w_lit(b, "]}");
}

static void w_with_payload(wbuf *b, int payload) {
    w_lit(b, payload == QJ_PAYLOAD_ALL ? "true" : "{\"include\":[\"memoryd\"]}");
}

/* ------------------------------------------------------------------ */
/* public builders                                                      */

int qj_version_at_least(const qj_version *v, int major, int minor) {
    return v->major > major || (v->major == major && v->minor >= minor);
}

const char *qj_distance_name(int distance) {
    switch (distance) {
    case VS_COSINE:
        return "Cosine";
    case VS_DOT:
        return "Dot";
    case VS_EUCLID:
        return "Euclid";
    default:
        return NULL;
    }
}

int qj_distance_parse(const char *name) {
    if (!name) return 0;
    if (strcmp(name, "Cosine") == 0) return VS_COSINE;
    if (strcmp(name, "Dot") == 0) return VS_DOT;
    if (strcmp(name, "Euclid") == 0) return VS_EUCLID;
    return 0;
}

int qj_filter(const qj_scope *s, const Memory__V1__Filter *f, char **out, size_t *len, char *err,
              size_t errlen) {
    wbuf b;
    w_init(&b, err, errlen);
    w_scoped_filter(&b, s, f);
    return w_finish(&b, out, len);
}

int qj_create_collection(int dims, int distance, char **out, size_t *len, char *err,
                         size_t errlen) {
    wbuf b;
    w_init(&b, err, errlen);
    const char *d = qj_distance_name(distance);
    if (!d)
        w_fail(&b, STATUS_EINVALID, "unknown distance %d", distance);
    else if (dims < 1 || dims > VS_MAX_DIMS)
        w_fail(&b, STATUS_EINVALID, "dims %d out of 1..%d", dims, VS_MAX_DIMS);
    else
        w_fmt(&b, "{\"vectors\":{\"size\":%d,\"distance\":\"%s\"}}", dims, d);
    return w_finish(&b, out, len);
}

int qj_payload_index(const char *field, int tenant_index, const qj_version *v, char **out,
                     size_t *len, char *err, size_t errlen) {
    wbuf b;
    w_init(&b, err, errlen);
    w_lit(&b, "{\"field_name\":");
    w_str(&b, field ? field : "", "index field");
    /* is_tenant (1.11+) lays the tenant's points out together on disk;
     * older servers reject the parameterised schema. */
    if (tenant_index && v && qj_version_at_least(v, 1, 11))
        w_lit(&b, ",\"field_schema\":{\"type\":\"keyword\",\"is_tenant\":true}}");
    else
        w_lit(&b, ",\"field_schema\":\"keyword\"}");
    return w_finish(&b, out, len);
}

static void w_vector(wbuf *b, const float *v, int dims) {
    if (!v) {
        w_fail(b, STATUS_EINVALID, "a point has no vector");
        return;
    }
    w_lit(b, "[");
    for (int i = 0; i < dims && !b->rc; i++) {
        if (i) w_lit(b, ",");
        w_f32(b, v[i], "vector component");
    }
    w_lit(b, "]");
}

static void w_meta(wbuf *b, const char *tenant, const tier_meta *m, const char *const *pii,
                   size_t npii) {
    w_lit(b, "{\"tenant\":");
    w_str(b, tenant, "tenant");
    w_lit(b, ",\"owner\":");
    w_str(b, m->owner ? m->owner : "", "owner");
    w_fmt(b,
          ",\"label\":%d,\"version\":%" PRId64 ",\"created_us\":%" PRId64 ",\"updated_us\":%" PRId64
          ",\"pii_kinds\":[",
          m->label, m->version, m->create_us, m->update_us);
    for (size_t i = 0; i < npii; i++) {
        if (i) w_lit(b, ",");
        w_str(b, pii[i] ? pii[i] : "", "pii kind");
    }
    w_lit(b, "]}");
}

int qj_upsert(const char *tenant, int dims, const vs_point_in *pts, const tier_meta *metas, size_t n,
              char **out, size_t *len, char *err, size_t errlen) {
    wbuf b;
    w_init(&b, err, errlen);
    if (!tenant || !tenant[0]) w_fail(&b, STATUS_EINVALID, "upsert needs a tenant");
    if (dims < 1 || dims > VS_MAX_DIMS) w_fail(&b, STATUS_EINVALID, "dims %d out of range", dims);
    w_lit(&b, "{\"points\":[");
    for (size_t i = 0; i < n && !b.rc; i++) {
        const vs_point_in *p = &pts[i];
        if (i) w_lit(&b, ",");
        w_lit(&b, "{\"id\":");
        w_id(&b, &p->id);
        w_lit(&b, ",\"vector\":");
        w_vector(&b, p->vector, dims);
        w_lit(&b, ",\"payload\":{\"payload\":");
        if (p->payload && !json_is_object(p->payload))
            w_fail(&b, STATUS_EINVALID, "a point payload must be a JSON object");
        if (p->payload)
            w_json(&b, p->payload, "point payload");
        else
            w_lit(&b, "{}");
        w_lit(&b, ",\"memoryd\":");
        w_meta(&b, tenant, &metas[i], p->pii_kinds, p->npii);
        w_lit(&b, "}}");
    }
    w_lit(&b, "]}");
    return w_finish(&b, out, len);
}

static void w_id_list(wbuf *b, const vs_id *ids, size_t n) {
    w_lit(b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i) w_lit(b, ",");
        w_id(b, &ids[i]);
    }
    w_lit(b, "]");
}

int qj_retrieve(const vs_id *ids, size_t n, int payload, int with_vector, char **out, size_t *len,
                char *err, size_t errlen) {
    wbuf b;
    w_init(&b, err, errlen);
    w_lit(&b, "{\"ids\":");
    w_id_list(&b, ids, n);
    w_lit(&b, ",\"with_payload\":");
    w_with_payload(&b, payload);
    w_lit(&b, ",\"with_vector\":");
    w_bool(&b, with_vector);
    w_lit(&b, "}");
    return w_finish(&b, out, len);
}

int qj_query(const qj_scope *s, const vs_search *q, int dims, int legacy_search, char **out,
             size_t *len, char *err, size_t errlen) {
    wbuf b;
    w_init(&b, err, errlen);
    if (dims < 1 || dims > VS_MAX_DIMS) w_fail(&b, STATUS_EINVALID, "dims %d out of range", dims);
    if (q->limit < 1) w_fail(&b, STATUS_EINVALID, "limit %d is below 1", q->limit);
    if (q->offset < 0) w_fail(&b, STATUS_EINVALID, "offset %d is negative", q->offset);
    w_lit(&b, legacy_search ? "{\"vector\":" : "{\"query\":");
    w_vector(&b, q->vector, dims);
    w_lit(&b, ",\"filter\":");
    w_scoped_filter(&b, s, q->filter);
    w_fmt(&b, ",\"limit\":%d,\"offset\":%d", q->limit, q->offset);
    if (q->has_threshold) {
        w_lit(&b, ",\"score_threshold\":");
        w_f32(&b, q->threshold, "score threshold");
    }
    w_lit(&b, ",\"with_payload\":");
    w_with_payload(&b, q->with_payload ? QJ_PAYLOAD_ALL : QJ_PAYLOAD_META);
    w_lit(&b, ",\"with_vector\":");
    w_bool(&b, q->with_vector);
    w_lit(&b, "}");
    return w_finish(&b, out, len);
}

int qj_scroll(const qj_scope *s, const Memory__V1__Filter *f, int limit, const vs_id *offset,
              int payload, int with_vector, char **out, size_t *len, char *err, size_t errlen) {
    wbuf b;
    w_init(&b, err, errlen);
    if (limit < 1) w_fail(&b, STATUS_EINVALID, "limit %d is below 1", limit);
    w_lit(&b, "{\"filter\":");
    w_scoped_filter(&b, s, f);
    w_fmt(&b, ",\"limit\":%d", limit);
    if (offset) {
        w_lit(&b, ",\"offset\":");
        w_id(&b, offset);
    }
    w_lit(&b, ",\"with_payload\":");
    w_with_payload(&b, payload);
    w_lit(&b, ",\"with_vector\":");
    w_bool(&b, with_vector);
    w_lit(&b, "}");
    return w_finish(&b, out, len);
}

int qj_count(const qj_scope *s, const Memory__V1__Filter *f, int exact, char **out, size_t *len,
             char *err, size_t errlen) {
    wbuf b;
    w_init(&b, err, errlen);
    w_lit(&b, "{\"filter\":");
    w_scoped_filter(&b, s, f);
    w_lit(&b, ",\"exact\":");
    w_bool(&b, exact);
    w_lit(&b, "}");
    return w_finish(&b, out, len);
}

int qj_delete(const vs_id *ids, size_t n, char **out, size_t *len, char *err, size_t errlen) {
    wbuf b;
    w_init(&b, err, errlen);
    w_lit(&b, "{\"points\":");
    w_id_list(&b, ids, n);
    w_lit(&b, "}");
    return w_finish(&b, out, len);
}

/* ------------------------------------------------------------------ */
/* loading answers                                                      */

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

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
 * exact, and qj_parse_id reads them back) and reals inside (user data that
 * memoryd writes as doubles anyway). Malformed input is left for jansson to
 * reject: a rewrite only ever turns one valid number token into another
 * valid token. */
static int scan(const char *s, size_t n, bigint **out, size_t *nout, char *err, size_t errlen) {
    unsigned char kind[QJ_MAX_DEPTH + 1];
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
            if (depth >= QJ_MAX_DEPTH) {
                free(list);
                return fail(err, errlen, STATUS_EINTERNAL,
                            "qdrant's answer nests deeper than %d levels", QJ_MAX_DEPTH);
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
                if (count == cap) {
                    size_t ncap = cap ? cap * 2 : 8;
                    bigint *nl = realloc(list, ncap * sizeof *nl);
                    if (!nl) {
                        free(list);
                        return fail(err, errlen, STATUS_ENOMEM,
                                    "out of memory reading qdrant's answer");
                    }
                    list = nl;
                    cap = ncap;
                }
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

int qj_load(const char *body, size_t len, json_t **out, char *err, size_t errlen) {
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
            return fail(err, errlen, STATUS_ENOMEM, "out of memory reading qdrant's answer");
        }
        size_t at = 0, w = 0;
        for (size_t i = 0; i < nbig; i++) {
            memcpy(copy + w, body + at, big[i].off - at);
            w += big[i].off - at;
            if (big[i].as_string) copy[w++] = '"';
            memcpy(copy + w, body + big[i].off, big[i].len);
            w += big[i].len;
            if (big[i].as_string)
                copy[w++] = '"';
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
        qj_error_text(jerr.text, strnlen(jerr.text, sizeof jerr.text), text_err, sizeof text_err);
        return fail(err, errlen, STATUS_EINTERNAL, "qdrant's answer is not JSON: %s (at byte %d)",
                    text_err, jerr.position);
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

void qj_error_text(const char *body, size_t len, char *out, size_t outlen) {
    if (!out || !outlen) return;
    out[0] = '\0';
    if (!body) len = 0;
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
        i++;
    if (i < len && body[i] == '{') {
        json_t *j = NULL;
        if (qj_load(body, len, &j, NULL, 0) == STATUS_OK) {
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

int qj_parse_envelope(const char *body, size_t len, json_t **result, char *err, size_t errlen) {
    *result = NULL;
    json_t *j = NULL;
    int rc = qj_load(body, len, &j, err, errlen);
    if (rc != STATUS_OK) return rc;
    if (!json_is_object(j)) {
        json_decref(j);
        return fail(err, errlen, STATUS_EINTERNAL, "qdrant's answer is not a JSON object");
    }
    json_t *st = json_object_get(j, "status");
    json_t *e = json_is_object(st) ? json_object_get(st, "error") : NULL;
    if (json_is_string(e)) {
        char text[256];
        sanitize(json_string_value(e), json_string_length(e), text, sizeof text);
        json_decref(j);
        return fail(err, errlen, STATUS_EINTERNAL, "qdrant reported an error: %s", text);
    }
    /* "ok"; "accepted" is what Qdrant says of queued work (its result then
     * says more). */
    const char *sv = json_string_value(st);
    if (!sv || (strcmp(sv, "ok") != 0 && strcmp(sv, "accepted") != 0)) {
        json_decref(j);
        return fail(err, errlen, STATUS_EINTERNAL, "qdrant's answer has no \"ok\" status");
    }
    json_t *r = json_object_get(j, "result");
    if (!r) {
        json_decref(j);
        return fail(err, errlen, STATUS_EINTERNAL, "qdrant's answer has no result");
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

int qj_parse_version(const char *body, size_t len, qj_version *v, char *err, size_t errlen) {
    json_t *j = NULL;
    int rc = qj_load(body, len, &j, err, errlen);
    if (rc != STATUS_OK) return rc;
    const char *s = json_string_value(json_object_get(j, "version"));
    if (!s) {
        json_decref(j);
        return fail(err, errlen, STATUS_EINTERNAL, "qdrant's GET / has no version string");
    }
    qj_version x = {0, 0, 0};
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
        return fail(err, errlen, STATUS_EINTERNAL, "qdrant's version \"%s\" is not major.minor.patch",
                    text);
    }
    json_decref(j);
    *v = x;
    return STATUS_OK;
}

/* An integer member in [lo, hi]. */
static int int_member(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *v) {
    json_t *x = json_object_get(o, key);
    if (!json_is_integer(x)) return -1;
    json_int_t i = json_integer_value(x);
    if (i < lo || i > hi) return -1;
    *v = (int64_t)i;
    return 0;
}

int qj_parse_collection(const char *body, size_t len, int *dims, int *distance, char *err,
                        size_t errlen) {
    json_t *r = NULL;
    int rc = qj_parse_envelope(body, len, &r, err, errlen);
    if (rc != STATUS_OK) return rc;
    json_t *vec =
        json_object_get(json_object_get(json_object_get(r, "config"), "params"), "vectors");
    int64_t size = 0;
    if (!json_is_object(vec))
        rc = fail(err, errlen, STATUS_EINTERNAL,
                  "qdrant's collection info has no config.params.vectors");
    else if (!json_object_get(vec, "size"))
        rc = fail(err, errlen, STATUS_EINTERNAL,
                  "the qdrant collection has named vectors (not one memoryd made)");
    else if (int_member(vec, "size", 1, VS_MAX_DIMS, &size) != 0)
        rc = fail(err, errlen, STATUS_EINTERNAL, "the qdrant collection's vector size is not 1..%d",
                  VS_MAX_DIMS);
    else {
        int d = qj_distance_parse(json_string_value(json_object_get(vec, "distance")));
        if (!d)
            rc = fail(err, errlen, STATUS_EINTERNAL,
                      "the qdrant collection's distance is not Cosine, Dot or Euclid");
        else {
            *dims = (int)size;
            *distance = d;
        }
    }
    json_decref(r);
    return rc;
}

int qj_parse_bool(const char *body, size_t len, int *value, char *err, size_t errlen) {
    json_t *r = NULL;
    int rc = qj_parse_envelope(body, len, &r, err, errlen);
    if (rc != STATUS_OK) return rc;
    if (!json_is_boolean(r))
        rc = fail(err, errlen, STATUS_EINTERNAL, "qdrant's result is not a boolean");
    else
        *value = json_is_true(r);
    json_decref(r);
    return rc;
}

int qj_parse_update(const char *body, size_t len, char *err, size_t errlen) {
    json_t *r = NULL;
    int rc = qj_parse_envelope(body, len, &r, err, errlen);
    if (rc != STATUS_OK) return rc;
    const char *st = json_string_value(json_object_get(r, "status"));
    if (!json_is_object(r) || !st)
        rc = fail(err, errlen, STATUS_EINTERNAL, "qdrant's update result has no status");
    else if (strcmp(st, "wait_timeout") == 0)
        rc = fail(err, errlen, STATUS_ETIMEOUT,
                  "qdrant took the change but did not apply it within its wait timeout");
    else if (strcmp(st, "completed") != 0 && strcmp(st, "acknowledged") != 0)
        rc = fail(err, errlen, STATUS_EINTERNAL, "qdrant's update status is not completed");
    json_decref(r);
    return rc;
}

int qj_parse_count(const char *body, size_t len, int64_t *count, char *err, size_t errlen) {
    json_t *r = NULL;
    int rc = qj_parse_envelope(body, len, &r, err, errlen);
    if (rc != STATUS_OK) return rc;
    if (!json_is_object(r) || int_member(r, "count", 0, INT64_MAX, count) != 0)
        rc = fail(err, errlen, STATUS_EINTERNAL, "qdrant's count result has no count");
    json_decref(r);
    return rc;
}

/* ------------------------------------------------------------------ */
/* points                                                               */

int qj_parse_id(const json_t *j, vs_id *out) {
    memset(out, 0, sizeof *out);
    if (json_is_integer(j)) {
        json_int_t v = json_integer_value(j);
        if (v < 0) return -1;
        out->num = (uint64_t)v;
        return 0;
    }
    if (json_is_string(j)) {
        /* An embedded NUL would let strlen see less than the string. */
        if (strlen(json_string_value(j)) != json_string_length(j)) return -1;
        return vs_id_parse(json_string_value(j), out) == 0 ? 0 : -1;
    }
    return -1;
}

/* A metadata string: non-empty, no NUL, at most max bytes. */
static const char *meta_str(const json_t *o, const char *key, size_t max) {
    json_t *x = json_object_get(o, key);
    if (!json_is_string(x)) return NULL;
    size_t n = json_string_length(x);
    if (n == 0 || n > max || strlen(json_string_value(x)) != n) return NULL;
    return json_string_value(x);
}

int qj_parse_meta(const json_t *payload, const char *tenant, arena *a, tier_meta *out, char *err,
                  size_t errlen) {
    memset(out, 0, sizeof *out);
    json_t *m = json_is_object(payload) ? json_object_get(payload, "memoryd") : NULL;
    if (!json_is_object(m)) return fail(err, errlen, STATUS_EINTERNAL, "no memoryd metadata");
    const char *t = meta_str(m, "tenant", 4096);
    if (!t) return fail(err, errlen, STATUS_EINTERNAL, "memoryd.tenant is not a string");
    /* Another tenant's name is not repeated into a message that may leave
     * the service. */
    if (tenant && strcmp(t, tenant) != 0)
        return fail(err, errlen, STATUS_EINTERNAL, "memoryd.tenant names another tenant");
    const char *owner = meta_str(m, "owner", 4096);
    if (!owner) return fail(err, errlen, STATUS_EINTERNAL, "memoryd.owner is not a string");
    int64_t label, version, created, updated;
    if (int_member(m, "label", 1, 4, &label) != 0)
        return fail(err, errlen, STATUS_EINTERNAL, "memoryd.label is not 1..4");
    if (int_member(m, "version", 1, INT64_MAX, &version) != 0)
        return fail(err, errlen, STATUS_EINTERNAL, "memoryd.version is not a positive integer");
    if (int_member(m, "created_us", 0, INT64_MAX, &created) != 0 ||
        int_member(m, "updated_us", 0, INT64_MAX, &updated) != 0)
        return fail(err, errlen, STATUS_EINTERNAL, "memoryd.created_us/updated_us are not times");
    json_t *pk = json_object_get(m, "pii_kinds");
    if (!json_is_array(pk) || json_array_size(pk) > QJ_MAX_PII)
        return fail(err, errlen, STATUS_EINTERNAL, "memoryd.pii_kinds is not a list of at most %d",
                    QJ_MAX_PII);
    size_t npii = json_array_size(pk);
    const char **pii = NULL;
    if (npii) {
        pii = arena_alloc(a, npii * sizeof *pii);
        if (!pii) return fail(err, errlen, STATUS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < npii; i++) {
        json_t *x = json_array_get(pk, i);
        size_t n = json_string_length(x);
        if (!json_is_string(x) || n == 0 || n > QJ_MAX_PII_LEN || strlen(json_string_value(x)) != n)
            return fail(err, errlen, STATUS_EINTERNAL, "memoryd.pii_kinds[%zu] is not a kind", i);
        if (!(pii[i] = arena_strdup(a, json_string_value(x))))
            return fail(err, errlen, STATUS_ENOMEM, "out of memory");
    }
    out->owner = arena_strdup(a, owner);
    if (!out->owner) return fail(err, errlen, STATUS_ENOMEM, "out of memory");
    out->label = (int)label;
    out->version = version;
    out->create_us = created;
    out->update_us = updated;
    out->pii_kinds = pii;
    out->npii = npii;
    return STATUS_OK;
}

/* A JSON number as a float: finite and within float range (a double
 * outside it has no float value: converting it is undefined). */
static int to_float(const json_t *x, float *out) {
    if (!json_is_number(x)) return -1;
    double d = json_number_value(x);
    if (!isfinite(d) || d > FLT_MAX || d < -FLT_MAX) return -1;
    *out = (float)d;
    return 0;
}

/* One Record or ScoredPoint (the fields they share). The payload reference
 * is taken last, so every earlier failure leaves nothing to drop. */
static int parse_point(const json_t *pj, const qj_read *r, arena *a, vs_point *out, char *err,
                       size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(pj)) return fail(err, errlen, STATUS_EINTERNAL, "a point is not an object");
    if (qj_parse_id(json_object_get(pj, "id"), &out->id) != 0)
        return fail(err, errlen, STATUS_EINTERNAL, "a point has no valid id");
    char idt[37], why[256];
    vs_id_text(&out->id, idt);
    json_t *payload = json_object_get(pj, "payload");
    int rc = qj_parse_meta(payload, r->tenant, a, &out->meta, why, sizeof why);
    if (rc != STATUS_OK) return fail(err, errlen, rc, "qdrant point %s is corrupt: %s", idt, why);
    if (r->with_vector) {
        json_t *v = json_object_get(pj, "vector");
        if (!json_is_array(v))
            return fail(err, errlen, STATUS_EINTERNAL, "qdrant point %s has no (unnamed) vector", idt);
        if (r->dims < 1 || r->dims > VS_MAX_DIMS || json_array_size(v) != (size_t)r->dims)
            return fail(err, errlen, STATUS_EINTERNAL,
                        "qdrant point %s has %zu vector components, not %d", idt,
                        json_array_size(v), r->dims);
        float *f = arena_alloc(a, (size_t)r->dims * sizeof *f);
        if (!f) return fail(err, errlen, STATUS_ENOMEM, "out of memory");
        for (int i = 0; i < r->dims; i++)
            if (to_float(json_array_get(v, (size_t)i), &f[i]) != 0)
                return fail(err, errlen, STATUS_EINTERNAL,
                            "qdrant point %s: vector component %d is not a float", idt, i);
        out->vector = f;
    }
    if (r->with_payload) {
        json_t *user = json_object_get(payload, "payload");
        if (!json_is_object(user))
            return fail(err, errlen, STATUS_EINTERNAL, "qdrant point %s is corrupt: no payload object",
                        idt);
        out->payload = json_incref(user);
    }
    return STATUS_OK;
}

int qj_parse_hits(const char *body, size_t len, const qj_read *r, int legacy_search, arena *a,
                  vs_hit **out, size_t *n, char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    json_t *res = NULL;
    int rc = qj_parse_envelope(body, len, &res, err, errlen);
    if (rc != STATUS_OK) return rc;
    json_t *pts = legacy_search ? res : json_object_get(res, "points");
    if (!json_is_array(pts)) {
        json_decref(res);
        return fail(err, errlen, STATUS_EINTERNAL, "qdrant's %s result has no list of points",
                    legacy_search ? "search" : "query");
    }
    size_t cnt = json_array_size(pts);
    vs_hit *hits = cnt ? arena_zalloc(a, cnt * sizeof *hits) : NULL;
    if (cnt && !hits) {
        json_decref(res);
        return fail(err, errlen, STATUS_ENOMEM, "out of memory");
    }
    size_t i = 0;
    for (; i < cnt; i++) {
        json_t *pj = json_array_get(pts, i);
        rc = parse_point(pj, r, a, &hits[i].point, err, errlen);
        if (rc != STATUS_OK) break;
        if (to_float(json_object_get(pj, "score"), &hits[i].score) != 0) {
            json_decref(hits[i].point.payload);
            hits[i].point.payload = NULL;
            rc = fail(err, errlen, STATUS_EINTERNAL, "a qdrant hit has no valid score");
            break;
        }
    }
    json_decref(res);
    if (rc != STATUS_OK) {
        vs_hits_release(hits, i);
        return rc;
    }
    *out = hits;
    *n = cnt;
    return STATUS_OK;
}

int qj_parse_records(const char *body, size_t len, const qj_read *r, int scroll, arena *a,
                     vs_point **out, size_t *n, vs_id *next, int *has_next, char *err,
                     size_t errlen) {
    *out = NULL;
    *n = 0;
    if (has_next) *has_next = 0;
    json_t *res = NULL;
    int rc = qj_parse_envelope(body, len, &res, err, errlen);
    if (rc != STATUS_OK) return rc;
    json_t *pts = scroll ? json_object_get(res, "points") : res;
    if (!json_is_array(pts)) {
        json_decref(res);
        return fail(err, errlen, STATUS_EINTERNAL, "qdrant's %s result has no list of points",
                    scroll ? "scroll" : "retrieve");
    }
    vs_id nx;
    int hn = 0;
    if (scroll) {
        json_t *o = json_object_get(res, "next_page_offset");
        if (o && !json_is_null(o)) {
            if (qj_parse_id(o, &nx) != 0) {
                json_decref(res);
                return fail(err, errlen, STATUS_EINTERNAL,
                            "qdrant's next_page_offset is not a point id");
            }
            hn = 1;
        }
    }
    size_t cnt = json_array_size(pts);
    vs_point *p = cnt ? arena_zalloc(a, cnt * sizeof *p) : NULL;
    if (cnt && !p) {
        json_decref(res);
        return fail(err, errlen, STATUS_ENOMEM, "out of memory");
    }
    size_t i = 0;
    for (; i < cnt; i++) {
        rc = parse_point(json_array_get(pts, i), r, a, &p[i], err, errlen);
        if (rc != STATUS_OK) break;
    }
    json_decref(res);
    if (rc != STATUS_OK) {
        vs_points_release(p, i);
        return rc;
    }
    *out = p;
    *n = cnt;
    if (hn && next) *next = nx;
    if (has_next) *has_next = hn;
    return STATUS_OK;
}
