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

/* Runs fn in a session of the store (tier_sql_run). */
int global_run(global_store *s, tier_ctx *c, tier_sql_fn fn, void *arg);

/* Row decoders. _row: the columns only; the others also apply the final
 * read filter (tier_check_row). */
int global_decode_entity_row(tier_ctx *c, const PGresult *r, int row, global_entity *e);
int global_decode_entity(tier_ctx *c, const PGresult *r, int row, global_entity *e);
int global_decode_rel(tier_ctx *c, const PGresult *r, int row, global_rel *e);
int global_decode_task(tier_ctx *c, const PGresult *r, int row, global_task *t);

/* A put's INSERT ... ON CONFLICT DO NOTHING / UPDATE returned r. No row:
 * it lost a create race (the other transaction's row committed, ON
 * CONFLICT waited for it): 1 with r freed, and the put locks again. */
int global_lost_race(PGresult *r);
/* The end of a put: rc is how decoding r's row went (r is freed); then
 * *created = created_now and COMMIT. */
int global_put_commit(pgq_session *ss, tier_ctx *c, PGresult *r, int rc, int created_now,
                      int *created);

#endif
