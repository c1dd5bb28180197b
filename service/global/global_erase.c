/* global_erase: GlobalMemory's eraser (tier/tier_erase.h): a data
 * subject's (or a retention rule's) entities, relationships and tasks in
 * one transaction. The selection's entities are locked first (at most
 * sel->limit); then every relationship touching one of them, whoever owns
 * it (an edge to an erased entity would still say something about it; the
 * foreign keys would cascade it anyway, uncounted), and the relationships
 * the selection names itself; then the entities, each dropped from the
 * entity cache on every replica; then the tasks (by provenance). TIER_GLOBAL
 * counts the three together. */
#include <jansson.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "service/cache/cache_records.h"
#include "service/global/global_service_internal.h"
#include "service/tier/tier_erase.h"
#include "service/tier/tier_export.h"
#include "service/tier/tier_sql.h"

typedef struct erase_job {
    const global_service *svc;
    const tier_erase_sel *sel;
    int64_t count;
} erase_job;

/* The relationships sel reaches, as a WHERE fragment on alias r: those it
 * names and those touching an entity it names. An erasure takes the
 * latter whoever owns them; an export (a read) only those the caller may
 * read itself. */
static int rel_where(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    pgq_sql_add(b, "(");
    int rc = tier_erase_sql_where(b, c, sel, "r", "properties");
    if (rc != STATUS_OK) return rc;
    pgq_sql_add(b, ") OR (");
    if (sel->max_label) tier_sql_read_diode(b, c, "r");
    else pgq_sql_add(b, "r.tenant = $%d", pgq_text(b, sel->tenant));
    pgq_sql_add(b, " AND EXISTS (SELECT 1 FROM entities e WHERE "
                   "e.tenant = r.tenant AND e.id IN (r.source_id, r.target_id) AND ");
    rc = tier_erase_sql_where(b, c, sel, "e", "properties");
    pgq_sql_add(b, "))");
    return rc;
}

static int count_all(pgq_session *ss, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT (SELECT count(*) FROM entities e WHERE ");
    int rc = tier_erase_sql_where(&b, c, sel, "e", "properties");
    pgq_sql_add(&b, ") + (SELECT count(*) FROM relationships r WHERE ");
    if (rc == STATUS_OK) rc = rel_where(&b, c, sel);
    pgq_sql_add(&b, ") + (SELECT count(*) FROM tasks t WHERE ");
    if (rc == STATUS_OK) rc = tier_erase_sql_where(&b, c, sel, "t", "provenance");
    pgq_sql_add(&b, ")");
    PGresult *r = NULL;
    if (rc == STATUS_OK) rc = pgq_pipeline(ss, "count erasure", NULL, &b, 1, &r);
    if (rc == STATUS_OK && pgq_col_int(r, 0, 0, count) != 0)
        rc = tier_fail(c, STATUS_EINTERNAL, "unexpected erasure count");
    PQclear(r);
    return rc;
}

/* Runs b (a DELETE) in the open transaction: its row count added to
 * *count. */
static int delete_rows(pgq_session *ss, const pgq_sql *b, const char *what, int64_t *count) {
    PGresult *r = NULL;
    int rc = pgq_exec_ok(ss, b, what, &r);
    if (rc == STATUS_OK) *count += atoll(PQcmdTuples(r));
    PQclear(r);
    return rc;
}

/* " LIMIT n" of a batch, or nothing. */
static void add_limit(pgq_sql *b, const tier_erase_sel *sel) {
    if (sel->limit) pgq_sql_add(b, " LIMIT %lld", (long long)sel->limit);
}

/* The selection's entities, locked, their ids into *ids (in c's arena). */
static int lock_entities(pgq_session *ss, tier_ctx *c, const tier_erase_sel *sel, const char ***ids,
                         size_t *n) {
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT e.id FROM entities e WHERE ");
    int rc = tier_erase_sql_where(&b, c, sel, "e", "properties");
    add_limit(&b, sel);
    pgq_sql_add(&b, " FOR UPDATE");
    PGresult *r = NULL;
    if (rc == STATUS_OK) rc = pgq_pipeline(ss, "lock erased entities", "BEGIN", &b, 0, &r);
    if (rc != STATUS_OK) return rc;
    *n = 0;
    *ids = arena_alloc(c->ar, ((size_t)PQntuples(r) + 1) * sizeof **ids);
    for (int i = 0; *ids && i < PQntuples(r); i++)
        if (((*ids)[*n] = pgq_col_str(c->ar, r, i, 0))) ++*n;
    if (!*ids || *n != (size_t)PQntuples(r)) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    PQclear(r);
    return rc;
}

static int erase_in(pgq_session *ss, tier_ctx *c, void *arg) {
    erase_job *j = arg;
    const tier_erase_sel *sel = j->sel;
    j->count = 0;
    if (sel->dry_run) return count_all(ss, c, sel, &j->count);
    const char **ids = NULL;
    size_t nids = 0;
    int rc = lock_entities(ss, c, sel, &ids, &nids);
    const char *lit = rc == STATUS_OK && nids ? pgq_array_literal(c->ar, ids, nids) : NULL;
    if (rc == STATUS_OK && nids && !lit) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    pgq_sql b = {0};
    if (rc == STATUS_OK && nids) { /* every relationship touching them */
        int t = pgq_text(&b, sel->tenant), in = pgq_text_array(&b, lit);
        pgq_sql_add(&b,
                    "DELETE FROM relationships WHERE tenant = $%d AND "
                    "(source_id = ANY($%d) OR target_id = ANY($%d))",
                    t, in, in);
        rc = delete_rows(ss, &b, "erase relationships of erased entities", &j->count);
    }
    if (rc == STATUS_OK) { /* and those the selection names itself */
        memset(&b, 0, sizeof b);
        tier_erase_sql_begin(&b, sel, "relationships", "r");
        rc = tier_erase_sql_where(&b, c, sel, "r", "properties");
        tier_erase_sql_end(&b, sel);
        if (rc == STATUS_OK) rc = delete_rows(ss, &b, "erase relationships", &j->count);
    }
    if (rc == STATUS_OK && nids) {
        memset(&b, 0, sizeof b);
        int t = pgq_text(&b, sel->tenant), in = pgq_text_array(&b, lit);
        pgq_sql_add(&b, "DELETE FROM entities WHERE tenant = $%d AND id = ANY($%d)", t, in);
        rc = delete_rows(ss, &b, "erase entities", &j->count);
    }
    if (rc == STATUS_OK) {
        memset(&b, 0, sizeof b);
        tier_erase_sql_begin(&b, sel, "tasks", "t");
        rc = tier_erase_sql_where(&b, c, sel, "t", "provenance");
        tier_erase_sql_end(&b, sel);
        if (rc == STATUS_OK) rc = delete_rows(ss, &b, "erase tasks", &j->count);
    }
    if (rc == STATUS_OK) rc = pgq_commit(ss, NULL, NULL, NULL);
    if (rc != STATUS_OK) return rc;
    /* Only once committed: a copy dropped before could be loaded again
     * from the rows still there. */
    if (j->svc->entities)
        for (size_t i = 0; i < nids; i++)
            cache_records_changed(j->svc->entities, c->ar, sel->tenant, ids[i]);
    return STATUS_OK;
}

int global_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    erase_job j = {.svc = state, .sel = sel};
    int rc = tier_sql_run(j.svc->env->pg, c, TIER_MAX_STATEMENT_MS, erase_in, &j);
    *count = rc == STATUS_OK ? j.count : 0;
    return rc;
}

/* ------------------------------------------------------------ export */

#define EXPORT_PAGE 200 /* rows in memory at a time */

/* The columns every exported row ends with, after its own. */
#define META_COLS "owner, label, pii_kinds, version, created_at, updated_at"

/* The metadata at column `at` of row i (META_COLS), strings in c's arena. */
static int export_meta(tier_ctx *c, const PGresult *r, int i, int at, const char *tenant,
                       tier_meta *m) {
    memset(m, 0, sizeof *m);
    int64_t label = 0;
    m->tenant = tenant;
    m->owner = pgq_col_str(c->ar, r, i, at);
    if (!m->owner || pgq_col_int(r, i, at + 1, &label) != 0 ||
        pgq_col_text_array(c->ar, r, i, at + 2, &m->pii_kinds, &m->npii) != 0 ||
        pgq_col_int(r, i, at + 3, &m->version) != 0 ||
        pgq_col_ts(r, i, at + 4, &m->create_us) != 0 ||
        pgq_col_ts(r, i, at + 5, &m->update_us) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "unexpected row in an export");
    m->label = (int)label;
    return STATUS_OK;
}

static int select_entities(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    pgq_sql_add(b, "SELECT e.id, e.entity_type, e.name, e.properties, " META_COLS
                   " FROM entities e WHERE ");
    return tier_erase_sql_where(b, c, sel, "e", "properties");
}

static int select_relationships(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    pgq_sql_add(b, "SELECT r.source_id, r.rel_type, r.target_id, r.properties, " META_COLS
                   " FROM relationships r WHERE (");
    int rc = rel_where(b, c, sel);
    pgq_sql_add(b, ")");
    return rc;
}

static int select_tasks(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    pgq_sql_add(b, "SELECT t.id, t.task_type, t.description, t.status, t.provenance, t.result, "
                   "t.entity_ids, t.start_time, t.end_time, " META_COLS " FROM tasks t WHERE ");
    return tier_erase_sql_where(b, c, sel, "t", "provenance");
}

/* A jsonb column as a JSON value (null when SQL NULL). */
static json_t *jsonb_at(tier_ctx *c, const PGresult *r, int i, int col) {
    const char *s = pgq_col_jsonb(c->ar, r, i, col);
    json_error_t jerr;
    return s ? json_loads(s, 0, &jerr) : json_null();
}

static int render_entity(tier_ctx *c, const PGresult *r, int i, const tier_erase_sel *sel,
                         tier_export_rec *rec, tier_meta *m) {
    int rc = export_meta(c, r, i, 4, sel->tenant, m);
    if (rc != STATUS_OK) return rc;
    const char **id = &rec->id, **json = &rec->json;
    *id = pgq_col_str(c->ar, r, i, 0);
    json_t *o = json_pack("{s:s?, s:s?, s:o}", "type", pgq_col_str(c->ar, r, i, 1), "name",
                          pgq_col_str(c->ar, r, i, 2), "properties", jsonb_at(c, r, i, 3));
    if (!*id) json_decref(o);
    return *id ? tier_export_json(c, o, json) : tier_fail(c, STATUS_ENOMEM, "out of memory");
}

static int render_relationship(tier_ctx *c, const PGresult *r, int i, const tier_erase_sel *sel,
                               tier_export_rec *rec, tier_meta *m) {
    int rc = export_meta(c, r, i, 4, sel->tenant, m);
    if (rc != STATUS_OK) return rc;
    const char **id = &rec->id, **json = &rec->json;
    const char *src = pgq_col_str(c->ar, r, i, 0), *type = pgq_col_str(c->ar, r, i, 1),
               *dst = pgq_col_str(c->ar, r, i, 2);
    if (!src || !type || !dst) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    *id = arena_printf(c->ar, "%s/%s/%s", src, type, dst);
    json_t *o = json_pack("{s:s, s:s, s:s, s:o}", "source_id", src, "type", type, "target_id", dst,
                          "properties", jsonb_at(c, r, i, 3));
    if (!*id) json_decref(o);
    return *id ? tier_export_json(c, o, json) : tier_fail(c, STATUS_ENOMEM, "out of memory");
}

static json_t *time_at(const PGresult *r, int i, int col) {
    int64_t us;
    if (PQgetisnull(r, i, col) || pgq_col_ts(r, i, col, &us) != 0) return json_null();
    return json_integer(us);
}

static int render_task(tier_ctx *c, const PGresult *r, int i, const tier_erase_sel *sel,
                       tier_export_rec *rec, tier_meta *m) {
    int rc = export_meta(c, r, i, 9, sel->tenant, m);
    if (rc != STATUS_OK) return rc;
    const char **id = &rec->id, **json = &rec->json;
    *id = pgq_col_str(c->ar, r, i, 0);
    int64_t status = 0;
    const char **ents = NULL;
    size_t nents = 0;
    json_t *ids = json_array();
    if (pgq_col_int(r, i, 3, &status) != 0 ||
        pgq_col_text_array(c->ar, r, i, 6, &ents, &nents) != 0) {
        json_decref(ids);
        return tier_fail(c, STATUS_EINTERNAL, "unexpected task row in an export");
    }
    for (size_t k = 0; ids && k < nents; k++) json_array_append_new(ids, json_string(ents[k]));
    json_t *o =
        json_pack("{s:s?, s:s?, s:I, s:o, s:o, s:o, s:o, s:o}", "type", pgq_col_str(c->ar, r, i, 1),
                  "description", pgq_col_str(c->ar, r, i, 2), "status", (json_int_t)status,
                  "provenance", jsonb_at(c, r, i, 4), "result", jsonb_at(c, r, i, 5), "entity_ids",
                  ids, "start_time_us", time_at(r, i, 7), "end_time_us", time_at(r, i, 8));
    if (!*id) json_decref(o);
    return *id ? tier_export_json(c, o, json) : tier_fail(c, STATUS_ENOMEM, "out of memory");
}

/* The graph's three kinds of record, each keyed by its first columns. */
static const tier_export_pages export_kinds[] = {
    {.kind = "entity",
     .what = "export entities",
     .key = "e.id",
     .nkey = 1,
     .key_cols = {0},
     .page = EXPORT_PAGE,
     .select = select_entities,
     .render = render_entity},
    {.kind = "relationship",
     .what = "export relationships",
     .key = "r.source_id, r.rel_type, r.target_id",
     .nkey = 3,
     .key_cols = {0, 1, 2},
     .page = EXPORT_PAGE,
     .select = select_relationships,
     .render = render_relationship},
    {.kind = "task",
     .what = "export tasks",
     .key = "t.id",
     .nkey = 1,
     .key_cols = {0},
     .page = EXPORT_PAGE,
     .select = select_tasks,
     .render = render_task},
};

int global_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                  void *emit_arg) {
    const global_service *svc = state;
    if (tier_erase_is_retention(sel)) return STATUS_OK;
    int rc = STATUS_OK;
    for (size_t k = 0; rc == STATUS_OK && k < sizeof export_kinds / sizeof export_kinds[0]; k++)
        rc = tier_export_pages_run(svc->env->pg, c, &export_kinds[k], sel, emit, emit_arg);
    return rc;
}
