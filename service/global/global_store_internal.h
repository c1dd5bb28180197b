/* global_store_internal: what the GlobalMemory storage files share:
 * global_store.c (rows), global_entities.c, global_graph.c (relationships
 * and traversal) and global_tasks.c. Not for other modules. */
#ifndef MEMORYD_GLOBAL_GLOBAL_STORE_INTERNAL_H
#define MEMORYD_GLOBAL_GLOBAL_STORE_INTERNAL_H

#include <libpq-fe.h>

#include "service/global/global_store.h"
#include "service/tier/tier_sql.h"

#define GLOBAL_MAX_CREATE_RACES 3

/* Entity columns every entity query selects (alias e), in this order. */
#define GLOBAL_E_COLS                                                                              \
    "e.tenant, e.id, e.owner, e.label, e.entity_type, e.name, e.properties, e.pii_kinds,"          \
    " e.version, e.created_at, e.updated_at"
#define GLOBAL_E_NCOLS 11
/* Relationship columns (alias r). */
#define GLOBAL_R_COLS                                                                              \
    "r.tenant, r.source_id, r.rel_type, r.target_id, r.owner, r.label, r.properties,"              \
    " r.pii_kinds, r.version, r.created_at, r.updated_at"
/* Task columns (alias t). */
#define GLOBAL_T_COLS                                                                              \
    "t.tenant, t.id, t.owner, t.label, t.task_type, t.description, t.status, t.provenance,"        \
    " t.result, t.entity_ids, t.pii_kinds, t.start_time, t.end_time, t.version,"                   \
    " t.created_at, t.updated_at"

/* Row decoders. _row: the columns only; the others also apply the final
 * read filter (tier_check_row). */
int global_decode_entity_row(tier_ctx *c, const PGresult *r, int row, global_entity *e);
int global_decode_entity(tier_ctx *c, const PGresult *r, int row, global_entity *e);
int global_decode_rel(tier_ctx *c, const PGresult *r, int row, global_rel *e);
int global_decode_task(tier_ctx *c, const PGresult *r, int row, global_task *t);

/* QueryEntities' statement for in (global_entities.c): the entity
 * columns, the sort key (the rank for GLOBAL_ORDER_RELEVANCE), then with a
 * text query its relevance. lang: ranked text's language (tier_sql_rank.h;
 * unused unless in->ranked). */
int global_sql_query(tier_ctx *c, const global_query_in *in, pgq_sql *b, const char *lang);

/* ---- writes on the event loop (global_write.c) ---- */

/* A put of one record (PutEntity, PutRelationship, RecordTask) as a
 * transaction of round trips: the row lock with BEGIN; the kind's check
 * statement, if it has one, before its first write (a relationship's
 * ends); the INSERT ... ON CONFLICT DO NOTHING or UPDATE (an INSERT that
 * lost a create race locks and decides again, up to
 * GLOBAL_MAX_CREATE_RACES); then the audit row with COMMIT. */
typedef struct global_put global_put;
typedef struct global_put_kind {
    const char *what; /* "entity": messages */
    /* the row lock: SELECT owner, label, version[, more] ... FOR UPDATE */
    void (*lock)(const global_put *g, const tier_ctx *c, pgq_sql *b);
    /* after it (g->row filled; r for more columns): the write diode and
     * the kind's own checks */
    int (*locked)(global_put *g, tier_ctx *c, const PGresult *r);
    /* optional: a check before the first write, and its answer */
    void (*check)(const global_put *g, const tier_ctx *c, pgq_sql *b);
    int (*checked)(global_put *g, tier_ctx *c, const PGresult *r);
    /* the INSERT (exists 0) or UPDATE, RETURNING the row */
    void (*write)(const global_put *g, const tier_ctx *c, pgq_sql *b, int exists, int label);
    /* the returned row into the kind's output */
    int (*written)(global_put *g, tier_ctx *c, const PGresult *r);
} global_put_kind;

struct global_put {
    const global_put_kind *k;
    const void *in; /* the kind's input, in c's arena */
    void *out;      /* the kind's output, in c's arena */
    int *created;
    const char *name; /* the record in messages */
    int label;        /* the label asked for */
    const char *lang; /* an entity's rank_doc's (tier_sql_rank.h) */
    const char *pii;  /* array literals the write sends */
    const char *ids;
    int64_t start_us; /* a task's recorded start (locked) */
    /* global_write.c's */
    tier_row row;
    int step, races, checked;
};
/* The put g describes (copied, with its input of in_size bytes, and the
 * record's pii_kinds as an array literal in g->pii), ready for
 * tier_pending. NULL when out of memory. */
tier_async *global_put_start(tier_ctx *c, const global_put *g, size_t in_size,
                             const char *const *pii_kinds, size_t npii, tier_async_done_fn done,
                             void *arg);

/* A delete of one record: the row lock with BEGIN (absent: NOT_FOUND),
 * the write diode, the DELETE, then the audit row with COMMIT. */
typedef struct global_delete global_delete;
struct global_delete {
    const char *what, *name; /* messages */
    const void *key;         /* the kind's, in c's arena */
    int has_expected;
    int64_t expected;
    void (*lock_sql)(const global_delete *d, const tier_ctx *c, pgq_sql *b);
    /* The DELETE; with refusable set it answers one row when it deleted
     * and none when it refused (the reason: refused_why). */
    void (*delete_sql)(const global_delete *d, const tier_ctx *c, pgq_sql *b);
    int refusable;
    const char *refused_why;
    int deleted; /* global_write.c's */
};
tier_async *global_delete_start(tier_ctx *c, const global_delete *d, tier_async_done_fn done,
                                void *arg);

#endif
