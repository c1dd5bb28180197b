/* global_store: the GlobalMemory store's handle and its row decoders; the
 * queries are in global_entities.c, global_graph.c and global_tasks.c.
 * See global_store.h.
 *
 * Every statement runs on the event loop (tier_sql.h's tier_async):
 * parameterized, with the call's deadline, one round trip per read,
 * explicit write transactions. */
#include <stdlib.h>
#include <string.h>

#include "service/global/global_store_internal.h"

/* The metadata columns of a row, by column numbers. */
static int decode_meta(tier_ctx *c, const PGresult *r, int row, int c_tenant, int c_owner,
                       int c_label, int c_pii, int c_version, int c_created, tier_meta *m) {
    int64_t label;
    m->tenant = pgq_col_str(c->ar, r, row, c_tenant);
    m->owner = pgq_col_str(c->ar, r, row, c_owner);
    if (!m->tenant || !m->owner || pgq_col_int(r, row, c_label, &label) != 0 ||
        pgq_col_text_array(c->ar, r, row, c_pii, &m->pii_kinds, &m->npii) != 0 ||
        pgq_col_int(r, row, c_version, &m->version) != 0 ||
        pgq_col_ts(r, row, c_created, &m->create_us) != 0 ||
        pgq_col_ts(r, row, c_created + 1, &m->update_us) != 0)
        return -1;
    m->label = (int)label;
    return 0;
}

int global_decode_entity_row(tier_ctx *c, const PGresult *r, int row, global_entity *e) {
    memset(e, 0, sizeof *e);
    e->id = pgq_col_str(c->ar, r, row, 1);
    e->type = pgq_col_str(c->ar, r, row, 4);
    e->name = pgq_col_str(c->ar, r, row, 5);
    e->properties_json = pgq_col_jsonb(c->ar, r, row, 6);
    if (!e->id || !e->type || !e->name || !e->properties_json ||
        decode_meta(c, r, row, 0, 2, 3, 7, 8, 9, &e->meta) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "an entities row has an unreadable column");
    return STATUS_OK;
}

int global_decode_entity(tier_ctx *c, const PGresult *r, int row, global_entity *e) {
    int rc = global_decode_entity_row(c, r, row, e);
    return rc != STATUS_OK ? rc : tier_check_row(c, &e->meta, 1, "entity %s", e->id);
}

int global_decode_rel(tier_ctx *c, const PGresult *r, int row, global_rel *e) {
    memset(e, 0, sizeof *e);
    e->source_id = pgq_col_str(c->ar, r, row, 1);
    e->type = pgq_col_str(c->ar, r, row, 2);
    e->target_id = pgq_col_str(c->ar, r, row, 3);
    e->properties_json = pgq_col_jsonb(c->ar, r, row, 6);
    if (!e->source_id || !e->type || !e->target_id || !e->properties_json ||
        decode_meta(c, r, row, 0, 4, 5, 7, 8, 9, &e->meta) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "a relationships row has an unreadable column");
    return tier_check_row(c, &e->meta, 1, "relationship %s -[%s]-> %s", e->source_id, e->type,
                          e->target_id);
}

int global_decode_task(tier_ctx *c, const PGresult *r, int row, global_task *t) {
    memset(t, 0, sizeof *t);
    int64_t status;
    t->id = pgq_col_str(c->ar, r, row, 1);
    t->type = pgq_col_str(c->ar, r, row, 4);
    t->description = pgq_col_str(c->ar, r, row, 5);
    if (!PQgetisnull(r, row, 7) && !(t->provenance_json = pgq_col_jsonb(c->ar, r, row, 7)))
        return tier_fail(c, STATUS_EINTERNAL, "a tasks row has an unreadable provenance");
    if (!PQgetisnull(r, row, 8) && !(t->result_json = pgq_col_jsonb(c->ar, r, row, 8)))
        return tier_fail(c, STATUS_EINTERNAL, "a tasks row has an unreadable result");
    if (!PQgetisnull(r, row, 12)) {
        if (pgq_col_ts(r, row, 12, &t->end_us) != 0)
            return tier_fail(c, STATUS_EINTERNAL, "a tasks row has an unreadable end_time");
        t->has_end = 1;
    }
    if (!t->id || !t->type || !t->description || pgq_col_int(r, row, 6, &status) != 0 ||
        pgq_col_text_array(c->ar, r, row, 9, &t->entity_ids, &t->nentity_ids) != 0 ||
        pgq_col_ts(r, row, 11, &t->start_us) != 0 ||
        decode_meta(c, r, row, 0, 2, 3, 10, 13, 14, &t->meta) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "a tasks row has an unreadable column");
    t->status = (int)status;
    return tier_check_row(c, &t->meta, 1, "task %s", t->id);
}
