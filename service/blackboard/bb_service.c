/* bb_service: the blackboard tier and memory.v1.Blackboard: requests
 * checked, the PII policy and the write diode applied, then one script on
 * Redis per call (bb_store.h) from the event loop; Subscribe streams are
 * the hub's (bb_hub.h). */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/v1/blackboard.pb-c.h"
#include "service/audit/audit.h"
#include "service/auth/authn.h"
#include "service/blackboard/bb_hub.h"
#include "service/blackboard/bb_render.h"
#include "service/blackboard/bb_store.h"
#include "service/core/log.h"
#include "service/pb/pbjson.h"
#include "service/pii/pii.h"
#include "service/pii/pii_policy.h"
#include "service/tier/tier.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_sql.h"

#define KEY_MAX 256                      /* characters of a key */
#define VALUE_MAX (256 * 1024)           /* bytes of a value's JSON */
#define KEYS_MAX 1000                    /* keys per board */
#define TTL_MIN_MS 1000                  /* a board's time-to-live ... */
#define TTL_MAX_MS (30LL * 86400 * 1000) /* ... at most 30 days */
#define TTL_DEFAULT_MS (86400LL * 1000)  /* 24 h */
#define LEASE_MIN_MS 1000                /* a key's lease ... */
#define LEASE_MAX_MS (86400LL * 1000)    /* ... at most 24 h */
#define ITEM_OVERHEAD 96                 /* an item's meta, encoded, about */

typedef struct bb_service {
    aredis *redis;    /* NULL: no Redis configured (every call UNAVAILABLE) */
    redis_pool *pool; /* the same Redis for the eraser, which may block */
    bb_hub *hub;
    bb_limits lim;
    pii_policy pii;
    tier_store store; /* PostgreSQL, for the audit rows of posts */
    audit *audit;
} bb_service;

static grpc_status_code no_redis(rpc_call *call) {
    rpc_call_set_error(call, "the blackboard needs Redis, and this server runs without one "
                             "(--redis-url)");
    return GRPC_STATUS_UNAVAILABLE;
}

/* The caller's identity and breadths for the scripts. */
static bb_caller caller_of(const principal *p) {
    return (bb_caller){.sub = principal_sub(p),
                       .clr = (int)principal_clr(p),
                       .read_all = principal_scope(p, "blackboard:read") == PRINCIPAL_ALL,
                       .write_all = principal_scope(p, "blackboard:write") == PRINCIPAL_ALL};
}

/* A cancel can come as soon as it is registered, before the start has
 * set e->r: the service's own client is the one to name. */
static void cancel_eval(const bb_service *svc, bb_eval *e) { aredis_cancel(svc->redis, &e->cmd); }

/* ------------------------------------------------------------ Post */

typedef struct pending_post {
    bb_post p; /* first */
    const bb_service *svc;
    rpc_call *call;
    Memory__V1__BlackboardPostResponse *resp;
    const char *tenant;
} pending_post;

static void cancel_post(rpc_call *call, void *arg) {
    (void)call;
    pending_post *pp = arg;
    cancel_eval(pp->svc, &pp->p.e);
}

static grpc_status_code post_settled(pending_post *pp, int status) {
    rpc_call *call = pp->call;
    if (status != STATUS_OK) return rpc_call_fail(call, status, pp->p.err);
    arena *a = rpc_call_arena(call);
    Memory__V1__BlackboardPostResponse *resp = pp->resp;
    resp->meta = bb_render_meta(a, pp->tenant, &pp->p.h, pp->p.expire_ms);
    resp->board_created = pp->p.created;
    resp->board_id = (char *)pp->p.board_id;
    if (!resp->meta) return rpc_call_oom(call);
    if (pp->p.h.lease_ms && !(resp->lease_expire_time = bb_render_time(a, pp->p.h.lease_ms)))
        return rpc_call_oom(call);
    /* Redis keeps no history: the audit row is stored before the answer. */
    return tier_pending_audit_row(call, &pp->svc->store, pp->svc->audit, &resp->base);
}

static void posted(bb_post *p, int status) {
    pending_post *pp = (pending_post *)p;
    grpc_status_code st = post_settled(pp, status);
    if (st != RPC_PENDING) rpc_call_complete(pp->call, st);
}

/* The value as stored: the PII policy applied (key and task id name the
 * record: never redacted), then compact JSON (NaN and infinities refused)
 * of at most VALUE_MAX bytes, in the arena. */
static grpc_status_code value_json(rpc_call *call, const bb_service *svc, const principal *p,
                                   const Memory__V1__BlackboardPostRequest *req, bb_post_in *in) {
    arena *a = rpc_call_arena(call);
    const Google__Protobuf__Value *v = req->value;
    const char *task = req->task_id, *key = req->key;
    pii_field f[] = {PII_NAME("task_id", &task), PII_NAME("key", &key), PII_VALUE("value", &v)};
    const char **kinds = NULL;
    size_t nkinds = 0;
    char why[512];
    int rc = pii_policy_apply(a, pii_policy_mode(svc->pii, p), f, req->delete_key ? 2 : 3, &kinds,
                              &nkinds, why, sizeof why);
    if (rc == STATUS_EINVALID) return rpc_call_invalid(call, "%s", why);
    if (rc != STATUS_OK) return rpc_call_oom(call);
    for (size_t i = 0; i < nkinds; i++) in->pii |= pii_kind_of(kinds[i]);
    if (req->delete_key) return GRPC_STATUS_OK;
    char *json;
    size_t len;
    if (pbjson_from_value(v, "value", &json, &len, why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s", why);
    if (len > VALUE_MAX) {
        free(json);
        return rpc_call_invalid(call, "value: %zu bytes as JSON; at most %d", len, VALUE_MAX);
    }
    in->json = arena_strndup(a, json, len);
    in->json_len = len;
    free(json);
    if (!in->json) return rpc_call_oom(call);
    in->size = (int64_t)(protobuf_c_message_get_packed_size(&v->base) + strlen(req->key) +
                         strlen(principal_sub(p)) + ITEM_OVERHEAD);
    return GRPC_STATUS_OK;
}

/* The random tail of the id of a board the post may create (bb_codec.h). */
static grpc_status_code board_id_random(rpc_call *call, unsigned *out) {
    unsigned char rnd[2];
    if (RAND_bytes(rnd, sizeof rnd) != 1) {
        rpc_call_set_error(call, "no randomness for a board id");
        return GRPC_STATUS_INTERNAL;
    }
    *out = (unsigned)rnd[0] << 8 | rnd[1];
    return GRPC_STATUS_OK;
}

static RPC_UNARY_HANDLER(do_post, bb_service, Memory__V1__BlackboardPostRequest,
                         Memory__V1__BlackboardPostResponse) {
    const char *task = req->task_id;
    RPC_CHECK(tier_check_id(call, "task_id", &task, 0));
    RPC_CHECK(tier_check_name(call, "key", req->key, KEY_MAX, 1));
    if (req->delete_key && req->value)
        return rpc_call_invalid(call, "value: must be unset with delete_key");
    if (!req->delete_key && !req->value)
        return rpc_call_invalid(call, "value: required (or delete_key to delete the key)");
    if (req->delete_key && req->lease_ttl)
        return rpc_call_invalid(call, "lease_ttl: must be unset with delete_key");
    bb_post_in in = {.key = req->key, .del = req->delete_key};
    RPC_CHECK(tier_check_duration(call, "ttl", req->ttl, TTL_MIN_MS, TTL_MAX_MS, "1 s to 30 days",
                                  &in.ttl_ms));
    RPC_CHECK(tier_check_duration(call, "lease_ttl", req->lease_ttl, LEASE_MIN_MS, LEASE_MAX_MS,
                                  "1 s to 24 h", &in.lease_ms));
    RPC_CHECK(tier_check_label(call, "label", (int)req->label));
    RPC_CHECK(TIER_CHECK_PRECONDITION(call, req, MEMORY__V1__BLACKBOARD_POST_REQUEST,
                                      req->delete_key ? TIER_EXPECT_VERSION : TIER_EXPECT_CREATE_OK,
                                      &in.has_expected, &in.expected));
    if (!svc->redis) return no_redis(call);
    const principal *p = authn_principal(call);
    RPC_CHECK(value_json(call, svc, p, req, &in));
    in.label = principal_stamp_label(p, (int)req->label, 0);
    RPC_CHECK(board_id_random(call, &in.id_random));

    arena *a = rpc_call_arena(call);
    pending_post *pp = arena_zalloc(a, sizeof *pp);
    bb_names n;
    if (!pp || bb_names_make(a, principal_tenant(p), task, &n) != 0) return rpc_call_oom(call);
    tier_target(call, "blackboard:%s/%s", task, req->key);
    pp->svc = svc;
    pp->call = call;
    pp->resp = resp;
    pp->tenant = principal_tenant(p);
    pp->p.done = posted;
    bb_caller c = caller_of(p);
    /* Registered before the start: once started, the call may complete on
     * the loop thread at any moment. */
    if (rpc_call_on_cancel(call, cancel_post, pp) != 0) return GRPC_STATUS_CANCELLED;
    if (bb_post_start(&pp->p, svc->redis, a, &n, &svc->lim, &c, &in, rpc_call_deadline_ms(call)) !=
        0)
        return rpc_call_oom(call);
    return RPC_PENDING;
}

/* ------------------------------------------------------------ Read */

typedef struct pending_read {
    bb_sync s; /* first */
    const bb_service *svc;
    rpc_call *call;
    Memory__V1__BlackboardReadResponse *resp;
    const char *tenant;
    bb_caller c;
} pending_read;

static grpc_status_code read_settled(pending_read *pr, int status) {
    rpc_call *call = pr->call;
    if (status != STATUS_OK) return rpc_call_fail(call, status, pr->s.err);
    arena *a = rpc_call_arena(call);
    Memory__V1__BlackboardReadResponse *resp = pr->resp;
    const bb_sync *s = &pr->s;
    resp->version = s->rev;
    resp->board_id = arena_strndup(a, s->board_id, s->board_id_len);
    resp->items = arena_alloc(a, (s->nitems ? s->nitems : 1) * sizeof *resp->items);
    if (!resp->board_id || !resp->items) return rpc_call_oom(call);
    if (s->expire_ms > 0 && !(resp->expire_time = bb_render_time(a, s->expire_ms)))
        return rpc_call_oom(call);
    for (size_t i = 0; i < s->nitems; i++) {
        const bb_item *it = &s->items[i];
        if (!bb_check_visible(&pr->c, &it->h, it->key, it->key_len)) continue;
        Memory__V1__BlackboardItem *item = bb_render_item(
            a, pr->tenant, it->key, it->key_len, &it->h, it->json, it->json_len, s->expire_ms);
        if (!item) return rpc_call_oom(call);
        resp->items[resp->n_items++] = item;
    }
    return GRPC_STATUS_OK;
}

static void cancel_read(rpc_call *call, void *arg) {
    (void)call;
    pending_read *pr = arg;
    cancel_eval(pr->svc, &pr->s.e);
}

static void read_done(bb_sync *s, int status) {
    pending_read *pr = (pending_read *)s;
    rpc_call_complete(pr->call, read_settled(pr, status));
}

static RPC_UNARY_HANDLER(do_read, bb_service, Memory__V1__BlackboardReadRequest,
                         Memory__V1__BlackboardReadResponse) {
    const char *task = req->task_id;
    RPC_CHECK(tier_check_id(call, "task_id", &task, 0));
    if (!svc->redis) return no_redis(call);
    const principal *p = authn_principal(call);
    arena *a = rpc_call_arena(call);
    pending_read *pr = arena_zalloc(a, sizeof *pr);
    bb_names n;
    if (!pr || bb_names_make(a, principal_tenant(p), task, &n) != 0) return rpc_call_oom(call);
    tier_target(call, "blackboard:%s", task);
    pr->svc = svc;
    pr->call = call;
    pr->resp = resp;
    pr->tenant = principal_tenant(p);
    pr->c = caller_of(p);
    pr->s.done = read_done;
    if (rpc_call_on_cancel(call, cancel_read, pr) != 0) return GRPC_STATUS_CANCELLED;
    if (bb_sync_start(&pr->s, svc->redis, a, &n, &svc->lim, &pr->c, -1, NULL,
                      rpc_call_deadline_ms(call)) != 0)
        return rpc_call_oom(call);
    return RPC_PENDING;
}

/* ------------------------------------------------------------ Subscribe */

static grpc_status_code do_subscribe(rpc_call *call, const ProtobufCMessage *msg, void *arg) {
    bb_service *svc = arg;
    const Memory__V1__BlackboardSubscribeRequest *req =
        (const Memory__V1__BlackboardSubscribeRequest *)msg;
    const char *task = req->task_id;
    RPC_CHECK(tier_check_id(call, "task_id", &task, 0));
    bb_watch_req w = {.task = task, .board_id = req->board_id};
    w.has_after =
        req->resume_case == MEMORY__V1__BLACKBOARD_SUBSCRIBE_REQUEST__RESUME_AFTER_VERSION;
    w.after = req->after_version;
    size_t idlen = strlen(req->board_id);
    if (w.has_after && w.after < 0)
        return rpc_call_invalid(call, "after_version: %lld; must be 0 or more", (long long)w.after);
    if (idlen && !w.has_after) return rpc_call_invalid(call, "board_id: only with after_version");
    if (idlen && (idlen != BB_BOARD_ID_LEN || strspn(req->board_id, "0123456789abcdef") != idlen))
        return rpc_call_invalid(call, "board_id: not a board id (%d hex digits, as events carry)",
                                BB_BOARD_ID_LEN);
    if (!svc->redis) return no_redis(call);
    const principal *p = authn_principal(call);
    bb_caller c = caller_of(p);
    w.tenant = principal_tenant(p);
    tier_target(call, "blackboard:%s", task);
    return bb_hub_watch(svc->hub, call, p, &c, &w);
}

/* ------------------------------------------------------------ Forget */

/* The tier's eraser (tier_erase.h), on a task-pool thread. Without Redis
 * there are no boards, so nothing to erase. */
static int bb_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    const bb_service *svc = state;
    *count = 0;
    /* Boards end with their task (their TTL): retention has nothing to do. */
    if (!svc->pool || tier_erase_is_retention(sel)) return STATUS_OK;
    return bb_erase_tenant(svc->pool, &svc->lim, c, sel, count);
}

/* ------------------------------------------------------------ Export */

/* The tier's exporter (tier_erase.h), on a task-pool thread: the eraser's
 * selection, read. Without Redis there are no boards, so nothing to
 * export. */
static int bb_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                     void *emit_arg) {
    const bb_service *svc = state;
    if (!svc->pool) return STATUS_OK;
    return bb_export_tenant(svc->pool, c, sel, emit, emit_arg);
}

/* ------------------------------------------------------------ the tier */

static void bb_free(void *state) {
    bb_service *svc = state;
    if (!svc) return;
    bb_hub_free(svc->hub);
    tier_quota_free(svc->lim.quota);
    free(svc);
}

static int bb_open(tier_env *env, void **state, char *err, size_t errlen) {
    const config *c = env->cfg;
    bb_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    if (!svc) return -1;
    svc->pii = env->pii;
    svc->store = tier_store_on(env->pg, env->pga, 0);
    svc->audit = env->audit;
    /* The board's items must fit one Read answer or SNAPSHOT. */
    tier_quota_def quota = {
        .tier = "blackboard",
        .objects = "boards",
        .freed_by = "use goes down as boards expire, as keys are deleted, and as change logs "
                    "roll over",
        .limit = {c->quota_boards_per_tenant, c->quota_boards_per_principal,
                  (int64_t)c->quota_board_mib_per_tenant << 20,
                  (int64_t)c->quota_board_mib_per_principal << 20},
        .flag = {"--quota-boards-per-tenant", "--quota-boards-per-principal",
                 "--quota-board-mib-per-tenant", "--quota-board-mib-per-principal"}};
    svc->lim = (bb_limits){.max_keys = KEYS_MAX,
                           .max_bytes = (int64_t)env->max_response_bytes,
                           .default_ttl_ms = TTL_DEFAULT_MS,
                           .log_entries = c->blackboard_log_entries,
                           .log_bytes = c->blackboard_log_bytes,
                           .quota = tier_quota_create(&quota)};
    if (!svc->lim.quota) return tier_oom(err, errlen);
    if (!env->redis_async) {
        log_fields(LOG_INFO, "blackboard tier", LOG_F_STR, "redis",
                   "none (calls answer UNAVAILABLE)", LOG_F_END);
        return 0;
    }
    svc->redis = env->redis_async;
    svc->pool = env->redis;
    bb_hub_options ho = {.loop = env->loop,
                         .redis = env->redis_async,
                         .redis_url = c->redis_url,
                         .lim = svc->lim,
                         .grace_ms = c->blackboard_redis_grace_ms,
                         .auth = env->auth};
    if (bb_hub_create(&ho, &svc->hub, err, errlen) != 0) return -1;
    log_fields(LOG_INFO, "blackboard tier", LOG_F_INT, "log_entries",
               (int64_t)c->blackboard_log_entries, LOG_F_INT, "log_bytes",
               (int64_t)c->blackboard_log_bytes, LOG_F_INT, "max_board_bytes", svc->lim.max_bytes,
               LOG_F_INT, "quota_boards_per_tenant", (int64_t)c->quota_boards_per_tenant, LOG_F_INT,
               "quota_boards_per_principal", (int64_t)c->quota_boards_per_principal, LOG_F_INT,
               "quota_board_mib_per_tenant", (int64_t)c->quota_board_mib_per_tenant, LOG_F_INT,
               "quota_board_mib_per_principal", (int64_t)c->quota_board_mib_per_principal,
               LOG_F_INT, "redis_grace_ms", (int64_t)c->blackboard_redis_grace_ms, LOG_F_END);
    return 0;
}

/* 0 while the change streams' Redis subscription is up. */
static int bb_probe(void *state) {
    const bb_service *svc = state;
    return bb_hub_live(svc->hub) ? 0 : -1;
}

#define SVC "memory.v1.Blackboard"
static const rpc_method methods[] = {
    RPC_METHOD_UNARY(SVC, "Post", memory__v1__blackboard_post, "blackboard:write", do_post),
    RPC_METHOD_UNARY(SVC, "Read", memory__v1__blackboard_read, "blackboard:read", do_read),
    RPC_METHOD_SERVER_STREAM(SVC, "Subscribe", memory__v1__blackboard_subscribe, "blackboard:read",
                             do_subscribe),
};

/* Posts store their audit rows in PostgreSQL before answering. */
static const tier_service services[] = {
    {SVC, HEALTH_NEEDS_REDIS | HEALTH_NEEDS_PG | HEALTH_NEEDS_PROBE},
};

static const tier_records records = {.tier = MEMORY__V1__TIER__TIER_BLACKBOARD,
                                     .order = TIER_ORDER_RECORDS + 50,
                                     .erase = bb_erase,
                                     .exporter = bb_export};

const tier blackboard_tier = {
    TIER_FIELDS("blackboard", services, methods, bb_open, bb_free),
    .probe = bb_probe,
    .probe_backend = "blackboard change stream subscription",
    .records = &records,
};
