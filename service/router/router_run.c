/* router_run: a Router call's run of its parts (router_internal.h).
 *
 * Each part is a tier's route (tier_route.h) with its own context, answer
 * and, when parts run side by side, its own arena. Non-blocking parts are
 * prepared on the handler's thread and started there (their I/O runs on
 * the event loop); blocking ones are prepared and started on one task-pool
 * thread, in turn. Every part obeys the run's deadline itself, so the run
 * hears from each by then; the last to end answers the call (Query) or
 * ends the stream (QueryStream, which sends each part's message as that
 * part ends). A client's cancel, or a part that finds the request at
 * fault, cancels the others. Parts' memory lives until the call is
 * destroyed, so a cancel may reach a part at any time. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "service/auth/authn.h"
#include "service/core/cancel.h"
#include "service/pb/pbtime.h"
#include "service/router/router_fuse.h"
#include "service/router/router_internal.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_erase.h"

#define KINDS TIER_ROUTE_KINDS
/* The reply margin kept from the caller's deadline: a tenth of what is
 * left, at most this. */
#define REPLY_MARGIN_MS 100
/* A point names the entity it is about with this top-level payload field
 * (router.proto's fusion). */
#define ENTITY_FIELD "entity_id"

struct run;

typedef struct part {
    struct run *run;
    const tier_routable *rt; /* NULL: not in the query */
    int used;                /* consulted (or skipped: outcome set up front) */
    int running;             /* ends through part_end */
    int ended;
    int rc; /* how it ended (STATUS_*) */
    Memory__V1__TierOutcome outcome;
    const char *detail;
    int64_t end_ms;
    tier_ctx c;
    tier_route_answer ans;
    cancel_token cancel; /* a blocking part's */
    void *h;             /* the route's part, once prepared */
    arena *own;          /* its arena when parts run side by side */
} part;

typedef struct run {
    rpc_call *call;
    router_service *svc;
    router_query q;
    Memory__V1__RouterQueryResponse *resp; /* Query's; NULL: a stream */
    int64_t start_ms, deadline_ms;
    pthread_mutex_t lock;
    int pending;            /* running parts and the launcher, not yet ended */
    int cancelled;          /* atomic */
    grpc_status_code fault; /* the request's fault found by a part (message set); atomic */
    part parts[KINDS];
    int order[KINDS]; /* parts in the order they ended */
    int nended;
    principal *as_user; /* a recall for another user: the parts' principal */
} run;

const tier_routable *router_route_of(const tier_env *env, tier_route_kind kind) {
    for (size_t i = 0; i < env->nroutes; i++)
        if (env->routes[i].route->kind == kind) return &env->routes[i];
    return NULL;
}

/* ------------------------------------------------------------ results */

/* The entity a point names: its payload's top-level string entity_id. */
static const char *point_entity(const Memory__V1__RouterResult *res) {
    const Google__Protobuf__Struct *s = res->point ? res->point->payload : NULL;
    for (size_t i = 0; s && i < s->n_fields; i++) {
        const Google__Protobuf__Value *v = s->fields[i]->value;
        if (strcmp(s->fields[i]->key, ENTITY_FIELD) == 0 && v &&
            v->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE)
            return v->string_value;
    }
    return NULL;
}

/* A fused result: graph result e, with the best-ranked point p that named
 * it (NULL: none), or point p alone (e NULL). */
static Memory__V1__RouterResult *fused_result(arena *a, const Memory__V1__RouterResult *e,
                                              const Memory__V1__RouterResult *p, double score) {
    const Memory__V1__RouterResult *own = e ? e : p;
    Memory__V1__RouterResult *res = tier_route_result(a, own->tier, e && p ? p->tier : 0, score);
    if (!res) return NULL;
    res->record_case = own->record_case;
    if (e) {
        res->entity = e->entity;
        res->depth = e->depth;
        if (p) res->entity_point = p->point;
    } else {
        res->point = p->point;
    }
    if (p) {
        res->n_search_parts = p->n_search_parts;
        res->search_parts = p->search_parts;
    }
    return res;
}

/* The hybrid's fused ranking (router.proto), at most limit results, in
 * the call's arena. */
static int fused_results(run *r, Memory__V1__RouterResult ***out, size_t *nout) {
    arena *a = rpc_call_arena(r->call);
    const tier_route_answer *g = &r->parts[TIER_ROUTE_GRAPH].ans;
    const tier_route_answer *v = &r->parts[TIER_ROUTE_VECTOR].ans;
    size_t ne = g->n, np = v->n;
    rfuse_entity *ents = arena_alloc(a, (ne + 1) * sizeof *ents);
    const char **names = arena_alloc(a, (np + 1) * sizeof *names);
    rfuse_result *fr = arena_alloc(a, (ne + np + 1) * sizeof *fr);
    Memory__V1__RouterResult **res = arena_alloc(a, (ne + np + 1) * sizeof *res);
    if (!ents || !names || !fr || !res) return -1;
    for (size_t i = 0; i < ne; i++)
        ents[i] = (rfuse_entity){g->results[i]->entity->id, g->results[i]->depth};
    for (size_t j = 0; j < np; j++) names[j] = point_entity(v->results[j]);
    const Memory__V1__GraphQuery *gq = (const Memory__V1__GraphQuery *)r->q.part[TIER_ROUTE_GRAPH];
    int traversal = gq && gq->start_id[0];
    size_t n = rfuse(ents, ne, traversal, names, np, fr);
    if (n > (size_t)r->q.limit) n = (size_t)r->q.limit;
    for (size_t k = 0; k < n; k++) {
        const Memory__V1__RouterResult *e = fr[k].entity >= 0 ? g->results[fr[k].entity] : NULL;
        const Memory__V1__RouterResult *p = fr[k].point >= 0 ? v->results[fr[k].point] : NULL;
        if (!(res[k] = fused_result(a, e, p, fr[k].score))) return -1;
    }
    *out = res;
    *nout = n;
    return 0;
}

/* At most limit of a part's results. */
static size_t shown(const run *r, const part *pt) {
    return pt->ans.n < (size_t)r->q.limit ? pt->ans.n : (size_t)r->q.limit;
}

/* ------------------------------------------------------------ reports */

static Memory__V1__TierReport *report_of(arena *a, const run *r, const part *pt,
                                         Memory__V1__Tier tier, Memory__V1__TierOutcome outcome) {
    Memory__V1__TierReport *m = arena_message(a, &memory__v1__tier_report__descriptor);
    if (!m) return NULL;
    m->tier = tier;
    m->outcome = outcome;
    int answering = tier == pt->ans.tier;
    m->result_count = answering ? (int32_t)pt->ans.n : 0;
    if (answering && pt->detail && !(m->detail = arena_strdup(a, pt->detail))) return NULL;
    int64_t ms = (pt->end_ms > r->start_ms ? pt->end_ms : r->start_ms) - r->start_ms;
    if (!(m->latency = pbtime_duration(a, ms * 1000))) return NULL;
    return m;
}

/* A part's reports into out (room for TIER_ROUTE_LEVELS): how many, or -1
 * when out of memory. */
static int part_reports(arena *a, const run *r, const part *pt, Memory__V1__TierReport **out) {
    const tier_route_answer *ans = &pt->ans;
    if (!ans->nlevels) return (out[0] = report_of(a, r, pt, ans->tier, pt->outcome)) ? 1 : -1;
    for (int k = 0; k < ans->nlevels; k++) {
        Memory__V1__TierOutcome o =
            ans->level_tier[k] == ans->tier ? pt->outcome : ans->level_outcome[k];
        if (!(out[k] = report_of(a, r, pt, ans->level_tier[k], o))) return -1;
    }
    return ans->nlevels;
}

/* A part's end code as its outcome. */
static void set_outcome(part *pt, int rc) {
    pt->rc = rc;
    if (rc == STATUS_OK) {
        pt->outcome = MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_ANSWERED;
        pt->detail = pt->ans.partial;
        return;
    }
    pt->outcome = rc == STATUS_ETIMEOUT ? MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_DEADLINE_EXCEEDED
                                        : MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_UNAVAILABLE;
    pt->detail = pt->c.err[0] ? pt->c.err : status_text(rc);
    pt->ans.n = pt->ans.ntargets = 0;
}

/* ------------------------------------------------------------ the run's end */

/* The status when no part answered: DEADLINE_EXCEEDED when one ran out of
 * budget, CANCELLED after the client's cancel, else UNAVAILABLE. */
static grpc_status_code none_answered(run *r) {
    if (__atomic_load_n(&r->cancelled, __ATOMIC_SEQ_CST)) {
        rpc_call_set_error(r->call, "the client cancelled the call");
        return GRPC_STATUS_CANCELLED;
    }
    char msg[1200];
    size_t at = 0;
    int late = 0;
    msg[0] = '\0';
    for (int i = 0; i < KINDS; i++) {
        const part *pt = &r->parts[i];
        if (!pt->used) continue;
        late |= pt->outcome == MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_DEADLINE_EXCEEDED;
        int w = snprintf(msg + at, sizeof msg - at, "%s%s: %s", at ? "; " : "",
                         pt->rt ? pt->rt->route->label : "a tier",
                         pt->detail ? pt->detail : "no answer");
        if (w > 0 && (size_t)w < sizeof msg - at) at += (size_t)w;
    }
    if (late) {
        rpc_call_set_error(r->call, "no tier answered within the budget: %s", msg);
        return GRPC_STATUS_DEADLINE_EXCEEDED;
    }
    rpc_call_set_error(r->call, "every tier failed: %s", msg);
    return GRPC_STATUS_UNAVAILABLE;
}

/* The results the call answers with (every part has ended; one thread). */
static int final_results(run *r, Memory__V1__RouterResult ***out, size_t *n) {
    if (r->q.hybrid) return fused_results(r, out, n);
    for (int i = 0; i < KINDS; i++) {
        const part *pt = &r->parts[i];
        if (!pt->used) continue;
        *out = pt->ans.results;
        *n = shown(r, pt);
        return 0;
    }
    *out = NULL, *n = 0;
    return 0;
}

/* Names every record the parts returned in the call's audit row (for a
 * hybrid Query, also those the fusion then cut past limit). */
static void name_targets(run *r) {
    for (int i = 0; i < KINDS; i++)
        for (size_t k = 0; k < r->parts[i].ans.ntargets; k++)
            tier_target(r->call, "%s", r->parts[i].ans.targets[k]);
}

static grpc_status_code fill_response(run *r, Memory__V1__RouterResult **res, size_t n) {
    rpc_call *call = r->call;
    Memory__V1__RouterQueryResponse *resp = r->resp;
    arena *a = rpc_call_arena(call);
    resp->results = res;
    resp->n_results = n;
    for (int i = 0; i < KINDS; i++) {
        const part *pt = &r->parts[i];
        if (pt->used &&
            (pt->outcome != MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_ANSWERED || pt->ans.partial))
            resp->partial = 1;
    }
    resp->tiers = arena_alloc(a, KINDS * TIER_ROUTE_LEVELS * sizeof *resp->tiers);
    if (!resp->tiers) return rpc_call_oom(call);
    for (int k = 0; k < r->nended; k++) {
        int got = part_reports(a, r, &r->parts[r->order[k]], resp->tiers + resp->n_tiers);
        if (got < 0) return rpc_call_oom(call);
        resp->n_tiers += (size_t)got;
    }
    return GRPC_STATUS_OK;
}

/* Every part has ended (the last one's thread): the call's answer. */
static void finish(run *r) {
    rpc_call *call = r->call;
    name_targets(r);
    int answered = 0;
    for (int i = 0; i < KINDS; i++)
        if (r->parts[i].used &&
            r->parts[i].outcome == MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_ANSWERED)
            answered = 1;
    grpc_status_code st = GRPC_STATUS_OK;
    Memory__V1__RouterResult **res = NULL;
    size_t n = 0;
    if (r->fault) st = r->fault;
    else if (!answered) st = none_answered(r);
    else if (final_results(r, &res, &n) != 0) st = rpc_call_oom(call);
    if (!r->resp) {
        if (st == GRPC_STATUS_OK && r->q.hybrid) {
            Memory__V1__RouterQueryStreamResponse m =
                MEMORY__V1__ROUTER_QUERY_STREAM_RESPONSE__INIT;
            m.results = res;
            m.n_results = n;
            m.fused = 1;
            if (rpc_call_send(call, &m.base) == RPC_SEND_OVERFLOW) {
                rpc_call_set_error(call, RPC_OVERFLOW_MESSAGE);
                st = GRPC_STATUS_RESOURCE_EXHAUSTED;
            }
        }
        rpc_call_finish(call, st, st == GRPC_STATUS_OK ? NULL : rpc_call_error(call));
        return;
    }
    if (st == GRPC_STATUS_OK) st = fill_response(r, res, n);
    rpc_call_complete(call, st); /* may free the call, and r in its arena */
}

/* ------------------------------------------------------------ parts */

/* A stream's message for part pt (its report and results, in a). A
 * stream the client left ends with the run; one whose reader is too slow
 * for a message or two is not a Router concern (the buffer holds them). */
static void announce(run *r, const part *pt, arena *a) {
    if (r->resp || __atomic_load_n(&r->cancelled, __ATOMIC_SEQ_CST) ||
        __atomic_load_n(&r->fault, __ATOMIC_SEQ_CST))
        return;
    Memory__V1__TierReport *reps[TIER_ROUTE_LEVELS];
    int n = part_reports(a, r, pt, reps);
    for (int k = 0; k < n; k++) {
        Memory__V1__RouterQueryStreamResponse m = MEMORY__V1__ROUTER_QUERY_STREAM_RESPONSE__INIT;
        m.report = reps[k];
        if (reps[k]->tier == pt->ans.tier) {
            m.results = pt->ans.results;
            m.n_results = shown(r, pt);
        }
        rpc_call_send(r->call, &m.base);
    }
}

/* Stops the parts still running but except (any thread, no lock held: a
 * part's cancel may end it before it returns). */
static void cancel_parts(run *r, const part *except) {
    for (int i = 0; i < KINDS; i++) {
        part *pt = &r->parts[i];
        if (!pt->running || pt == except || __atomic_load_n(&pt->ended, __ATOMIC_SEQ_CST)) continue;
        const tier_route *rt = pt->rt->route;
        if (rt->blocking) cancel_fire(&pt->cancel);
        else rt->cancel(pt->h);
    }
}

/* The end of the launcher's or a part's share of the run: the last one
 * finishes it. */
static void release(run *r) {
    pthread_mutex_lock(&r->lock);
    int last = --r->pending == 0;
    pthread_mutex_unlock(&r->lock);
    if (last) finish(r);
}

/* Codes with which a part finds the request, not its tier, at fault (a
 * start entity that does not exist, a text the embedder refused, another
 * model): the call fails with them. */
static int fault_code(int rc) {
    return rc == STATUS_ENOTFOUND || rc == STATUS_EINVALID || rc == STATUS_EPRECONDITION;
}

/* Part pt ended with rc (its answer filled when STATUS_OK); fault: the
 * request's fault it found before running (its message set), or
 * GRPC_STATUS_OK. A stream gets its message now; the last part to end
 * finishes the call. */
static void part_end(part *pt, int rc, grpc_status_code fault) {
    run *r = pt->run;
    pt->end_ms = rpc_now_ms();
    int at_fault = fault != GRPC_STATUS_OK || fault_code(rc);
    pthread_mutex_lock(&r->lock); /* the first fault names the call's status and message */
    int first_fault = at_fault && r->fault == GRPC_STATUS_OK;
    if (first_fault && fault == GRPC_STATUS_OK) fault = tier_status(r->call, rc, &pt->c);
    if (first_fault) __atomic_store_n(&r->fault, fault, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&r->lock);
    set_outcome(pt, rc);
    announce(r, pt, pt->c.ar);
    pthread_mutex_lock(&r->lock);
    __atomic_store_n(&pt->ended, 1, __ATOMIC_SEQ_CST); /* a cancel no longer reaches into it */
    r->order[r->nended++] = (int)(pt - r->parts);
    pthread_mutex_unlock(&r->lock);
    if (first_fault) cancel_parts(r, pt);
    release(r);
}

static void part_done(void *arg, int rc) { part_end(arg, rc, GRPC_STATUS_OK); }

/* Whether a failure of a blocking part's preparation is the request's
 * fault (the call fails with it) or the tier's (reported, the rest runs). */
static int request_fault(grpc_status_code st) {
    return st == GRPC_STATUS_INVALID_ARGUMENT || st == GRPC_STATUS_NOT_FOUND ||
           st == GRPC_STATUS_PERMISSION_DENIED || st == GRPC_STATUS_RESOURCE_EXHAUSTED ||
           st == GRPC_STATUS_CANCELLED || st == GRPC_STATUS_FAILED_PRECONDITION;
}

/* A blocking part failed before it ran: the tier's failure (reported;
 * the rest answers), or the request's (the call fails with st, its
 * message set, once the other parts, cancelled now, have ended). */
static void prepare_failed(part *pt, grpc_status_code st) {
    const char *why = rpc_call_error(pt->run->call);
    snprintf(pt->c.err, sizeof pt->c.err, "%s", why ? why : rpc_status_name(st));
    part_end(pt, st == GRPC_STATUS_DEADLINE_EXCEEDED ? STATUS_ETIMEOUT : STATUS_EUNAVAILABLE,
             request_fault(st) ? st : GRPC_STATUS_OK);
}

static grpc_status_code prepare(run *r, part *pt) {
    const tier_route *rt = pt->rt->route;
    int k = (int)(pt - r->parts);
    return rt->prepare(pt->rt->state, r->call, r->q.prefix[k], r->q.part[k], r->q.limit, &pt->c,
                       &pt->ans, part_done, pt, &pt->h);
}

/* On a task-pool thread, while the other parts run on the loop: the
 * blocking parts' preparation (their checks may block) and run, in turn.
 * It always runs, past the deadline too: those parts end through it. */
static grpc_status_code run_blocking_parts(rpc_call *call, const ProtobufCMessage *req,
                                           ProtobufCMessage *resp, void *arg) {
    (void)call, (void)req, (void)resp;
    run *r = arg;
    for (int i = 0; i < KINDS; i++) {
        part *pt = &r->parts[i];
        if (!pt->running || !pt->rt->route->blocking) continue;
        grpc_status_code st = prepare(r, pt);
        if (st != GRPC_STATUS_OK) prepare_failed(pt, st);
        else pt->rt->route->start(pt->h);
    }
    return RPC_PENDING;
}

/* The client cancelled, its deadline passed, or the server drains: the
 * running parts stop (each then ends through part_end). */
static void on_cancel(rpc_call *call, void *arg) {
    (void)call;
    run *r = arg;
    __atomic_store_n(&r->cancelled, 1, __ATOMIC_SEQ_CST);
    cancel_parts(r, NULL);
}

/* A part skipped (for want of its tier's read scope: "the token lacks
 * <scope>"): reported with why, not run. */
static void skip(run *r, part *pt, const char *why) {
    pt->used = 1;
    pt->outcome = MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_SKIPPED;
    pt->detail = why;
    pt->end_ms = r->start_ms;
    r->order[r->nended++] = (int)(pt - r->parts);
}

/* The call is gone: the parts' arenas and a recall's principal. */
static void run_destroy(void *arg) {
    run *r = arg;
    for (int i = 0; i < KINDS; i++) arena_free(r->parts[i].own);
    principal_unref(r->as_user);
}

/* The run's budget (router.proto): the caller's deadline, or the default,
 * less the reply margin. */
static int64_t budget_end(const router_service *svc, rpc_call *call, int64_t now) {
    int64_t dl = rpc_call_deadline_ms(call);
    if (dl == INT64_MAX) dl = now + svc->default_deadline_ms;
    return tier_end_less_margin(dl, now, REPLY_MARGIN_MS);
}

/* The parts' contexts of a recall read only its user's records: the
 * caller's own (even with `:all`), or the named user's through a
 * principal of that user with the caller's tenant and read ceiling. */
static grpc_status_code recall_scope(run *r, const principal *p) {
    const char *user = r->q.recall_user;
    if (user[0] && strcmp(user, principal_sub(p)) != 0) {
        tier_erase_sel sel = {
            .tenant = principal_tenant(p), .owner = user, .max_label = (int)principal_clr(p)};
        if (!(r->as_user = tier_erase_principal(&sel))) return rpc_call_oom(r->call);
    }
    for (int i = 0; i < KINDS; i++) {
        part *pt = &r->parts[i];
        if (!pt->running) continue;
        pt->c.read_breadth = PRINCIPAL_OWN;
        if (r->as_user) pt->c.p = r->as_user;
    }
    return GRPC_STATUS_OK;
}

/* Each part's context: its tier's, with the run's deadline, its own
 * arena when it runs beside another, a cancel token when it blocks. */
static grpc_status_code set_up(run *r, int nrunning) {
    rpc_call *call = r->call;
    for (int i = 0; i < KINDS; i++) {
        part *pt = &r->parts[i];
        pt->run = r;
        if (!r->q.part[i] && !r->q.skip[i]) continue;
        pt->rt = router_route_of(r->svc->env, (tier_route_kind)i);
        pt->ans.tier = pt->rt ? pt->rt->route->tier : MEMORY__V1__TIER__TIER_UNSPECIFIED;
        if (r->q.skip[i]) {
            skip(r, pt, r->q.skip[i]);
            continue;
        }
        pt->used = pt->running = 1;
        pt->c = tier_ctx_for(call, pt->rt->route->ctx_tier, NULL);
        pt->c.deadline_ms = r->deadline_ms;
        if (nrunning > 1 && !(pt->c.ar = pt->own = arena_create())) return rpc_call_oom(call);
        if (pt->rt->route->blocking) {
            cancel_init(&pt->cancel);
            pt->c.cancel = &pt->cancel;
        }
    }
    return GRPC_STATUS_OK;
}

/* Starts the running parts once every check that needs no backend has
 * passed: the non-blocking ones here, the blocking ones on a task-pool
 * thread. r is not touched after the launcher's release. */
static grpc_status_code start(run *r, int nrunning) {
    if (rpc_call_on_cancel(r->call, on_cancel, r) != 0) return GRPC_STATUS_CANCELLED;
    for (int k = 0; k < r->nended; k++)
        announce(r, &r->parts[r->order[k]], rpc_call_arena(r->call));
    r->pending = nrunning + 1;
    int blocking = 0;
    for (int i = 0; i < KINDS; i++) {
        part *pt = &r->parts[i];
        if (!pt->running) continue;
        if (pt->rt->route->blocking) blocking = 1;
        else pt->rt->route->start(pt->h);
    }
    if (blocking && rpc_call_run_blocking(r->call, run_blocking_parts, r) != RPC_PENDING) {
        /* No task thread for them (the queue is full): the tiers are busy. */
        for (int i = 0; i < KINDS; i++) {
            part *pt = &r->parts[i];
            if (pt->running && pt->rt->route->blocking) prepare_failed(pt, GRPC_STATUS_UNAVAILABLE);
        }
    }
    release(r);
    return RPC_PENDING;
}

grpc_status_code router_run(rpc_call *call, router_service *svc, const router_query *q,
                            Memory__V1__RouterQueryResponse *resp) {
    run *r = arena_zalloc(rpc_call_arena(call), sizeof *r);
    if (!r) return rpc_call_oom(call);
    r->call = call;
    r->svc = svc;
    r->q = *q;
    r->resp = resp;
    r->start_ms = rpc_now_ms();
    r->deadline_ms = budget_end(svc, call, r->start_ms);
    pthread_mutex_init(&r->lock, NULL); /* a default mutex holds no resources */
    if (rpc_call_on_destroy(call, run_destroy, r) != 0) {
        rpc_call_set_error(call, "the call has no room for the router's clean-up");
        return GRPC_STATUS_INTERNAL;
    }
    int nrunning = 0;
    for (int i = 0; i < KINDS; i++) nrunning += q->part[i] && !q->skip[i];
    RPC_CHECK(set_up(r, nrunning));
    if (q->recall) RPC_CHECK(recall_scope(r, authn_principal(call)));
    for (int i = 0; i < KINDS; i++) {
        part *pt = &r->parts[i];
        if (pt->running && !pt->rt->route->blocking) RPC_CHECK(prepare(r, pt));
    }
    return start(r, nrunning);
}
