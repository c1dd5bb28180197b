/* global_query: QueryEntities' property predicates (memory.v1.
 * PropertyPredicate) validated and turned into SQL fragments over the
 * `properties` jsonb column, with every operand a parameter. No I/O: tests
 * and fuzzers drive it directly.
 *
 * Semantics (common.proto PredicateOp), x being the value at the path:
 *   EQ        x = value as JSON (jsonb equality: 1 = 1.0, "1" <> 1)
 *   NE        x absent or x <> value
 *   LT..GE    numbers compare numerically, strings by byte order; x of
 *             another type does not match; value must be a number or a
 *             string
 *   CONTAINS  x an array with an element equal to value; x an object
 *             containing value (an object) as a sub-document; x a string
 *             containing value (a string), case-sensitively
 *   EXISTS    x present (JSON null included); value ignored
 * Paths: dot-separated keys, 1-256 characters, 1-16 segments, no empty
 * segment; a segment of decimal digits also indexes arrays. */
#ifndef MEMORYD_GLOBAL_GLOBAL_QUERY_H
#define MEMORYD_GLOBAL_GLOBAL_QUERY_H

#include <stddef.h>

#include "service/core/arena.h"
#include "service/core/status.h"
#include "service/store/pgq.h"

#define GLOBAL_PATH_MAX_CHARS 256
#define GLOBAL_PATH_MAX_SEGMENTS 16

/* Kinds of a predicate operand (google.protobuf.Value kinds). */
typedef enum global_kind {
    GLOBAL_KIND_NONE = 0,
    GLOBAL_KIND_NULL,
    GLOBAL_KIND_NUMBER,
    GLOBAL_KIND_STRING,
    GLOBAL_KIND_BOOL,
    GLOBAL_KIND_OBJECT,
    GLOBAL_KIND_LIST,
} global_kind;

/* One predicate as the service hands it over. op is a memory.v1.
 * PredicateOp value; value_json is the operand as JSON text (NULL when the
 * request had none). */
typedef struct global_pred {
    const char *path;
    int op;
    global_kind kind;
    const char *value_json;
} global_pred;

/* Splits path (valid UTF-8: the service checks) into segments; on 0 *pg_path is the PostgreSQL
 * text[] literal for `#>` in arena a, and *nested (may be NULL) is the JSON object
 * {"a":{"b":<value_json>}} for a containment prefilter, NULL when a segment is numeric (it may
 * index an array). Returns STATUS_OK, STATUS_EINVALID with why
 * ("path: ...") on a bad path, or STATUS_ENOMEM. */
int global_path_parse(arena *a, const char *path, const char *value_json, const char **pg_path,
                      const char **nested, char *why, size_t whylen);

/* Appends " AND <predicate>" to b, parameters to q. Returns STATUS_OK,
 * STATUS_EINVALID with why (op/value mismatch, bad path; why names the
 * predicate's index as "predicates[i]") or STATUS_ENOMEM. */
int global_pred_sql(pgq_sql *b, arena *a, size_t index, const global_pred *p, char *why,
                    size_t whylen);

#endif
