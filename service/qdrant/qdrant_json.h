/* qdrant_json (qj_): the JSON side of the Qdrant backend — request bodies
 * for Qdrant's REST API and parsers for its answers, with no I/O, so unit
 * tests and tests/fuzz/qdrant_json_fuzz.c feed them bytes directly
 * (qdrant_store.c does the HTTP).
 *
 * Point layout in Qdrant: the payload of every point is
 *   {"payload": <the user's payload object>,
 *    "memoryd": {"tenant": T, "owner": O, "label": 1..4, "version": V,
 *                "created_us": N, "updated_us": N, "pii_kinds": [...]}}
 * so user filter keys are prefixed ("a.b[].c" -> "payload.a.b[].c") and the
 * read diode filters on "memoryd.*".
 *
 * Builders write a malloc'd, NUL-terminated body into *out (the caller
 * free()s it; *out is NULL on error) and return STATUS_OK, STATUS_EINVALID (an input
 * Qdrant cannot take: a non-finite number, text that is not UTF-8, a filter
 * condition with no Qdrant form) or STATUS_ENOMEM, with a message in err.
 *
 * Parsers take the raw response bytes (any bytes: they never read outside
 * body[0..len) and recurse at most QDRANT_JSON_MAX_DEPTH levels) and return STATUS_OK, or
 * STATUS_EINTERNAL for an answer that is not what the Qdrant API promises
 * (malformed JSON, wrong types, a point without valid memoryd metadata: a
 * corrupt point), or STATUS_ENOMEM, with a message in err. Results live in the
 * arena passed in, except payloads, which are jansson references the caller
 * owns (vs_points_release / vs_hits_release); on error nothing is handed
 * out and every reference taken is dropped. */
#ifndef MEMORYD_QDRANT_QDRANT_JSON_H
#define MEMORYD_QDRANT_QDRANT_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/v1/common.pb-c.h"
#include "service/core/arena.h"
#include "service/vstore/vstore.h"

/* Deepest nesting accepted in an answer. A user payload comes from a
 * google.protobuf.Struct, which protobuf decoding already limits to 50 JSON
 * levels (PB_CHECK_MAX_DEPTH 100 messages, two per level); the envelope adds
 * six. Checked before jansson parses, so nothing recurses deeper. */
#define QDRANT_JSON_MAX_DEPTH 128
/* Deepest filter nesting emitted (the API allows 8, checked by the caller
 * with episodic_filter_check; this only bounds our own recursion). */
#define QDRANT_JSON_MAX_FILTER_DEPTH 16
/* At most this many pii_kinds per point, each at most QDRANT_JSON_MAX_PII_LEN bytes. */
#define QDRANT_JSON_MAX_PII 64
#define QDRANT_JSON_MAX_PII_LEN 64

/* Which payload to ask Qdrant for. Every read asks for the memoryd
 * metadata at least (the read diode is checked again on the way out). */
#define QDRANT_JSON_PAYLOAD_META 0 /* {"include":["memoryd"]} */
#define QDRANT_JSON_PAYLOAD_ALL 1  /* true: the user payload too */

/* A Qdrant server version from GET /. */
typedef struct qdrant_json_version {
    int major, minor, patch;
} qdrant_json_version;

/* 1 if v is at least major.minor. */
int qdrant_json_version_at_least(const qdrant_json_version *v, int major, int minor);

/* The read diode (and id list) every read filter starts with: the points of
 * tenant, owned by owner (NULL: any owner), with label <= clr, and (nids >
 * 0) with one of ids. Strings and ids borrowed. */
typedef struct qdrant_json_scope {
    const char *tenant;
    const char *owner;
    int clr;
    const vs_id *ids;
    size_t nids;
    int64_t updated_before_us;      /* memoryd.updated_us below it; 0: any (erasures) */
    const tier_time_range *updated; /* memoryd.updated_us in it; NULL: any (searches) */
} qdrant_json_scope;

/* What a points parser expects and hands out. */
typedef struct qdrant_json_read {
    const char *tenant; /* memoryd.tenant of every point must equal it */
    int dims;           /* vector length, checked when with_vector */
    int with_payload;   /* hand out the user payload (a new reference) */
    int with_vector;    /* decode the vector (into the arena) */
} qdrant_json_read;

/* ---- request bodies ---- */

/* The Qdrant Filter object: the scope's conditions as `must`, with the user
 * filter f (NULL or empty: none) as one nested Filter condition inside that
 * `must`, so its should / must_not keep their meaning:
 *   {"must":[{"key":"memoryd.tenant","match":{"value":T}},
 *            {"key":"memoryd.owner","match":{"value":O}},   (owner != NULL)
 *            {"key":"memoryd.label","range":{"lte":clr}},
 *            {"has_id":[...]},                                (nids > 0)
 *            {<f mapped>}]}                                   (f not empty)
 * f's keys get the "payload." prefix. f must have passed episodic_filter_check;
 * what still has no Qdrant form (booleans in match_any / match_except, a
 * non-integral match value, ...) is STATUS_EINVALID. */
int qdrant_json_filter(const qdrant_json_scope *s, const Memory__V1__Filter *f, char **out,
                       size_t *len, char *err, size_t errlen);

/* PUT /collections/{name}: {"vectors":{"size":dims,"distance":"Cosine"}}. */
int qdrant_json_create_collection(int dims, int distance, char **out, size_t *len, char *err,
                                  size_t errlen);

/* PUT /collections/{name}/index: an index on field of kind
 * QDRANT_JSON_INDEX_KEYWORD, QDRANT_JSON_INDEX_TENANT (a keyword index marked `"is_tenant":
 * true`, which servers before 1.11 do not know: plain "keyword" for them)
 * or QDRANT_JSON_INDEX_INTEGER. */
#define QDRANT_JSON_INDEX_KEYWORD 0
#define QDRANT_JSON_INDEX_TENANT 1
#define QDRANT_JSON_INDEX_INTEGER 2
int qdrant_json_payload_index(const char *field, int kind, const qdrant_json_version *v, char **out,
                              size_t *len, char *err, size_t errlen);

/* PUT /collections/{name}/points: {"points":[{"id","vector","payload"}]},
 * each payload in the layout above with metas[i] (stamped by vs_stamp) and
 * pts[i].pii_kinds. Vectors must have dims finite components. */
int qdrant_json_upsert(const char *tenant, int dims, const vs_point_in *pts, const tier_meta *metas,
                       size_t n, char **out, size_t *len, char *err, size_t errlen);

/* POST /collections/{name}/points (retrieve):
 * {"ids":[...],"with_payload":...,"with_vector":bool}. */
int qdrant_json_retrieve(const vs_id *ids, size_t n, int payload, int with_vector, char **out,
                         size_t *len, char *err, size_t errlen);

/* POST .../points/query (legacy_search == 0, servers 1.10+):
 * {"query":[...],"filter":...,"limit","offset","score_threshold",
 *  "with_payload","with_vector"}; legacy_search: POST .../points/search,
 * the same with "vector" instead of "query". q->filter is the user filter,
 * wrapped in s. */
int qdrant_json_query(const qdrant_json_scope *s, const vs_search *q, int dims, int legacy_search,
                      char **out, size_t *len, char *err, size_t errlen);

/* POST .../points/scroll: {"filter":...,"limit":n,"offset":<id>,
 * "with_payload":...,"with_vector":bool}; offset NULL: from the start. */
int qdrant_json_scroll(const qdrant_json_scope *s, const Memory__V1__Filter *f, int limit,
                       const vs_id *offset, int payload, int with_vector, char **out, size_t *len,
                       char *err, size_t errlen);

/* POST .../points/count: {"filter":...,"exact":bool}. */
int qdrant_json_count(const qdrant_json_scope *s, const Memory__V1__Filter *f, int exact,
                      char **out, size_t *len, char *err, size_t errlen);

/* POST .../points/delete: {"points":[ids]}. */
int qdrant_json_delete(const vs_id *ids, size_t n, char **out, size_t *len, char *err,
                       size_t errlen);

/* ---- answers ---- */

/* Parses body as JSON with Qdrant's quirks handled: integers above
 * INT64_MAX (jansson stores only signed 64-bit integers and refuses
 * bigger ones) become decimal strings outside any "payload" object (where
 * only point ids and scroll offsets can be that large; qdrant_json_parse_id takes
 * them back) and reals inside one; nesting is limited to QDRANT_JSON_MAX_DEPTH.
 * *out is a new reference. */
int qdrant_json_load(const char *body, size_t len, json_t **out, char *err, size_t errlen);

/* The envelope of a 2xx answer: {"result": R, "status": "ok", ...}
 * (unknown keys ignored). *result is a new reference to R. An error
 * envelope ({"status":{"error":...}}) is STATUS_EINTERNAL naming the error. */
int qdrant_json_parse_envelope(const char *body, size_t len, json_t **result, char *err,
                               size_t errlen);

/* The text of a failed answer for an error message, into out (always
 * NUL-terminated, never fails): status.error of a JSON error envelope, or
 * else the body itself (Qdrant's 401/403 are text/plain); only printable
 * ASCII is kept (others become '?'), cut to fit with "..." at the end;
 * "(empty body)" when there is nothing. */
void qdrant_json_error_text(const char *body, size_t len, char *out, size_t outlen);

/* GET / (no envelope): {"title":...,"version":"1.19.0",...}. */
int qdrant_json_parse_version(const char *body, size_t len, qdrant_json_version *v, char *err,
                              size_t errlen);

/* GET /collections/{name}: the single unnamed vector's size and distance
 * (VS_COSINE / VS_DOT / VS_EUCLID); named vectors or another distance are
 * STATUS_EINTERNAL (not a collection memoryd made). */
int qdrant_json_parse_collection(const char *body, size_t len, int *dims, int *distance, char *err,
                                 size_t errlen);

/* PUT / DELETE /collections/{name}: {"result": true|false} into *value. */
int qdrant_json_parse_bool(const char *body, size_t len, int *value, char *err, size_t errlen);

/* An UpdateResult (upsert, delete, index): "completed" or "acknowledged"
 * are STATUS_OK (acknowledged: in Qdrant's WAL, applied in order); "wait_timeout"
 * is STATUS_ETIMEOUT. */
int qdrant_json_parse_update(const char *body, size_t len, char *err, size_t errlen);

/* POST .../points/count: {"result":{"count":N}}. */
int qdrant_json_parse_count(const char *body, size_t len, int64_t *count, char *err, size_t errlen);

/* ScoredPoints of a query ({"result":{"points":[...]}}) or, legacy_search,
 * of a search ({"result":[...]}), in Qdrant's order. *out in a. */
int qdrant_json_parse_hits(const char *body, size_t len, const qdrant_json_read *r,
                           int legacy_search, arena *a, vs_hit **out, size_t *n, char *err,
                           size_t errlen);

/* Records of a retrieve ({"result":[...]}) or, scroll != 0, of a scroll
 * ({"result":{"points":[...],"next_page_offset":id|null}}: *has_next and
 * *next set; both may be NULL for a retrieve). *out in a. */
int qdrant_json_parse_records(const char *body, size_t len, const qdrant_json_read *r, int scroll,
                              arena *a, vs_point **out, size_t *n, vs_id *next, int *has_next,
                              char *err, size_t errlen);

/* A point id: a JSON integer >= 0, a UUID string (any case; stored lower
 * case) or a decimal string (what qdrant_json_load makes of ids > INT64_MAX). */
int qdrant_json_parse_id(const json_t *j, vs_id *out);

/* The memoryd metadata of a point's payload object (borrowed): memoryd.tenant
 * must equal tenant; strings are copied into a. A missing or malformed
 * object is STATUS_EINTERNAL (a corrupt point). */
int qdrant_json_parse_meta(const json_t *payload, const char *tenant, arena *a, tier_meta *out,
                           char *err, size_t errlen);

/* "Cosine" / "Dot" / "Euclid" for VS_COSINE / VS_DOT / VS_EUCLID, NULL
 * otherwise; and back (0 when unknown). */
const char *qdrant_json_distance_name(int distance);
int qdrant_json_distance_parse(const char *name);

#endif
