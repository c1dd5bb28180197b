/* pbjson: Struct <-> JSON; see entries_json.h. */
#include "service/pb/pbjson.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEN 256

typedef struct {
    char path[PATH_MAX_LEN];
    size_t len;
    char *err;
    size_t errlen;
} walk;

/* Appends ".key" or "[i]" to the path (cut when long); returns the old
 * length to restore. */
static void advance(walk *w, int n) {
    size_t room = sizeof w->path - w->len;
    if (n > 0) w->len += (size_t)n < room ? (size_t)n : room - 1;
}
static size_t push_key(walk *w, const char *key) {
    size_t old = w->len;
    advance(w, snprintf(w->path + w->len, sizeof w->path - w->len, ".%s", key));
    return old;
}
static size_t push_index(walk *w, size_t i) {
    size_t old = w->len;
    advance(w, snprintf(w->path + w->len, sizeof w->path - w->len, "[%zu]", i));
    return old;
}
static void pop(walk *w, size_t old) {
    w->len = old;
    w->path[old] = '\0';
}
static json_t *bad(walk *w, const char *why) {
    snprintf(w->err, w->errlen, "%s: %s", w->path, why);
    return NULL;
}

static json_t *from_struct(walk *w, const Google__Protobuf__Struct *s);

static json_t *from_value(walk *w, const Google__Protobuf__Value *v) {
    if (!v) return bad(w, "value is missing");
    switch (v->kind_case) {
    case GOOGLE__PROTOBUF__VALUE__KIND_NULL_VALUE: return json_null();
    case GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE:
        if (!isfinite(v->number_value)) return bad(w, "NaN and infinities are not valid JSON");
        /* Whole numbers print as integers ("3", not "3.0"): what people
         * wrote, and what jsonb shows to SQL. -0 keeps its sign as a real. */
        if (v->number_value == trunc(v->number_value) &&
            fabs(v->number_value) < 9007199254740992.0 &&
            !(v->number_value == 0 && signbit(v->number_value)))
            return json_integer((json_int_t)v->number_value);
        return json_real(v->number_value);
    case GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE: {
        json_t *j = json_string(v->string_value ? v->string_value : "");
        return j ? j : bad(w, "string is not valid UTF-8");
    }
    case GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE: return json_boolean(v->bool_value);
    case GOOGLE__PROTOBUF__VALUE__KIND_STRUCT_VALUE: return from_struct(w, v->struct_value);
    case GOOGLE__PROTOBUF__VALUE__KIND_LIST_VALUE: {
        json_t *arr = json_array();
        if (!arr) return bad(w, "out of memory");
        const Google__Protobuf__ListValue *l = v->list_value;
        for (size_t i = 0; l && i < l->n_values; i++) {
            size_t old = push_index(w, i);
            json_t *e = from_value(w, l->values[i]);
            if (!e || json_array_append_new(arr, e) != 0) {
                if (e) bad(w, "out of memory");
                json_decref(arr);
                return NULL;
            }
            pop(w, old);
        }
        return arr;
    }
    default: return bad(w, "value has no kind set");
    }
}

static json_t *from_struct(walk *w, const Google__Protobuf__Struct *s) {
    json_t *obj = json_object();
    if (!obj) return bad(w, "out of memory");
    for (size_t i = 0; s && i < s->n_fields; i++) {
        const Google__Protobuf__Struct__FieldsEntry *f = s->fields[i];
        const char *key = f && f->key ? f->key : "";
        size_t old = push_key(w, key);
        json_t *v = f ? from_value(w, f->value) : bad(w, "field is missing");
        /* Later duplicates win, as in a protobuf map. */
        if (!v || json_object_set_new(obj, key, v) != 0) {
            if (v) bad(w, "key is not valid UTF-8");
            json_decref(obj);
            return NULL;
        }
        pop(w, old);
    }
    return obj;
}

static int render(const Google__Protobuf__Struct *s, const Google__Protobuf__Value *v,
                  const char *prefix, char **out, size_t *len, char *err, size_t errlen) {
    *out = NULL;
    *len = 0;
    walk w = {.len = 0, .err = err, .errlen = errlen};
    snprintf(w.path, sizeof w.path, "%s", prefix);
    w.len = strlen(w.path);
    json_t *j = v ? from_value(&w, v) : from_struct(&w, s);
    if (!j) return -1;
    char *text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    json_decref(j);
    if (!text) {
        snprintf(err, errlen, "%s: cannot be rendered as JSON", prefix);
        return -1;
    }
    *out = text;
    *len = strlen(text);
    return 0;
}

json_t *pbjson_struct_to_json(const Google__Protobuf__Struct *s, const char *prefix, char *err,
                              size_t errlen) {
    walk w = {.len = 0, .err = err, .errlen = errlen};
    snprintf(w.path, sizeof w.path, "%s", prefix);
    w.len = strlen(w.path);
    return from_struct(&w, s);
}

int pbjson_from_struct(const Google__Protobuf__Struct *s, const char *prefix, char **out,
                       size_t *len, char *err, size_t errlen) {
    return render(s, NULL, prefix, out, len, err, errlen);
}

int pbjson_from_value(const Google__Protobuf__Value *v, const char *prefix, char **out, size_t *len,
                      char *err, size_t errlen) {
    if (!v) {
        snprintf(err, errlen, "%s: required", prefix);
        *out = NULL;
        *len = 0;
        return -1;
    }
    return render(NULL, v, prefix, out, len, err, errlen);
}

/* ---- JSON -> Struct ---- */

static Google__Protobuf__Struct *to_struct(arena *a, json_t *obj);

static Google__Protobuf__Value *to_value(arena *a, json_t *j) {
    Google__Protobuf__Value *v = arena_message(a, &google__protobuf__value__descriptor);
    if (!v) return NULL;
    switch (json_typeof(j)) {
    case JSON_NULL:
        v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_NULL_VALUE;
        v->null_value = GOOGLE__PROTOBUF__NULL_VALUE__NULL_VALUE;
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE;
        v->bool_value = json_is_true(j);
        break;
    case JSON_INTEGER:
    case JSON_REAL:
        v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE;
        v->number_value = json_number_value(j);
        break;
    case JSON_STRING:
        v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
        v->string_value = arena_strndup(a, json_string_value(j), json_string_length(j));
        if (!v->string_value) return NULL;
        break;
    case JSON_OBJECT:
        v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRUCT_VALUE;
        if (!(v->struct_value = to_struct(a, j))) return NULL;
        break;
    case JSON_ARRAY: {
        Google__Protobuf__ListValue *l =
            arena_message(a, &google__protobuf__list_value__descriptor);
        if (!l) return NULL;
        size_t n = json_array_size(j);
        l->values = arena_alloc(a, (n ? n : 1) * sizeof *l->values);
        if (!l->values) return NULL;
        for (size_t i = 0; i < n; i++)
            if (!(l->values[i] = to_value(a, json_array_get(j, i)))) return NULL;
        l->n_values = n;
        v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_LIST_VALUE;
        v->list_value = l;
        break;
    }
    default: return NULL;
    }
    return v;
}

static Google__Protobuf__Struct *to_struct(arena *a, json_t *obj) {
    Google__Protobuf__Struct *s = arena_message(a, &google__protobuf__struct__descriptor);
    if (!s) return NULL;
    size_t n = json_object_size(obj), i = 0;
    s->fields = arena_alloc(a, (n ? n : 1) * sizeof *s->fields);
    if (!s->fields) return NULL;
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        Google__Protobuf__Struct__FieldsEntry *f =
            arena_message(a, &google__protobuf__struct__fields_entry__descriptor);
        if (!f) return NULL;
        if (!(f->key = arena_strdup(a, key)) || !(f->value = to_value(a, val))) return NULL;
        s->fields[i++] = f;
    }
    s->n_fields = i;
    return s;
}

Google__Protobuf__Struct *pbjson_json_to_struct(arena *a, json_t *obj) {
    return json_is_object(obj) ? to_struct(a, obj) : NULL;
}

int pbjson_to_struct(arena *a, const char *json, size_t len, Google__Protobuf__Struct **out) {
    *out = NULL;
    json_error_t jerr;
    json_t *j = json_loadb(json, len, JSON_DECODE_INT_AS_REAL, &jerr);
    if (!j) return -1;
    if (json_is_object(j)) *out = to_struct(a, j);
    json_decref(j);
    return *out ? 0 : -1;
}

int pbjson_to_value(arena *a, const char *json, size_t len, Google__Protobuf__Value **out) {
    json_error_t jerr;
    json_t *j = json_loadb(json, len, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &jerr);
    *out = j ? to_value(a, j) : NULL;
    json_decref(j);
    return *out ? 0 : -1;
}

/* A deep copy through the wire form, in arena a. */
static ProtobufCMessage *message_copy(arena *a, const ProtobufCMessage *m) {
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = arena_alloc(a, n ? n : 1);
    if (!buf) return NULL;
    protobuf_c_message_pack(m, buf);
    return protobuf_c_message_unpack(m->descriptor, arena_protobuf_allocator(a), n, buf);
}

Google__Protobuf__Struct *pbjson_struct_copy(arena *a, const Google__Protobuf__Struct *st) {
    return (Google__Protobuf__Struct *)message_copy(a, &st->base);
}

Google__Protobuf__Value *pbjson_value_copy(arena *a, const Google__Protobuf__Value *v) {
    return (Google__Protobuf__Value *)message_copy(a, &v->base);
}
