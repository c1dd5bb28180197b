/* episodic_filter: checks and evaluates payload filters with Qdrant's
 * semantics (tests/contract/README.md cites the Qdrant source of each):
 * - A key selects values: `a.b` steps into objects only, never into an
 *   intermediate array; `a[]` selects each element of array a. A selected
 *   value that is an array is tested element by element (one level).
 * - match value / any: one tested value equals (strings, bools and
 *   integers; a float payload value never equals an integer).
 * - match except: one tested value is not null and not in the list (a
 *   float, bool, object or a value of the other kind counts as "not in");
 *   a missing field, null, [] or [null] does not match.
 * - range: one tested value is a number within the bounds.
 * - is_empty: every selected value is null or [] (so a missing field is
 *   empty, [null] is not).
 * - should holds when empty or when one condition holds. */
#include "service/episodic/episodic_filter.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEGMENTS 32

/* ---- paths ---- */

typedef struct segment {
    const char *name;
    size_t len;
    int expand; /* followed by [] */
} segment;

/* Splits key into segments; -1 with why on a syntax error. */
static int parse_key(const char *key, segment *seg, int *nseg, const char **why) {
    size_t klen = strlen(key);
    if (klen == 0 || klen > EPISODIC_FILTER_MAX_KEY) {
        *why = "must be 1 to 256 characters";
        return -1;
    }
    int n = 0;
    const char *p = key;
    for (;;) {
        const char *s = p;
        while (isalnum((unsigned char)*p) || *p == '_' || *p == '-') p++;
        if (p == s) {
            *why = "path segments are [A-Za-z0-9_-]+, optionally followed by [], joined by dots";
            return -1;
        }
        if (n == MAX_SEGMENTS) {
            *why = "at most 32 path segments";
            return -1;
        }
        seg[n].name = s;
        seg[n].len = (size_t)(p - s);
        seg[n].expand = 0;
        if (p[0] == '[' && p[1] == ']') {
            seg[n].expand = 1;
            p += 2;
        }
        n++;
        if (*p == '\0') break;
        if (*p != '.') {
            *why = "path segments are [A-Za-z0-9_-]+, optionally followed by [], joined by dots";
            return -1;
        }
        p++;
    }
    *nseg = n;
    return 0;
}

typedef struct values {
    json_t **v;
    size_t n, cap;
    json_t *small[16];
} values;

static int values_add(values *vs, json_t *j) {
    if (vs->n == vs->cap) {
        size_t cap = vs->cap * 2;
        json_t **v = vs->v == vs->small ? malloc(cap * sizeof *v) : realloc(vs->v, cap * sizeof *v);
        if (!v) return -1;
        if (vs->v == vs->small) memcpy(v, vs->small, sizeof vs->small);
        vs->v = v;
        vs->cap = cap;
    }
    vs->v[vs->n++] = j;
    return 0;
}

static void resolve(json_t *cur, const segment *seg, int i, int nseg, values *out) {
    if (!json_is_object(cur)) return;
    json_t *next = json_object_getn(cur, seg[i].name, seg[i].len);
    if (!next) return;
    if (seg[i].expand) {
        if (!json_is_array(next)) return;
        size_t k;
        json_t *e;
        json_array_foreach(next, k, e) {
            if (i + 1 == nseg) values_add(out, e);
            else resolve(e, seg, i + 1, nseg, out);
        }
    } else if (i + 1 < nseg) {
        resolve(next, seg, i + 1, nseg, out);
    } else {
        values_add(out, next);
    }
}

/* The values key selects in payload (null included: is_empty tells null
 * from missing). The caller frees with values_done. An allocation failure
 * yields fewer values: payloads are bounded, so this only happens when the
 * process is out of memory anyway. */
static void values_of(json_t *payload, const char *key, values *out) {
    out->v = out->small;
    out->n = 0;
    out->cap = 16;
    segment seg[MAX_SEGMENTS];
    int nseg = 0;
    const char *why;
    if (!payload || parse_key(key, seg, &nseg, &why) != 0) return;
    resolve(payload, seg, 0, nseg, out);
}

static void values_done(values *vs) {
    if (vs->v != vs->small) free(vs->v);
}

/* ---- matching ---- */

#define MAX_EXACT_INT 9007199254740992.0 /* 2^53 */

/* A match operand: strings, bools and integers (checked). */
static int scalar_eq(const json_t *payload_value, const Google__Protobuf__Value *v) {
    switch (v->kind_case) {
    case GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE:
        return json_is_string(payload_value) &&
               strcmp(json_string_value(payload_value), v->string_value) == 0;
    case GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE:
        return json_is_boolean(payload_value) &&
               json_is_true(payload_value) == (v->bool_value != 0);
    case GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE:
        return json_is_integer(payload_value) &&
               (double)json_integer_value(payload_value) == v->number_value;
    default: return 0;
    }
}

static int in_list(const json_t *pv, const Google__Protobuf__ListValue *l) {
    for (size_t i = 0; i < l->n_values; i++)
        if (scalar_eq(pv, l->values[i])) return 1;
    return 0;
}

static int in_range(const json_t *pv, const Memory__V1__Range *r) {
    if (!json_is_number(pv)) return 0;
    double x = json_number_value(pv);
    switch (r->lower_case) {
    case MEMORY__V1__RANGE__LOWER_GT:
        if (!(x > r->gt)) return 0;
        break;
    case MEMORY__V1__RANGE__LOWER_GTE:
        if (!(x >= r->gte)) return 0;
        break;
    default: break;
    }
    switch (r->upper_case) {
    case MEMORY__V1__RANGE__UPPER_LT:
        if (!(x < r->lt)) return 0;
        break;
    case MEMORY__V1__RANGE__UPPER_LTE:
        if (!(x <= r->lte)) return 0;
        break;
    default: break;
    }
    return 1;
}

/* One tested value (not an array, or an element of one) against fc. */
static int value_passes(const Memory__V1__FieldCondition *fc, const json_t *v) {
    switch (fc->condition_case) {
    case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_VALUE: return scalar_eq(v, fc->match_value);
    case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_ANY: return in_list(v, fc->match_any);
    case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_EXCEPT:
        return !json_is_null(v) && !in_list(v, fc->match_except);
    case MEMORY__V1__FIELD_CONDITION__CONDITION_RANGE: return in_range(v, fc->range);
    default: return 0;
    }
}

static int field_match(const Memory__V1__FieldCondition *fc, json_t *payload) {
    values vs;
    values_of(payload, fc->key, &vs);
    int hit = 0;
    for (size_t i = 0; i < vs.n && !hit; i++) {
        if (!json_is_array(vs.v[i])) {
            hit = value_passes(fc, vs.v[i]);
            continue;
        }
        size_t k;
        json_t *e;
        json_array_foreach(vs.v[i], k, e) {
            if ((hit = value_passes(fc, e))) break;
        }
    }
    values_done(&vs);
    return hit;
}

static int is_empty(const char *key, json_t *payload) {
    values vs;
    values_of(payload, key, &vs);
    int empty = 1;
    for (size_t i = 0; i < vs.n && empty; i++)
        empty = json_is_null(vs.v[i]) || (json_is_array(vs.v[i]) && json_array_size(vs.v[i]) == 0);
    values_done(&vs);
    return empty;
}

static int has_id(const Memory__V1__HasIdCondition *h, const vs_id *id) {
    for (size_t i = 0; i < h->n_ids; i++) {
        vs_id x;
        if (episodic_filter_point_id(h->ids[i], &x) == 0 && vs_id_cmp(&x, id) == 0) return 1;
    }
    return 0;
}

static int condition_match(const Memory__V1__Condition *c, const vs_id *id, json_t *payload) {
    switch (c->condition_case) {
    case MEMORY__V1__CONDITION__CONDITION_FIELD: return field_match(c->field, payload);
    case MEMORY__V1__CONDITION__CONDITION_IS_EMPTY: return is_empty(c->is_empty->key, payload);
    case MEMORY__V1__CONDITION__CONDITION_HAS_ID: return has_id(c->has_id, id);
    case MEMORY__V1__CONDITION__CONDITION_FILTER:
        return episodic_filter_match(c->filter, id, payload);
    default: return 0;
    }
}

int episodic_filter_match(const Memory__V1__Filter *f, const vs_id *id, json_t *payload) {
    if (!f) return 1;
    for (size_t i = 0; i < f->n_must; i++)
        if (!condition_match(f->must[i], id, payload)) return 0;
    for (size_t i = 0; i < f->n_must_not; i++)
        if (condition_match(f->must_not[i], id, payload)) return 0;
    if (f->n_should == 0) return 1;
    for (size_t i = 0; i < f->n_should; i++)
        if (condition_match(f->should[i], id, payload)) return 1;
    return 0;
}

/* ---- ids ---- */

int episodic_filter_point_id(const Memory__V1__PointId *pid, vs_id *out) {
    if (!pid) return -1;
    switch (pid->kind_case) {
    case MEMORY__V1__POINT_ID__KIND_NUM:
        memset(out, 0, sizeof *out);
        out->num = pid->num;
        return 0;
    case MEMORY__V1__POINT_ID__KIND_UUID: return vs_uuid_parse(pid->uuid, out);
    default: return -1;
    }
}

/* ---- checking ---- */

typedef struct check {
    char path[512];
    size_t len;
    int conditions;
    char *err;
    size_t errlen;
} check;

static size_t push(check *ck, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t push(check *ck, const char *fmt, ...) {
    size_t old = ck->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ck->path + ck->len, sizeof ck->path - ck->len, fmt, ap);
    va_end(ap);
    if (n > 0) ck->len += (size_t)n;
    if (ck->len >= sizeof ck->path) ck->len = sizeof ck->path - 1;
    return old;
}

static void pop(check *ck, size_t old) {
    ck->len = old;
    ck->path[old] = '\0';
}

static int fail(check *ck, const char *why) {
    snprintf(ck->err, ck->errlen, "%s: %s", ck->path, why);
    return -1;
}

static int check_key(check *ck, const char *key) {
    segment seg[MAX_SEGMENTS];
    int n;
    const char *why;
    if (parse_key(key, seg, &n, &why) == 0) return 0;
    push(ck, ".key");
    return fail(ck, why);
}

static int check_scalar(check *ck, const Google__Protobuf__Value *v) {
    if (!v) return fail(ck, "a value is required");
    switch (v->kind_case) {
    case GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE:
    case GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE: return 0;
    case GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE:
        if (!isfinite(v->number_value) || floor(v->number_value) != v->number_value ||
            fabs(v->number_value) > MAX_EXACT_INT)
            return fail(ck, "numbers in a match must be integers with |n| <= 2^53");
        return 0;
    default: return fail(ck, "must be a string, a bool or an integer");
    }
}

static int check_list(check *ck, const Google__Protobuf__ListValue *l) {
    if (!l || l->n_values == 0 || l->n_values > EPISODIC_FILTER_MAX_VALUES)
        return fail(ck, "must hold 1 to 1024 values");
    int kind = l->values[0] ? (int)l->values[0]->kind_case : 0;
    for (size_t i = 0; i < l->n_values; i++) {
        size_t o = push(ck, "[%zu]", i);
        const Google__Protobuf__Value *v = l->values[i];
        if (check_scalar(ck, v) != 0) return -1;
        if (v->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE)
            return fail(ck, "any/except lists hold strings or integers (as in Qdrant)");
        if ((int)v->kind_case != kind)
            return fail(ck, "any/except lists hold only strings or only integers");
        pop(ck, o);
    }
    return 0;
}

static int check_filter(check *ck, const Memory__V1__Filter *f, int depth);

static int check_condition(check *ck, const Memory__V1__Condition *c, int depth) {
    if (++ck->conditions > EPISODIC_FILTER_MAX_CONDITIONS)
        return fail(ck, "a filter holds at most 64 conditions in all");
    size_t o;
    switch (c->condition_case) {
    case MEMORY__V1__CONDITION__CONDITION_FIELD: {
        const Memory__V1__FieldCondition *fc = c->field;
        o = push(ck, ".field");
        if (check_key(ck, fc->key) != 0) return -1;
        switch (fc->condition_case) {
        case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_VALUE:
            push(ck, ".match_value");
            if (check_scalar(ck, fc->match_value) != 0) return -1;
            break;
        case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_ANY:
            push(ck, ".match_any");
            if (check_list(ck, fc->match_any) != 0) return -1;
            break;
        case MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_EXCEPT:
            push(ck, ".match_except");
            if (check_list(ck, fc->match_except) != 0) return -1;
            break;
        case MEMORY__V1__FIELD_CONDITION__CONDITION_RANGE: {
            const Memory__V1__Range *r = fc->range;
            push(ck, ".range");
            if (r->lower_case == MEMORY__V1__RANGE__LOWER__NOT_SET &&
                r->upper_case == MEMORY__V1__RANGE__UPPER__NOT_SET)
                return fail(ck, "set at least one bound (gt, gte, lt, lte)");
            double lo = r->lower_case == MEMORY__V1__RANGE__LOWER_GT ? r->gt : r->gte;
            double hi = r->upper_case == MEMORY__V1__RANGE__UPPER_LT ? r->lt : r->lte;
            if ((r->lower_case != MEMORY__V1__RANGE__LOWER__NOT_SET && !isfinite(lo)) ||
                (r->upper_case != MEMORY__V1__RANGE__UPPER__NOT_SET && !isfinite(hi)))
                return fail(ck, "bounds must be finite numbers");
            break;
        }
        default: return fail(ck, "set one of match_value, match_any, match_except, range");
        }
        pop(ck, o);
        return 0;
    }
    case MEMORY__V1__CONDITION__CONDITION_IS_EMPTY:
        o = push(ck, ".is_empty");
        if (check_key(ck, c->is_empty->key) != 0) return -1;
        pop(ck, o);
        return 0;
    case MEMORY__V1__CONDITION__CONDITION_HAS_ID: {
        const Memory__V1__HasIdCondition *h = c->has_id;
        o = push(ck, ".has_id.ids");
        if (h->n_ids == 0 || h->n_ids > EPISODIC_FILTER_MAX_VALUES)
            return fail(ck, "must hold 1 to 1024 ids");
        for (size_t i = 0; i < h->n_ids; i++) {
            vs_id id;
            size_t o2 = push(ck, "[%zu]", i);
            if (episodic_filter_point_id(h->ids[i], &id) != 0)
                return fail(ck, "set num, or uuid in canonical form "
                                "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
            pop(ck, o2);
        }
        pop(ck, o);
        return 0;
    }
    case MEMORY__V1__CONDITION__CONDITION_FILTER:
        o = push(ck, ".filter");
        if (depth + 1 >= EPISODIC_FILTER_MAX_DEPTH) return fail(ck, "filters nest at most 8 deep");
        if (check_filter(ck, c->filter, depth + 1) != 0) return -1;
        pop(ck, o);
        return 0;
    default: return fail(ck, "set one of field, is_empty, has_id, filter");
    }
}

static int check_list_of(check *ck, const char *name, Memory__V1__Condition **cs, size_t n,
                         int depth) {
    for (size_t i = 0; i < n; i++) {
        size_t o = push(ck, ".%s[%zu]", name, i);
        if (check_condition(ck, cs[i], depth) != 0) return -1;
        pop(ck, o);
    }
    return 0;
}

static int check_filter(check *ck, const Memory__V1__Filter *f, int depth) {
    if (check_list_of(ck, "must", f->must, f->n_must, depth) != 0) return -1;
    if (check_list_of(ck, "should", f->should, f->n_should, depth) != 0) return -1;
    return check_list_of(ck, "must_not", f->must_not, f->n_must_not, depth);
}

int episodic_filter_check(const Memory__V1__Filter *f, const char *prefix, char *err,
                          size_t errlen) {
    if (!f) return 0;
    check ck = {.len = 0, .conditions = 0, .err = err, .errlen = errlen};
    push(&ck, "%s", prefix);
    return check_filter(&ck, f, 0);
}
