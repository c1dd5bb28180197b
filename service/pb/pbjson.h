/* pbjson: google.protobuf.Struct / Value <-> JSON text (jansson), the form
 * JSON payloads are stored in (jsonb: entry metadata, entity properties,
 * task provenance). Numbers are doubles both ways: whole numbers below
 * 2^53 print as integers, others with 17 significant digits, so every
 * finite double comes back bit for bit; NaN and infinities have no JSON
 * form and are refused.
 * Pure functions (no I/O), so tests and fuzzers can feed them bytes. */
#ifndef MEMORYD_PB_PBJSON_H
#define MEMORYD_PB_PBJSON_H

#include <jansson.h>
#include <stddef.h>

#include "google/protobuf/struct.pb-c.h"
#include "service/core/arena.h"

/* Renders s (may be NULL: "{}") as compact JSON into *out, malloc'd and
 * NUL-terminated, owned by the caller (free()); *len is its length.
 * Returns 0, or -1 with err naming the offending path below prefix (e.g.
 * "metadata.a.b[2]: NaN is not valid JSON") and *out NULL. */
int pbjson_from_struct(const Google__Protobuf__Struct *s, const char *prefix, char **out,
                       size_t *len, char *err, size_t errlen);

/* The same for one Value (any kind: "1", "\"x\"", "[...]", "null"). A
 * NULL v is an error naming prefix as required. */
int pbjson_from_value(const Google__Protobuf__Value *v, const char *prefix, char **out, size_t *len,
                      char *err, size_t errlen);

/* The same as a jansson object (s NULL: {}), a new reference owned by the
 * caller; NULL with err as above. */
json_t *pbjson_struct_to_json(const Google__Protobuf__Struct *s, const char *prefix, char *err,
                              size_t errlen);

/* A jansson object as a Struct in arena a (obj is only read); NULL when
 * obj is not an object or out of memory. */
Google__Protobuf__Struct *pbjson_json_to_struct(arena *a, json_t *obj);

/* Parses a JSON object into a Struct allocated in arena a. Returns 0, or
 * -1 when json is not an object (or out of memory). */
int pbjson_to_struct(arena *a, const char *json, size_t len, Google__Protobuf__Struct **out);

/* Parses any JSON value (object, array, string, number, true, false,
 * null) into a Value allocated in arena a. Returns 0, or -1 when json is
 * not JSON (or out of memory). */
int pbjson_to_value(arena *a, const char *json, size_t len, Google__Protobuf__Value **out);

/* A deep copy of st in arena a (so it can be changed, e.g. redacted,
 * without touching the request); NULL when out of memory. */
Google__Protobuf__Struct *pbjson_struct_copy(arena *a, const Google__Protobuf__Struct *st);
/* The same for a Value. */
Google__Protobuf__Value *pbjson_value_copy(arena *a, const Google__Protobuf__Value *v);

#endif
