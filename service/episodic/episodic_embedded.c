/* episodic_embedded: points in PostgreSQL, searched in memory.
 *
 * Consistency: every write locks its collection's catalog row (UPDATE ...
 * seq = seq + 1, or SELECT ... FOR UPDATE) for the length of its
 * transaction, so writes to one collection commit in seq order and a
 * statement that sees seq N also sees every point stamped <= N. A read
 * first asks for the collection's seq (one indexed row) and, when it moved,
 * applies the points stamped above what this replica has applied (new
 * versions and tombstones) before searching. Writes do not touch the
 * in-memory index: the next read on any replica, this one included,
 * catches up the same way. The writes are in episodic_embedded_write.c. */
#include <stdlib.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/core/hash.h"
#include "service/core/log.h"
#include "service/episodic/episodic_embedded_internal.h"
#include "service/episodic/episodic_filter.h"
#include "service/lexical/lex_text.h"
#include "service/vstore/vstore_catalog.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "episodic_points.vector is little-endian float32: add byte swapping for this target"
#endif

#define TIER "episodic"
#define MAX_STATEMENT_MS 30000

/* One collection's in-memory state on this replica. */
/* ------------------------------------------------------------ the map */

static char *coll_key(const tier_ctx *c, const char *name) {
    const char *t = principal_tenant(c->p);
    size_t tl = strlen(t), nl = strlen(name);
    char *k = malloc(tl + nl + 2);
    if (!k) return NULL;
    memcpy(k, t, tl);
    k[tl] = '\n';
    memcpy(k + tl + 1, name, nl + 1);
    return k;
}

static size_t bucket_of(const char *key) { return (size_t)(hash_fnv1a_str(key) % EMB_BUCKETS); }

static void ecoll_free(ecoll *ec) {
    episodic_index_free(ec->x);
    pthread_rwlock_destroy(&ec->rw);
    pthread_mutex_destroy(&ec->sync_mu);
    free(ec->key);
    free(ec);
}

void episodic_embedded_release(embedded *e, ecoll *ec) {
    pthread_mutex_lock(&e->mu);
    int last = --ec->refs == 0;
    pthread_mutex_unlock(&e->mu);
    if (last) ecoll_free(ec);
}

/* Unlinks key's entry (if any) under e->mu, its memory off the total;
 * returns it for release. */
static ecoll *unlink_locked(embedded *e, const char *key) {
    ecoll **pp = &e->buckets[bucket_of(key)];
    for (; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->key, key) == 0) {
            ecoll *ec = *pp;
            *pp = ec->next;
            e->total -= ec->bytes;
            e->points -= ec->points;
            e->ncoll--;
            ec->bytes = ec->points = 0;
            return ec;
        }
    }
    return NULL;
}

/* Caller holds e->mu. The least recently used collection no call holds
 * (only the map's reference), other than keep; NULL when none. */
static ecoll *idle_lru_locked(embedded *e, const ecoll *keep) {
    ecoll *lru = NULL;
    for (size_t b = 0; b < EMB_BUCKETS; b++)
        for (ecoll *ec = e->buckets[b]; ec; ec = ec->next)
            if (ec != keep && ec->refs == 1 && (!lru || ec->used_ms < lru->used_ms)) lru = ec;
    return lru;
}

int episodic_embedded_account(embedded *e, tier_ctx *c, ecoll *ec, const char *name) {
    pthread_rwlock_rdlock(&ec->rw);
    size_t bytes = episodic_index_bytes(ec->x), points = episodic_index_count(ec->x);
    pthread_rwlock_unlock(&ec->rw);
    ecoll *gone[8], *too_big = NULL;
    size_t ngone = 0, evicted_bytes = 0;
    pthread_mutex_lock(&e->mu);
    ec->used_ms = clock_mono_ms(NULL);
    int mapped = 0;
    for (ecoll *m = e->buckets[bucket_of(ec->key)]; m; m = m->next) mapped |= m == ec;
    if (mapped) { /* a collection dropped meanwhile counts no more */
        e->total += bytes - ec->bytes;
        ec->bytes = bytes;
        e->points += points - ec->points;
        ec->points = points;
    }
    if (mapped && e->budget && bytes > e->budget) {
        too_big = unlink_locked(e, ec->key);
    } else {
        ecoll *lru;
        while (e->budget && e->total > e->budget && ngone < 8 &&
               (lru = idle_lru_locked(e, ec)) != NULL) {
            evicted_bytes += lru->bytes;
            gone[ngone++] = unlink_locked(e, lru->key);
            metrics_inc(&e->evictions);
        }
    }
    size_t total = e->total;
    pthread_mutex_unlock(&e->mu);
    for (size_t i = 0; i < ngone; i++)
        episodic_embedded_release(e, gone[i]); /* the map's reference */
    if (ngone)
        log_fields(LOG_INFO, "episodic: idle collections left memory (--episodic-index-max-mb)",
                   LOG_F_INT, "collections", (int64_t)ngone, LOG_F_INT, "freed_bytes",
                   (int64_t)evicted_bytes, LOG_F_INT, "in_memory_bytes", (int64_t)total, LOG_F_END);
    if (!too_big) return STATUS_OK;
    episodic_embedded_release(e, too_big); /* the map's reference; the caller still holds its own */
    return tier_fail(c, STATUS_ENOMEM,
                     "collection %s needs %zu MiB of this replica's memory, more than the whole "
                     "embedded index may hold (--episodic-index-max-mb %zu): raise the limit or "
                     "keep points in Qdrant (--qdrant-url)",
                     name, (bytes + (1 << 20) - 1) >> 20, e->budget >> 20);
}

/* Drops this replica's index of a collection that no longer exists. */
void episodic_embedded_forget(embedded *e, const tier_ctx *c, const char *name) {
    char *key = coll_key(c, name);
    if (!key) return;
    pthread_mutex_lock(&e->mu);
    ecoll *old = unlink_locked(e, key);
    pthread_mutex_unlock(&e->mu);
    free(key);
    if (old) episodic_embedded_release(e, old);
}

/* The in-memory state of col, created empty on first use; a state of an
 * older collection of the same name is replaced. NULL when out of memory. */
ecoll *episodic_embedded_acquire(embedded *e, const tier_ctx *c, const vs_collection *col) {
    char *key = coll_key(c, col->name);
    if (!key) return NULL;
    ecoll *stale = NULL, *ec;
    pthread_mutex_lock(&e->mu);
    size_t b = bucket_of(key);
    for (ec = e->buckets[b]; ec; ec = ec->next)
        if (strcmp(ec->key, key) == 0) break;
    if (ec && ec->cid != col->cid) {
        stale = unlink_locked(e, key);
        ec = NULL;
    }
    if (!ec && (ec = calloc(1, sizeof *ec)) != NULL) {
        ec->key = key;
        key = NULL;
        ec->cid = col->cid;
        ec->language = e->language;
        ec->x = episodic_index_create(col->dims, col->distance);
        if (!ec->x) {
            free(ec->key);
            free(ec);
            ec = NULL;
        } else {
            pthread_rwlock_init(&ec->rw, NULL);
            pthread_mutex_init(&ec->sync_mu, NULL);
            ec->refs = 1;
            ec->next = e->buckets[b];
            e->buckets[b] = ec;
            e->ncoll++;
        }
    }
    if (ec) ec->refs++;
    pthread_mutex_unlock(&e->mu);
    free(key);
    if (stale) episodic_embedded_release(e, stale);
    return ec;
}

/* ------------------------------------------------------------ SQL helpers */

/* Runs one statement: inside the session's open transaction when in_tx,
 * else alone in one round trip. */
int episodic_embedded_query(pgq_session *ss, int in_tx, const char *what, const pgq_sql *b,
                            PGresult **out) {
    return in_tx ? pgq_exec_ok(ss, b, what, out) : pgq_pipeline(ss, what, NULL, b, 1, out);
}

const char *episodic_embedded_pid_text(arena *a, const vs_id *id) {
    char buf[37];
    return arena_strdup(a, vs_id_text(id, buf));
}

/* ------------------------------------------------------------ catch-up
 * (episodic_embedded_sync.c brings an index up to date) */

static int sync_fn(pgq_session *ss, void *arg) {
    op *o = arg;
    return episodic_embedded_sync_index(ss, o->c, o->ec, 0);
}

int episodic_embedded_run(op *o, pgq_fn fn) {
    o->c->err[0] = '\0';
    return pgq_run(o->e->pg, TIER, o->c->deadline_ms, MAX_STATEMENT_MS, o->c->cancel, o->c->err,
                   sizeof o->c->err, fn, o);
}

/* The collection's state, brought up to date. On STATUS_OK the caller
 * releases *out. */
static int open_current(embedded *e, tier_ctx *c, const vs_collection *col, ecoll **out) {
    ecoll *ec = episodic_embedded_acquire(e, c, col);
    if (!ec) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    op o = {.e = e, .c = c, .col = col, .ec = ec};
    int rc = episodic_embedded_run(&o, sync_fn);
    if (rc == STATUS_OK) rc = episodic_embedded_account(e, c, ec, col->name);
    if (rc != STATUS_OK) {
        episodic_embedded_release(e, ec);
        if (rc == STATUS_ENOTFOUND) episodic_embedded_forget(e, c, col->name);
        return rc;
    }
    *out = ec;
    return STATUS_OK;
}

/* ------------------------------------------------------------ reads */

static int copy_point(tier_ctx *c, const episodic_index *x, size_t slot, int with_payload,
                      int with_vector, vs_point *out) {
    memset(out, 0, sizeof *out);
    out->id = *episodic_index_id(x, slot);
    const tier_meta *m = episodic_index_meta(x, slot);
    out->meta = *m;
    out->meta.owner = arena_strdup(c->ar, m->owner);
    if (!out->meta.owner) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    if (m->npii) {
        const char **k = arena_alloc(c->ar, m->npii * sizeof *k);
        if (!k) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        for (size_t i = 0; i < m->npii; i++)
            if (!(k[i] = arena_strdup(c->ar, m->pii_kinds[i])))
                return tier_fail(c, STATUS_ENOMEM, "out of memory");
        out->meta.pii_kinds = k;
    }
    if (with_vector && episodic_index_vector(x, slot)) {
        size_t bytes = (size_t)episodic_index_dims(x) * sizeof(float);
        float *v = arena_alloc(c->ar, bytes);
        if (!v) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        memcpy(v, episodic_index_vector(x, slot), bytes);
        out->vector = v;
    }
    if (with_payload) {
        json_t *p = episodic_index_payload(x, slot);
        out->payload = p ? json_incref(p) : json_object();
        if (!out->payload) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        const char *t = episodic_index_text(x, slot);
        if (t && !(out->text = arena_strdup(c->ar, t)))
            return tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    return STATUS_OK;
}

/* The read diode alone (episodic_embedded_accept_args): what the caller may see at all. */
static int episodic_embedded_visible(const episodic_index *x, size_t slot, void *arg) {
    const episodic_embedded_accept_args *a = arg;
    const tier_meta *m = episodic_index_meta(x, slot);
    return tier_may_read(a->c, m->owner, m->label);
}

/* 1 when the caller may read every point whatever its owner and label:
 * no point is hidden from it, and scores need no visible filter. */
static int sees_everything(const tier_ctx *c) {
    return c->read_breadth == PRINCIPAL_ALL && principal_clr(c->p) >= JWT_LABEL_SECRET;
}

int episodic_embedded_accept(const episodic_index *x, size_t slot, void *arg) {
    const episodic_embedded_accept_args *a = arg;
    const tier_meta *m = episodic_index_meta(x, slot);
    if (!episodic_embedded_visible(x, slot, arg)) return 0;
    if (a->modifiable && a->c->write_breadth != PRINCIPAL_ALL &&
        strcmp(m->owner, principal_sub(a->c->p)) != 0)
        return 0;
    if (!tier_time_in(a->updated, m->update_us)) return 0;
    return episodic_filter_match(a->filter, episodic_index_id(x, slot),
                                 episodic_index_payload(x, slot));
}

static int episodic_embedded_search(vstore *vs, tier_ctx *c, const vs_collection *col,
                                    const vs_search *s, vs_hit **out, size_t *n) {
    embedded *e = (embedded *)vs;
    *out = NULL;
    *n = 0;
    ecoll *ec;
    int rc = open_current(e, c, col, &ec);
    if (rc != STATUS_OK) return rc;
    size_t k = (size_t)s->offset + (size_t)s->limit;
    episodic_index_hit *hits = malloc(k * sizeof *hits);
    if (!hits) {
        episodic_embedded_release(e, ec);
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    episodic_embedded_accept_args aa = {.c = c, .filter = s->filter, .updated = s->updated};
    lex_terms q = {0};
    if (s->text) { /* analyzed before the lock is taken */
        lex_analyzer *an = lex_analyzer_of_thread(e->language);
        if (!an || lex_analyze(an, s->text, strlen(s->text), &q) != 0)
            rc = tier_fail(c, STATUS_ENOMEM, "out of memory analyzing the query");
    }
    pthread_rwlock_rdlock(&ec->rw);
    /* The read diode as episodic_index scores by it; episodic_embedded_accept applies it too. */
    episodic_index_reader reader = {.owner = c->read_breadth == PRINCIPAL_ALL ? NULL
                                                                              : principal_sub(c->p),
                                    .max_label = (int)principal_clr(c->p)};
    const episodic_index_reader *visible = sees_everything(c) ? NULL : &reader;
    long got = rc != STATUS_OK ? 0
               : s->text ? episodic_index_search_text(ec->x, &q, k, s->has_threshold, s->threshold,
                                                      episodic_embedded_accept, visible, &aa, hits)
                         : episodic_index_search(ec->x, s->vector, k, s->has_threshold,
                                                 s->threshold, episodic_embedded_accept, &aa, hits);
    if (got < 0) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    size_t first = (size_t)s->offset, count = got > (long)first ? (size_t)got - first : 0;
    vs_hit *res = count ? arena_zalloc(c->ar, count * sizeof *res) : NULL;
    if (count && !res) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    size_t done = 0;
    for (; rc == STATUS_OK && done < count; done++) {
        res[done].score = hits[first + done].score;
        rc = copy_point(c, ec->x, hits[first + done].slot, s->with_payload, s->with_vector,
                        &res[done].point);
    }
    pthread_rwlock_unlock(&ec->rw);
    lex_terms_free(&q);
    free(hits);
    episodic_embedded_release(e, ec);
    if (rc != STATUS_OK) {
        vs_hits_release(res, done);
        return rc;
    }
    *out = res;
    *n = count;
    return STATUS_OK;
}

static int episodic_embedded_get(vstore *vs, tier_ctx *c, const vs_collection *col,
                                 const vs_id *ids, size_t n, int with_payload, int with_vector,
                                 vs_point **out, size_t *nout) {
    embedded *e = (embedded *)vs;
    *out = NULL;
    *nout = 0;
    ecoll *ec;
    int rc = open_current(e, c, col, &ec);
    if (rc != STATUS_OK) return rc;
    vs_point *res = arena_zalloc(c->ar, (n ? n : 1) * sizeof *res);
    if (!res) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    size_t got = 0;
    pthread_rwlock_rdlock(&ec->rw);
    for (size_t i = 0; rc == STATUS_OK && i < n; i++) {
        long slot = episodic_index_find(ec->x, &ids[i]);
        if (slot < 0) continue;
        const tier_meta *m = episodic_index_meta(ec->x, (size_t)slot);
        if (!tier_may_read(c, m->owner, m->label)) continue;
        rc = copy_point(c, ec->x, (size_t)slot, with_payload, with_vector, &res[got]);
        if (rc == STATUS_OK) got++;
    }
    pthread_rwlock_unlock(&ec->rw);
    episodic_embedded_release(e, ec);
    if (rc != STATUS_OK) {
        vs_points_release(res, got);
        return rc;
    }
    *out = res;
    *nout = got;
    return STATUS_OK;
}

static int episodic_embedded_count(vstore *vs, tier_ctx *c, const vs_collection *col,
                                   const Memory__V1__Filter *filter, int exact, int64_t *count) {
    (void)exact; /* always exact */
    embedded *e = (embedded *)vs;
    ecoll *ec;
    int rc = open_current(e, c, col, &ec);
    if (rc != STATUS_OK) return rc;
    episodic_embedded_accept_args aa = {.c = c, .filter = filter};
    int64_t k = 0;
    pthread_rwlock_rdlock(&ec->rw);
    for (size_t s = 0, n = episodic_index_count(ec->x); s < n; s++)
        k += episodic_embedded_accept(ec->x, s, &aa);
    pthread_rwlock_unlock(&ec->rw);
    episodic_embedded_release(e, ec);
    *count = k;
    return STATUS_OK;
}

/* The limit smallest accepted ids above the cursor, as a max-heap of
 * slots (the root is the largest kept): one pass over the index and
 * O(limit) memory per page, whatever the collection's size. */
typedef struct scroll_heap {
    const episodic_index *x;
    size_t *slot;
    size_t n, cap;
} scroll_heap;

static int heap_less(const scroll_heap *h, size_t i, size_t j) {
    return vs_id_cmp(episodic_index_id(h->x, h->slot[i]), episodic_index_id(h->x, h->slot[j])) < 0;
}

static void heap_swap(scroll_heap *h, size_t i, size_t j) {
    size_t t = h->slot[i];
    h->slot[i] = h->slot[j];
    h->slot[j] = t;
}

/* Restores the heap below i among the first n entries. */
static void heap_down(scroll_heap *h, size_t i, size_t n) {
    for (;;) {
        size_t big = i, l = 2 * i + 1, r = l + 1;
        if (l < n && heap_less(h, big, l)) big = l;
        if (r < n && heap_less(h, big, r)) big = r;
        if (big == i) return;
        heap_swap(h, i, big);
        i = big;
    }
}

/* Takes slot, whose id is below the root's when the heap is full. */
static void heap_offer(scroll_heap *h, size_t slot) {
    if (h->n == h->cap) {
        h->slot[0] = slot;
        heap_down(h, 0, h->n);
        return;
    }
    size_t i = h->n++;
    h->slot[i] = slot;
    while (i > 0 && heap_less(h, (i - 1) / 2, i)) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

/* Heapsort's second half: the kept slots in ascending id order. */
static void heap_sort(scroll_heap *h) {
    for (size_t end = h->n; end > 1; end--) {
        heap_swap(h, 0, end - 1);
        heap_down(h, 0, end - 1);
    }
}

static int episodic_embedded_scroll(vstore *vs, tier_ctx *c, const vs_collection *col,
                                    const Memory__V1__Filter *filter, const vs_id *after,
                                    size_t limit, int with_payload, vs_point **out, size_t *n) {
    embedded *e = (embedded *)vs;
    *out = NULL;
    *n = 0;
    ecoll *ec;
    int rc = open_current(e, c, col, &ec);
    if (rc != STATUS_OK) return rc;
    scroll_heap h = {.slot = malloc(limit * sizeof(size_t)), .cap = limit};
    if (!h.slot) {
        episodic_embedded_release(e, ec);
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    episodic_embedded_accept_args aa = {.c = c, .filter = filter};
    pthread_rwlock_rdlock(&ec->rw);
    h.x = ec->x;
    for (size_t s = 0, cnt = episodic_index_count(ec->x); s < cnt; s++) {
        const vs_id *id = episodic_index_id(ec->x, s);
        /* The id tests first: they are cheaper than the filter. */
        if (after && vs_id_cmp(id, after) <= 0) continue;
        if (h.n == h.cap && vs_id_cmp(id, episodic_index_id(ec->x, h.slot[0])) >= 0) continue;
        if (episodic_embedded_accept(ec->x, s, &aa)) heap_offer(&h, s);
    }
    heap_sort(&h);
    vs_point *res = h.n ? arena_zalloc(c->ar, h.n * sizeof *res) : NULL;
    if (h.n && !res) rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    size_t done = 0;
    for (; rc == STATUS_OK && done < h.n; done++)
        rc = copy_point(c, ec->x, h.slot[done], with_payload, 0, &res[done]);
    pthread_rwlock_unlock(&ec->rw);
    free(h.slot);
    episodic_embedded_release(e, ec);
    if (rc != STATUS_OK) {
        vs_points_release(res, done);
        return rc;
    }
    *out = res;
    *n = h.n;
    return STATUS_OK;
}

/* ------------------------------------------------------------ collections */

static int episodic_embedded_create_collection(vstore *vs, tier_ctx *c, const char *name, int dims,
                                               int distance, const char *model,
                                               vs_collection *out) {
    return vstore_catalog_create(((embedded *)vs)->pg, c, name, dims, distance, model, NULL, NULL,
                                 out);
}

static int episodic_embedded_get_collection(vstore *vs, tier_ctx *c, const char *name,
                                            vs_collection *out) {
    embedded *e = (embedded *)vs;
    int rc = vstore_catalog_get(e->pg, c, name, out);
    if (rc == STATUS_ENOTFOUND) episodic_embedded_forget(e, c, name);
    return rc;
}

static int episodic_embedded_list_collections(vstore *vs, tier_ctx *c, const char *after,
                                              size_t limit, vs_collection **out, size_t *n) {
    return vstore_catalog_list(((embedded *)vs)->pg, c, after, limit, out, n);
}

static int episodic_embedded_delete_collection(vstore *vs, tier_ctx *c, const char *name) {
    embedded *e = (embedded *)vs;
    int rc = vstore_catalog_delete(e->pg, c, name, NULL, NULL);
    if (rc == STATUS_OK || rc == STATUS_ENOTFOUND) episodic_embedded_forget(e, c, name);
    return rc;
}

static int episodic_embedded_probe(vstore *vs) {
    return pg_pool_ping(((embedded *)vs)->pg, clock_mono_ms(NULL) + 1000) == 0 ? 0 : -1;
}

static void episodic_embedded_free(vstore *vs) {
    embedded *e = (embedded *)vs;
    for (size_t b = 0; b < EMB_BUCKETS; b++) {
        for (ecoll *ec = e->buckets[b], *next; ec; ec = next) {
            next = ec->next;
            ecoll_free(ec);
        }
    }
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* The index's figures, read under the map's lock at each scrape. */
static void episodic_embedded_collect(strbuf *out, void *arg) {
    embedded *e = arg;
    pthread_mutex_lock(&e->mu);
    size_t ncoll = e->ncoll, points = e->points, bytes = e->total;
    pthread_mutex_unlock(&e->mu);
    metrics_family(out, "memoryd_episodic_index_collections", "gauge",
                   "Collections this replica's embedded vector index holds in memory.");
    metrics_sample_u64(out, "memoryd_episodic_index_collections", NULL, ncoll);
    metrics_family(out, "memoryd_episodic_index_points", "gauge",
                   "Points in this replica's embedded vector index.");
    metrics_sample_u64(out, "memoryd_episodic_index_points", NULL, points);
    metrics_family(out, "memoryd_episodic_index_bytes", "gauge",
                   "Memory the embedded vector index holds.");
    metrics_sample_u64(out, "memoryd_episodic_index_bytes", NULL, bytes);
    metrics_family(out, "memoryd_episodic_index_budget_bytes", "gauge",
                   "Memory the embedded index may hold (--episodic-index-max-mb; 0: no limit).");
    metrics_sample_u64(out, "memoryd_episodic_index_budget_bytes", NULL, e->budget);
    metrics_family(out, "memoryd_episodic_index_evictions_total", "counter",
                   "Idle collections dropped from memory to stay within the budget (read again "
                   "from PostgreSQL when next used).");
    metrics_sample_u64(out, "memoryd_episodic_index_evictions_total", NULL,
                       metrics_get(&e->evictions));
}

static int episodic_embedded_register_metrics(vstore *vs) {
    return metrics_add_collector(episodic_embedded_collect, vs);
}

static const vstore_ops embedded_ops = VSTORE_OPS("embedded", episodic_embedded);

int episodic_embedded_open(pg_pool *pg, size_t budget_bytes, const char *language, vstore **out) {
    if (!language) language = "english";
    /* Known to the stemmer, as a thread will ask for it. */
    if (strlen(language) >= sizeof((embedded *)0)->language || !lex_analyzer_of_thread(language))
        return -1;
    embedded *e = calloc(1, sizeof *e);
    if (!e) return -1;
    snprintf(e->language, sizeof e->language, "%s", language);
    e->base.ops = &embedded_ops;
    e->pg = pg;
    e->budget = budget_bytes;
    pthread_mutex_init(&e->mu, NULL);
    *out = &e->base;
    return 0;
}
