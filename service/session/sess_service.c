/* sess_service: the Session tier (session.proto): its descriptor and the
 * five handlers. Each runs one script in Redis (sess_store.h); a write to a
 * durable session then goes through to PostgreSQL with its audit row in
 * one transaction (sess_pg.h) before it is acknowledged, and any other
 * write stores its audit row before the answer. A read of a durable
 * session Redis no longer holds answers from PostgreSQL's copy. */
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "memory/v1/session.pb-c.h"
#include "service/auth/authn.h"
#include "service/core/log.h"
#include "service/core/uuid.h"
#include "service/pb/pbtime.h"
#include "service/session/sess_pg.h"
#include "service/session/sess_service_internal.h"
#include "service/session/sess_store.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_record.h"

#define SVC "memory.v1.Session"

/* ------------------------------------------------------------ rendering */

static Memory__V1__SessionInfo *render_info(arena *a, const sess_info *s) {
    Memory__V1__SessionInfo *m = arena_message(a, &memory__v1__session_info__descriptor);
    if (!m) return NULL;
    m->session_id = (char *)s->id;
    m->owner = (char *)s->owner;
    m->durable = s->durable;
    m->state = (Memory__V1__SessionState)s->state;
    m->duration = pbtime_duration(a, s->duration_ms * 1000);
    m->create_time = pbtime_timestamp(a, s->create_ms * 1000);
    m->expire_time = pbtime_timestamp(a, s->expire_ms * 1000);
    m->purge_time = pbtime_timestamp(a, s->purge_ms * 1000);
    return m->duration && m->create_time && m->expire_time && m->purge_time ? m : NULL;
}

static tier_meta rec_meta(const principal *p, const sess_rec *r) {
    return (tier_meta){.tenant = principal_tenant(p),
                       .owner = r->owner,
                       .label = r->label,
                       .version = r->version,
                       .create_us = r->create_ms * 1000,
                       .update_us = r->update_ms * 1000,
                       .pii_kinds = r->pii_kinds,
                       .npii = r->npii};
}

static Memory__V1__SessionRecord *render_rec(arena *a, const principal *p, const sess_rec *r) {
    Memory__V1__SessionRecord *m = arena_message(a, &memory__v1__session_record__descriptor);
    if (!m) return NULL;
    tier_meta meta = rec_meta(p, r);
    m->key = (char *)r->key;
    if (r->has_value) {
        m->value.data = (uint8_t *)r->value;
        m->value.len = (size_t)r->size;
    }
    m->size_bytes = r->size;
    return (m->meta = tier_meta_render(a, &meta)) ? m : NULL;
}

/* ------------------------------------------------------------ the calls */

typedef enum { OP_START, OP_GET, OP_SET, OP_LIST, OP_END } op_kind;

/* A call in flight: the script, then maybe PostgreSQL. */
typedef struct pending {
    sess_op op; /* first: the script's done finds the call */
    sess_service *svc;
    rpc_call *call;
    ProtobufCMessage *resp;
    const principal *p;
    op_kind kind;
    const char *key;      /* Get, Set */
    const uint8_t *value; /* Set: as stored (the PII policy applied) */
    size_t value_len;
    int with_values; /* List */
    sess_pg_read pg; /* the fallback read's answer */
} pending;

static principal_breadth read_breadth(const principal *p) {
    return principal_scope(p, "session:read");
}

static const char *const state_names[] = {"", "active", "expired", "ended", "closed"};

static const char *state_name(int s) { return s >= 1 && s <= 4 ? state_names[s] : "unknown"; }

/* The read diode on the way out: the session is the caller's (or it reads
 * with :all), and the record's label is within its ceiling. */
static int may_see(pending *pp, const sess_info *s, const sess_rec *r, principal_breadth breadth) {
    tier_ctx c;
    tier_ctx_make(&c, "session", pp->p, INT64_MAX, rpc_call_arena(pp->call));
    c.read_breadth = breadth;
    return tier_may_read(&c, s->owner, r ? r->label : 1);
}

/* What the script let through, checked again: a refusal here is a bug,
 * logged, and the record never leaves. */
static grpc_status_code must_see(pending *pp, const sess_info *s, const sess_rec *r) {
    if (may_see(pp, s, r, read_breadth(pp->p))) return GRPC_STATUS_OK;
    log_fields(LOG_ERROR, "sessions: a script let through what the read diode refuses", LOG_F_STR,
               "session", s->id, LOG_F_STR, "key", r ? r->key : "", LOG_F_END);
    rpc_call_set_error(pp->call, "internal error");
    return GRPC_STATUS_INTERNAL;
}

/* The records of a Get or List answer, each through the diode (from_pg:
 * PostgreSQL's copy, which the diode filters; the scripts filter
 * themselves, and a record they let through is checked again). */
static grpc_status_code fill_reads(pending *pp, const sess_info *s, sess_rec *recs, size_t n,
                                   int from_pg) {
    arena *a = rpc_call_arena(pp->call);
    principal_breadth br = read_breadth(pp->p);
    if (pp->kind == OP_GET) {
        Memory__V1__SessionGetResponse *resp = (Memory__V1__SessionGetResponse *)pp->resp;
        if (n == 1 && !from_pg) RPC_CHECK(must_see(pp, s, &recs[0]));
        if (n != 1 || (from_pg && !may_see(pp, s, &recs[0], br))) {
            rpc_call_set_error(pp->call, "key \"%s\" not found in session %s", pp->key, s->id);
            return GRPC_STATUS_NOT_FOUND;
        }
        recs[0].key = pp->key;
        if (!(resp->record = render_rec(a, pp->p, &recs[0]))) return rpc_call_oom(pp->call);
        if (!(resp->session = render_info(a, s))) return rpc_call_oom(pp->call);
        return GRPC_STATUS_OK;
    }
    Memory__V1__SessionListResponse *resp = (Memory__V1__SessionListResponse *)pp->resp;
    resp->records = arena_alloc(a, (n + 1) * sizeof *resp->records);
    if (!resp->records) return rpc_call_oom(pp->call);
    for (size_t i = 0; i < n; i++) {
        if (!from_pg) RPC_CHECK(must_see(pp, s, &recs[i]));
        else if (!may_see(pp, s, &recs[i], br)) continue;
        if (!pp->with_values) recs[i].has_value = 0;
        if (!(resp->records[resp->n_records++] = render_rec(a, pp->p, &recs[i])))
            return rpc_call_oom(pp->call);
    }
    return (resp->session = render_info(a, s)) ? GRPC_STATUS_OK : rpc_call_oom(pp->call);
}

/* ---- PostgreSQL's copy, when Redis has no such session ---- */

static grpc_status_code render_pg_read(tier_pending_call *pc) {
    pending *pp = pc->arg;
    if (!pp->pg.found) {
        rpc_call_set_error(pp->call, "session %s not found", pp->op.id);
        return GRPC_STATUS_NOT_FOUND;
    }
    if (!may_see(pp, &pp->pg.info, NULL, read_breadth(pp->p))) {
        rpc_call_set_error(pp->call, "session %s not found", pp->op.id);
        return GRPC_STATUS_NOT_FOUND;
    }
    /* Past its purge time, its PII goes whether or not the sweeper came. */
    if (pp->pg.unswept &&
        sess_pg_close_read(rpc_call_arena(pp->call), pp->svc->env->pii, &pp->pg) != STATUS_OK)
        return rpc_call_oom(pp->call);
    return fill_reads(pp, &pp->pg.info, pp->pg.recs, pp->pg.nrecs, 1);
}

static grpc_status_code read_from_pg(pending *pp) {
    tier_pending_call *pc =
        tier_pending_new(pp->call, "session", NULL, 0, render_pg_read, pp->resp);
    if (!pc) return rpc_call_oom(pp->call);
    pc->arg = pp;
    sess_pg_read in = {.id = pp->op.id, .key = pp->key};
    tier_async *op = sess_pg_read_async(pc->c, &in, &pp->pg, tier_pending_done, pc);
    return op ? tier_pending(pp->call, &pp->svc->store, op) : rpc_call_oom(pp->call);
}

/* ---- the write-through ---- */

static int decode_write_through(tier_async *op, const PGresult *r) {
    (void)r;
    return tier_async_commit(op);
}

/* A durable session's write in PostgreSQL with the audit row, or a plain
 * one's audit row: either way stored before the answer. */
static grpc_status_code store_write(pending *pp) {
    audit *au = pp->svc->env->audit;
    if (!pp->op.info.durable)
        return tier_pending_audit_row(pp->call, &pp->svc->store, au, pp->resp);
    tier_async *op = tier_pending_op(pp->call, "session", au, "session write-through",
                                     decode_write_through, NULL, 0, tier_render_nothing, pp->resp);
    if (!op) return rpc_call_oom(pp->call);
    tier_async_begin(op, "BEGIN");
    if (pp->kind == OP_START) sess_pg_start_sql(&op->sql, op->c, &pp->op.info);
    else if (pp->kind == OP_END) sess_pg_end_sql(&op->sql, op->c, &pp->op.info);
    else sess_pg_set_sql(&op->sql, op->c, &pp->op.info, &pp->op.recs[0], pp->value, pp->value_len);
    return tier_pending_durable(pp->call, &pp->svc->store, op); /* Redis holds it already */
}

/* ---- the script's answer ---- */

static grpc_status_code answered(pending *pp, int status) {
    sess_op *op = &pp->op;
    rpc_call *call = pp->call;
    arena *a = rpc_call_arena(call);
    if (status != STATUS_OK) return rpc_call_fail(call, status, op->err);
    switch (op->code) {
    case SESS_OK: break;
    case SESS_NO_SESSION:
        if (pp->kind == OP_GET || pp->kind == OP_LIST) return read_from_pg(pp);
        rpc_call_set_error(call, "session %s not found", op->id);
        return GRPC_STATUS_NOT_FOUND;
    case SESS_NO_KEY:
        rpc_call_set_error(call, "key \"%s\" not found in session %s", pp->key, op->id);
        return GRPC_STATUS_NOT_FOUND;
    case SESS_CLOSED:
        rpc_call_set_error(call, "session %s is %s: it takes no more writes", op->id,
                           state_name(op->info.state));
        return GRPC_STATUS_FAILED_PRECONDITION;
    case SESS_FULL:
        rpc_call_set_error(call, "session %s holds %s", op->id,
                           op->full && strcmp(op->full, "keys") == 0
                               ? "1000 keys; delete one or start another session"
                               : "2 MiB of values; this value would pass it");
        return GRPC_STATUS_FAILED_PRECONDITION;
    case SESS_DENIED:
        rpc_call_set_error(call, "key \"%s\" of session %s is labelled above the token's clr",
                           pp->key, op->id);
        return GRPC_STATUS_PERMISSION_DENIED;
    case SESS_OVER_QUOTA: {
        char why[512];
        tier_quota_refused(pp->svc->quota, (int)op->over[0], op->over[1], op->over[2], why,
                           sizeof why);
        return rpc_call_fail(call, STATUS_EQUOTA, why);
    }
    case SESS_EXISTS:
        rpc_call_set_error(call, "session id collision; start again");
        return GRPC_STATUS_ABORTED;
    default:
        rpc_call_set_error(call, "session %s: unexpected answer %d", op->id, op->code);
        return GRPC_STATUS_INTERNAL;
    }
    if (op->has_use) tier_quota_observe(pp->svc->quota, op->use);
    switch (pp->kind) {
    case OP_START: {
        Memory__V1__SessionStartResponse *resp = (Memory__V1__SessionStartResponse *)pp->resp;
        if (!(resp->session = render_info(a, &op->info))) return rpc_call_oom(call);
        return store_write(pp);
    }
    case OP_GET:
    case OP_LIST: return fill_reads(pp, &op->info, op->recs, op->nrecs, 0);
    case OP_SET: {
        Memory__V1__SessionSetResponse *resp = (Memory__V1__SessionSetResponse *)pp->resp;
        op->recs[0].key = pp->key;
        tier_meta m = rec_meta(pp->p, &op->recs[0]);
        if (!(resp->meta = tier_meta_render(a, &m)) || !(resp->session = render_info(a, &op->info)))
            return rpc_call_oom(call);
        return store_write(pp);
    }
    case OP_END: {
        Memory__V1__SessionEndResponse *resp = (Memory__V1__SessionEndResponse *)pp->resp;
        resp->record_count = op->count;
        if (!(resp->session = render_info(a, &op->info))) return rpc_call_oom(call);
        return store_write(pp);
    }
    }
    return GRPC_STATUS_INTERNAL;
}

static void done(sess_op *op, int status) {
    pending *pp = (pending *)op;
    grpc_status_code st = answered(pp, status);
    if (st != RPC_PENDING) rpc_call_complete(pp->call, st);
}

static void cancel_script(rpc_call *call, void *arg) {
    (void)call;
    redis_eval *e = arg;
    aredis_cancel(e->r, &e->cmd);
}

/* A call's pending state and its script, readied with nargs words. */
static grpc_status_code begin(rpc_call *call, sess_service *svc, ProtobufCMessage *resp,
                              op_kind kind, sess_script_id script, const char *id,
                              const char *scope, int nargs, pending **out) {
    if (!svc->env->redis_async) {
        rpc_call_set_error(call, "sessions need Redis, and this server runs without one "
                                 "(--redis-url)");
        return GRPC_STATUS_UNAVAILABLE;
    }
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    pending *pp = arena_zalloc(a, sizeof *pp);
    if (!pp) return rpc_call_oom(call);
    sess_caller who = {principal_tenant(p), principal_sub(p),
                       principal_scope(p, scope) == PRINCIPAL_ALL};
    if (sess_op_init(&pp->op, svc->env->redis_async, a, script, &who, id, nargs) != 0)
        return rpc_call_oom(call);
    pp->svc = svc;
    pp->call = call;
    pp->resp = resp;
    pp->p = p;
    pp->kind = kind;
    pp->op.done = done;
    tier_target(call, "session:%s", id);
    *out = pp;
    return GRPC_STATUS_OK;
}

/* Sends the script; the call is the script's from here on. */
static grpc_status_code submit(pending *pp) {
    if (rpc_call_on_cancel(pp->call, cancel_script, &pp->op.e) != 0) return GRPC_STATUS_CANCELLED;
    sess_op_submit(&pp->op, rpc_call_deadline_ms(pp->call));
    return RPC_PENDING;
}

static grpc_status_code check_id(rpc_call *call, const char *id) {
    return tier_check_name(call, "session_id", id, 64, 1);
}

static grpc_status_code check_key(rpc_call *call, const char *key) {
    return tier_check_name(call, "key", key, SESS_KEY_MAX_CHARS, 1);
}

/* The four quotas as the script's words from index i. */
static int quota_words(pending *pp, int i) {
    for (int q = 0; q < TIER_QUOTA_N; q++)
        if (sess_op_num(&pp->op, i + q, tier_quota_limit(pp->svc->quota, (tier_quota_id)q)) != 0)
            return -1;
    return 0;
}

/* ------------------------------------------------------------ handlers */

static RPC_UNARY_HANDLER(do_start, sess_service, Memory__V1__SessionStartRequest,
                         Memory__V1__SessionStartResponse) {
    int64_t duration_ms = 0;
    RPC_CHECK(tier_check_duration(call, "duration", req->duration, SESS_DURATION_MIN_MS,
                                  SESS_DURATION_MAX_MS, "1 s to 7 days", &duration_ms));
    if (!req->duration) duration_ms = SESS_DURATION_DEFAULT_MS;
    char *id = arena_alloc(rpc_call_arena(call), UUID_TEXT_LEN);
    if (!id) return rpc_call_oom(call);
    uuid_new(id);
    pending *pp;
    RPC_CHECK(begin(call, svc, &resp->base, OP_START, SESS_SCRIPT_START, id, "session:write",
                    3 + TIER_QUOTA_N, &pp));
    if (sess_op_num(&pp->op, 0, duration_ms) != 0 ||
        sess_op_num(&pp->op, 1, svc->env->cfg->session_grace_ms) != 0 || quota_words(pp, 3) != 0)
        return rpc_call_oom(call);
    sess_op_arg(&pp->op, 2, req->durable ? "1" : "0", 1);
    return submit(pp);
}

static RPC_UNARY_HANDLER(do_get, sess_service, Memory__V1__SessionGetRequest,
                         Memory__V1__SessionGetResponse) {
    RPC_CHECK(check_id(call, req->session_id));
    RPC_CHECK(check_key(call, req->key));
    pending *pp;
    RPC_CHECK(begin(call, svc, &resp->base, OP_GET, SESS_SCRIPT_GET, req->session_id,
                    "session:read", 2, &pp));
    pp->key = req->key;
    sess_op_arg(&pp->op, 0, req->key, strlen(req->key));
    if (sess_op_num(&pp->op, 1, principal_clr(pp->p)) != 0) return rpc_call_oom(call);
    return submit(pp);
}

static RPC_UNARY_HANDLER(do_list, sess_service, Memory__V1__SessionListRequest,
                         Memory__V1__SessionListResponse) {
    RPC_CHECK(check_id(call, req->session_id));
    pending *pp;
    RPC_CHECK(begin(call, svc, &resp->base, OP_LIST, SESS_SCRIPT_LIST, req->session_id,
                    "session:read", 2, &pp));
    pp->with_values = pp->op.with_values = req->with_values;
    if (sess_op_num(&pp->op, 0, principal_clr(pp->p)) != 0) return rpc_call_oom(call);
    sess_op_arg(&pp->op, 1, req->with_values ? "1" : "0", 1);
    return submit(pp);
}

/* The PII policy over what a Set stores: the key names the record (never
 * redacted), the value may be. */
static grpc_status_code set_pii(rpc_call *call, const sess_service *svc, const principal *p,
                                const Memory__V1__SessionSetRequest *req, pending *pp,
                                const char **pii_field_out) {
    arena *a = rpc_call_arena(call);
    const char *key = req->key, *value = (const char *)req->value.data;
    size_t len = req->value.len;
    pii_field f[] = {PII_NAME("key", &key), PII_BYTES("value", &value, &len)};
    const char **kinds = NULL;
    size_t nkinds = 0;
    char why[512];
    int rc = pii_policy_apply(a, pii_policy_mode(svc->env->pii, p), f, 2, &kinds, &nkinds, why,
                              sizeof why);
    if (rc == STATUS_EINVALID) return rpc_call_invalid(call, "%s", why);
    if (rc != STATUS_OK) return rpc_call_oom(call);
    if (len > SESS_VALUE_MAX)
        return rpc_call_invalid(call, "value: %zu bytes once redacted; at most %d (256 KiB)", len,
                                SESS_VALUE_MAX);
    pp->value = (const uint8_t *)value;
    pp->value_len = len;
    return (*pii_field_out = sess_rec_pii_field(a, kinds, nkinds)) ? GRPC_STATUS_OK
                                                                   : rpc_call_oom(call);
}

static RPC_UNARY_HANDLER(do_set, sess_service, Memory__V1__SessionSetRequest,
                         Memory__V1__SessionSetResponse) {
    RPC_CHECK(check_id(call, req->session_id));
    RPC_CHECK(check_key(call, req->key));
    if (req->value.len > SESS_VALUE_MAX)
        return rpc_call_invalid(call, "value: %zu bytes; at most %d (256 KiB)", req->value.len,
                                SESS_VALUE_MAX);
    RPC_CHECK(tier_check_label(call, "label", (int)req->label));
    pending *pp;
    RPC_CHECK(begin(call, svc, &resp->base, OP_SET, SESS_SCRIPT_SET, req->session_id,
                    "session:write", 8 + TIER_QUOTA_N, &pp));
    const char *pii;
    RPC_CHECK(set_pii(call, svc, pp->p, req, pp, &pii));
    pp->key = req->key;
    sess_op_arg(&pp->op, 0, req->key, strlen(req->key));
    sess_op_arg(&pp->op, 4, pii, strlen(pii));
    sess_op_arg(&pp->op, 5, (const char *)pp->value, pp->value_len);
    if (sess_op_num(&pp->op, 1, principal_clr(pp->p)) != 0 ||
        sess_op_num(&pp->op, 2, req->label) != 0 ||
        sess_op_num(&pp->op, 3, principal_stamp_label(pp->p, 0, 0)) != 0 ||
        sess_op_num(&pp->op, 6, SESS_KEYS_MAX) != 0 ||
        sess_op_num(&pp->op, 7, SESS_BYTES_MAX) != 0 || quota_words(pp, 8) != 0)
        return rpc_call_oom(call);
    tier_target(call, "session:%s/%s", req->session_id, req->key);
    return submit(pp);
}

static RPC_UNARY_HANDLER(do_end, sess_service, Memory__V1__SessionEndRequest,
                         Memory__V1__SessionEndResponse) {
    RPC_CHECK(check_id(call, req->session_id));
    pending *pp;
    RPC_CHECK(begin(call, svc, &resp->base, OP_END, SESS_SCRIPT_END, req->session_id,
                    "session:write", 0, &pp));
    return submit(pp);
}

/* ------------------------------------------------------------ the sweeper */

static void sweeper_main(worker *w, void *arg) {
    sess_service *svc = arg;
    const config *cfg = svc->env->cfg;
    while (!worker_nap(w, cfg->session_sweep_ms)) {
        for (int more = 1; more && !worker_stopping(w);) {
            int64_t closed = 0;
            char err[512] = "";
            int rc = sess_pg_sweep(svc->env->pg, svc->env->redis, svc->env->pii, SESS_SWEEP_BATCH,
                                   &closed, err, sizeof err);
            if (rc != STATUS_OK)
                log_fields(LOG_WARN,
                           "sessions: closing durable sessions failed; next sweep retries",
                           LOG_F_STR, "error", err, LOG_F_END);
            else if (closed)
                log_fields(LOG_INFO, "sessions: closed durable sessions past their grace",
                           LOG_F_INT, "closed", closed, LOG_F_STR, "pii",
                           svc->env->pii == PII_POLICY_REDACT ? "redacted" : "dropped", LOG_F_END);
            more = rc == STATUS_OK && closed == SESS_SWEEP_BATCH;
        }
    }
}

/* ------------------------------------------------------------ the tier */

static int sess_open(tier_env *env, void **state, char *err, size_t errlen) {
    sess_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    if (!svc) return -1;
    svc->env = env;
    svc->store = tier_store_on(env->pg, env->pga, env->max_response_bytes);
    const config *c = env->cfg;
    tier_quota_def quota = {
        .tier = "session",
        .objects = "sessions",
        .freed_by = "use goes down as sessions pass their purge time and as a Forget erases "
                    "them; End starts the grace period sooner",
        .limit = {c->quota_sessions_per_tenant, c->quota_sessions_per_principal,
                  (int64_t)c->quota_session_mib_per_tenant << 20,
                  (int64_t)c->quota_session_mib_per_principal << 20},
        .flag = {"--quota-sessions-per-tenant", "--quota-sessions-per-principal",
                 "--quota-session-mib-per-tenant", "--quota-session-mib-per-principal"}};
    if (!(svc->quota = tier_quota_create(&quota))) return tier_oom(err, errlen);
    if (env->redis && env->cfg->session_sweep_ms > 0 &&
        worker_start(sweeper_main, svc, &svc->sweeper) != 0)
        return tier_oom(err, errlen);
    return 0;
}

static void sess_free(void *state) {
    sess_service *svc = state;
    if (!svc) return;
    worker_stop(svc->sweeper, NULL);
    tier_quota_free(svc->quota);
    free(svc);
}

static const rpc_method methods[] = {
    RPC_METHOD_UNARY(SVC, "Start", memory__v1__session_start, "session:write", do_start),
    RPC_METHOD_UNARY(SVC, "Get", memory__v1__session_get, "session:read", do_get),
    RPC_METHOD_UNARY(SVC, "Set", memory__v1__session_set, "session:write", do_set),
    RPC_METHOD_UNARY(SVC, "List", memory__v1__session_list, "session:read", do_list),
    RPC_METHOD_UNARY(SVC, "End", memory__v1__session_end, "session:write", do_end),
};

static const tier_service services[] = {{SVC, HEALTH_NEEDS_REDIS | HEALTH_NEEDS_PG}};

static const tier_records records =
    TIER_RECORDS(MEMORY__V1__TIER__TIER_SESSION, TIER_ORDER_RECORDS + 40, sess_erase, sess_export,
                 "sessions", "session_records");

const tier session_tier = {TIER_FIELDS("session", services, methods, sess_open, sess_free),
                           .records = &records};
