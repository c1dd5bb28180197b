/* audit_list: Audit.List. The read diode is in the WHERE clause (tenant
 * always; principal at audit:read = :own), pages are keyset cursors on
 * (time DESC, id DESC) served by the (tenant[, principal], time, id)
 * indexes, and the statement runs on the event loop (tier_async) with the
 * call's deadline; a client's cancel cancels it. Parameterized SQL only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/audit_service/audit_service_internal.h"
#include "service/store/pgq.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_page.h"

static void *arena_alloc_cb(void *ctx, size_t n) { return arena_alloc(ctx, n); }

static char *dup_or_empty(arena *ar, const char *s) { return arena_strdup(ar, s ? s : ""); }

/* Copies row i of r into *out in the arena (the PGresult dies before the
 * response is encoded). */
static int take_row(arena *ar, const PGresult *r, int i, Memory__V1__AuditRecord **out,
                    int64_t *time_us, int64_t *id) {
    audit_row row;
    if (audit_codec_row(r, i, arena_alloc_cb, ar, &row) != 0) return -1;
    Memory__V1__AuditRecord *rec = arena_alloc(ar, sizeof *rec);
    Google__Protobuf__Timestamp *ts = arena_alloc(ar, sizeof *ts);
    Google__Protobuf__Duration *d = arena_alloc(ar, sizeof *d);
    char *idbuf = arena_alloc(ar, 24);
    if (!rec || !ts || !d || !idbuf) return -1;
    row.tenant = dup_or_empty(ar, row.tenant);
    row.principal = dup_or_empty(ar, row.principal);
    row.token_id = dup_or_empty(ar, row.token_id);
    row.method = dup_or_empty(ar, row.method);
    row.request_id = dup_or_empty(ar, row.request_id);
    row.trace_id = dup_or_empty(ar, row.trace_id);
    row.client_identity = dup_or_empty(ar, row.client_identity);
    if (!row.tenant || !row.principal || !row.token_id || !row.method || !row.request_id ||
        !row.trace_id || !row.client_identity)
        return -1;
    audit_codec_record(&row, rec, ts, d, idbuf);
    *out = rec;
    *time_us = row.time_us;
    *id = row.id;
    return 0;
}

/* The query: the tenant, the filter, the time range, after the cursor;
 * then the page it read. Lives in the call's arena (tier_async_new copies
 * it) until the call ends. */
typedef struct {
    const principal *p;
    const audit_filter *f;
    const tier_time_range *tr;
    int resumed;
    int64_t after_time_us, after_id;
    int limit;
    tier_page pg;
    /* out */
    Memory__V1__AuditListResponse *resp;
    int more;
    int64_t last_time_us, last_id;
} list_args;

static void list_sql(const list_args *a, pgq_sql *b) {
    pgq_sql_add(b, "SELECT " AUDIT_COLUMNS " FROM audit_log WHERE tenant = $%d",
                pgq_text(b, principal_tenant(a->p)));
    const audit_filter *f = a->f;
    if (f->principal) pgq_sql_add(b, " AND principal = $%d", pgq_text(b, f->principal));
    if (f->method) pgq_sql_add(b, " AND method = $%d", pgq_text(b, f->method));
    if (f->service_prefix)
        pgq_sql_add(b, " AND starts_with(method, $%d)", pgq_text(b, f->service_prefix));
    if (f->target) pgq_sql_add(b, " AND target_ids @> ARRAY[$%d]", pgq_text(b, f->target));
    if (a->tr->has_start) pgq_sql_add(b, " AND time >= $%d", pgq_ts(b, a->tr->start_us));
    if (a->tr->has_end) pgq_sql_add(b, " AND time < $%d", pgq_ts(b, a->tr->end_us));
    if (a->resumed) {
        int p_time = pgq_ts(b, a->after_time_us);
        pgq_sql_add(b, " AND (time, id) < ($%d, $%d)", p_time, pgq_int8(b, a->after_id));
    }
    pgq_sql_add(b, " ORDER BY time DESC, id DESC LIMIT $%d", pgq_int8(b, (int64_t)a->limit + 1));
}

/* On the loop thread: the rows into the response, in the call's arena. */
static int decode_list(tier_async *op, const PGresult *r) {
    list_args *a = op->arg;
    arena *ar = op->c->ar;
    int rows = PQntuples(r);
    int n = rows > a->limit ? a->limit : rows;
    Memory__V1__AuditListResponse *resp = a->resp;
    resp->records = n ? arena_alloc(ar, (size_t)n * sizeof *resp->records) : NULL;
    for (int i = 0; i < n; i++)
        if (!resp->records ||
            take_row(ar, r, i, &resp->records[i], &a->last_time_us, &a->last_id) != 0)
            return tier_fail(op->c, STATUS_EINTERNAL, "audit: cannot decode an audit row");
    resp->n_records = (size_t)n;
    a->more = rows > a->limit;
    return STATUS_OK;
}

/* On the loop thread once the page is read: the next page's token. */
static grpc_status_code render_list(tier_pending_call *pc) {
    list_args *a = pc->arg;
    if (!a->more) return GRPC_STATUS_OK;
    arena *ar = pc->c->ar;
    const char *next[2] = {arena_printf(ar, "%lld", (long long)a->last_time_us),
                           arena_printf(ar, "%lld", (long long)a->last_id)};
    if (!next[0] || !next[1] ||
        !(a->resp->next_page_token = tier_page_seal(pc->call, &a->pg, next, 2)))
        return rpc_call_oom(pc->call);
    return GRPC_STATUS_OK;
}

/* The cursor of a page token: the last record's time and id. */
static int parse_cursor(const char *const *cur, int64_t *time_us, int64_t *id) {
    char *e1 = NULL, *e2 = NULL;
    *time_us = strtoll(cur[0], &e1, 10);
    *id = strtoll(cur[1], &e2, 10);
    return e1 && !*e1 && e2 && !*e2 ? 0 : -1;
}

RPC_UNARY_HANDLER(audit_list_handler, audit_service, Memory__V1__AuditListRequest,
                  Memory__V1__AuditListResponse) {
    audit_service *a = svc;
    arena *ar = rpc_call_arena(call);
    const principal *p;
    audit_filter *f = arena_zalloc(ar, sizeof *f);
    tier_time_range *tr = arena_zalloc(ar, sizeof *tr);
    if (!f || !tr) return rpc_call_oom(call);
    RPC_CHECK(audit_caller_filter(call, "Audit.List", req->filter, &p, f));
    list_args la = {.p = p, .f = f, .tr = tr, .resp = resp};
    const char *cur[2];
    RPC_CHECK(tier_page_size(call, req->page_size, &la.limit));
    RPC_CHECK(tier_check_time_range(call, "time_range", req->time_range, tr));
    RPC_CHECK(tier_page_bind(call, p, &req->base, &la.pg));
    RPC_CHECK(tier_page_open(call, &la.pg, req->page_token, cur, 2, 1, &la.resumed));
    if (la.resumed && parse_cursor(cur, &la.after_time_us, &la.after_id) != 0)
        return tier_page_refuse(call, &la.pg);
    tier_async *op = tier_pending_op(call, "audit", NULL, "list the audit trail", decode_list, &la,
                                     sizeof la, render_list, &resp->base);
    if (!op) return rpc_call_oom(call);
    list_sql(op->arg, &op->sql);
    return tier_pending(call, &a->store, op);
}
