/* qdrant_filter: memoryd filters as Qdrant filters, with the read diode
 * always in `must` (qdrant_json.h has the mapping and its limits). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "service/qdrant/qdrant_json_internal.h"

static int cmp_id(const void *a, const void *b) { return vs_id_cmp(a, b); }

/* has_id lists are sets (the spec marks them uniqueItems): sorted and
 * without duplicates. */
void qdrant_json_w_id_set(wbuf *b, const vs_id *ids, size_t n) {
    if (b->rc) return;
    vs_id *s = NULL;
    if (n) {
        s = malloc(n * sizeof *s);
        if (!s) {
            qdrant_json_w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant filter");
            return;
        }
        memcpy(s, ids, n * sizeof *s);
        qsort(s, n, sizeof *s, cmp_id);
    }
    qdrant_json_w_lit(b, "[");
    for (size_t i = 0, k = 0; i < n; i++) {
        if (i && vs_id_cmp(&s[i - 1], &s[i]) == 0) continue;
        if (k++) qdrant_json_w_lit(b, ",");
        qdrant_json_w_id(b, &s[i]);
    }
    qdrant_json_w_lit(b, "]");
    free(s);
}

static void w_key(wbuf *b, const char *key) {
    if (!key || !key[0]) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "a filter condition has an empty key");
        return;
    }
    size_t n = strlen(key);
    char *k = malloc(n + sizeof "payload.");
    if (!k) {
        qdrant_json_w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant filter");
        return;
    }
    memcpy(k, "payload.", 8);
    memcpy(k + 8, key, n + 1);
    qdrant_json_w_str(b, k, "filter key");
    free(k);
}

/* 1 for a number Qdrant takes as an integer match value. */
static int integral(double v) {
    return isfinite(v) && v == trunc(v) && fabs(v) <= 9007199254740992.0;
}

static void w_match_value(wbuf *b, const Google__Protobuf__Value *v, const char *key) {
    if (!v) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "filter key %.64s: match_value is missing", key);
        return;
    }
    switch (v->kind_case) {
    case GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE:
        qdrant_json_w_str(b, v->string_value ? v->string_value : "", "match value");
        return;
    case GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE: qdrant_json_w_bool(b, v->bool_value); return;
    case GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE:
        if (!integral(v->number_value)) {
            qdrant_json_w_fail(b, STATUS_EINVALID,
                               "filter key %.64s: Qdrant matches only integers, not %g", key,
                               v->number_value);
            return;
        }
        qdrant_json_w_fmt(b, "%lld", (long long)v->number_value);
        return;
    default:
        qdrant_json_w_fail(b, STATUS_EINVALID,
                           "filter key %.64s: a match value must be a string, a bool or an integer",
                           key);
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
            qdrant_json_w_fail(
                b, STATUS_EINVALID,
                "filter key %.64s: Qdrant's match %s takes only strings or only integers", key, op);
            return;
        }
        kind = k;
    }
    qdrant_json_w_lit(b, "[");
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
        if (k++) qdrant_json_w_lit(b, ",");
        w_match_value(b, v, key);
    }
    qdrant_json_w_lit(b, "]");
}

static void w_range(wbuf *b, const Memory__V1__Range *r, const char *key) {
    if (!r || (r->lower_case == MEMORY__V1__RANGE__LOWER__NOT_SET &&
               r->upper_case == MEMORY__V1__RANGE__UPPER__NOT_SET)) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "filter key %.64s: a range needs a bound", key);
        return;
    }
    int first = 1;
    qdrant_json_w_lit(b, "{");
    if (r->lower_case == MEMORY__V1__RANGE__LOWER_GT ||
        r->lower_case == MEMORY__V1__RANGE__LOWER_GTE) {
        int gt = r->lower_case == MEMORY__V1__RANGE__LOWER_GT;
        qdrant_json_w_lit(b, gt ? "\"gt\":" : "\"gte\":");
        qdrant_json_w_f64(b, gt ? r->gt : r->gte, "range bound");
        first = 0;
    }
    if (r->upper_case == MEMORY__V1__RANGE__UPPER_LT ||
        r->upper_case == MEMORY__V1__RANGE__UPPER_LTE) {
        int lt = r->upper_case == MEMORY__V1__RANGE__UPPER_LT;
        if (!first) qdrant_json_w_lit(b, ",");
        qdrant_json_w_lit(b, lt ? "\"lt\":" : "\"lte\":");
        qdrant_json_w_f64(b, lt ? r->lt : r->lte, "range bound");
    }
    qdrant_json_w_lit(b, "}");
}

static void w_field(wbuf *b, const Memory__V1__FieldCondition *f) {
    if (!f) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "a field condition is missing");
        return;
    }
    const char *key = f->key ? f->key : "";
    qdrant_json_w_lit(b, "{\"key\":");
    w_key(b, key);
    switch (f->condition_case) {
    case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_VALUE:
        qdrant_json_w_lit(b, ",\"match\":{\"value\":");
        w_match_value(b, f->match_value, key);
        qdrant_json_w_lit(b, "}");
        break;
    case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_ANY:
        qdrant_json_w_lit(b, ",\"match\":{\"any\":");
        w_match_list(b, f->match_any, key, "any");
        qdrant_json_w_lit(b, "}");
        break;
    case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_EXCEPT:
        qdrant_json_w_lit(b, ",\"match\":{\"except\":");
        w_match_list(b, f->match_except, key, "except");
        qdrant_json_w_lit(b, "}");
        break;
    case MEMORY__V1__FIELD_CONDITION__CONDITION_RANGE:
        qdrant_json_w_lit(b, ",\"range\":");
        w_range(b, f->range, key);
        break;
    default:
        qdrant_json_w_fail(b, STATUS_EINVALID,
                           "filter key %.64s: the field condition has no test set", key);
        return;
    }
    qdrant_json_w_lit(b, "}");
}

static int filter_empty(const Memory__V1__Filter *f) {
    return !f || (f->n_must == 0 && f->n_should == 0 && f->n_must_not == 0);
}

static void w_filter(wbuf *b, const Memory__V1__Filter *f, int depth);

static void w_condition(wbuf *b, const Memory__V1__Condition *c, int depth) {
    if (!c) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "a filter condition is missing");
        return;
    }
    switch (c->condition_case) {
    case MEMORY__V1__CONDITION__CONDITION_FIELD: w_field(b, c->field); return;
    case MEMORY__V1__CONDITION__CONDITION_IS_EMPTY:
        qdrant_json_w_lit(b, "{\"is_empty\":{\"key\":");
        w_key(b, c->is_empty ? c->is_empty->key : NULL);
        qdrant_json_w_lit(b, "}}");
        return;
    case MEMORY__V1__CONDITION__CONDITION_HAS_ID: {
        size_t n = c->has_id ? c->has_id->n_ids : 0;
        vs_id *ids = n ? calloc(n, sizeof *ids) : NULL;
        if (n && !ids) {
            qdrant_json_w_fail(b, STATUS_ENOMEM, "out of memory building a qdrant filter");
            return;
        }
        for (size_t i = 0; i < n && !b->rc; i++) {
            const Memory__V1__PointId *p = c->has_id->ids[i];
            if (p && p->kind_case == MEMORY__V1__POINT_ID__KIND_NUM) ids[i].num = p->num;
            else if (!p || p->kind_case != MEMORY__V1__POINT_ID__KIND_UUID || !p->uuid ||
                     vs_uuid_parse(p->uuid, &ids[i]) != 0)
                qdrant_json_w_fail(b, STATUS_EINVALID,
                                   "has_id: id %zu is neither an integer nor a UUID", i);
        }
        qdrant_json_w_lit(b, "{\"has_id\":");
        qdrant_json_w_id_set(b, ids, n);
        qdrant_json_w_lit(b, "}");
        free(ids);
        return;
    }
    case MEMORY__V1__CONDITION__CONDITION_FILTER:
        /* A Filter is itself a Qdrant condition: (a AND b) OR (c AND d). */
        w_filter(b, c->filter, depth + 1);
        return;
    default: qdrant_json_w_fail(b, STATUS_EINVALID, "a filter condition has nothing set");
    }
}

static void w_clause(wbuf *b, const char *name, Memory__V1__Condition *const *cs, size_t n,
                     int depth, int *first) {
    if (n == 0) return; /* omitted, never [] (an empty should would match nothing) */
    if (!*first) qdrant_json_w_lit(b, ",");
    *first = 0;
    qdrant_json_w_fmt(b, "\"%s\":[", name);
    for (size_t i = 0; i < n; i++) {
        if (i) qdrant_json_w_lit(b, ",");
        w_condition(b, cs[i], depth);
    }
    qdrant_json_w_lit(b, "]");
}

static void w_filter(wbuf *b, const Memory__V1__Filter *f, int depth) {
    if (depth > QDRANT_JSON_MAX_FILTER_DEPTH) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "filter nests deeper than %d levels",
                           QDRANT_JSON_MAX_FILTER_DEPTH);
        return;
    }
    int first = 1;
    qdrant_json_w_lit(b, "{");
    if (f) {
        w_clause(b, "must", f->must, f->n_must, depth, &first);
        w_clause(b, "should", f->should, f->n_should, depth, &first);
        w_clause(b, "must_not", f->must_not, f->n_must_not, depth, &first);
    }
    qdrant_json_w_lit(b, "}");
}

/* The read diode as `must`, the user filter nested as one more condition. */
void qdrant_json_w_scoped_filter(wbuf *b, const qdrant_json_scope *s, const Memory__V1__Filter *f) {
    if (!s || !s->tenant || !s->tenant[0]) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "the read diode needs a tenant");
        return;
    }
    qdrant_json_w_lit(b, "{\"must\":[{\"key\":\"memoryd.tenant\",\"match\":{\"value\":");
    qdrant_json_w_str(b, s->tenant, "tenant");
    qdrant_json_w_lit(b, "}}");
    if (s->owner) {
        qdrant_json_w_lit(b, ",{\"key\":\"memoryd.owner\",\"match\":{\"value\":");
        qdrant_json_w_str(b, s->owner, "owner");
        qdrant_json_w_lit(b, "}}");
    }
    qdrant_json_w_fmt(b, ",{\"key\":\"memoryd.label\",\"range\":{\"lte\":%d}}", s->clr);
    if (s->updated_before_us)
        qdrant_json_w_fmt(b, ",{\"key\":\"memoryd.updated_us\",\"range\":{\"lt\":%" PRId64 "}}",
                          s->updated_before_us);
    if (s->updated && s->updated->has_start)
        qdrant_json_w_fmt(b, ",{\"key\":\"memoryd.updated_us\",\"range\":{\"gte\":%" PRId64 "}}",
                          s->updated->start_us);
    if (s->updated && s->updated->has_end)
        qdrant_json_w_fmt(b, ",{\"key\":\"memoryd.updated_us\",\"range\":{\"lt\":%" PRId64 "}}",
                          s->updated->end_us);
    if (s->nids) {
        qdrant_json_w_lit(b, ",{\"has_id\":");
        qdrant_json_w_id_set(b, s->ids, s->nids);
        qdrant_json_w_lit(b, "}");
    }
    if (!filter_empty(f)) {
        qdrant_json_w_lit(b, ",");
        w_filter(b, f, 1);
    }
    qdrant_json_w_lit(b, "]}");
}

int qdrant_json_filter(const qdrant_json_scope *s, const Memory__V1__Filter *f, char **out,
                       size_t *len, char *err, size_t errlen) {
    wbuf b;
    qdrant_json_w_init(&b, err, errlen);
    qdrant_json_w_scoped_filter(&b, s, f);
    return qdrant_json_w_finish(&b, out, len);
}
