/* qdrant_store_internal: what the Qdrant backend's files share:
 * qdrant_store.c (the handle, naming, collections, open) and
 * qdrant_store_points.c (the point operations). Not for other modules. */
#ifndef MEMORYD_QDRANT_QDRANT_STORE_INTERNAL_H
#define MEMORYD_QDRANT_QDRANT_STORE_INTERNAL_H

#include "service/qdrant/qdrant_http.h"
#include "service/qdrant/qdrant_json.h"
#include "service/qdrant/qdrant_store.h"

#define QDRANT_PATH_MAX 512

typedef struct qdrant {
    vstore base;
    pg_pool *pg;
    char *prefix;
    qdrant_http *http;
} qdrant;

/* Logs failures that are ours or the backend's (not the caller's). */
int qdrant_logged(const char *op, int rc, const char *err);
/* The server's version, detecting it first if no call has reached Qdrant
 * yet (it was down at open); failures as the call's code in c->err. */
int qdrant_ready(qdrant *q, tier_ctx *c, qdrant_json_version *v);
/* What a point operation works on: the server, its version (it picks the
 * endpoints), the collection's name in memoryd's catalog and its Qdrant
 * name in the caller's tenant. */
typedef struct qtarget {
    qdrant *q;
    qdrant_json_version v;
    const char *name;
    char qn[EPISODIC_QDRANT_NAME_MAX];
} qtarget;
/* Fills t for collection name of vs (after qdrant_ready). */
int qdrant_target(vstore *vs, tier_ctx *c, const char *name, qtarget *t);
/* Runs fn(arg) (a write: read the points it touches, apply the write
 * diode, write) holding col's write lock, a PostgreSQL advisory lock
 * every replica takes the same way: Qdrant has no conditional write, so
 * without it two writers of one new id could both see it absent, and the
 * later would overwrite (and relabel) the other's point. Waits for the
 * lock until the call's deadline or cancel; returns fn's code. */
int qdrant_serialized(qdrant *q, tier_ctx *c, const vs_collection *col, int (*fn)(void *arg),
                      void *arg);
/* qdrant_http_call for an operation op on t's points, at
 * /collections/<qn>/points<suffix> (suffix "", "/scroll", "?wait=true"...):
 * a 404 means the Qdrant collection is gone (STATUS_ENOTFOUND naming it). */
int qdrant_points_call(const qtarget *t, tier_ctx *c, const char *op, const char *method,
                       const char *suffix, const char *body, size_t blen, http_resp *r);

/* qdrant_store_points.c: the point operations of vstore_ops. */
vs_upsert_fn qdrant_store_upsert;
vs_search_fn qdrant_store_search;
vs_get_fn qdrant_store_get;
vs_delete_ids_fn qdrant_store_delete_ids;
vs_delete_filter_fn qdrant_store_delete_filter;
vs_count_fn qdrant_store_count;
vs_scroll_fn qdrant_store_scroll;

#endif
