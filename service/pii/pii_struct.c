/* pii_struct: PII detection over fields and Struct payloads; see
 * pii_struct.h. */
#include "service/pii/pii_struct.h"

#include <stdio.h>
#include <string.h>

#include "service/pii/pii.h"

void pii_findings_init(pii_findings *f) { memset(f, 0, sizeof *f); }

static void note(pii_findings *f, const char *path, unsigned kinds) {
    f->kinds |= kinds;
    if (f->n < PII_MAX_FINDINGS) {
        f->at[f->n].kinds = kinds;
        snprintf(f->at[f->n].path, PII_PATH_MAX, "%s", path);
        f->n++;
    }
    f->total++;
}

void pii_scan_field(pii_findings *f, const char *path, const char *s, size_t n) {
    unsigned kinds = pii_scan(s, n, NULL, 0, NULL);
    if (kinds) note(f, path, kinds);
}

static int scan_value(pii_findings *f, char *path, size_t plen, const Google__Protobuf__Value *v,
                      int depth);

static int scan_struct(pii_findings *f, char *path, size_t plen, const Google__Protobuf__Struct *st,
                       int depth) {
    if (depth > PII_MAX_DEPTH) return -1;
    for (size_t i = 0; st && i < st->n_fields; i++) {
        const Google__Protobuf__Struct__FieldsEntry *e = st->fields[i];
        const char *key = e->key ? e->key : "";
        int w = snprintf(path + plen, PII_PATH_MAX - plen, ".%s", key);
        size_t np = plen + (w > 0 ? (size_t)w : 0);
        if (np >= PII_PATH_MAX) np = PII_PATH_MAX - 1;
        unsigned kinds = pii_scan(key, strlen(key), NULL, 0, NULL);
        /* A key holding PII is reported at its parent's path: the path
         * itself would repeat the PII in the error message. */
        if (kinds) {
            char saved = path[plen];
            path[plen] = '\0';
            char where[PII_PATH_MAX];
            snprintf(where, sizeof where, "%s (a key)", path);
            path[plen] = saved;
            note(f, where, kinds);
            np = plen + (size_t)snprintf(path + plen, PII_PATH_MAX - plen, ".<key>");
            if (np >= PII_PATH_MAX) np = PII_PATH_MAX - 1;
        }
        if (scan_value(f, path, np, e->value, depth + 1) != 0) return -1;
        path[plen] = '\0';
    }
    return 0;
}

static int scan_value(pii_findings *f, char *path, size_t plen, const Google__Protobuf__Value *v,
                      int depth) {
    if (!v) return 0;
    if (depth > PII_MAX_DEPTH) return -1;
    switch (v->kind_case) {
    case GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE:
        if (v->string_value) pii_scan_field(f, path, v->string_value, strlen(v->string_value));
        return 0;
    case GOOGLE__PROTOBUF__VALUE__KIND_STRUCT_VALUE:
        return scan_struct(f, path, plen, v->struct_value, depth + 1);
    case GOOGLE__PROTOBUF__VALUE__KIND_LIST_VALUE:
        for (size_t i = 0; v->list_value && i < v->list_value->n_values; i++) {
            int w = snprintf(path + plen, PII_PATH_MAX - plen, "[%zu]", i);
            size_t np = plen + (w > 0 ? (size_t)w : 0);
            if (np >= PII_PATH_MAX) np = PII_PATH_MAX - 1;
            if (scan_value(f, path, np, v->list_value->values[i], depth + 1) != 0) return -1;
            path[plen] = '\0';
        }
        return 0;
    default: return 0;
    }
}

int pii_scan_struct(pii_findings *f, const char *root, const Google__Protobuf__Struct *st) {
    char path[PII_PATH_MAX];
    snprintf(path, sizeof path, "%s", root);
    return scan_struct(f, path, strlen(path), st, 0);
}

int pii_scan_value(pii_findings *f, const char *root, const Google__Protobuf__Value *v) {
    char path[PII_PATH_MAX];
    snprintf(path, sizeof path, "%s", root);
    return scan_value(f, path, strlen(path), v, 0);
}

void pii_findings_format(const pii_findings *f, char *out, size_t outlen) {
    size_t used = 0;
    if (outlen == 0) return;
    out[0] = '\0';
    for (size_t i = 0; i < f->n && used < outlen; i++) {
        const char *names[PII_KIND_COUNT];
        size_t nn = pii_kind_names(f->at[i].kinds, names, PII_KIND_COUNT);
        for (size_t k = 0; k < nn && used < outlen; k++)
            used +=
                (size_t)snprintf(out + used, outlen - used, "%s%s", (i || k) ? ", " : "", names[k]);
        if (used < outlen)
            used += (size_t)snprintf(out + used, outlen - used, " at %s", f->at[i].path);
    }
    if (f->total > f->n && used < outlen)
        snprintf(out + used, outlen - used, " and %zu more", f->total - f->n);
}

const char *pii_redact_arena(arena *a, const char *s, size_t n, size_t *outlen) {
    unsigned kinds = 0;
    size_t need = pii_redact(s, n, NULL, 0, &kinds);
    if (!kinds) {
        *outlen = n;
        return s;
    }
    char *out = arena_alloc(a, need + 1);
    if (!out) return NULL;
    pii_redact(s, n, out, need + 1, NULL);
    *outlen = need;
    return out;
}

static int redact_value(arena *a, Google__Protobuf__Value *v, int depth);

static int redact_struct(arena *a, Google__Protobuf__Struct *st, int depth) {
    if (depth > PII_MAX_DEPTH) return -1;
    for (size_t i = 0; st && i < st->n_fields; i++) {
        Google__Protobuf__Struct__FieldsEntry *e = st->fields[i];
        if (e->key) {
            size_t len;
            const char *r = pii_redact_arena(a, e->key, strlen(e->key), &len);
            if (!r) return -1;
            e->key = (char *)r;
        }
        if (redact_value(a, e->value, depth + 1) != 0) return -1;
    }
    return 0;
}

static int redact_value(arena *a, Google__Protobuf__Value *v, int depth) {
    if (!v) return 0;
    if (depth > PII_MAX_DEPTH) return -1;
    switch (v->kind_case) {
    case GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE: {
        if (!v->string_value) return 0;
        size_t len;
        const char *r = pii_redact_arena(a, v->string_value, strlen(v->string_value), &len);
        if (!r) return -1;
        v->string_value = (char *)r;
        return 0;
    }
    case GOOGLE__PROTOBUF__VALUE__KIND_STRUCT_VALUE:
        return redact_struct(a, v->struct_value, depth + 1);
    case GOOGLE__PROTOBUF__VALUE__KIND_LIST_VALUE:
        for (size_t i = 0; v->list_value && i < v->list_value->n_values; i++)
            if (redact_value(a, v->list_value->values[i], depth + 1) != 0) return -1;
        return 0;
    default: return 0;
    }
}

int pii_redact_struct(arena *a, Google__Protobuf__Struct *st) { return redact_struct(a, st, 0); }

int pii_redact_value(arena *a, Google__Protobuf__Value *v) { return redact_value(a, v, 0); }
