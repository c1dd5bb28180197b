/* global_tasks: task history in PostgreSQL: RecordTask and ListTasks; see
 * global_store.h. */
#include <string.h>

#include "service/global/global_store_internal.h"

static void task_write(const global_put *g, const tier_ctx *c, pgq_sql *b, int exists, int label) {
    const global_task_in *in = g->in;
    const char *pii = g->pii, *ents = g->ids;
    int p_tenant = pgq_text(b, principal_tenant(c->p));
    int p_id = pgq_text(b, in->id);
    int p_label = pgq_int4(b, label);
    int p_type = pgq_text(b, in->type);
    int p_desc = pgq_text(b, in->description);
    int p_status = pgq_int4(b, in->status);
    int p_prov =
        in->provenance_json ? pgq_jsonb(b, in->provenance_json) : pgq_null(b, PGQ_OID_JSONB);
    int p_result = in->result_json ? pgq_jsonb(b, in->result_json) : pgq_null(b, PGQ_OID_JSONB);
    int p_ents = pgq_text_array(b, ents);
    int p_pii = pgq_text_array(b, pii);
    int p_start = in->has_start ? pgq_ts(b, in->start_us) : pgq_null(b, PGQ_OID_TIMESTAMPTZ);
    int p_end = in->has_end ? pgq_ts(b, in->end_us) : pgq_null(b, PGQ_OID_TIMESTAMPTZ);
    if (!exists)
        pgq_sql_add(b,
                    "INSERT INTO tasks AS t (tenant, id, owner, label, task_type,"
                    " description, status, provenance, result, entity_ids, pii_kinds,"
                    " start_time, end_time, version, created_at, updated_at)"
                    " VALUES ($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d,"
                    " COALESCE($%d, now()), $%d, 1, now(), now())"
                    " ON CONFLICT (tenant, id) DO NOTHING RETURNING " GLOBAL_T_COLS,
                    p_tenant, p_id, pgq_text(b, principal_sub(c->p)), p_label, p_type, p_desc,
                    p_status, p_prov, p_result, p_ents, p_pii, p_start, p_end);
    else
        pgq_sql_add(b,
                    "UPDATE tasks AS t SET label = $%d, task_type = $%d, description = $%d,"
                    " status = $%d, provenance = $%d, result = $%d, entity_ids = $%d,"
                    " pii_kinds = $%d, start_time = COALESCE($%d, t.start_time),"
                    " end_time = $%d, version = t.version + 1, updated_at = now()"
                    " WHERE t.tenant = $%d AND t.id = $%d RETURNING " GLOBAL_T_COLS,
                    p_label, p_type, p_desc, p_status, p_prov, p_result, p_ents, p_pii, p_start,
                    p_end, p_tenant, p_id);
}

static void task_lock(const global_put *g, const tier_ctx *c, pgq_sql *b) {
    pgq_sql_add(b,
                "SELECT owner, label, version, start_time FROM tasks WHERE tenant = $%d"
                " AND id = $%d FOR UPDATE",
                pgq_text(b, principal_tenant(c->p)),
                pgq_text(b, ((const global_task_in *)g->in)->id));
}

static int task_locked(global_put *g, tier_ctx *c, const PGresult *r) {
    const global_task_in *in = g->in;
    if (!g->row.exists) return STATUS_OK;
    if (pgq_col_ts(r, 0, 3, &g->start_us) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "unexpected row-lock result");
    int rc = tier_may_modify(c, &g->row, "task", in->id);
    if (rc == STATUS_OK && in->has_end && !in->has_start && in->end_us < g->start_us)
        rc = tier_fail(c, STATUS_EINVALID, "end_time: before the task's recorded start_time");
    return rc;
}

static int task_written(global_put *g, tier_ctx *c, const PGresult *r) {
    global_task *t = g->out;
    int rc = global_decode_task(c, r, 0, t);
    if (rc == STATUS_OK && t->has_end && t->end_us < t->start_us)
        rc = tier_fail(c, STATUS_EINVALID, "end_time: before start_time");
    return rc;
}

static const global_put_kind task_put = {
    "task", task_lock, task_locked, NULL, NULL, task_write, task_written,
};

tier_async *global_record_task_async(global_store *s, tier_ctx *c, const global_task_in *in,
                                     global_task *out, int *created, tier_async_done_fn done,
                                     void *arg) {
    (void)s;
    const char *ids = pgq_array_literal(c->ar, in->entity_ids, in->nentity_ids);
    if (!ids) return NULL;
    global_put g = {.k = &task_put,
                    .in = in,
                    .out = out,
                    .created = created,
                    .name = in->id,
                    .label = in->label,
                    .ids = ids};
    return global_put_start(c, &g, sizeof *in, in->pii_kinds, in->npii, done, arg);
}

typedef struct {
    global_list_tasks_in in;
    global_tasks_out *out;
} list_tasks_args;

static void build_list_tasks(tier_ctx *c, const global_list_tasks_in *in, pgq_sql *b) {
    pgq_sql_add(b, "SELECT " GLOBAL_T_COLS " FROM tasks t WHERE ");
    tier_sql_read_diode(b, c, "t");
    if (in->status) pgq_sql_add(b, " AND t.status = $%d", pgq_int4(b, in->status));
    if (in->type[0]) pgq_sql_add(b, " AND t.task_type = $%d", pgq_text(b, in->type));
    if (in->has_start) pgq_sql_add(b, " AND t.start_time >= $%d", pgq_ts(b, in->start_us));
    if (in->has_end) pgq_sql_add(b, " AND t.start_time < $%d", pgq_ts(b, in->end_us));
    if (in->has_after) {
        int p_ts = pgq_ts(b, in->after_start_us);
        pgq_sql_add(b, " AND (t.start_time < $%d OR (t.start_time = $%d AND t.id > $%d))", p_ts,
                    p_ts, pgq_text(b, in->after_id));
    }
    pgq_sql_add(b, " ORDER BY t.start_time DESC, t.id LIMIT $%d",
                pgq_int8(b, (int64_t)in->limit + 1));
}

static int decode_list_tasks(tier_async *op, const PGresult *r) {
    const list_tasks_args *a = op->arg;
    int rows = PQntuples(r), take = rows < a->in.limit ? rows : a->in.limit;
    global_task *v = arena_alloc(op->c->ar, ((size_t)take + 1) * sizeof *v);
    if (!v) return tier_fail(op->c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; i < take; i++) {
        int rc = global_decode_task(op->c, r, i, &v[i]);
        if (rc != STATUS_OK) return rc;
    }
    *a->out = (global_tasks_out){v, (size_t)take, rows > take};
    return STATUS_OK;
}

tier_async *global_list_tasks_async(global_store *s, tier_ctx *c, const global_list_tasks_in *in,
                                    global_tasks_out *out, tier_async_done_fn done, void *arg) {
    (void)s;
    list_tasks_args a = {*in, out};
    tier_async *op = tier_async_new(c, "list tasks", decode_list_tasks, &a, sizeof a, done, arg);
    if (op) build_list_tasks(c, in, &op->sql);
    return op;
}
