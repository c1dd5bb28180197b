/* router_service: memory.v1.Router; see router_service.h. */
#include "service/router/router_service.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "memory/v1/router.pb-c.h"
#include "service/auth/authn.h"
#include "service/core/cancel.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/entries/entries_service.h"
#include "service/episodic/episodic_service.h"
#include "service/episodic/episodic_text.h"
#include "service/global/global_service.h"
#include "service/pb/pbtime.h"
#include "service/router/router_fuse.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_erase.h"

#define LIMIT_MAX 1000
#define LIMIT_DEFAULT 10
/* The reply margin kept from the caller's deadline: a tenth of what is
 * left, at most this. */
#define REPLY_MARGIN_MS 100
/* A point names the entity it is about with this top-level payload field
 * (router.proto's fusion). */
#define ENTITY_FIELD "entity_id"
/* A recall's graph part: GraphQuery.text_query's bound. */
#define RECALL_QUERY_MAX 1024
#define USER_MAX 256

typedef struct router_service {
    struct global_service *global;
    struct episodic_service *episodic;
    struct entries_service *entries;
    int has_l2; /* Redis configured: the recent lookup has an L2 */
    int64_t default_deadline_ms;
} router_service;

/* A request of either method, normalised (the two messages have the same
 * fields). */
typedef struct query {
    const Memory__V1__VectorSearchQuery *vector;
    const Memory__V1__GraphQuery *graph;
    const Memory__V1__RecentLookupQuery *recent;
    const char *vector_prefix, *graph_prefix; /* field names in errors */
    int hybrid;
    int limit;
    /* A recall: a hybrid whose parts read only this user's records
     * ("" = the caller's); graph NULL when its text has no words. */
    int recall;
    const char *recall_user;
} query;

enum { PART_VECTOR = 0, PART_GRAPH = 1, PART_RECENT = 2, NPARTS = 3 };
/* Reports one part may give: the recent lookup's three levels. */
#define LEVELS 3

typedef struct part {
    int rc;      /* how it ended (STATUS_*) */
    int used;    /* consulted (or skipped: outcome set up front) */
    int running; /* started; ends through part_end */
    Memory__V1__Tier tier;
    Memory__V1__TierOutcome outcome;
    const char *detail;
    int partial; /* answered in part (a hybrid search without its vector part): detail says why */
    int64_t end_ms;
    Memory__V1__RouterResult **results; /* best first */
    size_t n;
    tier_ctx c;
    /* The recent lookup reports each level it passed (L1, L2, Entries);
     * the one that answered (tier) carries the results. */
    int nlevels;
    Memory__V1__Tier level_tier[LEVELS];
    Memory__V1__TierOutcome level_outcome[LEVELS];
} part;

typedef struct run {
    rpc_call *call;
    router_service *svc;
    query q;
    int stream;
    Memory__V1__RouterQueryResponse *resp; /* Query's */
    int64_t start_ms, deadline_ms;
    pthread_mutex_t lock;
    int pending; /* running parts not yet ended */
    int cancelled;
    grpc_status_code fault; /* the request's fault found by a part (its message set) */
    part parts[NPARTS];
    int order[NPARTS]; /* parts in the order they ended */
    int nended;
    cancel_token cancel;     /* the vector part's */
    global_graph *graph;     /* the graph part's query */
    arena *graph_arena;      /* the graph part's memory (the loop thread's while it runs) */
    global_graph_hit *ghits; /* what it found */
    long nghits;
    episodic_search *search; /* the vector part's */
    entries_lookup *lookup;  /* the recent part's */
    Memory__V1__ScoredPoint **points;
    size_t npoints;
    principal *as_user; /* a recall for another user: the parts' principal */
} run;

/* ------------------------------------------------------------ results */

static Memory__V1__Tier *tier_list(arena *a, Memory__V1__Tier first, Memory__V1__Tier second,
                                   size_t *n) {
    Memory__V1__Tier *t = arena_alloc(a, 2 * sizeof *t);
    if (!t) return NULL;
    t[0] = first;
    t[1] = second;
    *n = second ? 2 : 1;
    return t;
}

static Memory__V1__RouterResult *new_result(arena *a, Memory__V1__Tier tier, Memory__V1__Tier also,
                                            double score) {
    Memory__V1__RouterResult *r = arena_message(a, &memory__v1__router_result__descriptor);
    if (!r || !(r->tiers = tier_list(a, tier, also, &r->n_tiers))) return NULL;
    r->tier = tier;
    r->score = score;
    return r;
}

static Memory__V1__RouterResult *entity_result(arena *a, const global_graph_hit *h, double score,
                                               Memory__V1__Tier also) {
    Memory__V1__RouterResult *r = new_result(a, MEMORY__V1__TIER__TIER_GLOBAL, also, score);
    if (!r) return NULL;
    r->record_case = MEMORY__V1__ROUTER_RESULT__RECORD_ENTITY;
    r->entity = h->entity;
    r->depth = h->depth;
    return r;
}

static Memory__V1__RouterResult *point_result(arena *a, Memory__V1__ScoredPoint *sp, double score) {
    Memory__V1__RouterResult *r = new_result(a, MEMORY__V1__TIER__TIER_EPISODIC, 0, score);
    if (!r) return NULL;
    r->record_case = MEMORY__V1__ROUTER_RESULT__RECORD_POINT;
    r->point = sp->point;
    r->n_search_parts = sp->n_parts;
    r->search_parts = sp->parts;
    return r;
}

/* The graph part's hits as results, in a (the part's arena while it
 * runs): 0, or -1 when out of memory. */
static int graph_results(run *r, arena *a) {
    part *pt = &r->parts[PART_GRAPH];
    if ((r->nghits = global_graph_hits(r->graph, a, &r->ghits)) < 0) return -1;
    if (!(pt->results = arena_alloc(a, ((size_t)r->nghits + 1) * sizeof *pt->results))) return -1;
    for (long i = 0; i < r->nghits; i++)
        if (!(pt->results[i] = entity_result(a, &r->ghits[i], r->ghits[i].score, 0))) return -1;
    pt->n = (size_t)r->nghits;
    return 0;
}

static int vector_results(run *r, arena *a) {
    part *pt = &r->parts[PART_VECTOR];
    if (!(pt->results = arena_alloc(a, (r->npoints + 1) * sizeof *pt->results))) return -1;
    for (size_t i = 0; i < r->npoints; i++)
        if (!(pt->results[i] = point_result(a, r->points[i], r->points[i]->score))) return -1;
    pt->n = r->npoints;
    return 0;
}

/* The entity a point names: its payload's top-level string entity_id. */
static const char *point_entity(const Memory__V1__ScoredPoint *sp) {
    const Google__Protobuf__Struct *s = sp->point ? sp->point->payload : NULL;
    for (size_t i = 0; s && i < s->n_fields; i++) {
        const Google__Protobuf__Value *v = s->fields[i]->value;
        if (strcmp(s->fields[i]->key, ENTITY_FIELD) == 0 && v &&
            v->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE)
            return v->string_value;
    }
    return NULL;
}

/* The hybrid's fused ranking (router.proto), at most limit results, in
 * the call's arena. */
static int fused_results(run *r, Memory__V1__RouterResult ***out, size_t *nout) {
    arena *a = rpc_call_arena(r->call);
    size_t ne = r->nghits > 0 ? (size_t)r->nghits : 0, np = r->npoints;
    rfuse_entity *ents = arena_alloc(a, (ne + 1) * sizeof *ents);
    const char **names = arena_alloc(a, (np + 1) * sizeof *names);
    rfuse_result *fr = arena_alloc(a, (ne + np + 1) * sizeof *fr);
    Memory__V1__RouterResult **res = arena_alloc(a, (ne + np + 1) * sizeof *res);
    if (!ents || !names || !fr || !res) return -1;
    for (size_t i = 0; i < ne; i++)
        ents[i] = (rfuse_entity){r->ghits[i].entity->id, r->ghits[i].depth};
    for (size_t j = 0; j < np; j++) names[j] = point_entity(r->points[j]);
    int traversal = r->q.graph && r->q.graph->start_id[0];
    size_t n = rfuse(ents, ne, traversal, names, np, fr);
    if (n > (size_t)r->q.limit) n = (size_t)r->q.limit;
    for (size_t k = 0; k < n; k++) {
        if (fr[k].entity >= 0) {
            Memory__V1__Tier also = fr[k].point >= 0 ? MEMORY__V1__TIER__TIER_EPISODIC : 0;
            if (!(res[k] = entity_result(a, &r->ghits[fr[k].entity], fr[k].score, also))) return -1;
            if (fr[k].point >= 0) {
                const Memory__V1__ScoredPoint *sp = r->points[fr[k].point];
                res[k]->entity_point = sp->point;
                res[k]->n_search_parts = sp->n_parts;
                res[k]->search_parts = sp->parts;
            }
        } else if (!(res[k] = point_result(a, r->points[fr[k].point], fr[k].score))) {
            return -1;
        }
    }
    *out = res;
    *nout = n;
    return 0;
}

/* ------------------------------------------------------------ reports */

static Memory__V1__TierReport *report_of(arena *a, const run *r, const part *pt,
                                         Memory__V1__Tier tier, Memory__V1__TierOutcome outcome) {
    Memory__V1__TierReport *m = arena_message(a, &memory__v1__tier_report__descriptor);
    if (!m) return NULL;
    m->tier = tier;
    m->outcome = outcome;
    int answering = tier == pt->tier;
    m->result_count = answering ? (int32_t)pt->n : 0;
    if (answering && pt->detail && !(m->detail = arena_strdup(a, pt->detail))) return NULL;
    int64_t ms = (pt->end_ms > r->start_ms ? pt->end_ms : r->start_ms) - r->start_ms;
    if (!(m->latency = pbtime_duration(a, ms * 1000))) return NULL;
    return m;
}

/* A part's reports into out (room for LEVELS): how many, or -1 when out
 * of memory. */
static int part_reports(arena *a, const run *r, const part *pt, Memory__V1__TierReport **out) {
    if (!pt->nlevels) return (out[0] = report_of(a, r, pt, pt->tier, pt->outcome)) ? 1 : -1;
    for (int k = 0; k < pt->nlevels; k++) {
        Memory__V1__TierOutcome o =
            pt->level_tier[k] == pt->tier ? pt->outcome : pt->level_outcome[k];
        if (!(out[k] = report_of(a, r, pt, pt->level_tier[k], o))) return -1;
    }
    return pt->nlevels;
}

/* A part's end code as its outcome. */
static void set_outcome(part *pt, int rc) {
    pt->rc = rc;
    if (rc == STATUS_OK) {
        pt->outcome = MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_ANSWERED;
        return;
    }
    pt->outcome = rc == STATUS_ETIMEOUT ? MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_DEADLINE_EXCEEDED
                                        : MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_UNAVAILABLE;
    pt->detail = pt->c.err[0] ? pt->c.err : status_text(rc);
    pt->n = 0;
}

/* ------------------------------------------------------------ the run's end */

/* The status when no part answered: DEADLINE_EXCEEDED when one ran out of
 * budget, CANCELLED after the client's cancel, else UNAVAILABLE. */
static grpc_status_code none_answered(run *r) {
    if (r->cancelled) {
        rpc_call_set_error(r->call, "the client cancelled the call");
        return GRPC_STATUS_CANCELLED;
    }
    char msg[1200];
    size_t at = 0;
    int late = 0;
    msg[0] = '\0';
    for (int i = 0; i < NPARTS; i++) {
        const part *pt = &r->parts[i];
        if (!pt->used) continue;
        late |= pt->outcome == MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_DEADLINE_EXCEEDED;
        static const char *const names[NPARTS] = {"episodic memory", "global memory", "entries"};
        int w = snprintf(msg + at, sizeof msg - at, "%s%s: %s", at ? "; " : "", names[i],
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
    int i = r->parts[PART_GRAPH].used ? PART_GRAPH : r->q.recent ? PART_RECENT : PART_VECTOR;
    const part *pt = &r->parts[i];
    *out = pt->results;
    *n = pt->n < (size_t)r->q.limit ? pt->n : (size_t)r->q.limit;
    return 0;
}

/* Names every record the parts returned in the call's audit row (for a
 * hybrid Query, also those the fusion then cut past limit). */
static void name_targets(run *r) {
    for (long i = 0; i < r->nghits; i++) tier_target(r->call, "entity:%s", r->ghits[i].entity->id);
    /* The vector part named its points as it rendered them; the recent
     * part its entry. */
}

static void finish(run *r) {
    rpc_call *call = r->call;
    name_targets(r);
    int answered = 0, partial = 0;
    for (int i = 0; i < NPARTS; i++) {
        if (!r->parts[i].used) continue;
        if (r->parts[i].outcome == MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_ANSWERED) answered = 1;
        if (r->parts[i].outcome != MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_ANSWERED ||
            r->parts[i].partial)
            partial = 1;
    }
    grpc_status_code st = GRPC_STATUS_OK;
    Memory__V1__RouterResult **res = NULL;
    size_t n = 0;
    /* A start entity that does not exist is the request's fault. */
    const part *gp = &r->parts[PART_GRAPH];
    if (r->fault) st = r->fault;
    else if (gp->used && gp->rc == STATUS_ENOTFOUND) st = tier_status(call, gp->rc, &gp->c);
    else if (!answered) st = none_answered(r);
    else if (final_results(r, &res, &n) != 0) st = rpc_call_oom(call);
    if (r->stream) {
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
        /* Messages are encoded when sent (the fused one refers to the
         * graph part's entities); a cancel no longer reaches the graph
         * part, which has ended: its memory goes. */
        arena *ga = r->graph_arena;
        principal *up = r->as_user;
        rpc_call_finish(call, st, st == GRPC_STATUS_OK ? NULL : rpc_call_error(call));
        arena_free(ga);
        principal_unref(up);
        return;
    }
    if (st == GRPC_STATUS_OK) {
        Memory__V1__RouterQueryResponse *resp = r->resp;
        arena *a = rpc_call_arena(call);
        resp->results = res;
        resp->n_results = n;
        resp->partial = partial;
        resp->tiers = arena_alloc(a, NPARTS * LEVELS * sizeof *resp->tiers);
        if (!resp->tiers) st = rpc_call_oom(call);
        for (int k = 0; st == GRPC_STATUS_OK && k < r->nended; k++) {
            int got = part_reports(a, r, &r->parts[r->order[k]], resp->tiers + resp->n_tiers);
            if (got < 0) st = rpc_call_oom(call);
            else resp->n_tiers += (size_t)got;
        }
    }
    /* The response is encoded by rpc_call_complete, which may free the
     * call (and r in its arena): the graph part's memory goes after it. */
    arena *ga = r->graph_arena;
    principal *up = r->as_user;
    rpc_call_complete(call, st);
    arena_free(ga);
    principal_unref(up);
}

/* ------------------------------------------------------------ parts */

/* A stream's message for part i (its report and results, in a). A
 * stream the client left ends with the run; one whose reader is too slow
 * for a message or two is not a Router concern (the buffer holds them). */
static void announce(run *r, int i, arena *a) {
    const part *pt = &r->parts[i];
    if (!r->stream || r->cancelled || r->fault) return;
    Memory__V1__TierReport *reps[LEVELS];
    int n = part_reports(a, r, pt, reps);
    for (int k = 0; k < n; k++) {
        Memory__V1__RouterQueryStreamResponse m = MEMORY__V1__ROUTER_QUERY_STREAM_RESPONSE__INIT;
        m.report = reps[k];
        if (reps[k]->tier == pt->tier) {
            m.results = pt->results;
            m.n_results = pt->n < (size_t)r->q.limit ? pt->n : (size_t)r->q.limit;
        }
        rpc_call_send(r->call, &m.base);
    }
}

/* Part i ended with rc (its results rendered when STATUS_OK). A stream
 * gets its message now; the last part to end finishes the call. */
static void part_end(run *r, int i, int rc, arena *a) {
    part *pt = &r->parts[i];
    pt->end_ms = rpc_now_ms();
    set_outcome(pt, rc);
    announce(r, i, a);
    pthread_mutex_lock(&r->lock);
    pt->running = 0; /* a cancel no longer reaches into it */
    r->order[r->nended++] = i;
    int last = --r->pending == 0;
    pthread_mutex_unlock(&r->lock);
    if (last) finish(r);
}

/* The graph part's statement ended (loop thread). */
static void graph_done(void *arg, int rc) {
    run *r = arg;
    if (rc == STATUS_OK && graph_results(r, r->graph_arena) != 0)
        rc = tier_fail(&r->parts[PART_GRAPH].c, STATUS_ENOMEM, "out of memory");
    part_end(r, PART_GRAPH, rc, r->graph_arena);
}

/* The client cancelled, its deadline passed, or the server drains: the
 * running parts stop (each then ends through part_end). The graph part's
 * query lives in its own arena, which the run's end frees: it is cancelled
 * under the run's lock, and only while it runs (its cancel is only a flag
 * for the loop, so nothing ends under the lock). */
static void on_cancel(rpc_call *call, void *arg) {
    (void)call;
    run *r = arg;
    pthread_mutex_lock(&r->lock);
    r->cancelled = 1;
    if (r->parts[PART_GRAPH].running) global_graph_cancel(r->graph);
    pthread_mutex_unlock(&r->lock);
    cancel_fire(&r->cancel);
    if (r->lookup) entries_lookup_cancel(r->lookup);
}

/* The recent lookup ended (any thread): the levels it passed, and the
 * entry if there is one. */
static void recent_done(void *arg, int rc, int from) {
    run *r = arg;
    part *pt = &r->parts[PART_RECENT];
    static const Memory__V1__Tier levels[LEVELS] = {MEMORY__V1__TIER__TIER_CACHE_L1,
                                                    MEMORY__V1__TIER__TIER_CACHE_L2,
                                                    MEMORY__V1__TIER__TIER_ENTRIES};
    int at = from - ENTRIES_FROM_L1; /* the level that answered */
    pt->tier = levels[at];
    pt->nlevels = LEVELS;
    for (int k = 0; k < LEVELS; k++) {
        pt->level_tier[k] = levels[k];
        pt->level_outcome[k] = k < at ? MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_MISS
                                      : MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_SKIPPED;
    }
    /* Without Redis there is no L2 to miss. */
    if (!r->svc->has_l2) pt->level_outcome[1] = MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_SKIPPED;
    Memory__V1__Entry *e = rc == STATUS_OK ? entries_lookup_entry(r->lookup) : NULL;
    if (e) {
        arena *a = pt->c.ar;
        Memory__V1__RouterResult *res = new_result(a, pt->tier, 0, 1.0);
        if (!res || !(pt->results = arena_alloc(a, sizeof *pt->results))) {
            rc = tier_fail(&pt->c, STATUS_ENOMEM, "out of memory");
        } else {
            res->record_case = MEMORY__V1__ROUTER_RESULT__RECORD_ENTRY;
            res->entry = e;
            pt->results[0] = res;
            pt->n = 1;
            tier_target(r->call, "%s/%s", e->namespace_, e->key);
        }
    }
    part_end(r, PART_RECENT, rc, pt->c.ar);
}

/* Whether a failure of the vector part's preparation is the request's
 * fault (the call fails with it) or the tier's (reported, the rest runs). */
static int request_fault(grpc_status_code st) {
    return st == GRPC_STATUS_INVALID_ARGUMENT || st == GRPC_STATUS_NOT_FOUND ||
           st == GRPC_STATUS_PERMISSION_DENIED || st == GRPC_STATUS_RESOURCE_EXHAUSTED ||
           st == GRPC_STATUS_CANCELLED || st == GRPC_STATUS_FAILED_PRECONDITION;
}

/* The vector part failed before its search: the tier's failure
 * (reported; the rest answers), or the request's (the call fails with st,
 * its message set, once the graph part, cancelled now, has ended). */
static void vector_failed(run *r, grpc_status_code st) {
    part *pt = &r->parts[PART_VECTOR];
    if (request_fault(st)) {
        pthread_mutex_lock(&r->lock);
        r->fault = st;
        if (r->parts[PART_GRAPH].running) global_graph_cancel(r->graph);
        pthread_mutex_unlock(&r->lock);
    }
    const char *why = rpc_call_error(r->call);
    snprintf(pt->c.err, sizeof pt->c.err, "%s", why ? why : rpc_status_name(st));
    part_end(r, PART_VECTOR,
             st == GRPC_STATUS_DEADLINE_EXCEEDED ? STATUS_ETIMEOUT : STATUS_EUNAVAILABLE,
             rpc_call_arena(r->call));
}

/* On a task-pool thread, while the graph part runs on the loop: the
 * vector part's collection and checks (they block on the catalog), then
 * its search. */
static grpc_status_code with_vector(rpc_call *call, const ProtobufCMessage *req,
                                    ProtobufCMessage *resp, void *arg) {
    (void)req, (void)resp;
    run *r = arg;
    part *pt = &r->parts[PART_VECTOR];
    grpc_status_code st = episodic_search_prepare(r->svc->episodic, call, r->q.vector_prefix,
                                                  r->q.vector, r->q.limit, &pt->c, &r->search);
    if (st != GRPC_STATUS_OK) {
        vector_failed(r, st);
        return RPC_PENDING;
    }
    int rc = episodic_search_run(r->search, &r->points, &r->npoints);
    if (rc == STATUS_EINVALID || rc == STATUS_EPRECONDITION) {
        /* A hybrid's vector part found the request or the setup at fault
         * (a text the embedder refused, another model): the call's, as a
         * single search's would be in its checks. */
        rpc_call_set_error(call, "%s", pt->c.err);
        vector_failed(r, rc == STATUS_EINVALID ? GRPC_STATUS_INVALID_ARGUMENT
                                               : GRPC_STATUS_FAILED_PRECONDITION);
        return RPC_PENDING;
    }
    if (rc != STATUS_OK) r->npoints = 0;
    const char *why = rc == STATUS_OK ? episodic_search_partial(r->search) : NULL;
    if (why) pt->partial = 1, pt->detail = why;
    if (rc == STATUS_OK && vector_results(r, pt->c.ar) != 0)
        rc = tier_fail(&pt->c, STATUS_ENOMEM, "out of memory");
    part_end(r, PART_VECTOR, rc, pt->c.ar);
    return RPC_PENDING;
}

/* Starts the running parts once the checks that need no backend passed:
 * the graph part on the loop, the recent lookup, and the vector part on a
 * task-pool thread (its collection's checks run there, in parallel with
 * the graph part). */
static grpc_status_code start(run *r) {
    if (rpc_call_on_cancel(r->call, on_cancel, r) != 0) {
        arena_free(r->graph_arena);
        r->graph_arena = NULL;
        return GRPC_STATUS_CANCELLED;
    }
    for (int k = 0; k < r->nended; k++) announce(r, r->order[k], rpc_call_arena(r->call));
    if (r->parts[PART_RECENT].running) {
        entries_lookup_start(r->lookup); /* may end the call: r is not touched after */
        return RPC_PENDING;
    }
    int vector = r->parts[PART_VECTOR].running;
    if (r->parts[PART_GRAPH].running) global_graph_submit(r->graph);
    if (vector) {
        /* It always runs, past the deadline too: the run ends through it. */
        grpc_status_code st = rpc_call_run_blocking(r->call, with_vector, r);
        /* No task thread for it (the queue is full): the tier is busy. */
        if (st != RPC_PENDING) vector_failed(r, GRPC_STATUS_UNAVAILABLE);
    }
    return RPC_PENDING;
}

/* ------------------------------------------------------------ the request */

static grpc_status_code check_limit(rpc_call *call, int32_t limit, int *out) {
    if (limit < 0 || limit > LIMIT_MAX)
        return rpc_call_invalid(call, "limit: %d; must be 1 to %d (0 = %d)", (int)limit, LIMIT_MAX,
                                LIMIT_DEFAULT);
    *out = limit ? limit : LIMIT_DEFAULT;
    return GRPC_STATUS_OK;
}

/* A part skipped (for want of its tier's read scope: "the token lacks
 * <scope>"): reported with why, not run. */
static void skip(run *r, int i, const char *why) {
    part *pt = &r->parts[i];
    pt->used = 1;
    pt->outcome = MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_SKIPPED;
    pt->detail = why;
    pt->end_ms = r->start_ms;
    r->order[r->nended++] = i;
}

/* The run's budget (router.proto): the caller's deadline, or the default,
 * less the reply margin. */
static int64_t budget_end(const router_service *svc, rpc_call *call, int64_t now) {
    int64_t dl = rpc_call_deadline_ms(call);
    if (dl == INT64_MAX) dl = now + svc->default_deadline_ms;
    return tier_end_less_margin(dl, now, REPLY_MARGIN_MS);
}

/* The token's breadth for a recall's part: PRINCIPAL_DENY when it may
 * not read that user's records of the tier. */
static principal_breadth recall_breadth(const principal *p, const char *scope, int other_user) {
    principal_breadth b = principal_scope(p, scope);
    return other_user && b != PRINCIPAL_ALL ? PRINCIPAL_DENY : b;
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
    for (int i = 0; i < NPARTS; i++) {
        part *pt = &r->parts[i];
        if (!pt->running) continue;
        pt->c.read_breadth = PRINCIPAL_OWN;
        if (r->as_user) pt->c.p = r->as_user;
    }
    return GRPC_STATUS_OK;
}

/* Sets up the parts the token may run and starts them: RPC_PENDING (the
 * run ends through finish), or the call's status. */
static grpc_status_code launch(run *r, int may_vector, int may_graph, const char *vector_scope,
                               const char *graph_scope) {
    rpc_call *call = r->call;
    router_service *svc = r->svc;
    const query *q = &r->q;
    r->parts[PART_VECTOR].tier = MEMORY__V1__TIER__TIER_EPISODIC;
    r->parts[PART_GRAPH].tier = MEMORY__V1__TIER__TIER_GLOBAL;
    r->parts[PART_RECENT].tier = MEMORY__V1__TIER__TIER_CACHE_L1; /* until it answers */
    arena *a = rpc_call_arena(call);
    if (q->graph && !may_graph)
        skip(r, PART_GRAPH, arena_printf(a, "the token lacks %s", graph_scope));
    if (q->vector && !may_vector)
        skip(r, PART_VECTOR, arena_printf(a, "the token lacks %s", vector_scope));
    if (q->recall && !q->graph)
        skip(r, PART_GRAPH,
             "the text has no words (besides common ones) for the graph's full-text query");
    if (may_graph) {
        part *pt = &r->parts[PART_GRAPH];
        pt->used = pt->running = 1;
        if (!(r->graph_arena = arena_create())) return rpc_call_oom(call);
        pt->c = tier_ctx_for(call, "global", NULL);
        pt->c.deadline_ms = r->deadline_ms;
        pt->c.ar = r->graph_arena;
    }
    if (may_vector) {
        part *pt = &r->parts[PART_VECTOR];
        pt->used = pt->running = 1;
        pt->c = tier_ctx_for(call, "episodic", NULL);
        pt->c.deadline_ms = r->deadline_ms;
        pt->c.cancel = &r->cancel;
        r->pending++;
    }
    if (q->recall) RPC_CHECK(recall_scope(r, authn_principal(call)));
    if (may_graph) {
        part *pt = &r->parts[PART_GRAPH];
        grpc_status_code st = global_graph_prepare(svc->global, call, q->graph_prefix, q->graph,
                                                   q->limit, &pt->c, graph_done, r, &r->graph);
        if (st != GRPC_STATUS_OK) return st;
        r->pending++;
    }
    if (q->recent) {
        part *pt = &r->parts[PART_RECENT];
        pt->used = pt->running = 1;
        pt->c = tier_ctx_for(call, "entries", NULL);
        pt->c.deadline_ms = r->deadline_ms;
        RPC_CHECK(entries_lookup_prepare(svc->entries, call, "recent_lookup.", q->recent, &pt->c,
                                         recent_done, r, &r->lookup));
        r->pending++;
    }
    return start(r);
}

static grpc_status_code route(rpc_call *call, router_service *svc, const query *q, int stream,
                              Memory__V1__RouterQueryResponse *resp) {
    const principal *p = authn_principal(call);
    /* Only the scopes of the parts the query has are looked up. A recall
     * for another user needs the tiers' `:all` read breadth. */
    int other_user = q->recall && q->recall_user[0] && strcmp(q->recall_user, principal_sub(p));
    const char *vector_scope = other_user ? "episodic:read:all" : "episodic:read";
    const char *graph_scope = other_user ? "global:read:all" : "global:read";
    int may_vector = q->vector && recall_breadth(p, "episodic:read", other_user) != PRINCIPAL_DENY;
    int may_graph = q->graph && recall_breadth(p, "global:read", other_user) != PRINCIPAL_DENY;
    if (q->vector && !q->hybrid && !may_vector) {
        rpc_call_set_error(call, "vector_search needs the episodic:read scope");
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    if (q->graph && !q->hybrid && !may_graph) {
        rpc_call_set_error(call, "graph_query needs the global:read scope");
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    if (q->recent && principal_scope(p, "entries:read") == PRINCIPAL_DENY) {
        rpc_call_set_error(call, "recent_lookup needs the entries:read scope");
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    if (q->hybrid && !may_vector && !may_graph) {
        rpc_call_set_error(call, "%s needs %s or %s (it has neither)",
                           q->recall ? "recall" : "hybrid", vector_scope, graph_scope);
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    arena *a = rpc_call_arena(call);
    run *r = arena_zalloc(a, sizeof *r);
    if (!r) return rpc_call_oom(call);
    r->call = call;
    r->svc = svc;
    r->q = *q;
    r->stream = stream;
    r->resp = resp;
    r->start_ms = rpc_now_ms();
    r->deadline_ms = budget_end(svc, call, r->start_ms);
    pthread_mutex_init(&r->lock, NULL); /* a default mutex holds no resources */
    cancel_init(&r->cancel);
    grpc_status_code st = launch(r, may_vector, may_graph, vector_scope, graph_scope);
    if (st != RPC_PENDING) {
        /* Nothing runs: finish never comes. */
        arena_free(r->graph_arena);
        principal_unref(r->as_user);
    }
    return st;
}

/* A request's query, normalised: INVALID_ARGUMENT when none or half a
 * hybrid is given. kind is the request's query_case (both messages number
 * their oneof alike: checked below). */
_Static_assert((int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_HYBRID ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_HYBRID &&
                   (int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_RECENT_LOOKUP ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_RECENT_LOOKUP &&
                   (int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_GRAPH_QUERY ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_GRAPH_QUERY &&
                   (int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_VECTOR_SEARCH ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_VECTOR_SEARCH &&
                   (int)MEMORY__V1__ROUTER_QUERY_STREAM_REQUEST__QUERY_RECALL ==
                       (int)MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_RECALL,
               "RouterQueryRequest and RouterQueryStreamRequest number their query alike");
/* The graph part of a recall: the text's words, any of them, in web-search
 * syntax ("a or b or c"), within RECALL_QUERY_MAX bytes; "" when the text
 * has none. A word is a run of letters and digits (any non-ASCII byte
 * counts as one, so words of every script stay whole). The graph's text
 * search has no stop words (PostgreSQL's 'simple' configuration), so the
 * commonest English function words are left out here: "what did I say
 * about the trip" looks for "say or trip", not for every entity with a
 * "the" in it. */
static int word_byte(unsigned char c) {
    return c >= 0x80 || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

static int stop_word(const unsigned char *w, size_t n) {
    static const char *const stop[] = {
        "a",    "about", "an",   "and",  "are",   "as",   "at",   "be",    "but",   "by",
        "can",  "could", "did",  "do",   "does",  "for",  "from", "had",   "has",   "have",
        "he",   "her",   "his",  "how",  "i",     "if",   "in",   "into",  "is",    "it",
        "its",  "me",    "my",   "no",   "not",   "of",   "on",   "or",    "our",   "she",
        "so",   "than",  "that", "the",  "their", "them", "then", "there", "these", "they",
        "this", "to",    "was",  "we",   "were",  "what", "when", "where", "which", "who",
        "whom", "why",   "will", "with", "would", "you",  "your"};
    if (n > 5) return 0;
    for (size_t k = 0; k < sizeof stop / sizeof stop[0]; k++)
        if (strlen(stop[k]) == n && strncasecmp((const char *)w, stop[k], n) == 0) return 1;
    return 0;
}

static const char *recall_words(arena *a, const char *text) {
    char *out = arena_alloc(a, RECALL_QUERY_MAX + 1);
    if (!out) return NULL;
    size_t at = 0;
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        while (*s && !word_byte(*s)) s++;
        const unsigned char *w = s;
        while (*s && word_byte(*s)) s++;
        size_t n = (size_t)(s - w), sep = at ? 4 : 0;
        if (n == 0 || stop_word(w, n) || at + sep + n > RECALL_QUERY_MAX) continue;
        if (sep) memcpy(out + at, " or ", sep);
        memcpy(out + at + sep, w, n);
        at += sep + n;
    }
    out[at] = '\0';
    return out;
}

/* A recall as the hybrid query it runs (router.proto's RecallQuery). */
static grpc_status_code recall_of(rpc_call *call, const Memory__V1__RecallQuery *rq, query *q) {
    if (!rq->text[0]) return rpc_call_invalid(call, "recall.text: required");
    /* Checked here, not by the vector part: the graph part uses it too. */
    RPC_CHECK(episodic_text_check(call, "recall.text", rq->text));
    long uc = rq->user[0] ? text_name_chars(rq->user) : 0;
    if (uc < 0 || uc > USER_MAX)
        return rpc_call_invalid(call,
                                "recall.user: %s; a principal is 1 to %d printable characters",
                                uc < 0 ? "not printable UTF-8" : "too long", USER_MAX);
    arena *a = rpc_call_arena(call);
    Memory__V1__VectorSearchQuery *v =
        arena_message(a, &memory__v1__vector_search_query__descriptor);
    if (!v) return rpc_call_oom(call);
    v->collection = rq->collection;
    v->text = rq->text;
    v->filter = rq->filter;
    v->options = rq->options;
    v->with_payload = 1;
    const char *words = recall_words(a, rq->text);
    if (!words) return rpc_call_oom(call);
    if (words[0]) {
        Memory__V1__GraphQuery *g = arena_message(a, &memory__v1__graph_query__descriptor);
        if (!g) return rpc_call_oom(call);
        g->text_query = (char *)words;
        q->graph = g, q->graph_prefix = "recall.";
    }
    q->hybrid = q->recall = 1;
    q->recall_user = rq->user;
    q->vector = v, q->vector_prefix = "recall.";
    return GRPC_STATUS_OK;
}

static grpc_status_code query_of(rpc_call *call, int kind, const Memory__V1__VectorSearchQuery *v,
                                 const Memory__V1__GraphQuery *g,
                                 const Memory__V1__RecentLookupQuery *r,
                                 const Memory__V1__HybridQuery *h,
                                 const Memory__V1__RecallQuery *rc, int32_t limit, query *q) {
    memset(q, 0, sizeof *q);
    RPC_CHECK(check_limit(call, limit, &q->limit));
    switch (kind) {
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_VECTOR_SEARCH:
        q->vector = v, q->vector_prefix = "vector_search.";
        break;
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_GRAPH_QUERY:
        q->graph = g, q->graph_prefix = "graph_query.";
        break;
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_RECENT_LOOKUP: q->recent = r; break;
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_HYBRID:
        if (!h->vector_search) return rpc_call_invalid(call, "hybrid.vector_search: required");
        if (!h->graph_query) return rpc_call_invalid(call, "hybrid.graph_query: required");
        q->hybrid = 1;
        q->vector = h->vector_search, q->vector_prefix = "hybrid.vector_search.";
        q->graph = h->graph_query, q->graph_prefix = "hybrid.graph_query.";
        break;
    case MEMORY__V1__ROUTER_QUERY_REQUEST__QUERY_RECALL: return recall_of(call, rc, q);
    default:
        return rpc_call_invalid(call, "query: required (set one of vector_search, graph_query, "
                                      "recent_lookup, hybrid, recall)");
    }
    return GRPC_STATUS_OK;
}

static RPC_UNARY_HANDLER(do_query, router_service, Memory__V1__RouterQueryRequest,
                         Memory__V1__RouterQueryResponse) {
    query q;
    RPC_CHECK(query_of(call, (int)req->query_case, req->vector_search, req->graph_query,
                       req->recent_lookup, req->hybrid, req->recall, req->limit, &q));
    return route(call, svc, &q, 0, resp);
}

static grpc_status_code do_query_stream(rpc_call *call, const ProtobufCMessage *msg, void *arg) {
    const Memory__V1__RouterQueryStreamRequest *req =
        (const Memory__V1__RouterQueryStreamRequest *)msg;
    query q;
    RPC_CHECK(query_of(call, (int)req->query_case, req->vector_search, req->graph_query,
                       req->recent_lookup, req->hybrid, req->recall, req->limit, &q));
    return route(call, arg, &q, 1, NULL);
}

/* ------------------------------------------------------------ the tier */

static int router_open(tier_env *env, void **state, char *err, size_t errlen) {
    router_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    if (!svc) return -1;
    if (!env->global || !env->episodic || !env->entries)
        return snprintf(err, errlen,
                        "the router opens after GlobalMemory, EpisodicMemory and Entries"),
               -1;
    svc->global = env->global;
    svc->episodic = env->episodic;
    svc->entries = env->entries;
    svc->has_l2 = env->redis != NULL;
    svc->default_deadline_ms = env->cfg ? env->cfg->router_default_deadline_ms : 5000;
    if (svc->default_deadline_ms <= 0) svc->default_deadline_ms = 5000;
    return 0;
}

static void router_free(void *state) { free(state); }

#define SVC "memory.v1.Router"
static const rpc_method methods[] = {
    RPC_METHOD_UNARY(SVC, "Query", memory__v1__router_query, "router:query", do_query),
    RPC_METHOD_SERVER_STREAM(SVC, "QueryStream", memory__v1__router_query_stream, "router:query",
                             do_query_stream),
};

static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG}};

const tier router_tier = {TIER_FIELDS("router", services, methods, router_open, router_free)};
