/* global_query: property predicates -> SQL; see global_query.h.
 *
 * Each predicate reads the value at its path once per row as
 * (properties #> $path). Branches that would fail on the wrong JSON type
 * (jsonb -> numeric casts, jsonb_array_elements) sit inside CASE, whose
 * evaluation order PostgreSQL guarantees, so a property of an unexpected
 * type simply does not match. EQ also adds `properties @> {"a":{"b":v}}`
 * when the path has no numeric segment: implied by the equality, and
 * answerable from the GIN (jsonb_path_ops) index. */
#include "service/global/global_query.h"

#include <stdio.h>
#include <string.h>

#include "memory/v1/common.pb-c.h"

static int bad(char *why, size_t whylen, const char *fmt, const char *a, const char *b) {
    snprintf(why, whylen, fmt, a, b);
    return STATUS_EINVALID;
}

/* JSON string literal for s (quotes and escapes), in the arena. */
static char *json_quote(arena *a, const char *s) {
    size_t n = strlen(s);
    char *out = arena_alloc(a, 6 * n + 3), *w = out;
    if (!out) return NULL;
    *w++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *w++ = '\\';
            *w++ = (char)c;
        } else if (c < 0x20) {
            w += sprintf(w, "\\u%04x", c);
        } else {
            *w++ = (char)c;
        }
    }
    *w++ = '"';
    *w = '\0';
    return out;
}

int global_path_parse(arena *a, const char *path, const char *value_json, const char **pg_path,
                      const char **nested, char *why, size_t whylen) {
    size_t len = strlen(path);
    if (len == 0) return bad(why, whylen, "path: required%s%s", "", "");
    long chars = 0;
    for (size_t i = 0; i < len; i++) chars += ((unsigned char)path[i] & 0xc0) != 0x80;
    if (chars > GLOBAL_PATH_MAX_CHARS)
        return bad(why, whylen, "path: longer than 256 characters%s%s", "", "");
    const char *segs[GLOBAL_PATH_MAX_SEGMENTS];
    size_t nseg = 0;
    int numeric_seen = 0;
    char *copy = arena_strndup(a, path, len);
    if (!copy) return STATUS_ENOMEM;
    for (char *p = copy;;) {
        char *dot = strchr(p, '.');
        if (dot) *dot = '\0';
        if (!*p) return bad(why, whylen, "path: \"%s\" has an empty segment%s", path, "");
        if (nseg == GLOBAL_PATH_MAX_SEGMENTS)
            return bad(why, whylen, "path: \"%s\" has more than 16 segments%s", path, "");
        int numeric = 1;
        for (const char *c = p; *c; c++) numeric &= *c >= '0' && *c <= '9';
        numeric_seen |= numeric;
        segs[nseg++] = p;
        if (!dot) break;
        p = dot + 1;
    }
    if (!(*pg_path = pgq_array_literal(a, segs, nseg))) return STATUS_ENOMEM;
    if (!nested) return 0;
    *nested = NULL;
    if (numeric_seen || !value_json) return 0;
    /* {"s0":{"s1":...value...}} */
    size_t cap = strlen(value_json) + 3;
    const char *quoted[GLOBAL_PATH_MAX_SEGMENTS];
    for (size_t i = 0; i < nseg; i++) {
        if (!(quoted[i] = json_quote(a, segs[i]))) return STATUS_ENOMEM;
        cap += strlen(quoted[i]) + 3;
    }
    char *doc = arena_alloc(a, cap), *w = doc;
    if (!doc) return STATUS_ENOMEM;
    for (size_t i = 0; i < nseg; i++) w += sprintf(w, "{%s:", quoted[i]);
    w += sprintf(w, "%s", value_json);
    for (size_t i = 0; i < nseg; i++) *w++ = '}';
    *w = '\0';
    *nested = doc;
    return 0;
}

static const char *op_name(int op) {
    switch (op) {
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EQ: return "EQ";
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_NE: return "NE";
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_LT: return "LT";
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_LE: return "LE";
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_GT: return "GT";
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_GE: return "GE";
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_CONTAINS: return "CONTAINS";
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EXISTS: return "EXISTS";
    default: return NULL;
    }
}

int global_pred_sql(pgq_sql *b, arena *a, size_t index, const global_pred *p, char *why,
                    size_t whylen) {
    char at[32];
    snprintf(at, sizeof at, "predicates[%zu]", index);
    const char *name = op_name(p->op);
    if (!name)
        return bad(why, whylen,
                   "%s.op: %s is not a comparison (EQ, NE, LT, LE, GT, GE, "
                   "CONTAINS or EXISTS)",
                   at, p->op == 0 ? "PREDICATE_OP_UNSPECIFIED" : "an unknown value");
    int exists = p->op == MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EXISTS;
    if (!exists && (p->kind == GLOBAL_KIND_NONE || !p->value_json))
        return bad(why, whylen, "%s.value: required for %s", at, name);
    int ordering = p->op >= MEMORY__V1__PREDICATE_OP__PREDICATE_OP_LT &&
                   p->op <= MEMORY__V1__PREDICATE_OP__PREDICATE_OP_GE;
    if (ordering && p->kind != GLOBAL_KIND_NUMBER && p->kind != GLOBAL_KIND_STRING)
        return bad(why, whylen, "%s.value: %s compares numbers or strings only", at, name);
    const char *pg_path, *nested = NULL;
    char pwhy[160];
    int rc = global_path_parse(a, p->path, exists ? NULL : p->value_json, &pg_path,
                               p->op == MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EQ ? &nested : NULL,
                               pwhy, sizeof pwhy);
    if (rc == STATUS_ENOMEM) return STATUS_ENOMEM;
    if (rc != 0) return bad(why, whylen, "%s.%s", at, pwhy);
    int pp = pgq_text_array(b, pg_path);
#define X "(properties #> $%d)"
    if (exists) {
        pgq_sql_add(b, " AND " X " IS NOT NULL", pp);
        return 0;
    }
    int pv = pgq_jsonb(b, p->value_json);
    switch (p->op) {
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EQ:
        if (nested) pgq_sql_add(b, " AND properties @> $%d", pgq_jsonb(b, nested));
        pgq_sql_add(b, " AND " X " = $%d", pp, pv);
        break;
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_NE:
        pgq_sql_add(b, " AND " X " IS DISTINCT FROM $%d", pp, pv);
        break;
    case MEMORY__V1__PREDICATE_OP__PREDICATE_OP_CONTAINS:
        pgq_sql_add(b,
                    " AND CASE jsonb_typeof" X
                    " WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements" X
                    " AS el(v) WHERE el.v = $%d)"
                    " WHEN 'object' THEN jsonb_typeof($%d) = 'object' AND " X " @> $%d"
                    " WHEN 'string' THEN jsonb_typeof($%d) = 'string'"
                    " AND strpos(properties #>> $%d, $%d #>> '{}') > 0"
                    " ELSE false END",
                    pp, pp, pv, pv, pp, pv, pv, pp, pv);
        break;
    default: {
        const char *cmp = p->op == MEMORY__V1__PREDICATE_OP__PREDICATE_OP_LT   ? "<"
                          : p->op == MEMORY__V1__PREDICATE_OP__PREDICATE_OP_LE ? "<="
                          : p->op == MEMORY__V1__PREDICATE_OP__PREDICATE_OP_GT ? ">"
                                                                               : ">=";
        if (p->kind == GLOBAL_KIND_NUMBER)
            pgq_sql_add(b,
                        " AND CASE WHEN jsonb_typeof" X " = 'number'"
                        " THEN " X "::numeric %s $%d::numeric ELSE false END",
                        pp, pp, cmp, pv);
        else
            pgq_sql_add(b,
                        " AND CASE WHEN jsonb_typeof" X " = 'string'"
                        " THEN (properties #>> $%d) COLLATE \"C\" %s ($%d #>> '{}') COLLATE \"C\""
                        " ELSE false END",
                        pp, pp, cmp, pv);
        break;
    }
    }
#undef X
    return 0;
}
