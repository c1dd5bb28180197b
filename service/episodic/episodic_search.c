/* episodic_search: EpisodicMemory.Search and the Router's vector part:
 * one search (by vector, by a text's embedding, or lexical), or a hybrid
 * of the lexical and the vector part fused by rank (episodic_fuse.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/episodic/episodic_fuse.h"
#include "service/episodic/episodic_rerank.h"
#include "service/episodic/episodic_service_internal.h"
#include "service/episodic/episodic_text.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"

#define WEIGHT_MAX 100
/* Of a hybrid's time left when its vector part starts, what is kept for
 * answering with the lexical part alone (a tenth, at most this). */
#define HYBRID_REPLY_MARGIN_MS 100
/* RecallOptions: how many hits a boost or de-duplication re-ranks, the
 * same for every page so that pages join up (offset + limit must fit in
 * it), and the half-life's bounds. */
#define RERANK_POOL 1000
#define HALF_LIFE_MIN_MS 1000LL
#define HALF_LIFE_MAX_MS (3650LL * 86400 * 1000)

/* A search's request fields, from EpisodicMemory.Search or a routed
 * VectorSearchQuery. */
typedef struct search_req {
    const char *collection;
    const float *vector;
    size_t n_vector;
    const char *text; /* "": none (then vector) */
    int mode;         /* memory.v1.SearchMode */
    float lexical_weight, vector_weight;
    const Memory__V1__Filter *filter;
    int has_threshold;
    float score_threshold;
    int limit, offset; /* checked by the caller */
    int with_payload, with_vector;
    const Memory__V1__RecallOptions *options; /* NULL: none */
} search_req;

/* A search as prepared: one part (q), or a hybrid (lex, then q with the
 * text's embedding, made when it runs). */
typedef struct episodic_search {
    episodic_service *svc;
    rpc_call *call;
    tier_ctx *c;
    vs_collection col;
    vs_search q;
    int part; /* the single part: MEMORY__V1__SEARCH_PART__SEARCH_PART_* */
    int hybrid;
    vs_search lex;
    const char *text_field; /* the hybrid's text, for the embedder's errors */
    double wl, wv;
    int limit, offset;
    /* RecallOptions: the window q applies; the boost (half-life 0: none)
     * and de-duplication (diversity 0: none) re-rank. */
    tier_time_range updated;
    int64_t half_life_us;
    double diversity;
    int with_payload, with_vector; /* what the caller asked to see */
    int partial;
    const char *partial_detail;
    int fatal; /* the vector part failed the call (not a partial answer) */
} episodic_search;

static grpc_status_code check_weight(rpc_call *call, const char *prefix, const char *name, float w,
                                     double *out) {
    if (!isfinite(w) || w < 0 || w > WEIGHT_MAX)
        return rpc_call_invalid(call, "%s%s: %g; must be 0 to %d (0: 1)", prefix, name, (double)w,
                                WEIGHT_MAX);
    *out = w == 0 ? 1.0 : (double)w;
    return GRPC_STATUS_OK;
}

static int reranks(const episodic_search *s) { return s->half_life_us > 0 || s->diversity > 0; }

/* What the scores mean, as a memory.v1.Distance: the collection's
 * (EUCLID scores are distances), or DOT (higher is better) for a lexical
 * search's BM25 scores and a hybrid's fused ones. */
static int score_distance(const episodic_search *s) {
    return s->hybrid || s->q.text ? VS_DOT : s->col.distance;
}

static grpc_status_code check_options(episodic_search *s, const char *prefix,
                                      const Memory__V1__RecallOptions *o) {
    if (!o) return GRPC_STATUS_OK;
    char field[96];
    snprintf(field, sizeof field, "%soptions.time_range", prefix);
    RPC_CHECK(tier_check_time_range(s->call, field, o->time_range, &s->updated));
    int64_t ms = 0;
    snprintf(field, sizeof field, "%soptions.recency_half_life", prefix);
    if (o->recency_half_life)
        RPC_CHECK(tier_check_duration(s->call, field, o->recency_half_life, HALF_LIFE_MIN_MS,
                                      HALF_LIFE_MAX_MS, "1 s to 3650 days", &ms));
    s->half_life_us = ms * 1000;
    if (!isfinite(o->diversity) || o->diversity < 0 || o->diversity > 1)
        return rpc_call_invalid(s->call, "%soptions.diversity: %g; must be 0 to 1 (0: none)",
                                prefix, (double)o->diversity);
    s->diversity = o->diversity;
    return GRPC_STATUS_OK;
}

/* Checks r (errors name prefix + the field) and looks up its collection
 * with s->c (blocks: the catalog; and the embedder, for a single search by
 * a text's embedding). */
static grpc_status_code search_prepare(episodic_search *s, const char *prefix,
                                       const search_req *r) {
    episodic_service *svc = s->svc;
    rpc_call *call = s->call;
    tier_ctx *c = s->c;
    vs_collection *col = &s->col;
    char field[96];
    if (r->has_threshold && !isfinite(r->score_threshold))
        return rpc_call_invalid(call, "%sscore_threshold: must be a finite number", prefix);
    snprintf(field, sizeof field, "%sfilter", prefix);
    RPC_CHECK(episodic_service_check_filter(call, field, r->filter));
    snprintf(field, sizeof field, "%stext", prefix);
    if (r->text[0] && r->n_vector)
        return rpc_call_invalid(call, "%svector and %stext are both set; give one", prefix, prefix);
    if (r->text[0]) RPC_CHECK(episodic_text_check(call, field, r->text));
    int mode = r->mode;
    if (mode < MEMORY__V1__SEARCH_MODE__SEARCH_MODE_AUTO ||
        mode > MEMORY__V1__SEARCH_MODE__SEARCH_MODE_HYBRID)
        return rpc_call_invalid(call, "%smode: %d; AUTO, VECTOR, LEXICAL or HYBRID", prefix, mode);
    if ((mode == MEMORY__V1__SEARCH_MODE__SEARCH_MODE_LEXICAL ||
         mode == MEMORY__V1__SEARCH_MODE__SEARCH_MODE_HYBRID) &&
        !r->text[0])
        return rpc_call_invalid(
            call, "%smode: %s searches by text; give %stext", prefix,
            mode == MEMORY__V1__SEARCH_MODE__SEARCH_MODE_LEXICAL ? "LEXICAL" : "HYBRID", prefix);
    if (mode == MEMORY__V1__SEARCH_MODE__SEARCH_MODE_HYBRID && r->has_threshold)
        return rpc_call_invalid(call,
                                "%sscore_threshold: not with HYBRID (its parts' scores are on "
                                "different scales)",
                                prefix);
    RPC_CHECK(check_options(s, prefix, r->options));
    RPC_CHECK(check_weight(call, prefix, "lexical_weight", r->lexical_weight, &s->wl));
    RPC_CHECK(check_weight(call, prefix, "vector_weight", r->vector_weight, &s->wv));
    snprintf(field, sizeof field, "%scollection", prefix);
    RPC_CHECK(episodic_service_check_name(call, field, r->collection));
    RPC_CHECK(
        episodic_service_status(call, vstore_get_collection(svc->vs, c, r->collection, col), c));
    s->limit = r->limit;
    s->offset = r->offset;
    s->with_payload = r->with_payload;
    s->with_vector = r->with_vector;
    s->q = (vs_search){.limit = r->limit,
                       .offset = r->offset,
                       .filter = r->filter,
                       .has_threshold = r->has_threshold,
                       .threshold = r->score_threshold,
                       .updated = s->updated.has_start || s->updated.has_end ? &s->updated : NULL,
                       .with_payload = r->with_payload,
                       .with_vector = r->with_vector};
    if (reranks(s)) {
        /* The pool is searched from its first hit and paged once re-ranked;
         * de-duplication compares vectors and texts. */
        if ((long)r->offset + r->limit > RERANK_POOL)
            return rpc_call_invalid(call,
                                    "%soffset + %slimit: %d; a boosted or de-duplicated search "
                                    "pages within its best %d hits",
                                    prefix, prefix, r->offset + r->limit, RERANK_POOL);
        s->q.offset = 0;
        s->q.limit = RERANK_POOL;
        if (s->diversity > 0) s->q.with_payload = s->q.with_vector = 1;
    }
    /* AUTO: a text is searched both ways when it can be (an embedder, and
     * vectors to search), by its embedding alone under a threshold or on
     * Qdrant (which keeps no texts), and lexically otherwise. */
    int embeddable = svc->emb && col->dims > 0;
    if (mode == MEMORY__V1__SEARCH_MODE__SEARCH_MODE_AUTO && r->text[0])
        mode = !embeddable                       ? MEMORY__V1__SEARCH_MODE__SEARCH_MODE_LEXICAL
               : r->has_threshold || svc->remote ? MEMORY__V1__SEARCH_MODE__SEARCH_MODE_VECTOR
                                                 : MEMORY__V1__SEARCH_MODE__SEARCH_MODE_HYBRID;
    if (mode == MEMORY__V1__SEARCH_MODE__SEARCH_MODE_LEXICAL) {
        s->q.text = r->text;
        s->part = MEMORY__V1__SEARCH_PART__SEARCH_PART_LEXICAL;
        return GRPC_STATUS_OK;
    }
    if (col->dims == 0)
        return rpc_call_invalid(call,
                                "collection %s has no vector yet (dims 0: text only); search it "
                                "by %stext with mode AUTO or LEXICAL",
                                col->name, prefix);
    s->part = MEMORY__V1__SEARCH_PART__SEARCH_PART_VECTOR;
    if (mode == MEMORY__V1__SEARCH_MODE__SEARCH_MODE_HYBRID) {
        /* Each part ranks the first offset + limit; the fused ranking is
         * paged afterwards. The embedding is made when it runs, so that
         * its failure leaves the lexical part's answer. */
        s->hybrid = 1;
        if (!reranks(s)) s->q.limit = r->offset + r->limit;
        s->q.offset = 0;
        s->lex = s->q;
        s->lex.text = r->text;
        s->text_field = arena_printf(c->ar, "%stext", prefix);
        if (!s->text_field) return rpc_call_oom(call);
        if (!svc->emb) { /* asked for: say what is missing, as VECTOR would */
            float *unused;
            return episodic_text_embed(call, svc->emb, svc->pg, c, col, s->text_field, &r->text, 1,
                                       0, &unused);
        }
        return GRPC_STATUS_OK;
    }
    if (r->text[0]) {
        float *v;
        RPC_CHECK(episodic_text_embed(call, svc->emb, svc->pg, c, col, field, &r->text, 1, 0, &v));
        s->q.vector = v;
        return GRPC_STATUS_OK;
    }
    snprintf(field, sizeof field, "%svector", prefix);
    return episodic_service_check_vector(call, field, r->vector, r->n_vector, col, &s->q.vector);
}

/* A hit on its way to the answer: the point as a part found it, its
 * score, and its rank (from 1; 0: not found) and score in each part
 * (lexical, vector). */
typedef struct cand {
    const vs_hit *hit;
    double score;
    int ranks[2];
    float scores[2];
} cand;

/* A ScoredPoint for k (the point shown as the caller asked: the search may
 * have fetched more for de-duplication), named in the call's audit row;
 * NULL when out of memory. */
static Memory__V1__ScoredPoint *render_hit(episodic_search *s, const cand *k) {
    tier_ctx *c = s->c;
    Memory__V1__ScoredPoint *sp = arena_message(c->ar, &memory__v1__scored_point__descriptor);
    if (!sp) return NULL;
    vs_point pt = k->hit->point;
    if (!s->with_vector) pt.vector = NULL;
    if (!s->with_payload) pt.payload = NULL, pt.text = NULL;
    sp->score = (float)k->score;
    sp->point = episodic_service_render_point(c->ar, c->p, &pt, s->col.dims);
    episodic_service_target(s->call, s->col.name, &pt.id);
    size_t n = (k->ranks[0] > 0) + (k->ranks[1] > 0);
    sp->parts = arena_alloc(c->ar, (n ? n : 1) * sizeof *sp->parts);
    if (!sp->point || !sp->parts) return NULL;
    static const int part_of[2] = {MEMORY__V1__SEARCH_PART__SEARCH_PART_LEXICAL,
                                   MEMORY__V1__SEARCH_PART__SEARCH_PART_VECTOR};
    for (int i = 0; i < 2; i++) {
        if (!k->ranks[i]) continue;
        Memory__V1__SearchPartHit *ph =
            arena_message(c->ar, &memory__v1__search_part_hit__descriptor);
        if (!ph) return NULL;
        ph->part = (Memory__V1__SearchPart)part_of[i];
        ph->rank = k->ranks[i];
        ph->score = k->scores[i];
        sp->parts[sp->n_parts++] = ph;
    }
    return sp;
}

/* One part's hits as candidates; base: the rank of hits[0] less one. */
static cand *cands_of_part(episodic_search *s, const vs_hit *hits, size_t n, int base) {
    cand *v = arena_alloc(s->c->ar, (n ? n : 1) * sizeof *v);
    int lexical = s->part == MEMORY__V1__SEARCH_PART__SEARCH_PART_LEXICAL;
    for (size_t i = 0; v && i < n; i++) {
        int rank = base + (int)i + 1;
        v[i] = (cand){.hit = &hits[i],
                      .score = hits[i].score,
                      .ranks = {lexical ? rank : 0, lexical ? 0 : rank},
                      .scores = {hits[i].score, hits[i].score}};
    }
    return v;
}

/* episodic_rerank_mmr's clock: whether the call's deadline has passed. */
static int past_deadline(void *arg) {
    const tier_ctx *c = arg;
    return c->deadline_ms != INT64_MAX && clock_mono_ms(NULL) >= c->deadline_ms;
}

/* RecallOptions' boost and de-duplication over v[0..n) (best first),
 * keeping what the page needs: STATUS_OK or STATUS_ENOMEM. */
static int rerank(episodic_search *s, cand *v, size_t n) {
    if (!reranks(s) || n == 0) return STATUS_OK;
    tier_ctx *c = s->c;
    episodic_rerank_item *items = arena_alloc(c->ar, n * sizeof *items);
    cand *was = arena_alloc(c->ar, n * sizeof *was);
    if (!items || !was) return STATUS_ENOMEM;
    for (size_t i = 0; i < n; i++)
        items[i] =
            (episodic_rerank_item){.point = &v[i].hit->point, .score = v[i].score, .index = i};
    int higher = score_distance(s) == VS_EUCLID ? EPISODIC_RERANK_LOWER_BETTER
                                                : EPISODIC_RERANK_HIGHER_BETTER;
    if (s->half_life_us)
        episodic_rerank_recency(items, n, higher, clock_wall_us(), s->half_life_us);
    if (s->diversity > 0) {
        lex_analyzer *an = lex_analyzer_of_thread(s->svc->language);
        size_t want = (size_t)s->offset + (size_t)s->limit;
        if (!an) return tier_fail(c, STATUS_ENOMEM, "no text analyzer for %s", s->svc->language);
        int rc = episodic_rerank_mmr(items, n, want, higher, s->diversity, s->col.dims, an,
                                     past_deadline, c);
        if (rc == STATUS_ETIMEOUT)
            return tier_fail(c, STATUS_ETIMEOUT,
                             "the deadline passed while de-duplicating %zu hits", n);
        if (rc != 0) return STATUS_ENOMEM;
    }
    memcpy(was, v, n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        v[i] = was[items[i].index];
        v[i].score = items[i].score;
    }
    return STATUS_OK;
}

/* The page [first, first + limit) of v[0..n) as ScoredPoints. */
static int render_page(episodic_search *s, const cand *v, size_t n, size_t first,
                       Memory__V1__ScoredPoint ***out, size_t *nout) {
    size_t count = n > first ? n - first : 0;
    if (count > (size_t)s->limit) count = (size_t)s->limit;
    Memory__V1__ScoredPoint **pts = arena_alloc(s->c->ar, (count ? count : 1) * sizeof *pts);
    if (!pts) return STATUS_ENOMEM;
    for (size_t i = 0; i < count; i++)
        if (!(pts[i] = render_hit(s, &v[first + i]))) return STATUS_ENOMEM;
    *out = pts;
    *nout = count;
    return STATUS_OK;
}

/* The hybrid's vector part: the text's embedding, then its search, within
 * the time left less the reply margin. STATUS_OK; a failure the call
 * answers with the lexical part alone (its detail in s->partial_detail);
 * or one that fails the call (s->fatal, c->err). */
static int vector_part(episodic_search *s, vs_hit **hits, size_t *n) {
    tier_ctx *c = s->c;
    int64_t end = c->deadline_ms;
    c->deadline_ms = tier_end_less_margin(end, clock_mono_ms(NULL), HYBRID_REPLY_MARGIN_MS);
    float *v;
    int rc = STATUS_OK;
    grpc_status_code st = episodic_text_embed(s->call, s->svc->emb, s->svc->pg, c, &s->col,
                                              s->text_field, &s->lex.text, 1, 0, &v);
    if (st == GRPC_STATUS_INVALID_ARGUMENT || st == GRPC_STATUS_FAILED_PRECONDITION) {
        /* The request's fault or the setup's (the embedder refused the
         * text, another model): the call's, as a single search's. */
        const char *why = rpc_call_error(s->call);
        rc = tier_fail(c,
                       st == GRPC_STATUS_INVALID_ARGUMENT ? STATUS_EINVALID : STATUS_EPRECONDITION,
                       "%s", why ? why : rpc_status_name(st));
        s->fatal = 1;
    } else if (st != GRPC_STATUS_OK) {
        const char *why = rpc_call_error(s->call);
        s->partial_detail = arena_printf(c->ar, "vector part: %s: %s", rpc_status_name(st),
                                         why ? why : "the embedder failed");
        rc = STATUS_EUNAVAILABLE;
    } else {
        s->q.vector = v;
        rc = vstore_search(s->svc->vs, c, &s->col, &s->q, hits, n);
        if (rc != STATUS_OK) s->partial_detail = arena_printf(c->ar, "vector part: %s", c->err);
    }
    c->deadline_ms = end;
    return rc;
}

/* The hybrid: the lexical part, then the vector part, fused as candidates
 * (*hits: the two parts' hits, for the caller to release). */
static int run_hybrid(episodic_search *s, vs_hit *hits[2], size_t nh[2], cand **out, size_t *n) {
    tier_ctx *c = s->c;
    int rc = vstore_search(s->svc->vs, c, &s->col, &s->lex, &hits[0], &nh[0]);
    if (rc != STATUS_OK) return rc;
    if ((rc = vector_part(s, &hits[1], &nh[1])) != STATUS_OK && s->fatal) return rc;
    if (rc != STATUS_OK) {
        s->partial = 1;
        hits[1] = NULL, nh[1] = 0;
        c->err[0] = '\0';
    }
    size_t total = nh[0] + nh[1];
    episodic_fuse_hit *fused = arena_alloc(c->ar, (total ? total : 1) * sizeof *fused);
    cand *v = arena_alloc(c->ar, (total ? total : 1) * sizeof *v);
    long nf = fused && v ? episodic_fuse(hits[0], nh[0], hits[1], nh[1], s->wl, s->wv, fused) : -1;
    if (nf < 0) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    /* Re-ranked, the fusion's best RERANK_POOL are the pool (each part
     * brought as many). */
    if (reranks(s) && nf > RERANK_POOL) nf = RERANK_POOL;
    for (long i = 0; i < nf; i++) {
        const episodic_fuse_hit *h = &fused[i];
        v[i] = (cand){.hit = episodic_fuse_point(h),
                      .score = h->score,
                      .ranks = {h->lex_rank, h->vec_rank},
                      .scores = {h->lex ? h->lex->score : 0, h->vec ? h->vec->score : 0}};
    }
    *out = v;
    *n = (size_t)nf;
    return STATUS_OK;
}

/* The search: one part or the hybrid, re-ranked by the options, paged. */
static int search_run(episodic_search *s, Memory__V1__ScoredPoint ***points, size_t *n) {
    vs_hit *hits[2] = {NULL, NULL};
    size_t nh[2] = {0, 0}, nc = 0, first = (size_t)s->offset;
    cand *v = NULL;
    int rc;
    if (s->hybrid) {
        rc = run_hybrid(s, hits, nh, &v, &nc);
    } else {
        rc = vstore_search(s->svc->vs, s->c, &s->col, &s->q, &hits[0], &nh[0]);
        /* Unless re-ranked, the backend skipped the offset already. */
        int paged = !reranks(s);
        if (paged) first = 0;
        if (rc == STATUS_OK && !(v = cands_of_part(s, hits[0], nh[0], paged ? s->offset : 0)))
            rc = STATUS_ENOMEM;
        nc = nh[0];
    }
    if (rc == STATUS_OK) rc = rerank(s, v, nc);
    if (rc == STATUS_OK) rc = render_page(s, v, nc, first, points, n);
    vs_hits_release(hits[0], nh[0]);
    vs_hits_release(hits[1], nh[1]);
    return rc != STATUS_ENOMEM || s->c->err[0] ? rc : tier_fail(s->c, rc, "out of memory");
}

RPC_UNARY_HANDLER(episodic_do_search, episodic_service, Memory__V1__EpisodicMemorySearchRequest,
                  Memory__V1__EpisodicMemorySearchResponse) {
    if (req->limit < 0 || req->limit > LIMIT_MAX)
        return rpc_call_invalid(call, "limit: %d; must be 1 to %d (0: %d)", req->limit, LIMIT_MAX,
                                LIMIT_DEFAULT);
    if (req->offset < 0 || req->offset > OFFSET_MAX)
        return rpc_call_invalid(call, "offset: %d; must be 0 to %d", req->offset, OFFSET_MAX);
    search_req r = {
        .collection = req->collection,
        .vector = req->vector,
        .n_vector = req->n_vector,
        .text = req->text,
        .mode = (int)req->mode,
        .lexical_weight = req->lexical_weight,
        .vector_weight = req->vector_weight,
        .filter = req->filter,
        .has_threshold = req->threshold_case ==
                         MEMORY__V1__EPISODIC_MEMORY_SEARCH_REQUEST__THRESHOLD_SCORE_THRESHOLD,
        .score_threshold = req->score_threshold,
        .limit = req->limit ? req->limit : LIMIT_DEFAULT,
        .offset = req->offset,
        .with_payload = req->with_payload,
        .with_vector = req->with_vector,
        .options = req->options,
    };
    tier_ctx c;
    RPC_CHECK(episodic_service_ctx(&c, call));
    episodic_search s = {.svc = svc, .call = call, .c = &c};
    RPC_CHECK(search_prepare(&s, "", &r));
    int rc = search_run(&s, &resp->points, &resp->n_points);
    if (rc != STATUS_OK) return episodic_service_status(call, rc, &c);
    resp->partial = s.partial;
    if (s.partial_detail) resp->partial_detail = (char *)s.partial_detail;
    return GRPC_STATUS_OK;
}

/* ---- the Router's part (tier_route.h): a VectorSearchQuery run as
 * Search runs (the same checks, the same backend call with the read
 * diode inside it); both steps block on the catalog and the backend. */

typedef struct route_part {
    episodic_search s;
    tier_route_answer *ans;
    tier_route_done done;
    void *arg;
} route_part;

static grpc_status_code route_prepare(void *state, rpc_call *call, const char *prefix,
                                      const ProtobufCMessage *query, int limit, tier_ctx *c,
                                      tier_route_answer *ans, tier_route_done done, void *arg,
                                      void **out) {
    const Memory__V1__VectorSearchQuery *vq = (const Memory__V1__VectorSearchQuery *)query;
    route_part *rp = arena_zalloc(c->ar, sizeof *rp);
    if (!rp) return rpc_call_oom(call);
    rp->s = (episodic_search){.svc = state, .call = call, .c = c};
    rp->ans = ans;
    rp->done = done;
    rp->arg = arg;
    search_req r = {
        .collection = vq->collection,
        .vector = vq->vector,
        .n_vector = vq->n_vector,
        .text = vq->text,
        .filter = vq->filter,
        .has_threshold =
            vq->threshold_case == MEMORY__V1__VECTOR_SEARCH_QUERY__THRESHOLD_SCORE_THRESHOLD,
        .score_threshold = vq->score_threshold,
        .limit = limit,
        .with_payload = vq->with_payload,
        .options = vq->options,
    };
    RPC_CHECK(search_prepare(&rp->s, prefix, &r));
    *out = rp;
    return GRPC_STATUS_OK;
}

/* The points as the answer's results (each named in the audit row as
 * Search names them, when rendered). */
static int route_answer(route_part *rp, Memory__V1__ScoredPoint **pts, size_t n) {
    arena *a = rp->s.c->ar;
    tier_route_answer *ans = rp->ans;
    if (!(ans->results = arena_alloc(a, (n + 1) * sizeof *ans->results))) return -1;
    for (size_t i = 0; i < n; i++) {
        Memory__V1__RouterResult *r =
            tier_route_result(a, MEMORY__V1__TIER__TIER_EPISODIC, 0, pts[i]->score);
        if (!r) return -1;
        r->record_case = MEMORY__V1__ROUTER_RESULT__RECORD_POINT;
        r->point = pts[i]->point;
        r->n_search_parts = pts[i]->n_parts;
        r->search_parts = pts[i]->parts;
        ans->results[i] = r;
    }
    ans->n = n;
    if (rp->s.partial) ans->partial = rp->s.partial_detail;
    return 0;
}

static void route_start(void *part) {
    route_part *rp = part;
    Memory__V1__ScoredPoint **pts = NULL;
    size_t n = 0;
    int rc = search_run(&rp->s, &pts, &n);
    if (rc == STATUS_OK && route_answer(rp, pts, n) != 0)
        rc = tier_fail(rp->s.c, STATUS_ENOMEM, "out of memory");
    rp->done(rp->arg, rc);
}

const tier_route episodic_route = {
    .kind = TIER_ROUTE_VECTOR,
    .tier = MEMORY__V1__TIER__TIER_EPISODIC,
    .label = "episodic memory",
    .ctx_tier = "episodic",
    .read_scope = "episodic:read",
    .blocking = 1,
    .prepare = route_prepare,
    .start = route_start,
};
