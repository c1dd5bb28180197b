/* global_store: the GlobalMemory tier's storage in PostgreSQL (tables
 * entities, relationships and tasks; migration 5). It knows SQL and the
 * caller's principal, never gRPC: every read carries the read diode
 * (tier_sql.h: tenant, owner unless the read scope is `global:read:all`,
 * label <= clr) inside the query, and rows coming back are checked again
 * (tier_check_row). Writes run in one transaction with row locks, the
 * write diode and compare-and-set, and call the caller's before-commit
 * hook (the service writes its audit row there).
 *
 * Inputs are assumed validated by the caller (ids, sizes, JSON text); the
 * store re-checks nothing it does not need for safety.
 *
 * Every function takes the call's tier_ctx (tier "global"). Results are
 * allocated in ctx->ar and live as long as it. Functions return STATUS_OK
 * or a negative STATUS_E* code with a message in ctx->err. */
#ifndef MEMORYD_GLOBAL_GLOBAL_STORE_H
#define MEMORYD_GLOBAL_GLOBAL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/arena.h"
#include "service/core/status.h"
#include "service/global/global_query.h"
#include "service/store/pg_pool.h"
#include "service/store/pgq.h"
#include "service/tier/tier_ctx.h"
#include "service/tier/tier_meta.h"
#include "service/tier/tier_sql.h"

/* A tier_store (tier_sql.h): the pool and the answer budget. */
typedef tier_store global_store;

typedef struct global_entity {
    const char *id;
    const char *type;
    const char *name;
    const char *properties_json; /* JSON object text */
    tier_meta meta;
} global_entity;

typedef struct global_rel {
    const char *source_id;
    const char *type;
    const char *target_id;
    const char *properties_json;
    tier_meta meta;
} global_rel;

typedef struct global_task {
    const char *id;
    const char *type;
    const char *description;
    int status;                  /* memory.v1.TaskStatus */
    const char *provenance_json; /* NULL = never given */
    const char *result_json;     /* NULL = never given */
    const char **entity_ids;
    size_t nentity_ids;
    int64_t start_us;
    int has_end;
    int64_t end_us;
    tier_meta meta;
} global_task;

/* The store's max_response_bytes bounds the edges of a Traverse answer. */

/* ---- entities ---- */

typedef struct global_entity_in {
    const char *id;
    const char *type;
    const char *name;
    const char *properties_json; /* JSON object text */
    int label;                   /* requested memory.v1.Label (0 = unspecified) */
    int has_expected;
    int64_t expected_version; /* 0 = must not exist */
    const char *const *pii_kinds;
    size_t npii;
} global_entity_in;

/* Creates or replaces the entity. Replacing keeps owner and create time,
 * bumps the version and stamps label = max(requested, lvl, existing).
 * STATUS_EDENIED when it exists and belongs to another owner without
 * `global:write:all` or is labelled above clr; STATUS_ECONFLICT on a
 * version mismatch. Writes run on the event loop as transactions of round
 * trips (the row lock with BEGIN, the write, the audit row with COMMIT;
 * global_store_internal.h), ready for tier_pending like the reads; in is
 * copied, out and created live in c's arena. */
tier_async *global_put_entity_async(global_store *s, tier_ctx *c, const global_entity_in *in,
                                    global_entity *out, int *created, tier_async_done_fn done,
                                    void *arg);
/* GetEntity on the event loop: the statement, ready for tier_pending; when
 * it has answered, done(arg, rc) runs once on the loop thread with *out
 * filled when rc is STATUS_OK (c->err set otherwise; STATUS_ENOTFOUND when
 * absent or hidden). c and out must live in c's arena. NULL when out of
 * memory (done never runs). */
tier_async *global_get_entity_async(global_store *s, tier_ctx *c, const char *id,
                                    global_entity *out, void (*done)(void *arg, int rc), void *arg);
/* The entity of the caller's tenant whatever its owner and label, on the
 * event loop (as global_get_entity_async): for a cache shared by the
 * tenant's callers, which must apply the rest of the read diode
 * (principal_may_read) to every copy it hands out. */
tier_async *global_load_entity_async(global_store *s, tier_ctx *c, const char *id,
                                     global_entity *out, tier_async_done_fn done, void *arg);
/* Deletes the entity and every relationship touching it. NOT_FOUND when
 * absent, EDENIED / ECONFLICT as for put. */
tier_async *global_delete_entity_async(global_store *s, tier_ctx *c, const char *id,
                                       int has_expected, int64_t expected_version,
                                       tier_async_done_fn done, void *arg);

/* QueryEntities' sort keys (memory.v1.EntityOrderBy, UNSPECIFIED resolved
 * by the caller). */
typedef enum global_order {
    GLOBAL_ORDER_ID = 1,
    GLOBAL_ORDER_NAME = 2,
    GLOBAL_ORDER_CREATE_TIME = 3,
    GLOBAL_ORDER_UPDATE_TIME = 4,
    GLOBAL_ORDER_RELEVANCE = 5,
} global_order;

typedef struct global_query_in {
    const char *type; /* "" = any */
    const global_pred *preds;
    size_t npreds;
    const char *text_query; /* "" = none */
    global_order order;
    int descending; /* the effective direction: 1 = largest first */
    int limit;      /* 1..1000 */
    /* keyset cursor: the sort key (as text: name, Unix µs, rank "%.9g")
     * and id of the last entity of the previous page; NULL = first page */
    const char *after_key;
    const char *after_id;
    /* only these entities (a traversal's, filtered); nids 0 = any */
    const char *const *ids;
    size_t nids;
    /* text_query as a question: any word, BM25 (tier_sql_rank.h); the
     * relevance key is then the score's numeric text */
    int ranked;
} global_query_in;

/* What QueryEntities answers: keys[i] is entity i's sort key as text
 * (for the next cursor); more when more remain. In c's arena. */
typedef struct global_query_out {
    global_entity *ents;
    const char **keys;
    float *scores; /* with a text query, each entity's relevance; else NULL */
    size_t n;
    int more;
} global_query_out;

/* Visible entities matching in->..., at most limit, after the cursor, on
 * the event loop (as global_get_entity_async; in is copied).
 * INVALID (-1 from global_pred_sql) surfaces as STATUS_EINVALID with err
 * set. */
tier_async *global_query_entities_async(global_store *s, tier_ctx *c, const global_query_in *in,
                                        global_query_out *out, tier_async_done_fn done, void *arg);

/* ---- relationships ---- */

typedef struct global_rel_in {
    const char *source_id;
    const char *type;
    const char *target_id;
    const char *properties_json;
    int label;
    int has_expected;
    int64_t expected_version;
    const char *const *pii_kinds;
    size_t npii;
} global_rel_in;

/* Both ends must exist and be visible: STATUS_ENOTFOUND naming which
 * otherwise. Then as global_put_entity. */
tier_async *global_put_rel_async(global_store *s, tier_ctx *c, const global_rel_in *in,
                                 global_rel *out, int *created, tier_async_done_fn done, void *arg);
tier_async *global_delete_rel_async(global_store *s, tier_ctx *c, const char *source_id,
                                    const char *type, const char *target_id, int has_expected,
                                    int64_t expected_version, tier_async_done_fn done, void *arg);

/* ---- traversal ---- */

typedef enum global_dir { GLOBAL_DIR_OUT = 1, GLOBAL_DIR_IN = 2, GLOBAL_DIR_BOTH = 3 } global_dir;

typedef struct global_traverse_in {
    const char *start_id;
    const char *const *types; /* relationship types to follow; ntypes 0 = all */
    size_t ntypes;
    global_dir dir;
    int max_depth; /* 1..10 */
    int limit;     /* 1..1000 */
    /* NULL: the walk's entities and the edges among them. Otherwise the
     * walk's entities that also match this query (its type, predicates
     * and text; order, limit and cursor ignored), without edges: a routed
     * graph query (router.proto's GraphQuery). */
    const global_query_in *filter;
} global_traverse_in;

typedef struct global_traverse_out {
    global_entity *nodes; /* by depth, then id */
    int *depths;
    float *ranks; /* with a filter's text query: each node's full-text rank; else NULL */
    size_t nnodes;
    global_rel *edges; /* followed relationships with both ends in nodes */
    size_t nedges;
    int truncated; /* limit cut the walk short (or the edges did not fit) */
} global_traverse_out;

/* Breadth-first walk in one statement (a recursive CTE whose rows are
 * whole BFS levels, carrying the visited set): cycle-safe, each entity
 * once at its shortest depth, work bounded by limit × degree per level.
 * Hidden entities and relationships are neither returned nor walked
 * through. STATUS_ENOTFOUND when the start is absent or hidden. On the
 * event loop (as global_get_entity_async; in is copied, out zeroed by the
 * caller). */
tier_async *global_traverse_async(global_store *s, tier_ctx *c, const global_traverse_in *in,
                                  global_traverse_out *out, tier_async_done_fn done, void *arg);

/* The statements GetEntity and Traverse run (the traversal, then the
 * edges among the ids it returned) for the caller of c, built apart from
 * any I/O: the store runs them, and the benchmark runs the very same SQL
 * directly through libpq. Strings are borrowed by q; c->ar holds array
 * literals. Return 0, or -1 when out of memory. */
void global_sql_get_entity(const tier_ctx *c, const char *id, pgq_sql *b);
int global_sql_traverse(const tier_ctx *c, const global_traverse_in *in, pgq_sql *b);
int global_sql_traverse_edges(const tier_ctx *c, const global_traverse_in *in,
                              const char *const *ids, size_t n, pgq_sql *b);

/* ---- tasks ---- */

typedef struct global_task_in {
    const char *id;
    const char *type;
    const char *description;
    int status;
    const char *provenance_json; /* NULL = unset */
    const char *result_json;     /* NULL = unset */
    const char *const *entity_ids;
    size_t nentity_ids;
    int has_start; /* unset: now on creation, unchanged on update */
    int64_t start_us;
    int has_end;
    int64_t end_us;
    int label;
    const char *const *pii_kinds;
    size_t npii;
} global_task_in;

/* Creates or replaces the task (start_time kept unless given).
 * STATUS_EINVALID when end would precede start; EDENIED as for entities. */
tier_async *global_record_task_async(global_store *s, tier_ctx *c, const global_task_in *in,
                                     global_task *out, int *created, tier_async_done_fn done,
                                     void *arg);

typedef struct global_list_tasks_in {
    int status;       /* 0 = any */
    const char *type; /* "" = any */
    int has_start;    /* start_time >= start */
    int64_t start_us;
    int has_end; /* start_time < end */
    int64_t end_us;
    int limit;
    int has_after; /* keyset cursor: (start µs, id) of the previous page's last task */
    int64_t after_start_us;
    const char *after_id;
} global_list_tasks_in;

typedef struct global_tasks_out {
    global_task *tasks; /* in c's arena */
    size_t n;
    int more; /* tasks remain past the last one */
} global_tasks_out;

/* Visible tasks, newest start_time first, ties by id, on the event loop
 * (as global_get_entity_async; in is copied). */
tier_async *global_list_tasks_async(global_store *s, tier_ctx *c, const global_list_tasks_in *in,
                                    global_tasks_out *out, tier_async_done_fn done, void *arg);

#endif
