/* lex_index: see lex_index.h. */
#include "service/lexical/lex_index.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/array.h"

/* One document's entry in a term's postings: it is live while the
 * document is and still has the generation it had when indexed. */
typedef struct posting {
    uint32_t doc, gen, tf;
} posting;

typedef struct term {
    char *s;
    uint32_t df;   /* live documents holding it */
    uint32_t dead; /* postings of removed or replaced documents */
    posting *p;
    uint32_t np;
    size_t cap;
} term;

typedef struct docst {
    uint32_t gen;    /* bumped when the document goes */
    uint32_t len;    /* words (pairs not counted): BM25's document length */
    uint32_t *terms; /* its distinct term ids */
    uint32_t nterms;
    int live;
} docst;

struct lex_index {
    term *terms;
    size_t nterms, tcap;
    uint32_t *slots; /* open addressing: term id + 1, 0 = empty */
    size_t nslots;   /* a power of two */
    docst *docs;
    size_t ndocs; /* document numbers the array covers */
    size_t live;
    uint64_t total_len;
    size_t bytes;
};

static uint32_t hash(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

lex_index *lex_index_create(void) {
    lex_index *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->nslots = 1024;
    if (!(x->slots = calloc(x->nslots, sizeof *x->slots))) {
        free(x);
        return NULL;
    }
    x->bytes = sizeof *x + x->nslots * sizeof *x->slots;
    return x;
}

void lex_index_free(lex_index *x) {
    if (!x) return;
    for (size_t i = 0; i < x->nterms; i++) {
        free(x->terms[i].s);
        free(x->terms[i].p);
    }
    for (size_t d = 0; d < x->ndocs; d++) free(x->docs[d].terms);
    free(x->terms);
    free(x->slots);
    free(x->docs);
    free(x);
}

size_t lex_index_docs(const lex_index *x) { return x->live; }
size_t lex_index_bytes(const lex_index *x) { return x->bytes; }

/* The slot of s: where its id is, or the empty slot where it would go. */
static size_t slot_of(const lex_index *x, const char *s) {
    size_t mask = x->nslots - 1, i = hash(s) & mask;
    while (x->slots[i] && strcmp(x->terms[x->slots[i] - 1].s, s) != 0) i = (i + 1) & mask;
    return i;
}

static int lookup(const lex_index *x, const char *s, uint32_t *id) {
    size_t i = slot_of(x, s);
    if (!x->slots[i]) return -1;
    *id = x->slots[i] - 1;
    return 0;
}

static int grow_slots(lex_index *x) {
    size_t n = x->nslots * 2;
    uint32_t *s = calloc(n, sizeof *s);
    if (!s) return -1;
    for (size_t id = 0; id < x->nterms; id++) {
        size_t i = hash(x->terms[id].s) & (n - 1);
        while (s[i]) i = (i + 1) & (n - 1);
        s[i] = (uint32_t)id + 1;
    }
    free(x->slots);
    x->bytes += (n - x->nslots) * sizeof *s;
    x->slots = s;
    x->nslots = n;
    return 0;
}

/* The id of term s, added when new: 0, or -1 when out of memory. */
static int intern(lex_index *x, const char *s, uint32_t *id) {
    if (lookup(x, s, id) == 0) return 0;
    if ((x->nterms + 1) * 10 > x->nslots * 7 && grow_slots(x) != 0) return -1;
    size_t had = x->tcap;
    term *terms = array_grow(x->terms, &x->tcap, x->nterms + 1, sizeof *terms, 256);
    if (!terms) return -1;
    x->terms = terms;
    x->bytes += (x->tcap - had) * sizeof *terms;
    size_t len = strlen(s);
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, s, len + 1);
    x->bytes += len + 1;
    x->terms[x->nterms] = (term){.s = copy};
    x->slots[slot_of(x, s)] = (uint32_t)x->nterms + 1;
    *id = (uint32_t)x->nterms++;
    return 0;
}

static int live_posting(const lex_index *x, const posting *p) {
    const docst *d = &x->docs[p->doc];
    return d->live && d->gen == p->gen;
}

/* Drops a term's dead postings once they are half of them. */
static void compact(lex_index *x, term *t) {
    if (t->dead * 2 < t->np) return;
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->np; i++)
        if (live_posting(x, &t->p[i])) t->p[n++] = t->p[i];
    t->np = n;
    t->dead = 0;
}

void lex_index_remove(lex_index *x, uint32_t doc) {
    if (doc >= x->ndocs || !x->docs[doc].live) return;
    docst *d = &x->docs[doc];
    d->live = 0;
    d->gen++;
    for (uint32_t i = 0; i < d->nterms; i++) {
        term *t = &x->terms[d->terms[i]];
        t->df--;
        t->dead++;
        compact(x, t);
    }
    x->bytes -= d->nterms * sizeof *d->terms;
    free(d->terms);
    d->terms = NULL;
    d->nterms = 0;
    x->live--;
    x->total_len -= d->len;
    d->len = 0;
}

static int cover(lex_index *x, uint32_t doc) {
    if (doc < x->ndocs) return 0;
    size_t n = x->ndocs ? x->ndocs : 1024;
    while (n <= doc) n *= 2;
    docst *d = realloc(x->docs, n * sizeof *d);
    if (!d) return -1;
    memset(d + x->ndocs, 0, (n - x->ndocs) * sizeof *d);
    x->bytes += (n - x->ndocs) * sizeof *d;
    x->docs = d;
    x->ndocs = n;
    return 0;
}

static int add_posting(lex_index *x, term *t, posting p) {
    size_t had = t->cap;
    posting *ps = array_grow(t->p, &t->cap, (size_t)t->np + 1, sizeof *ps, 4);
    if (!ps) return -1;
    t->p = ps;
    x->bytes += (t->cap - had) * sizeof *ps;
    t->p[t->np++] = p;
    t->df++;
    return 0;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int lex_index_put(lex_index *x, uint32_t doc, const lex_terms *t) {
    lex_index_remove(x, doc);
    if (cover(x, doc) != 0) return -1;
    uint32_t *ids = malloc((t->n ? t->n : 1) * sizeof *ids);
    if (!ids) return -1;
    for (size_t i = 0; i < t->n; i++)
        if (intern(x, lex_term(t, i), &ids[i]) != 0) {
            free(ids);
            return -1;
        }
    qsort(ids, t->n, sizeof *ids, cmp_u32);
    docst *d = &x->docs[doc];
    uint32_t nd = 0;
    /* ids becomes the distinct ids, each posted with its run's length */
    for (size_t i = 0; i < t->n;) {
        size_t j = i;
        while (j < t->n && ids[j] == ids[i]) j++;
        posting p = {.doc = doc, .gen = d->gen, .tf = (uint32_t)(j - i)};
        if (add_posting(x, &x->terms[ids[i]], p) != 0) {
            /* undo the postings made so far: they are the document's */
            x->bytes += nd * sizeof *ids;
            d->terms = ids;
            d->nterms = nd;
            d->live = 1;
            x->live++;
            lex_index_remove(x, doc);
            return -1;
        }
        ids[nd++] = ids[i];
        i = j;
    }
    d->terms = ids;
    d->nterms = nd;
    d->len = (uint32_t)t->nwords;
    d->live = 1;
    x->bytes += nd * sizeof *ids;
    x->live++;
    x->total_len += d->len;
    return 0;
}

/* The k best so far: a min-heap on score, then on the tie order (the
 * later document is the worse). */
typedef struct kept {
    lex_hit *h;
    size_t n;
    const lex_search_how *how;
} kept;

static int worse(const kept *k, const lex_hit *a, const lex_hit *b) {
    if (a->score != b->score) return a->score < b->score;
    if (k->how && k->how->before) return k->how->before(k->how->arg, b->doc, a->doc);
    return a->doc > b->doc;
}

static void swap_hits(lex_hit *a, lex_hit *b) {
    lex_hit t = *a;
    *a = *b;
    *b = t;
}

static void sift_down(kept *k, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && worse(k, &k->h[l], &k->h[m])) m = l;
        if (r < n && worse(k, &k->h[r], &k->h[m])) m = r;
        if (m == i) return;
        swap_hits(&k->h[i], &k->h[m]);
        i = m;
    }
}

static void sift_up(kept *k, size_t i) {
    while (i > 0 && worse(k, &k->h[i], &k->h[(i - 1) / 2])) {
        swap_hits(&k->h[i], &k->h[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
}

int lex_index_search(const lex_index *x, const lex_terms *q, size_t k, const lex_search_how *how,
                     lex_hit *out, size_t *n) {
    *n = 0;
    if (x->live == 0 || k == 0 || q->n == 0) return 0;
    double *acc = calloc(x->ndocs, sizeof *acc);
    uint32_t *touched = NULL;
    uint32_t *seen = malloc(q->n * sizeof *seen);
    const unsigned char *vis = how ? how->visible : NULL;
    size_t ntouched = 0, tcap = 0, nseen = 0;
    if (!acc || !seen) goto oom;
    double N = (double)x->live, avgdl = (double)x->total_len / N;
    if (avgdl <= 0) avgdl = 1;
    for (size_t i = 0; i < q->n; i++) {
        uint32_t id;
        if (lookup(x, lex_term(q, i), &id) != 0) continue;
        int dup = 0;
        for (size_t s = 0; s < nseen && !dup; s++) dup = seen[s] == id;
        if (dup) continue;
        seen[nseen++] = id;
        const term *t = &x->terms[id];
        if (t->df == 0) continue;
        double df = t->df;
        if (vis) { /* the term's frequency among the documents the caller may see */
            df = 0;
            for (uint32_t p = 0; p < t->np; p++) {
                const posting *ps = &t->p[p];
                df += vis[ps->doc] && live_posting(x, ps);
            }
            if (df == 0) continue;
        }
        double idf = log(1.0 + (N - df + 0.5) / (df + 0.5));
        for (uint32_t p = 0; p < t->np; p++) {
            const posting *ps = &t->p[p];
            if ((vis && !vis[ps->doc]) || !live_posting(x, ps)) continue;
            double tf = ps->tf, dl = x->docs[ps->doc].len;
            double s = idf * tf * (LEX_BM25_K1 + 1) /
                       (tf + LEX_BM25_K1 * (1 - LEX_BM25_B + LEX_BM25_B * dl / avgdl));
            if (acc[ps->doc] == 0) {
                uint32_t *nt = array_grow(touched, &tcap, ntouched + 1, sizeof *nt, 1024);
                if (!nt) goto oom;
                touched = nt;
                touched[ntouched++] = ps->doc;
            }
            acc[ps->doc] += s;
        }
    }
    kept kp = {out, 0, how};
    for (size_t i = 0; i < ntouched; i++) {
        lex_hit h = {.doc = touched[i], .score = acc[touched[i]]};
        if (kp.n == k && !worse(&kp, &out[0], &h)) continue; /* not better than the k-th */
        if (how && how->accept && !how->accept(how->arg, h.doc)) continue;
        if (kp.n < k) {
            out[kp.n++] = h;
            sift_up(&kp, kp.n - 1);
        } else {
            out[0] = h;
            sift_down(&kp, kp.n, 0);
        }
    }
    /* Heap-sort: the worst kept goes to the end, best first remains. */
    for (size_t end = kp.n; end > 1; end--) {
        swap_hits(&out[0], &out[end - 1]);
        sift_down(&kp, end - 1, 0);
    }
    *n = kp.n;
    free(acc);
    free(touched);
    free(seen);
    return 0;
oom:
    free(acc);
    free(touched);
    free(seen);
    *n = 0;
    return -1;
}
