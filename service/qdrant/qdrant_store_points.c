/* qdrant_store_points: the Qdrant backend's point operations: upsert
 * (reading the existing points first for the write diode), search, get,
 * delete by ids or filter, count, scroll; every read carries the read
 * diode in Qdrant's filter and checks it again on the way out. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/qdrant/qdrant_store_internal.h"

#define QDRANT_SCROLL_PAGE 256                /* points per page in delete_filter */
#define QDRANT_BODY_TARGET ((size_t)16 << 20) /* upsert bodies are kept below this */

static qdrant_json_scope read_scope(const tier_ctx *c) {
    qdrant_json_scope s = {
        .tenant = principal_tenant(c->p),
        .owner = c->read_breadth == PRINCIPAL_ALL ? NULL : principal_sub(c->p),
        .clr = (int)principal_clr(c->p),
    };
    return s;
}

static int cmp_point(const void *a, const void *b) {
    return vs_id_cmp(&((const vs_point *)a)->id, &((const vs_point *)b)->id);
}

static const vs_point *find_point(const vs_point *sorted, size_t n, const vs_id *id) {
    vs_point key;
    key.id = *id;
    return n ? bsearch(&key, sorted, n, sizeof *sorted, cmp_point) : NULL;
}

/* The stored metadata of those of ids that exist (payload "memoryd" only),
 * sorted by id, in c->ar. Any point of another tenant in the answer is
 * STATUS_EINTERNAL (the parser checks memoryd.tenant). */
static int existing(const qtarget *t, tier_ctx *c, const vs_collection *col, const vs_id *ids,
                    size_t n, vs_point **out, size_t *nout) {
    char *body = NULL;
    size_t blen = 0;
    int rc = qdrant_json_retrieve(ids, n, QDRANT_JSON_PAYLOAD_META, 0, &body, &blen, c->err,
                                  sizeof c->err);
    if (rc != STATUS_OK) return rc;
    http_resp r;
    rc = qdrant_points_call(t, c, "retrieve", "POST", "", body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    qdrant_json_read rd = {.tenant = principal_tenant(c->p), .dims = col->dims};
    rc = qdrant_json_parse_records(r.body, r.len, &rd, 0, c->ar, out, nout, NULL, NULL, c->err,
                                   sizeof c->err);
    http_resp_free(&r);
    if (rc != STATUS_OK) return qdrant_logged("retrieve", rc, c->err);
    if (*nout > 1) qsort(*out, *nout, sizeof **out, cmp_point);
    return STATUS_OK;
}

static int upsert_checked(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_point_in *pts,
                          size_t n) {
    qtarget t;
    int rc = qdrant_target(vs, c, col->name, &t);
    if (rc != STATUS_OK || n == 0) return rc;

    vs_id *ids = arena_alloc(c->ar, n * sizeof *ids);
    tier_meta *metas = arena_alloc(c->ar, n * sizeof *metas);
    if (!ids || !metas) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) ids[i] = pts[i].id;
    vs_point *old = NULL;
    size_t nold = 0;
    rc = existing(&t, c, col, ids, n, &old, &nold);
    if (rc != STATUS_OK) return rc;

    /* The write diode decides every point before anything is written. */
    int64_t now = clock_wall_us();
    for (size_t i = 0; i < n; i++) {
        const vs_point *e = find_point(old, nold, &pts[i].id);
        rc = vs_stamp(c, &pts[i].id, e ? &e->meta : NULL, pts[i].label, now, &metas[i]);
        if (rc != STATUS_OK) return rc;
        metas[i].pii_kinds = pts[i].pii_kinds;
        metas[i].npii = pts[i].npii;
    }

    /* Batches of bounded size: 1000 points of 65536 dims would be ~800 MB
     * of JSON, far over Qdrant's request limit (32 MiB by default). A batch
     * whose body comes out too big is halved until it fits (one point is at
     * most ~1.5 MB: 65536 components and a 64 KiB payload). */
    for (size_t at = 0, m = n; at < n && rc == STATUS_OK; at += m) {
        char *body = NULL;
        size_t blen = 0;
        if (m > n - at) m = n - at;
        for (;;) {
            rc = qdrant_json_upsert(principal_tenant(c->p), col->dims, pts + at, metas + at, m,
                                    &body, &blen, c->err, sizeof c->err);
            if (rc != STATUS_OK || blen <= QDRANT_BODY_TARGET || m == 1) break;
            free(body);
            m = (m + 1) / 2;
        }
        if (rc != STATUS_OK) break;
        http_resp r;
        rc = qdrant_points_call(&t, c, "upsert", "PUT", "?wait=true", body, blen, &r);
        free(body);
        if (rc != STATUS_OK) break;
        rc = qdrant_logged("upsert", qdrant_json_parse_update(r.body, r.len, c->err, sizeof c->err),
                           c->err);
        http_resp_free(&r);
    }
    return rc;
}

/* A hit Qdrant's filter should not have let through: dropped, and logged
 * because it means the pushed-down diode and ours disagree. */
static int leak_check(tier_ctx *c, const char *op, const vs_point *p) {
    if (tier_may_read(c, p->meta.owner, p->meta.label)) return 1;
    char idt[37];
    log_fields(LOG_ERROR, "qdrant returned a point the read diode hides; dropped", LOG_F_STR, "op",
               op, LOG_F_STR, "id", vs_id_text(&p->id, idt), LOG_F_END);
    return 0;
}

static int worse(int distance, float score, float threshold) {
    return distance == VS_EUCLID ? score > threshold : score < threshold;
}

static int cmp_hit_id(const void *a, const void *b) {
    return vs_id_cmp(&((const vs_hit *)a)->point.id, &((const vs_hit *)b)->point.id);
}

/* Texts: the embedded backend keeps and ranks them; this one keeps
 * vectors only (a text-only point or a lexical search is refused). */
#define Q_NO_TEXT                                                                                  \
    "the Qdrant backend (--qdrant-url) keeps vectors only: give vectors, or configure an "         \
    "embedder (--embedder-url) for text; lexical search is the embedded backend's"

int qdrant_store_search(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_search *s,
                        vs_hit **out, size_t *n) {
    qtarget t;
    *out = NULL;
    *n = 0;
    if (s->text) return tier_fail(c, STATUS_EPRECONDITION, "%s", Q_NO_TEXT);
    int rc = qdrant_target(vs, c, col->name, &t);
    if (rc != STATUS_OK) return rc;

    /* /points/query arrived in 1.10; /points/search is gone from 1.19's
     * spec. */
    int legacy = !qdrant_json_version_at_least(&t.v, 1, 10);
    qdrant_json_scope scope = read_scope(c);
    scope.updated = s->updated;
    char *body = NULL;
    size_t blen = 0;
    /* Qdrant's score_threshold is strict (score > t, distance < t); the API
     * promises score >= t and distance <= t. Scores are f32 on both sides,
     * so the next float beyond t makes Qdrant's strict test ours. */
    vs_search sq = *s;
    if (sq.has_threshold)
        sq.threshold = nextafterf(s->threshold, col->distance == VS_EUCLID ? INFINITY : -INFINITY);
    rc = qdrant_json_query(&scope, &sq, col->dims, legacy, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    http_resp r;
    rc = qdrant_points_call(&t, c, "search", "POST", legacy ? "/search" : "/query", body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    qdrant_json_read rd = {.tenant = scope.tenant,
                           .dims = col->dims,
                           .with_payload = s->with_payload,
                           .with_vector = s->with_vector};
    vs_hit *hits = NULL;
    size_t nh = 0;
    rc = qdrant_json_parse_hits(r.body, r.len, &rd, legacy, c->ar, &hits, &nh, c->err,
                                sizeof c->err);
    http_resp_free(&r);
    if (rc != STATUS_OK) return qdrant_logged("search", rc, c->err);

    size_t k = 0;
    for (size_t i = 0; i < nh; i++) {
        int keep = leak_check(c, "search", &hits[i].point) &&
                   !(s->has_threshold && worse(col->distance, hits[i].score, s->threshold)) &&
                   k < (size_t)(s->limit > 0 ? s->limit : 0);
        if (!keep) {
            json_decref(hits[i].point.payload);
            hits[i].point.payload = NULL;
            continue;
        }
        hits[k++] = hits[i];
    }
    /* Qdrant orders by score only; equal scores are put in id order so
     * answers (and pages) are deterministic. */
    for (size_t i = 0; i < k;) {
        size_t j = i + 1;
        while (j < k && hits[j].score == hits[i].score) j++;
        if (j - i > 1) qsort(hits + i, j - i, sizeof *hits, cmp_hit_id);
        i = j;
    }
    *out = hits;
    *n = k;
    return STATUS_OK;
}

int qdrant_store_get(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_id *ids, size_t n,
                     int with_payload, int with_vector, vs_point **out, size_t *nout) {
    qtarget t;
    *out = NULL;
    *nout = 0;
    int rc = qdrant_target(vs, c, col->name, &t);
    if (rc != STATUS_OK || n == 0) return rc;
    if (n > 100000) return tier_fail(c, STATUS_EINVALID, "too many ids (%zu)", n);

    /* A scroll, not a retrieve: the diode filters inside Qdrant. */
    qdrant_json_scope scope = read_scope(c);
    scope.ids = ids;
    scope.nids = n;
    char *body = NULL;
    size_t blen = 0;
    rc = qdrant_json_scroll(&scope, NULL, (int)n, NULL,
                            with_payload ? QDRANT_JSON_PAYLOAD_ALL : QDRANT_JSON_PAYLOAD_META,
                            with_vector, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    http_resp r;
    rc = qdrant_points_call(&t, c, "get", "POST", "/scroll", body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    qdrant_json_read rd = {.tenant = scope.tenant,
                           .dims = col->dims,
                           .with_payload = with_payload,
                           .with_vector = with_vector};
    vs_point *found = NULL;
    size_t nf = 0;
    rc = qdrant_json_parse_records(r.body, r.len, &rd, 1, c->ar, &found, &nf, NULL, NULL, c->err,
                                   sizeof c->err);
    http_resp_free(&r);
    if (rc != STATUS_OK) return qdrant_logged("get", rc, c->err);
    if (nf > 1) qsort(found, nf, sizeof *found, cmp_point);

    /* In the order asked, each id once; what is left over is released. */
    vs_point *res = arena_alloc(c->ar, (nf ? nf : 1) * sizeof *res);
    char *taken = calloc(nf ? nf : 1, 1);
    if (!res || !taken) {
        free(taken);
        vs_points_release(found, nf);
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n && k < nf; i++) {
        const vs_point *p = find_point(found, nf, &ids[i]);
        if (!p) continue;
        size_t at = (size_t)(p - found);
        if (taken[at]) continue;
        taken[at] = 1;
        if (!leak_check(c, "get", p)) continue;
        res[k++] = *p;
        found[at].payload = NULL; /* moved */
    }
    free(taken);
    vs_points_release(found, nf);
    *out = res;
    *nout = k;
    return STATUS_OK;
}

static int delete_by_ids(const qtarget *t, tier_ctx *c, const vs_id *ids, size_t n) {
    char *body = NULL;
    size_t blen = 0;
    int rc = qdrant_json_delete(ids, n, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    http_resp r;
    rc = qdrant_points_call(t, c, "delete", "POST", "/delete?wait=true", body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    rc = qdrant_json_parse_update(r.body, r.len, c->err, sizeof c->err);
    http_resp_free(&r);
    return qdrant_logged("delete", rc, c->err);
}

static int delete_ids_checked(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_id *ids,
                              size_t n, int64_t *deleted) {
    qtarget t;
    *deleted = 0;
    int rc = qdrant_target(vs, c, col->name, &t);
    if (rc != STATUS_OK || n == 0) return rc;

    vs_point *old = NULL;
    size_t nold = 0;
    rc = existing(&t, c, col, ids, n, &old, &nold);
    if (rc != STATUS_OK || nold == 0) return rc;
    /* vs_stamp is the write diode: a point the caller may not modify may
     * not be deleted either, and then nothing is. */
    int64_t now = clock_wall_us();
    vs_id *del = arena_alloc(c->ar, nold * sizeof *del);
    if (!del) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    size_t nd = 0;
    for (size_t i = 0; i < nold; i++) {
        if (i && vs_id_cmp(&old[i - 1].id, &old[i].id) == 0) continue;
        tier_meta m;
        rc = vs_stamp(c, &old[i].id, &old[i].meta, 0, now, &m);
        if (rc != STATUS_OK) return rc;
        del[nd++] = old[i].id;
    }
    rc = delete_by_ids(&t, c, del, nd);
    if (rc == STATUS_OK) *deleted = (int64_t)nd;
    return rc;
}

/* One scroll request (what names it in logs): the points of scope and
 * filter from offset (NULL: the start), at most limit, with payload as
 * QDRANT_JSON_PAYLOAD_*, parsed with rd into *page (in arena a), and the cursor
 * Qdrant gave for the next request. */
typedef struct scroll_page {
    vs_point *points;
    size_t n;
    vs_id next;
    int has_next;
} scroll_page;

static int scroll_once(const qtarget *t, tier_ctx *c, const char *what,
                       const qdrant_json_scope *scope, const Memory__V1__Filter *filter, int limit,
                       const vs_id *offset, int payload, const qdrant_json_read *rd, arena *a,
                       scroll_page *page) {
    char *body = NULL;
    size_t blen = 0;
    memset(page, 0, sizeof *page);
    int rc = qdrant_json_scroll(scope, filter, limit, offset, payload, 0, &body, &blen, c->err,
                                sizeof c->err);
    if (rc != STATUS_OK) return rc;
    http_resp r;
    rc = qdrant_points_call(t, c, what, "POST", "/scroll", body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    rc = qdrant_json_parse_records(r.body, r.len, rd, 1, a, &page->points, &page->n, &page->next,
                                   &page->has_next, c->err, sizeof c->err);
    http_resp_free(&r);
    return rc == STATUS_OK ? rc : qdrant_logged(what, rc, c->err);
}

static int delete_filter_checked(vstore *vs, tier_ctx *c, const vs_collection *col,
                                 const Memory__V1__Filter *filter, const vs_meta_sel *meta,
                                 int64_t *deleted) {
    qtarget t;
    *deleted = 0;
    int rc = qdrant_target(vs, c, col->name, &t);
    if (rc != STATUS_OK) return rc;

    /* Visible to the caller and, without the :all write breadth, owned by
     * it: one owner condition serves both. */
    qdrant_json_scope scope = read_scope(c);
    if (c->write_breadth != PRINCIPAL_ALL) scope.owner = principal_sub(c->p);
    /* An erasure's time bound narrows the scroll; its other conditions
     * are checked on each point below. */
    if (meta) scope.updated_before_us = meta->updated_before_us;
    qdrant_json_read rd = {.tenant = scope.tenant, .dims = col->dims};
    /* Pages are transient: their own arena, reset per page, so deleting a
     * million points does not grow the call's arena by a million. */
    arena *pa = arena_create();
    if (!pa) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    vs_id offset;
    int has_offset = 0;
    int64_t total = 0, now = clock_wall_us();
    for (;; arena_reset(pa)) {
        scroll_page sp;
        rc = scroll_once(&t, c, "delete_filter", &scope, filter, QDRANT_SCROLL_PAGE,
                         has_offset ? &offset : NULL, QDRANT_JSON_PAYLOAD_META, &rd, pa, &sp);
        if (rc != STATUS_OK) break;
        vs_point *page = sp.points;
        size_t np = sp.n;
        vs_id next = sp.next;
        int has_next = sp.has_next;
        vs_id *del = np ? arena_alloc(pa, np * sizeof *del) : NULL;
        if (np && !del) {
            rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
            break;
        }
        size_t nd = 0;
        for (size_t i = 0; i < np; i++) {
            /* Defence in depth: what the filter should have excluded is
             * left alone (and logged), never deleted. */
            if (!leak_check(c, "delete_filter", &page[i])) continue;
            if (!vs_meta_match(meta, &page[i].meta)) continue;
            if (meta && meta->limit && total + (int64_t)nd >= meta->limit) break;
            tier_meta m;
            if (vs_stamp(c, &page[i].id, &page[i].meta, 0, now, &m) != STATUS_OK) {
                log_fields(LOG_ERROR, "qdrant returned a point the write diode protects; kept",
                           LOG_F_STR, "error", c->err, LOG_F_END);
                c->err[0] = '\0';
                continue;
            }
            del[nd++] = page[i].id;
        }
        if (nd) {
            rc = delete_by_ids(&t, c, del, nd);
            if (rc != STATUS_OK) break;
            total += (int64_t)nd;
        }
        if (!has_next || (meta && meta->limit && total >= meta->limit)) break;
        if (has_offset && vs_id_cmp(&next, &offset) == 0) {
            rc = qdrant_logged("delete_filter",
                               tier_fail(c, STATUS_EINTERNAL, "qdrant's scroll does not advance"),
                               c->err);
            break;
        }
        offset = next;
        has_offset = 1;
    }
    arena_free(pa);
    /* Pages deleted before a failure stay deleted: report them. */
    *deleted = total;
    return rc;
}

/* ---- writes, each under the collection's write lock ---- */

typedef struct {
    vstore *vs;
    tier_ctx *c;
    const vs_collection *col;
    const vs_point_in *pts;
    const vs_id *ids;
    size_t n;
    const Memory__V1__Filter *filter;
    const vs_meta_sel *meta;
    int64_t *deleted;
} write_args;

static int run_upsert(void *arg) {
    write_args *w = arg;
    return upsert_checked(w->vs, w->c, w->col, w->pts, w->n);
}

static int run_delete_ids(void *arg) {
    write_args *w = arg;
    return delete_ids_checked(w->vs, w->c, w->col, w->ids, w->n, w->deleted);
}

static int run_delete_filter(void *arg) {
    write_args *w = arg;
    return delete_filter_checked(w->vs, w->c, w->col, w->filter, w->meta, w->deleted);
}

int qdrant_store_upsert(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_point_in *pts,
                        size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!pts[i].vector)
            return tier_fail(c, STATUS_EPRECONDITION, "points[%zu]: no vector; %s", i, Q_NO_TEXT);
    write_args w = {.vs = vs, .c = c, .col = col, .pts = pts, .n = n};
    return n ? qdrant_serialized((qdrant *)vs, c, col, run_upsert, &w) : run_upsert(&w);
}

int qdrant_store_delete_ids(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_id *ids,
                            size_t n, int64_t *deleted) {
    write_args w = {.vs = vs, .c = c, .col = col, .ids = ids, .n = n, .deleted = deleted};
    *deleted = 0;
    return n ? qdrant_serialized((qdrant *)vs, c, col, run_delete_ids, &w) : run_delete_ids(&w);
}

int qdrant_store_delete_filter(vstore *vs, tier_ctx *c, const vs_collection *col,
                               const Memory__V1__Filter *filter, const vs_meta_sel *meta,
                               int64_t *deleted) {
    write_args w = {
        .vs = vs, .c = c, .col = col, .filter = filter, .meta = meta, .deleted = deleted};
    *deleted = 0;
    return qdrant_serialized((qdrant *)vs, c, col, run_delete_filter, &w);
}

int qdrant_store_count(vstore *vs, tier_ctx *c, const vs_collection *col,
                       const Memory__V1__Filter *filter, int exact, int64_t *count) {
    qtarget t;
    *count = 0;
    int rc = qdrant_target(vs, c, col->name, &t);
    if (rc != STATUS_OK) return rc;
    qdrant_json_scope scope = read_scope(c);
    char *body = NULL;
    size_t blen = 0;
    rc = qdrant_json_count(&scope, filter, exact, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    http_resp r;
    rc = qdrant_points_call(&t, c, "count", "POST", "/count", body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    rc = qdrant_json_parse_count(r.body, r.len, count, c->err, sizeof c->err);
    http_resp_free(&r);
    return qdrant_logged("count", rc, c->err);
}

/* The least id above id, as Qdrant's scroll offset (inclusive) for our
 * cursor (exclusive): 0, or -1 when id is the greatest (nothing follows).
 * Integers come before UUIDs and UUIDs go by their bytes, in Qdrant's
 * order as in vs_id_cmp, so the next id after UINT64_MAX is the nil UUID
 * and a UUID's is its text plus one in hex. */
static int id_after(const vs_id *id, vs_id *out) {
    *out = *id;
    if (!id->uuid[0]) {
        if (id->num < UINT64_MAX) {
            out->num++;
            return 0;
        }
        memset(out, 0, sizeof *out);
        memcpy(out->uuid, "00000000-0000-0000-0000-000000000000", sizeof out->uuid);
        return 0;
    }
    for (int i = 35; i >= 0; i--) {
        char *d = &out->uuid[i];
        if (*d == '-') continue;
        if (*d == 'f') {
            *d = '0';
            continue;
        }
        *d = *d == '9' ? 'a' : (char)(*d + 1);
        return 0;
    }
    return -1;
}

int qdrant_store_scroll(vstore *vs, tier_ctx *c, const vs_collection *col,
                        const Memory__V1__Filter *filter, const vs_id *after, size_t limit,
                        int with_payload, vs_point **out, size_t *n) {
    qtarget t;
    *out = NULL;
    *n = 0;
    int rc = qdrant_target(vs, c, col->name, &t);
    if (rc != STATUS_OK) return rc;
    vs_id offset;
    int has_offset = after != NULL;
    if (after && id_after(after, &offset) != 0) return STATUS_OK; /* the greatest id */
    vs_point *res = arena_alloc(c->ar, limit * sizeof *res);
    if (!res) return tier_fail(c, STATUS_ENOMEM, "out of memory");

    qdrant_json_scope scope = read_scope(c);
    qdrant_json_read rd = {.tenant = scope.tenant, .dims = col->dims, .with_payload = with_payload};
    size_t k = 0;
    /* Qdrant's filter carries the diode, so the first request fills the
     * page; only points leak_check drops make another. */
    while (k < limit) {
        scroll_page sp;
        rc = scroll_once(
            &t, c, "scroll", &scope, filter, (int)(limit - k), has_offset ? &offset : NULL,
            with_payload ? QDRANT_JSON_PAYLOAD_ALL : QDRANT_JSON_PAYLOAD_META, &rd, c->ar, &sp);
        if (rc != STATUS_OK) break;
        vs_point *page = sp.points;
        size_t np = sp.n;
        vs_id next = sp.next;
        int has_next = sp.has_next;
        /* The caller's next cursor is the last id handed out: a page out
         * of id order (or a next offset not past it) would skip or repeat
         * points. */
        int ordered = 1;
        for (size_t i = 0; i < np; i++) {
            if (i ? vs_id_cmp(&page[i - 1].id, &page[i].id) >= 0
                  : has_offset && vs_id_cmp(&page[i].id, &offset) < 0)
                ordered = 0;
        }
        if (has_next && np && vs_id_cmp(&next, &page[np - 1].id) <= 0) ordered = 0;
        if (has_next && !np && has_offset && vs_id_cmp(&next, &offset) <= 0) ordered = 0;
        for (size_t i = 0; ordered && i < np && k < limit; i++) {
            if (!leak_check(c, "scroll", &page[i])) continue;
            res[k++] = page[i];
            page[i].payload = NULL; /* moved */
        }
        vs_points_release(page, np);
        if (!ordered) {
            rc = qdrant_logged("scroll",
                               tier_fail(c, STATUS_EINTERNAL, "qdrant's scroll is out of id order"),
                               c->err);
            break;
        }
        if (!has_next) break;
        offset = next;
        has_offset = 1;
    }
    if (rc != STATUS_OK) {
        vs_points_release(res, k);
        return rc;
    }
    *out = res;
    *n = k;
    return STATUS_OK;
}

/* GET / bounded by the connect timeout: a health probe must not hang. */
