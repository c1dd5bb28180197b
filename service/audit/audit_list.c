/* audit_list: Audit.List. The read diode is in the WHERE clause (tenant
 * always; principal at audit:read = :own), pages are keyset cursors on
 * (time DESC, id DESC) served by the (tenant[, principal], time, id)
 * indexes, and the statement runs under a statement_timeout taken from
 * the call's deadline. Parameterized SQL only. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/audit/audit_internal.h"
#include "service/pb/pbtime.h"

#define DEFAULT_PAGE 50
#define MAX_PAGE 1000
#define NO_DEADLINE_TIMEOUT_MS 30000 /* statement_timeout when the call has none */
#define ACQUIRE_MAX_MS 5000          /* longest wait for a pooled connection */

static void *arena_alloc_cb(void *ctx, size_t n) { return arena_alloc(ctx, n); }

/* Hashes what a page token is valid for: the caller and every filter.
 * Not a secret (a forged cursor only moves within what the caller may
 * read anyway, the WHERE clause still holds); it makes a token reused with
 * other filters or by another caller fail loudly instead of paging
 * something else. */
static void binding(const principal *p, principal_breadth b, const audit_filter *f,
                    const char *start, const char *end, char out[17]) {
    const char *parts[] = {principal_tenant(p),
                           principal_sub(p),
                           b == PRINCIPAL_ALL ? "all" : "own",
                           f->principal ? f->principal : "",
                           f->method ? f->method : "",
                           f->service_prefix ? f->service_prefix : "",
                           f->target ? f->target : "",
                           start ? start : "-",
                           end ? end : "-"};
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    for (size_t i = 0; ok && i < sizeof parts / sizeof parts[0]; i++) {
        char len[24];
        int n = snprintf(len, sizeof len, "%zu:", strlen(parts[i]));
        ok = EVP_DigestUpdate(ctx, len, (size_t)n) == 1 &&
             EVP_DigestUpdate(ctx, parts[i], strlen(parts[i])) == 1;
    }
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen >= 8;
    EVP_MD_CTX_free(ctx);
    if (!ok) memset(md, 0, 8); /* never: SHA-256 cannot fail here */
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* Builds the statement and its parameters (text, in the arena). */
typedef struct {
    audit_buf sql;
    const char *v[10];
    int n;
    arena *ar;
} query;

static void param(query *q, const char *clause, const char *value) {
    q->v[q->n++] = value;
    audit_buf_printf(&q->sql, clause, q->n);
}

static int time_param(arena *ar, const Google__Protobuf__Timestamp *ts, const char **out) {
    int64_t us;
    if (pbtime_timestamp_us(ts, &us) != 0) return -1;
    char t[40];
    audit_codec_time(us, t);
    *out = arena_strdup(ar, t);
    return *out ? 0 : -1;
}

static char *dup_or_empty(arena *ar, const char *s) { return arena_strdup(ar, s ? s : ""); }

/* Copies row i of r into records[k] in the arena (the PGresult dies
 * before the response is encoded). */
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
    if (!row.tenant || !row.principal || !row.token_id || !row.method || !row.request_id)
        return -1;
    audit_codec_record(&row, rec, ts, d, idbuf);
    *out = rec;
    *time_us = row.time_us;
    *id = row.id;
    return 0;
}

grpc_status_code audit_list_handler(rpc_call *call, const ProtobufCMessage *msg,
                                    ProtobufCMessage *out, void *arg) {
    audit *a = arg;
    const Memory__V1__AuditListRequest *req = (const Memory__V1__AuditListRequest *)msg;
    Memory__V1__AuditListResponse *resp = (Memory__V1__AuditListResponse *)out;
    arena *ar = rpc_call_arena(call);
    const principal *p = rpc_call_principal(call);
    if (!p) {
        rpc_call_set_error(call, "audit: Audit.List needs a verified token");
        return GRPC_STATUS_UNAUTHENTICATED;
    }
    principal_breadth breadth = principal_scope(p, AUDIT_SCOPE);
    if (breadth == PRINCIPAL_DENY) {
        rpc_call_set_error(call, "audit: Audit.List needs the audit:read scope");
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    if (req->page_size < 0) {
        rpc_call_set_error(call, "page_size must not be negative (got %d)", (int)req->page_size);
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    int limit = req->page_size == 0 ? DEFAULT_PAGE
                                    : req->page_size > MAX_PAGE ? MAX_PAGE : req->page_size;
    audit_filter f;
    char err[256];
    int frc = audit_codec_filter(req->filter, principal_sub(p), breadth, ar, &f, err, sizeof err);
    if (frc != 0) {
        rpc_call_set_error(call, "%s", err);
        return frc == STATUS_EDENIED ? GRPC_STATUS_PERMISSION_DENIED
                                         : GRPC_STATUS_INVALID_ARGUMENT;
    }
    const char *start = NULL, *end = NULL;
    int64_t start_us = 0, end_us = 0;
    if (req->time_range && req->time_range->start_time) {
        if (time_param(ar, req->time_range->start_time, &start) != 0) {
            rpc_call_set_error(call, "time_range.start_time is not a valid timestamp");
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        pbtime_timestamp_us(req->time_range->start_time, &start_us);
    }
    if (req->time_range && req->time_range->end_time) {
        if (time_param(ar, req->time_range->end_time, &end) != 0) {
            rpc_call_set_error(call, "time_range.end_time is not a valid timestamp");
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        pbtime_timestamp_us(req->time_range->end_time, &end_us);
    }
    if (start && end && start_us >= end_us) {
        rpc_call_set_error(call, "time_range.start_time must be before time_range.end_time");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    char bind[17];
    binding(p, breadth, &f, start, end, bind);
    const char *cursor_time = NULL, *cursor_id = NULL;
    if (req->page_token && req->page_token[0]) {
        int64_t t_us, id;
        if (audit_codec_page_token_parse(req->page_token, bind, &t_us, &id) != 0) {
            rpc_call_set_error(call, "page_token is not a next_page_token of this request "
                                     "(same caller, same filter and time range)");
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        char t[40];
        audit_codec_time(t_us, t);
        cursor_time = arena_strdup(ar, t);
        cursor_id = arena_printf(ar, "%lld", (long long)id);
    }

    query q = {.ar = ar};
    audit_buf_puts(&q.sql, "SELECT " AUDIT_COLUMNS " FROM audit_log WHERE");
    param(&q, " tenant = $%d", principal_tenant(p));
    if (f.principal) param(&q, " AND principal = $%d", f.principal);
    if (f.method) param(&q, " AND method = $%d", f.method);
    if (f.service_prefix) param(&q, " AND starts_with(method, $%d)", f.service_prefix);
    if (f.target) param(&q, " AND target_ids @> ARRAY[$%d::text]", f.target);
    if (start) param(&q, " AND time >= $%d::timestamptz", start);
    if (end) param(&q, " AND time < $%d::timestamptz", end);
    if (cursor_time) {
        param(&q, " AND (time, id) < ($%d::timestamptz", cursor_time);
        param(&q, ", $%d::bigint)", cursor_id);
    }
    param(&q, " ORDER BY time DESC, id DESC LIMIT $%d", arena_printf(ar, "%d", limit + 1));
    char *sql = q.sql.oom ? NULL : arena_strdup(ar, q.sql.p);
    audit_buf_free(&q.sql);
    if (!sql || (req->page_token && req->page_token[0] && (!cursor_time || !cursor_id)) ||
        !q.v[q.n - 1]) {
        rpc_call_set_error(call, "out of memory");
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }

    int64_t left = rpc_call_remaining_ms(call);
    if (left <= 0) {
        rpc_call_set_error(call, "audit: the call's deadline passed");
        return GRPC_STATUS_DEADLINE_EXCEEDED;
    }
    int64_t timeout = left == INT64_MAX ? NO_DEADLINE_TIMEOUT_MS : left;
    char perr[256];
    PGconn *c = pg_pool_acquire(
        a->pg, rpc_now_ms() + (timeout < ACQUIRE_MAX_MS ? timeout : ACQUIRE_MAX_MS), perr,
        sizeof perr);
    if (!c) {
        rpc_call_set_error(call, "audit: cannot list the audit trail: %s", perr);
        return GRPC_STATUS_UNAVAILABLE;
    }
    char begin[96];
    snprintf(begin, sizeof begin, "BEGIN READ ONLY; SET LOCAL statement_timeout = %lld",
             (long long)(timeout > 0 ? timeout : 1));
    grpc_status_code st = GRPC_STATUS_OK;
    PGresult *r = PQexec(c, begin);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        st = audit_pg_status(call, c, r, "cannot list the audit trail");
        PQclear(r);
        r = NULL;
    } else {
        PQclear(r);
        r = PQexecParams(c, sql, q.n, NULL, q.v, NULL, NULL, 1);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            st = audit_pg_status(call, c, r, "cannot list the audit trail");
            PQclear(r);
            r = NULL;
        }
        PQclear(PQexec(c, r ? "COMMIT" : "ROLLBACK"));
    }
    pg_pool_release(a->pg, c, st == GRPC_STATUS_UNAVAILABLE);
    if (!r) return st;

    int rows = PQntuples(r);
    int n = rows > limit ? limit : rows;
    resp->records = n ? arena_alloc(ar, (size_t)n * sizeof *resp->records) : NULL;
    int64_t last_time = 0, last_id = 0;
    for (int i = 0; i < n && st == GRPC_STATUS_OK; i++) {
        if (!resp->records || take_row(ar, r, i, &resp->records[i], &last_time, &last_id) != 0) {
            rpc_call_set_error(call, "audit: cannot decode an audit row");
            st = GRPC_STATUS_INTERNAL;
        }
    }
    PQclear(r);
    if (st != GRPC_STATUS_OK) return st;
    resp->n_records = (size_t)n;
    if (rows > limit) {
        char *tok = audit_codec_page_token(last_time, last_id, bind);
        resp->next_page_token = tok ? arena_strdup(ar, tok) : NULL;
        free(tok);
        if (!resp->next_page_token) {
            rpc_call_set_error(call, "out of memory");
            return GRPC_STATUS_RESOURCE_EXHAUSTED;
        }
    }
    return GRPC_STATUS_OK;
}
