/* vstore: the episodic tier's vector-store interface. A backend is a struct
 * of function pointers (vstore_ops) behind an opaque handle; the service
 * never knows which one it talks to. Two backends exist: the embedded
 * exact index with points durable in PostgreSQL (episodic_embedded, the
 * default) and Qdrant over REST (qdrant_store, when a Qdrant URL is
 * configured).
 *
 * Contract every backend keeps:
 * - Collections belong to the caller's tenant; names are unique in it.
 * - Reads (search, get, scroll, count, delete by filter) apply the read
 *   diode of the call (tenant, owner unless ctx->read_breadth is
 *   PRINCIPAL_ALL, label <= clr) inside the backend query, so limits,
 *   offsets, cursors and counts never see hidden points.
 * - Writes apply the write diode through vs_stamp: an existing point the
 *   caller may not modify fails the whole call with STATUS_EDENIED and nothing
 *   is written.
 * - Inputs are validated by the caller (dimensions, finite components,
 *   filters, sizes): a backend checks only what it needs for safety.
 *
 * Every operation takes the call's tier_ctx (tier "episodic": its read and
 * write breadths say how far the diodes reach). Results live in ctx->ar
 * except payloads, which are jansson references the caller must
 * json_decref (vs_points_release does it for an array). Functions return
 * STATUS_OK or a negative STATUS_E* code with a message in ctx->err. */
#ifndef MEMORYD_VSTORE_VSTORE_H
#define MEMORYD_VSTORE_VSTORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/v1/common.pb-c.h"
#include "service/auth/principal.h"
#include "service/core/arena.h"
#include "service/core/status.h"
#include "service/tier/tier_ctx.h"
#include "service/tier/tier_meta.h"
#include "service/tier/tier_record.h"

/* Distances: the memory.v1.Distance values. */
#define VS_COSINE 1
#define VS_DOT 2
#define VS_EUCLID 3

#define VS_MAX_DIMS 65536
#define VS_NAME_MAX 64

/* A point id: an unsigned integer, or a UUID when uuid[0] != '\0'
 * (canonical lower-case text, 36 characters). */
typedef struct vs_id {
    uint64_t num;
    char uuid[37];
} vs_id;

/* Total order used for ties: integers (ascending) before UUIDs (byte
 * order). */
int vs_id_cmp(const vs_id *a, const vs_id *b);
/* "42" or the UUID text into buf (at least 37 bytes); returns buf. */
const char *vs_id_text(const vs_id *id, char *buf);
/* Parses what vs_id_text writes (a decimal integer without sign or leading
 * zeros, or a UUID in any case). Returns 0 or -1. */
int vs_id_parse(const char *s, vs_id *out);
/* Parses a UUID in canonical hyphenated form, any case, into out
 * (lower-cased). Returns 0 or -1. */
int vs_uuid_parse(const char *s, vs_id *out);

/* A collection (strings in ctx->ar). */
typedef struct vs_collection {
    int64_t cid; /* catalog id: a re-created collection gets a new one */
    const char *name;
    int dims;
    int distance;
    const char *owner;
    int64_t created_us;         /* unix microseconds */
    const char *embedder_model; /* whose vectors fill it; NULL: none recorded */
} vs_collection;

/* A stored point as a read returns it. vector is NULL unless asked for
 * (or the point has none); payload is NULL unless asked for (then a
 * reference the caller owns), and text comes with it (NULL: none). */
typedef struct vs_point {
    vs_id id;
    const float *vector;
    json_t *payload;
    const char *text;
    tier_meta meta; /* tenant NULL: the collection's (the caller's) */
} vs_point;

typedef struct vs_hit {
    vs_point point;
    float score;
} vs_hit;

/* A point to write. vector has the collection's dims finite components,
 * already unit length for COSINE collections (the service normalizes), or
 * is NULL for a text-only point (text then set; a backend that keeps no
 * text refuses it, STATUS_EPRECONDITION); payload is borrowed (an object,
 * never NULL). */
typedef struct vs_point_in {
    vs_id id;
    const float *vector;
    const char *text; /* UTF-8, checked; NULL: none */
    json_t *payload;
    int label; /* requested memory.v1.Label, 0 = none */
    const char **pii_kinds;
    size_t npii;
} vs_point_in;

/* A vector search, or with text a lexical one (BM25 over the points'
 * texts; vector NULL; a backend without it answers STATUS_EPRECONDITION). */
typedef struct vs_search {
    const float *vector;              /* dims components (normalized for COSINE) */
    const char *text;                 /* checked UTF-8; NULL: by vector */
    int limit;                        /* 1..1000 */
    int offset;                       /* 0..10000 */
    const Memory__V1__Filter *filter; /* validated; NULL = none */
    int has_threshold;
    float threshold;                /* score >= t (COSINE, DOT, text), distance <= t (EUCLID) */
    const tier_time_range *updated; /* only points updated in it; NULL = any time */
    int with_payload, with_vector;
} vs_search;

typedef struct vstore vstore;

/* Every operation a backend provides, as function types: a backend
 * declares its own with them (`vs_upsert_fn emb_upsert;`) and fills a
 * vstore_ops with VSTORE_OPS. Collection names are validated. */
/* model: the embedder model the collection records (NULL: none). */
typedef int vs_create_collection_fn(vstore *vs, tier_ctx *c, const char *name, int dims,
                                    int distance, const char *model, vs_collection *out);
typedef int vs_get_collection_fn(vstore *vs, tier_ctx *c, const char *name, vs_collection *out);
/* Collections with name > after (NULL: from the start) by name, at most
 * limit; *out in ctx->ar. */
typedef int vs_list_collections_fn(vstore *vs, tier_ctx *c, const char *after, size_t limit,
                                   vs_collection **out, size_t *n);
typedef int vs_delete_collection_fn(vstore *vs, tier_ctx *c, const char *name);
/* Writes all points or none (as far as the backend allows: Qdrant has
 * no transactions, so a failure may leave part of a batch written; the
 * API documents upserts as idempotent). */
typedef int vs_upsert_fn(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_point_in *pts,
                         size_t n);
/* Best first, ties by id; at most q->limit hits after skipping
 * q->offset. */
typedef int vs_search_fn(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_search *q,
                         vs_hit **out, size_t *n);
/* The visible points among ids, in the order of ids (missing and hidden
 * ones left out). */
typedef int vs_get_fn(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_id *ids, size_t n,
                      int with_payload, int with_vector, vs_point **out, size_t *nout);
/* Deletes the listed ids that exist; STATUS_EDENIED (nothing deleted) when
 * one of them may not be modified by the caller. */
typedef int vs_delete_ids_fn(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_id *ids,
                             size_t n, int64_t *deleted);
/* What an erasure (tier/tier_erase.h: the retention sweeper's) asks of a
 * point's metadata beyond the diode and the payload filter. */
typedef struct vs_meta_sel {
    int64_t updated_before_us; /* last changed before (Unix µs); 0: any time */
    int label;                 /* exactly this memory.v1.Label; 0: any */
    const char *pii_kind;      /* carrying this PII kind, "*" any; NULL: with or without */
    int64_t limit;             /* delete at most this many; 0: every match */
} vs_meta_sel;
/* 1 when a point with metadata m meets s (NULL: no conditions). */
int vs_meta_match(const vs_meta_sel *s, const tier_meta *m);

/* Deletes every point visible to the caller that matches filter (NULL:
 * all visible points) and meta (NULL: no further conditions) and that the
 * caller may modify. */
typedef int vs_delete_filter_fn(vstore *vs, tier_ctx *c, const vs_collection *col,
                                const Memory__V1__Filter *filter, const vs_meta_sel *meta,
                                int64_t *deleted);
typedef int vs_count_fn(vstore *vs, tier_ctx *c, const vs_collection *col,
                        const Memory__V1__Filter *filter, int exact, int64_t *count);
/* The visible points matching filter (NULL: all) with ids > after (NULL:
 * from the start), in id order (vs_id_cmp), at most limit: a keyset page,
 * so a caller walks a collection with the last id of each page, holding
 * one page at a time. Fewer than limit means no visible point follows.
 * Not a snapshot: a point written between pages shows up when its id is
 * above the cursor. Vectors are not read; payloads only with with_payload
 * (else NULL). vstore_scroll answers limit 0 with no points without asking
 * the backend and refuses more than VS_SCROLL_MAX (STATUS_EINVALID), so a
 * backend sees 1..VS_SCROLL_MAX. */
#define VS_SCROLL_MAX 10000
typedef int vs_scroll_fn(vstore *vs, tier_ctx *c, const vs_collection *col,
                         const Memory__V1__Filter *filter, const vs_id *after, size_t limit,
                         int with_payload, vs_point **out, size_t *n);
/* Backend health for the health service: 0 serving, -1 not. */
typedef int vs_probe_fn(vstore *vs);
/* Registers the backend's Prometheus metrics (metrics.h): 0, or -1 when
 * the registry is full. */
typedef int vs_register_metrics_fn(vstore *vs);

typedef struct vstore_ops {
    const char *name; /* "embedded", "qdrant": logs and health */
    vs_create_collection_fn *create_collection;
    vs_get_collection_fn *get_collection;
    vs_list_collections_fn *list_collections;
    vs_delete_collection_fn *delete_collection;
    vs_upsert_fn *upsert;
    vs_search_fn *search;
    vs_get_fn *get;
    vs_delete_ids_fn *delete_ids;
    vs_delete_filter_fn *delete_filter;
    vs_count_fn *count;
    vs_scroll_fn *scroll;
    vs_probe_fn *probe;
    vs_register_metrics_fn *register_metrics;
    void (*free)(vstore *vs);
} vstore_ops;

/* A backend's table from its functions <prefix>_create_collection ...
 * <prefix>_free. */
#define VSTORE_OPS(name_, prefix)                                                                  \
    {                                                                                              \
        .name = (name_), .create_collection = prefix##_create_collection,                          \
        .get_collection = prefix##_get_collection, .list_collections = prefix##_list_collections,  \
        .delete_collection = prefix##_delete_collection, .upsert = prefix##_upsert,                \
        .search = prefix##_search, .get = prefix##_get, .delete_ids = prefix##_delete_ids,         \
        .delete_filter = prefix##_delete_filter, .count = prefix##_count,                          \
        .scroll = prefix##_scroll, .probe = prefix##_probe,                                        \
        .register_metrics = prefix##_register_metrics, .free = prefix##_free                       \
    }

/* Backends start their handle struct with this. */
struct vstore {
    const vstore_ops *ops;
};

/* Frees through ops->free; accepts NULL. */
void vstore_free(vstore *vs);

/* The operations, as the service calls them (each dispatches to the
 * backend; see vstore_ops for what they do). */
const char *vstore_name(const vstore *vs);
int vstore_probe(vstore *vs);
int vstore_register_metrics(vstore *vs);
vs_create_collection_fn vstore_create_collection;
vs_get_collection_fn vstore_get_collection;
vs_list_collections_fn vstore_list_collections;
vs_delete_collection_fn vstore_delete_collection;
vs_upsert_fn vstore_upsert;
vs_search_fn vstore_search;
vs_get_fn vstore_get;
vs_delete_ids_fn vstore_delete_ids;
vs_delete_filter_fn vstore_delete_filter;
vs_count_fn vstore_count;
vs_scroll_fn vstore_scroll;

/* Write diode for one point: existing is the stored point's metadata or
 * NULL when the id is new. Fills out (owner, label, version, created,
 * updated = now_us; strings borrowed from existing or the principal).
 * Returns STATUS_OK or STATUS_EDENIED with a message naming the id in c->err. */
int vs_stamp(tier_ctx *c, const vs_id *id, const tier_meta *existing, int requested_label,
             int64_t now_us, tier_meta *out);

/* json_decref of every payload in the array; accepts NULL. */
void vs_points_release(vs_point *pts, size_t n);
void vs_hits_release(vs_hit *hits, size_t n);

#endif
