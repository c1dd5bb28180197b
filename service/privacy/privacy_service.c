/* privacy_service: the Privacy tier; see privacy_service.h. */
#include "service/privacy/privacy_service.h"

#include <libpq-fe.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memory/v1/privacy.pb-c.h"
#include "service/auth/authn.h"
#include "service/auth/jwt.h"
#include "service/auth/nsglob.h"
#include "service/auth/stream_quota.h"
#include "service/core/cancel.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/taskpool.h"
#include "service/core/text.h"
#include "service/core/uuid.h"
#include "service/metrics/metrics.h"
#include "service/pb/pbjson.h"
#include "service/pii/pii_policy.h"
#include "service/privacy/privacy_receipt.h"
#include "service/privacy/privacy_retention.h"
#include "service/privacy/privacy_sweeper.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_meta.h"
#include "service/tier/tier_page.h"
#include "service/tier/tier_sql.h"

#define REASON_MAX 1024
#define ALL_NAMESPACES "*:*:*" /* the glob that matches every namespace */

typedef struct privacy_service {
    const tier_env *env;      /* the erasers, the audit trail, the signing key */
    privacy_sweeper *sweeper; /* NULL: this replica does not sweep */
    /* Exports run here, not on the server's task pool: an export waits for
     * its reader, and a slow reader must hold no thread the other calls
     * need (--export-threads). */
    taskpool *export_threads;
    stream_quota *exports; /* open exports per principal (--export-max-per-principal) */
} privacy_service;

/* ------------------------------------------------------------ Forget */

/* A request's subject (Forget's and Export's oneof, numbered alike). */
typedef struct subject {
    int is_principal, is_subject_id;
    const char *principal, *subject_id;
} subject;

/* The selection of a subject for caller p holding `scope` (its `:all`
 * breadth reaches other principals' records), checked; what says what the
 * scope does ("erasing", "exporting") in a refusal. */
static grpc_status_code selection(rpc_call *call, const principal *p, const char *scope,
                                  const char *what, const subject *s, tier_erase_sel *sel) {
    memset(sel, 0, sizeof *sel);
    sel->tenant = principal_tenant(p);
    principal_breadth breadth = principal_scope(p, scope);
    if (s->is_principal) {
        RPC_CHECK(tier_check_name(call, "principal", s->principal, PRIVACY_SUBJECT_MAX, 1));
        if (breadth != PRINCIPAL_ALL && strcmp(s->principal, principal_sub(p)) != 0) {
            rpc_call_set_error(call,
                               "principal: %s another principal's records needs %s:all (this "
                               "token reaches only its own, \"%s\")",
                               what, scope, principal_sub(p));
            return GRPC_STATUS_PERMISSION_DENIED;
        }
        sel->owner = s->principal;
    } else if (s->is_subject_id) {
        RPC_CHECK(tier_check_name(call, "subject_id", s->subject_id, PRIVACY_SUBJECT_MAX, 1));
        sel->subject_id = s->subject_id;
        if (breadth != PRINCIPAL_ALL) sel->owner = principal_sub(p);
    } else {
        return rpc_call_invalid(call, "subject: set principal or subject_id");
    }
    /* The namespaced tiers reach only the token's namespaces, as every
     * other call of theirs; a claim covering every namespace bounds none. */
    const jwt_claims *cl = principal_claims(p);
    sel->ns_limited = 1;
    for (size_t i = 0; i < cl->nns && sel->ns_limited; i++)
        if (nsglob_covers(cl->ns[i], ALL_NAMESPACES)) sel->ns_limited = 0;
    sel->ns = cl->ns;
    sel->nns = cl->nns;
    return GRPC_STATUS_OK;
}

static grpc_status_code forget_selection(rpc_call *call, const principal *p,
                                         const Memory__V1__PrivacyForgetRequest *req,
                                         tier_erase_sel *sel) {
    subject s = {.is_principal =
                     req->subject_case == MEMORY__V1__PRIVACY_FORGET_REQUEST__SUBJECT_PRINCIPAL,
                 .is_subject_id =
                     req->subject_case == MEMORY__V1__PRIVACY_FORGET_REQUEST__SUBJECT_SUBJECT_ID,
                 .principal = req->principal,
                 .subject_id = req->subject_id};
    RPC_CHECK(selection(call, p, "privacy:forget", "erasing", &s, sel));
    sel->dry_run = req->dry_run;
    return tier_check_text(call, "reason", req->reason, REASON_MAX);
}

/* A context for an erasure's or an export's erasers: the call's deadline
 * and cancel, the selection's principal (*ep, the caller's to release).
 * GRPC_STATUS_OK, or the call's status. */
static grpc_status_code erasure_ctx(rpc_call *call, const tier_erase_sel *sel, tier_ctx *c,
                                    principal **ep) {
    if (!(*ep = tier_erase_principal(sel))) return rpc_call_oom(call);
    *c = tier_ctx_for(call, "privacy", NULL);
    c->p = *ep;
    c->read_breadth = c->write_breadth = sel->owner ? PRINCIPAL_OWN : PRINCIPAL_ALL;
    return tier_ctx_watch_cancel(c, call);
}

/* Runs every eraser into r->counts, and how long each took into took_ms
 * (for the log); the first failure ends the call (tiers before it stay
 * erased: Forget is run again). */
static grpc_status_code erase_all(rpc_call *call, const privacy_service *svc,
                                  const tier_erase_sel *sel, privacy_receipt *r, int64_t *took_ms) {
    principal *ep = NULL;
    tier_ctx c;
    grpc_status_code st = erasure_ctx(call, sel, &c, &ep);
    for (size_t k = 0; st == GRPC_STATUS_OK && k < svc->env->nerasers; k++) {
        const tier_eraser *e = &svc->env->erasers[k];
        int64_t n = 0, t0 = rpc_now_ms();
        c.err[0] = '\0';
        int rc = e->r->erase(e->state, &c, sel, &n);
        took_ms[e->tier] += rpc_now_ms() - t0;
        if (rc == STATUS_OK) {
            r->counts[e->tier] += n;
            continue;
        }
        log_fields(LOG_WARN, "forget stopped at a tier: call it again", LOG_F_STR, "tier", e->name,
                   LOG_F_STR, "code", status_name(rc), LOG_F_STR, "reason", c.err, LOG_F_STR,
                   "request_id", rpc_call_request_id(call), LOG_F_END);
        char why[300];
        snprintf(why, sizeof why, "%.*s", (int)sizeof why - 1, c.err[0] ? c.err : status_name(rc));
        snprintf(c.err, sizeof c.err,
                 "%s: %s (the tiers before it are erased; Forget is idempotent: call it again)",
                 e->name, why);
        st = tier_status(call, rc, &c);
    }
    principal_unref(ep);
    return st;
}

typedef struct store_job {
    const privacy_receipt *r;
    const char *json, *signed_receipt;
} store_job;

static int store_in(pgq_session *ss, tier_ctx *c, void *arg) {
    const store_job *j = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "INSERT INTO privacy_receipts (tenant, receipt_id, requested_by, "
                "subject_principal, complete_time, receipt, signed) VALUES "
                "($%d, $%d, $%d, $%d, $%d, $%d, $%d)",
                pgq_text(&b, j->r->tenant), pgq_text(&b, j->r->receipt_id),
                pgq_text(&b, j->r->requested_by),
                j->r->principal ? pgq_text(&b, j->r->principal) : pgq_null(&b, PGQ_OID_TEXT),
                pgq_ts(&b, j->r->complete_us), pgq_jsonb(&b, j->json),
                pgq_text(&b, j->signed_receipt));
    PGresult *res = NULL;
    int rc = pgq_pipeline(ss, "store receipt", "BEGIN", &b, 0, &res);
    PQclear(res);
    return rc == STATUS_OK ? tier_sql_commit(ss, c) : rc;
}

/* The receipt and the call's audit row, durable together. */
static grpc_status_code store(rpc_call *call, const privacy_service *svc, const privacy_receipt *r,
                              const char *signed_receipt) {
    char *json = privacy_receipt_json(r);
    if (!json) return rpc_call_oom(call);
    tier_ctx c = tier_ctx_for(call, "privacy", svc->env->audit);
    store_job j = {r, json, signed_receipt};
    int rc = tier_sql_run(svc->env->pg, &c, TIER_MAX_STATEMENT_MS, store_in, &j);
    if (rc != STATUS_OK) {
        /* The erasure stands: say so, and keep what the receipt said. */
        log_fields(LOG_WARN, "forget done but its receipt not stored", LOG_F_STR, "receipt", json,
                   LOG_F_STR, "reason", c.err, LOG_F_END);
        char why[256];
        snprintf(why, sizeof why, "%.*s", (int)sizeof why - 1, c.err);
        snprintf(c.err, sizeof c.err,
                 "every tier is erased, but the receipt could not be stored (%s); the server "
                 "log has its counts, and Forget again issues a receipt (of nothing left)",
                 why);
    }
    free(json);
    return rc == STATUS_OK ? GRPC_STATUS_OK : tier_status(call, rc, &c);
}

/* "global=3 episodic=0 ..." of counts by tier, for the log. */
static const char *tier_text(arena *a, const int64_t *by_tier) {
    char buf[256];
    size_t n = 0;
    for (int t = 1; t <= privacy_tiers() && n < sizeof buf; t++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%lld", t > 1 ? " " : "",
                              privacy_tier_name(t), (long long)by_tier[t]);
    return arena_strdup(a, buf);
}

static RPC_UNARY_HANDLER(do_forget, privacy_service, Memory__V1__PrivacyForgetRequest,
                         Memory__V1__PrivacyForgetResponse) {
    const principal *p = authn_principal(call);
    tier_erase_sel sel;
    RPC_CHECK(forget_selection(call, p, req, &sel));
    arena *a = rpc_call_arena(call);
    privacy_receipt r = {.tenant = sel.tenant,
                         .principal = req->subject_case ==
                                              MEMORY__V1__PRIVACY_FORGET_REQUEST__SUBJECT_PRINCIPAL
                                          ? req->principal
                                          : NULL,
                         .subject_id = sel.subject_id,
                         .dry_run = sel.dry_run,
                         .request_id = rpc_call_request_id(call),
                         .requested_by = principal_sub(p)};
    static const char *const every_namespace[] = {ALL_NAMESPACES};
    r.has_scope = 1;
    r.scope_owner = sel.owner;
    r.ns = sel.ns_limited ? (const char *const *)sel.ns : every_namespace;
    r.nns = sel.ns_limited ? sel.nns : 1;
    uuid_new(r.receipt_id);
    tier_target(call, "receipt:%s", r.receipt_id);
    int64_t took_ms[PRIVACY_TIER_MAX] = {0};
    RPC_CHECK(erase_all(call, svc, &sel, &r, took_ms));
    r.complete_us = clock_wall_us();

    const char *kid = NULL;
    EVP_PKEY *key = authn_signing_key(svc->env->auth, &kid);
    char *jws = NULL, err[256];
    if (key && privacy_receipt_sign(key, kid, &r, &jws, err, sizeof err) != 0) {
        log_fields(LOG_ERROR, "receipt not signed", LOG_F_STR, "reason", err, LOG_F_END);
        return rpc_call_fail(call, STATUS_EINTERNAL, "the receipt could not be signed");
    }
    const char *signed_receipt = jws ? arena_strdup(a, jws) : "";
    free(jws);
    if (!signed_receipt) return rpc_call_oom(call);
    if (!sel.dry_run) RPC_CHECK(store(call, svc, &r, signed_receipt));

    log_fields(LOG_INFO, sel.dry_run ? "forget dry run" : "forget done", LOG_F_STR, "receipt_id",
               r.receipt_id, LOG_F_STR, r.principal ? "principal" : "subject_id",
               r.principal ? r.principal : r.subject_id, LOG_F_STR, "tenant", r.tenant, LOG_F_STR,
               "requested_by", r.requested_by, LOG_F_STR, "counts", tier_text(a, r.counts),
               LOG_F_STR, "tier_ms", tier_text(a, took_ms), LOG_F_STR, "reason", req->reason,
               LOG_F_INT, "duration_ms", rpc_now_ms() - rpc_call_start_ms(call), LOG_F_STR,
               "request_id", r.request_id, LOG_F_END);
    if (!(resp->receipt = privacy_receipt_render(a, &r, signed_receipt))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ ListReceipts */

typedef struct list_job {
    int limit;
    const char *after_time, *after_id; /* the cursor; NULL on the first page */
    PGresult *res;
} list_job;

static int list_in(pgq_session *ss, tier_ctx *c, void *arg) {
    list_job *j = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "SELECT receipt, signed, (extract(epoch FROM complete_time) * 1000000)::int8, "
                "receipt_id FROM privacy_receipts WHERE tenant = $%d",
                pgq_text(&b, principal_tenant(c->p)));
    if (c->read_breadth != PRINCIPAL_ALL) {
        int me = pgq_text(&b, principal_sub(c->p));
        pgq_sql_add(&b, " AND (requested_by = $%d OR subject_principal = $%d)", me, me);
    }
    if (j->after_time)
        pgq_sql_add(&b, " AND (complete_time, receipt_id) < ($%d, $%d)",
                    pgq_ts(&b, atoll(j->after_time)), pgq_text(&b, j->after_id));
    pgq_sql_add(&b, " ORDER BY complete_time DESC, receipt_id DESC LIMIT %d", j->limit + 1);
    return pgq_pipeline(ss, "list receipts", NULL, &b, 1, &j->res);
}

static RPC_UNARY_HANDLER(do_list_receipts, privacy_service, Memory__V1__PrivacyListReceiptsRequest,
                         Memory__V1__PrivacyListReceiptsResponse) {
    const principal *p = authn_principal(call);
    int size;
    RPC_CHECK(tier_page_size(call, req->page_size, &size));
    tier_page pg;
    RPC_CHECK(tier_page_bind(call, p, &req->base, &pg));
    list_job j = {.limit = size};
    RPC_CHECK(tier_page_resume(call, &pg, req->page_token, &j.after_time, &j.after_id, 1));
    tier_ctx c = tier_ctx_for(call, "privacy", NULL);
    c.read_breadth = principal_scope(p, "privacy:read");
    int rc = tier_sql_run(svc->env->pg, &c, TIER_MAX_STATEMENT_MS, list_in, &j);
    if (rc != STATUS_OK) return tier_status(call, rc, &c);
    arena *a = rpc_call_arena(call);
    int rows = PQntuples(j.res), n = rows > size ? size : rows;
    grpc_status_code st = GRPC_STATUS_OK;
    resp->receipts = arena_alloc(a, ((size_t)n + 1) * sizeof *resp->receipts);
    if (!resp->receipts) st = rpc_call_oom(call);
    for (int i = 0; st == GRPC_STATUS_OK && i < n; i++) {
        const char *json = pgq_col_jsonb(a, j.res, i, 0), *jws = pgq_col_str(a, j.res, i, 1);
        privacy_receipt r;
        char err[256];
        if (!json || !jws || privacy_receipt_parse(a, json, strlen(json), &r, err, sizeof err)) {
            log_fields(LOG_ERROR, "stored receipt unreadable", LOG_F_STR, "reason",
                       json ? err : "no payload", LOG_F_END);
            st = rpc_call_fail(call, STATUS_EINTERNAL, "a stored receipt is unreadable");
            break;
        }
        if (!(resp->receipts[resp->n_receipts++] = privacy_receipt_render(a, &r, jws)))
            st = rpc_call_oom(call);
        else tier_target(call, "receipt:%s", r.receipt_id);
    }
    if (st == GRPC_STATUS_OK && rows > size) {
        int64_t us = 0;
        pgq_col_int(j.res, size - 1, 2, &us);
        char t[24];
        snprintf(t, sizeof t, "%lld", (long long)us);
        const char *cursor[2] = {t, pgq_col_str(a, j.res, size - 1, 3)};
        if (!cursor[1] || !(resp->next_page_token = tier_page_seal(call, &pg, cursor, 2)))
            st = rpc_call_oom(call);
    }
    PQclear(j.res);
    return st;
}

/* ------------------------------------------------------------ Export */

/* One export under way: what its emit needs. */
typedef struct export_run {
    rpc_call *call;
    struct cancel_token *cancel; /* the call's (tier_ctx_watch_cancel) */
    int tier;                    /* of the exporter running */
    arena *scratch;              /* one record's message, reset per record */
    int64_t records;             /* sent so far */
    char why[160];               /* what ended the export in emit, for the status */
} export_run;

/* Exports that may wait for an export thread, per thread. */
#define EXPORT_QUEUE_PER_THREAD 4

/* How long a reader may take no message before its export ends. */
#define EXPORT_STALL_MS 30000

/* Waits until the stream's buffer has room (a slow reader holds the export
 * back instead of growing the buffer); ends with the call (its deadline, a
 * cancel) or when the reader took nothing for EXPORT_STALL_MS. */
static int wait_for_room(export_run *x) {
    int64_t give_up = rpc_now_ms() + EXPORT_STALL_MS;
    while (rpc_call_queued_bytes(x->call) > 0) {
        if (x->cancel && cancel_fired(x->cancel)) return STATUS_ECANCELLED;
        if (rpc_call_remaining_ms(x->call) <= 0) return STATUS_ETIMEOUT;
        if (rpc_now_ms() >= give_up) {
            snprintf(x->why, sizeof x->why,
                     "the client took no message for %d s: the export ended (call it again)",
                     EXPORT_STALL_MS / 1000);
            return STATUS_EBUSY;
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return STATUS_OK;
}

static int emit_record(void *arg, const tier_export_rec *r) {
    export_run *x = arg;
    arena_reset(x->scratch);
    Memory__V1__PrivacyExportResponse m = MEMORY__V1__PRIVACY_EXPORT_RESPONSE__INIT;
    m.tier = (Memory__V1__Tier)x->tier;
    m.kind = (char *)r->kind;
    m.id = (char *)r->id;
    if (pbjson_to_struct(x->scratch, r->json, strlen(r->json), &m.record) != 0) {
        /* The stores hold JSON objects: one that does not convert is a
         * bug or corrupt data, named here, not "out of memory". */
        snprintf(x->why, sizeof x->why, "%s %.100s: its content is not a JSON object we can send",
                 r->kind, r->id);
        return STATUS_EINTERNAL;
    }
    if (!(m.meta = tier_meta_render(x->scratch, r->meta))) return STATUS_ENOMEM;
    for (;;) {
        int rc = rpc_call_send(x->call, &m.base);
        if (rc == 0) break;
        if (rc != RPC_SEND_OVERFLOW) return STATUS_ECANCELLED; /* the call ended */
        if ((rc = wait_for_room(x)) != STATUS_OK) return rc;
    }
    x->records++;
    return STATUS_OK;
}

static grpc_status_code export_selection(rpc_call *call, const principal *p,
                                         const Memory__V1__PrivacyExportRequest *req,
                                         tier_erase_sel *sel) {
    subject s = {.is_principal =
                     req->subject_case == MEMORY__V1__PRIVACY_EXPORT_REQUEST__SUBJECT_PRINCIPAL,
                 .is_subject_id =
                     req->subject_case == MEMORY__V1__PRIVACY_EXPORT_REQUEST__SUBJECT_SUBJECT_ID,
                 .principal = req->principal,
                 .subject_id = req->subject_id};
    RPC_CHECK(selection(call, p, "privacy:export", "exporting", &s, sel));
    sel->max_label = (int)principal_clr(p); /* a read: the caller's ceiling holds */
    return GRPC_STATUS_OK;
}

/* Export is a read: a tier is exported only when the token may read it
 * directly, its `<tier>:read` scope at the breadth the selection needs
 * (`:all` when it reaches records the caller does not own). */
static int may_read_tier(const principal *p, const tier_eraser *e, const tier_erase_sel *sel) {
    char scope[64];
    snprintf(scope, sizeof scope, "%s:read", e->name);
    principal_breadth b = principal_scope(p, scope);
    int own = sel->owner && strcmp(sel->owner, principal_sub(p)) == 0;
    return b == PRINCIPAL_ALL || (own && b == PRINCIPAL_OWN);
}

/* On a task-pool thread: every exporter in the erasers' order, the records
 * streamed as they come; the status ends the stream. */
static RPC_UNARY_FN(export_all) {
    (void)resp;
    const privacy_service *svc = arg;
    const principal *p = authn_principal(call);
    tier_erase_sel sel;
    RPC_CHECK(export_selection(call, p, (const Memory__V1__PrivacyExportRequest *)req, &sel));
    export_run x = {.call = call, .scratch = arena_create()};
    principal *ep = NULL;
    tier_ctx c = {0};
    grpc_status_code st = x.scratch ? erasure_ctx(call, &sel, &c, &ep) : rpc_call_oom(call);
    x.cancel = c.cancel;
    char skipped[RPC_TRAILER_VALUE_MAX] = "";
    for (size_t k = 0; st == GRPC_STATUS_OK && k < svc->env->nerasers; k++) {
        const tier_eraser *e = &svc->env->erasers[k];
        if (!e->r->exporter) continue;
        if (!may_read_tier(p, e, &sel)) {
            size_t n = strlen(skipped);
            snprintf(skipped + n, sizeof skipped - n, "%s%s", n ? "," : "", e->name);
            continue;
        }
        x.tier = e->tier;
        c.err[0] = '\0';
        int rc = e->r->exporter(e->state, &c, &sel, emit_record, &x);
        if (rc == STATUS_OK) continue;
        if (!c.err[0]) tier_fail(&c, rc, "%s", x.why[0] ? x.why : status_text(rc));
        log_fields(LOG_WARN, "export stopped at a tier", LOG_F_STR, "tier", e->name, LOG_F_STR,
                   "code", status_name(rc), LOG_F_STR, "reason", c.err, LOG_F_INT, "records_sent",
                   x.records, LOG_F_STR, "request_id", rpc_call_request_id(call), LOG_F_END);
        st = tier_status(call, rc, &c);
    }
    if (skipped[0]) rpc_call_set_trailer(call, "memoryd-export-skipped", skipped);
    log_fields(st == GRPC_STATUS_OK ? LOG_INFO : LOG_WARN, "export", LOG_F_STR,
               sel.subject_id ? "subject_id" : "principal",
               sel.subject_id ? sel.subject_id : sel.owner, LOG_F_STR, "tenant", sel.tenant,
               LOG_F_STR, "requested_by", principal_sub(p), LOG_F_INT, "records", x.records,
               LOG_F_STR, "skipped_tiers", skipped, LOG_F_STR, "request_id",
               rpc_call_request_id(call), LOG_F_END);
    arena_free(x.scratch);
    principal_unref(ep);
    return st;
}

static grpc_status_code do_export(rpc_call *call, const ProtobufCMessage *req, void *arg) {
    const privacy_service *svc = arg;
    tier_erase_sel sel;
    RPC_CHECK(export_selection(call, authn_principal(call),
                               (const Memory__V1__PrivacyExportRequest *)req, &sel));
    const Memory__V1__PrivacyExportRequest *r = (const Memory__V1__PrivacyExportRequest *)req;
    tier_target(call, "export:%s:%s", sel.subject_id ? "subject" : "principal",
                sel.subject_id ? sel.subject_id : r->principal);
    RPC_CHECK(stream_quota_take(svc->exports, call));
    return rpc_call_continue_on(call, svc->export_threads, "the export threads (--export-threads)",
                                export_all, arg);
}

/* ------------------------------------------------------------ the tier */

/* The policy of the flags, logged rule by rule; its rules may name the
 * tiers of env that keep long-term records. */
static int load_policy(const tier_env *env, retention_policy *p, char *err, size_t errlen) {
    const config *cfg = env->cfg;
    retention_tier tiers[TIER_MAX_ERASERS];
    size_t ntiers = 0;
    for (size_t i = 0; i < env->nerasers; i++)
        if (env->erasers[i].r->tables)
            tiers[ntiers++] = (retention_tier){env->erasers[i].name, env->erasers[i].tier};
    char *file = NULL;
    size_t len = 0;
    const char *path = cfg ? cfg->retention_policy : NULL;
    if (path && path[0] && !(file = text_read_file(path, &len))) {
        snprintf(err, errlen, "--retention-policy: cannot read %s", path);
        return -1;
    }
    int rc = retention_policy_build(cfg ? cfg->retention : NULL, cfg ? cfg->retention_pii : NULL,
                                    file, len, tiers, ntiers, p, err, errlen);
    free(file);
    for (size_t i = 0; rc == 0 && i < p->n; i++) {
        char text[160];
        retention_rule_text(&p->rules[i], text, sizeof text);
        log_fields(LOG_INFO, "retention rule", LOG_F_STR, "rule", text, LOG_F_END);
    }
    return rc;
}

/* The audit trail's keeping of the flags (--audit-retention, a duration
 * or "off"; --audit-max-mib), logged. */
static int audit_policy(const config *cfg, audit_keeper_policy *pol, char *err, size_t errlen) {
    memset(pol, 0, sizeof *pol);
    const char *ret = cfg && cfg->audit_retention ? cfg->audit_retention : "off";
    if (strcmp(ret, "off") != 0 &&
        (text_parse_duration(ret, &pol->retention_s) != 0 || pol->retention_s < 1))
        return snprintf(err, errlen,
                        "--audit-retention: \"%.40s\" is not a duration (90s, 12h, 30d) or off",
                        ret),
               -1;
    pol->max_bytes = cfg ? (int64_t)cfg->audit_max_mib * 1024 * 1024 : 0;
    log_fields(LOG_INFO, "audit trail retention", LOG_F_STR, "retention", ret, LOG_F_INT, "max_mib",
               cfg ? (int64_t)cfg->audit_max_mib : 0, LOG_F_END);
    return 0;
}

static int privacy_open(tier_env *env, void **state, char *err, size_t errlen) {
    privacy_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    if (!svc) return -1;
    svc->env = env;
    int threads = env->cfg && env->cfg->export_threads > 0 ? env->cfg->export_threads : 4;
    int per_principal =
        env->cfg && env->cfg->export_max_per_principal > 0 ? env->cfg->export_max_per_principal : 2;
    if (taskpool_create("export", threads, (size_t)threads * EXPORT_QUEUE_PER_THREAD,
                        &svc->export_threads, err, errlen) != 0)
        return -1;
    if (!(svc->exports = stream_quota_create_for("exports", INT_MAX, "no limit", per_principal,
                                                 "--export-max-per-principal")))
        return snprintf(err, errlen, "out of memory"), -1;
    retention_policy policy;
    audit_keeper_policy audit;
    if (load_policy(env, &policy, err, errlen) != 0 ||
        audit_policy(env->cfg, &audit, err, errlen) != 0)
        return -1;
    int period = env->cfg ? env->cfg->retention_sweep_ms : 0;
    if (period > 0 && (policy.n > 0 || audit.retention_s || audit.max_bytes) &&
        privacy_sweeper_start(env, &policy, period, env->cfg->retention_batch, &audit,
                              &svc->sweeper) != 0)
        return snprintf(err, errlen, "cannot start the retention sweeper (memory or threads)"), -1;
    if (env->cfg && env->cfg->metrics_listen && env->cfg->metrics_listen[0] &&
        ((svc->sweeper &&
          metrics_add_collector(privacy_sweeper_metrics_collect, svc->sweeper) != 0) ||
         metrics_add_collector(pii_policy_metrics_collect, NULL) != 0))
        return snprintf(err, errlen, "cannot register the privacy metrics"), -1;
    if (!authn_signing_key(env->auth, NULL))
        log_fields(LOG_WARN,
                   "no --signing-key: Forget receipts are issued unsigned (not verifiable "
                   "offline)",
                   LOG_F_END);
    return 0;
}

#define SVC "memory.v1.Privacy"
static const rpc_method methods[] = {
    RPC_METHOD_BLOCKING(SVC, "Forget", memory__v1__privacy_forget, "privacy:forget", do_forget),
    RPC_METHOD_BLOCKING(SVC, "ListReceipts", memory__v1__privacy_list_receipts, "privacy:read",
                        do_list_receipts),
    RPC_METHOD_SERVER_STREAM(SVC, "Export", memory__v1__privacy_export, "privacy:export",
                             do_export),
};

static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG}};

static void privacy_free(void *state) {
    privacy_service *svc = state;
    if (!svc) return;
    privacy_sweeper_stop(svc->sweeper);
    taskpool_free(svc->export_threads); /* after the server: its calls ended the exports */
    stream_quota_free(svc->exports);
    free(svc);
}

const tier privacy_tier = {TIER_FIELDS("privacy", services, methods, privacy_open, privacy_free)};
