/* episodic_index: exact search over contiguous float arrays. The scoring
 * loops keep 16 independent partial sums so the compiler can vectorize
 * them without reassociating one long sum (which it may not do without
 * -ffast-math); episodic_index_score_block has an AVX2+FMA clone picked at
 * load time by the CPU it runs on.
 *
 * One file over 600 lines on purpose: it is the one unit built with -O3
 * (BUILD), and the scans inline the kernels and read the slot layout the
 * id hash, owners and texts keep; split, the hot loop would call across
 * units. */
#include "service/episodic/episodic_index.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/array.h"
#include "service/core/hash.h"

#define LANES 16
#define BLOCK 256 /* vectors scored per kernel call */

struct episodic_index {
    int dims, distance;
    size_t n, cap;
    float *vecs; /* cap * dims, 64-byte aligned (zeros where a slot has none) */
    vs_id *ids;
    tier_meta *metas; /* owner and pii_kinds owned (malloc) */
    json_t **payloads;
    size_t *table; /* open addressing: slot + 1, 0 = empty */
    size_t tcap;   /* power of two, > 2 * n */
    /* Texts: a slot's text (malloc'd, NULL: none) is a document of the
     * lexical index. Documents keep their number while slots move (a
     * remove fills the hole with the last slot), so doc_slot maps back. */
    char **texts;
    unsigned char *novec;  /* 1: the slot has no vector (text only) */
    size_t nnovec;         /* slots without a vector */
    size_t text_bytes;     /* sum of the texts' strlen + 1 */
    uint32_t *doc;         /* per slot: its document, NO_DOC when it has no text */
    size_t *doc_slot;      /* per document number: its slot */
    size_t ndocs, doc_cap; /* document numbers handed out; doc_slot's room */
    uint32_t *free_docs;   /* numbers of removed documents, for reuse */
    size_t nfree, free_cap;
    lex_index *lx; /* NULL until the first text */
    /* Who may see a slot, for a search's scores over the visible points
     * (episodic_index_reader): per slot its owner's number << 3 | its label, the
     * owners interned (a collection has few; never forgotten). */
    uint32_t *reader_key;
    char **owners; /* by number */
    size_t nowners, owners_cap;
    uint32_t *owner_table; /* open addressing: number + 1, 0 = empty */
    size_t owner_tcap;     /* power of two, > 2 * nowners */
};

#define LABEL_BITS 3

#define NO_DOC UINT32_MAX

/* ---- kernels ---- */

static inline float dot(const float *restrict a, const float *restrict b, int n) {
    float acc[LANES] = {0};
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += a[i + j] * b[i + j];
    float s = 0;
    for (; i < n; i++) s += a[i] * b[i];
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

static inline float sqdist(const float *restrict a, const float *restrict b, int n) {
    float acc[LANES] = {0};
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float d = a[i + j] - b[i + j];
            acc[j] += d * d;
        }
    float s = 0;
    for (; i < n; i++) {
        float d = a[i] - b[i];
        s += d * d;
    }
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

__attribute__((target_clones("arch=haswell", "default"))) void
episodic_index_score_block(int distance, const float *q, const float *base, size_t n, int dims,
                           float *out) {
    if (distance == VS_EUCLID) {
        for (size_t i = 0; i < n; i++) out[i] = sqdist(q, base + i * (size_t)dims, dims);
    } else {
        for (size_t i = 0; i < n; i++) out[i] = dot(q, base + i * (size_t)dims, dims);
    }
}

void episodic_index_normalize(float *v, int dims) {
    double s = 0;
    for (int i = 0; i < dims; i++) s += (double)v[i] * v[i];
    if (s == 0) return;
    double inv = 1.0 / sqrt(s);
    for (int i = 0; i < dims; i++) v[i] = (float)(v[i] * inv);
}

/* ---- id hash ---- */

static uint64_t id_hash(const vs_id *id) {
    uint64_t h;
    if (id->uuid[0]) {
        h = hash_fnv1a_str(id->uuid);
    } else {
        h = id->num;
    }
    /* splitmix64 finalizer: sequential integer ids spread over the table */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static int id_eq(const vs_id *a, const vs_id *b) {
    if (a->uuid[0] || b->uuid[0]) return strcmp(a->uuid, b->uuid) == 0;
    return a->num == b->num;
}

/* The table position holding id, or of the empty cell where it would go. */
static size_t probe(const episodic_index *x, const vs_id *id) {
    size_t mask = x->tcap - 1, i = id_hash(id) & mask;
    while (x->table[i] && !id_eq(&x->ids[x->table[i] - 1], id)) i = (i + 1) & mask;
    return i;
}

static int rehash(episodic_index *x, size_t tcap) {
    size_t *t = calloc(tcap, sizeof *t);
    if (!t) return -1;
    free(x->table);
    x->table = t;
    x->tcap = tcap;
    for (size_t s = 0; s < x->n; s++) x->table[probe(x, &x->ids[s])] = s + 1;
    return 0;
}

long episodic_index_find(const episodic_index *x, const vs_id *id) {
    size_t i = probe(x, id);
    return x->table[i] ? (long)(x->table[i] - 1) : -1;
}

/* ---- lifecycle ---- */

episodic_index *episodic_index_create(int dims, int distance) {
    assert(dims >= 0 && dims <= VS_MAX_DIMS);
    episodic_index *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->dims = dims;
    x->distance = distance;
    if (rehash(x, 16) != 0) {
        free(x);
        return NULL;
    }
    return x;
}

static void meta_clear(tier_meta *m) {
    free((char *)m->owner);
    for (size_t i = 0; i < m->npii; i++) free((char *)m->pii_kinds[i]);
    free(m->pii_kinds);
    memset(m, 0, sizeof *m);
}

static int meta_copy(tier_meta *dst, const tier_meta *src) {
    *dst = *src;
    dst->owner = NULL;
    dst->pii_kinds = NULL;
    dst->npii = 0;
    if (!(dst->owner = strdup(src->owner ? src->owner : ""))) return -1;
    if (src->npii) {
        const char **k = calloc(src->npii, sizeof *k);
        if (!k) return -1;
        dst->pii_kinds = k;
        for (size_t i = 0; i < src->npii; i++) {
            if (!(k[i] = strdup(src->pii_kinds[i]))) return -1;
            dst->npii = i + 1;
        }
    }
    return 0;
}

void episodic_index_free(episodic_index *x) {
    if (!x) return;
    for (size_t s = 0; s < x->n; s++) {
        meta_clear(&x->metas[s]);
        json_decref(x->payloads[s]);
        free(x->texts[s]);
    }
    free(x->vecs);
    free(x->ids);
    free(x->metas);
    free(x->payloads);
    free(x->texts);
    free(x->novec);
    free(x->doc);
    free(x->doc_slot);
    free(x->free_docs);
    lex_index_free(x->lx);
    free(x->table);
    free(x->reader_key);
    for (size_t i = 0; i < x->nowners; i++) free(x->owners[i]);
    free(x->owners);
    free(x->owner_table);
    free(x);
}

/* ---- owners, interned ---- */

/* owner's number, or -1 when the collection has no point of it. */
static long owner_find(const episodic_index *x, const char *owner) {
    if (!x->owner_tcap) return -1;
    size_t mask = x->owner_tcap - 1;
    for (size_t i = hash_fnv1a_str(owner) & mask; x->owner_table[i]; i = (i + 1) & mask)
        if (strcmp(x->owners[x->owner_table[i] - 1], owner) == 0) return x->owner_table[i] - 1;
    return -1;
}

static int owners_rehash(episodic_index *x, size_t tcap) {
    uint32_t *t = calloc(tcap, sizeof *t);
    if (!t) return -1;
    for (size_t n = 0; n < x->nowners; n++) {
        size_t i = hash_fnv1a_str(x->owners[n]) & (tcap - 1);
        while (t[i]) i = (i + 1) & (tcap - 1);
        t[i] = (uint32_t)n + 1;
    }
    free(x->owner_table);
    x->owner_table = t;
    x->owner_tcap = tcap;
    return 0;
}

/* owner's number, interned if new; -1 when out of memory. */
static long owner_intern(episodic_index *x, const char *owner) {
    long n = owner_find(x, owner);
    if (n >= 0) return n;
    if ((x->nowners + 1) >> (32 - LABEL_BITS)) return -1; /* the key's bits */
    if (2 * (x->nowners + 1) > x->owner_tcap &&
        owners_rehash(x, x->owner_tcap ? 2 * x->owner_tcap : 16) != 0)
        return -1;
    if (x->nowners == x->owners_cap) {
        size_t cap = x->owners_cap ? 2 * x->owners_cap : 8;
        char **o = realloc(x->owners, cap * sizeof *o);
        if (!o) return -1;
        x->owners = o;
        x->owners_cap = cap;
    }
    char *copy = strdup(owner);
    if (!copy) return -1;
    size_t mask = x->owner_tcap - 1, i = hash_fnv1a_str(owner) & mask;
    while (x->owner_table[i]) i = (i + 1) & mask;
    x->owners[x->nowners] = copy;
    x->owner_table[i] = (uint32_t)++x->nowners;
    return (long)x->nowners - 1;
}

size_t episodic_index_count(const episodic_index *x) { return x->n; }
int episodic_index_dims(const episodic_index *x) { return x->dims; }
int episodic_index_distance(const episodic_index *x) { return x->distance; }

size_t episodic_index_bytes(const episodic_index *x) {
    return x->cap * ((size_t)x->dims * sizeof(float) + sizeof(vs_id) + sizeof(tier_meta) +
                     sizeof(json_t *) + sizeof(char *) + 1 + 2 * sizeof(uint32_t)) +
           x->owner_tcap * sizeof(uint32_t) + x->owners_cap * sizeof(char *) +
           x->tcap * sizeof(size_t) + x->text_bytes + x->doc_cap * sizeof(size_t) +
           x->free_cap * sizeof(uint32_t) + (x->lx ? lex_index_bytes(x->lx) : 0);
}

size_t episodic_index_texts(const episodic_index *x) { return x->lx ? lex_index_docs(x->lx) : 0; }

const vs_id *episodic_index_id(const episodic_index *x, size_t slot) { return &x->ids[slot]; }
const float *episodic_index_vector(const episodic_index *x, size_t slot) {
    return x->novec[slot] ? NULL : x->vecs + slot * (size_t)x->dims;
}
const char *episodic_index_text(const episodic_index *x, size_t slot) { return x->texts[slot]; }
json_t *episodic_index_payload(const episodic_index *x, size_t slot) { return x->payloads[slot]; }
const tier_meta *episodic_index_meta(const episodic_index *x, size_t slot) {
    return &x->metas[slot];
}

/* The vector array for cap slots, the first n copied. */
static float *vectors_for(const episodic_index *x, size_t cap) {
    size_t vbytes = cap * (size_t)x->dims * sizeof(float);
    vbytes = (vbytes + 63) & ~(size_t)63;
    float *v = aligned_alloc(64, vbytes ? vbytes : 64);
    if (v && x->n) memcpy(v, x->vecs, x->n * (size_t)x->dims * sizeof(float));
    return v;
}

static int grow(episodic_index *x) {
    size_t cap = x->cap ? x->cap * 2 : 64;
    float *v = vectors_for(x, cap);
    if (!v) return -1;
    /* Each array is grown in turn; one that fails leaves the ones before
     * it bigger than cap says, which is harmless. */
    vs_id *ids = realloc(x->ids, cap * sizeof *ids);
    if (ids) x->ids = ids;
    tier_meta *m = ids ? realloc(x->metas, cap * sizeof *m) : NULL;
    if (m) x->metas = m;
    json_t **p = m ? realloc(x->payloads, cap * sizeof *p) : NULL;
    if (p) x->payloads = p;
    char **t = p ? realloc(x->texts, cap * sizeof *t) : NULL;
    if (t) x->texts = t;
    unsigned char *nv = t ? realloc(x->novec, cap) : NULL;
    if (nv) x->novec = nv;
    uint32_t *d = nv ? realloc(x->doc, cap * sizeof *d) : NULL;
    if (d) x->doc = d;
    uint32_t *rk = d ? realloc(x->reader_key, cap * sizeof *rk) : NULL;
    if (!rk) {
        free(v);
        return -1;
    }
    x->reader_key = rk;
    free(x->vecs);
    x->vecs = v;
    x->cap = cap;
    return 0;
}

int episodic_index_set_dims(episodic_index *x, int dims) {
    if (x->dims != 0 || dims < 1 || dims > VS_MAX_DIMS) return -1;
    /* Nothing to copy: the old array holds no vector (dims 0). */
    size_t n = x->n;
    x->n = 0;
    x->dims = dims;
    float *v = vectors_for(x, x->cap);
    x->n = n;
    if (!v) {
        x->dims = 0;
        return -1;
    }
    memset(v, 0, x->cap * (size_t)dims * sizeof(float));
    free(x->vecs);
    x->vecs = v;
    return 0;
}

/* A document number for slot: a removed document's, or the next. */
static int doc_take(episodic_index *x, size_t slot, uint32_t *out) {
    uint32_t d;
    if (x->nfree) {
        d = x->free_docs[--x->nfree];
    } else {
        if (x->ndocs >= NO_DOC) return -1;
        size_t *ds = array_grow(x->doc_slot, &x->doc_cap, x->ndocs + 1, sizeof *ds, 64);
        if (!ds) return -1;
        x->doc_slot = ds;
        d = (uint32_t)x->ndocs++;
    }
    x->doc_slot[d] = slot;
    *out = d;
    return 0;
}

/* Takes slot's document (and its text) out of the lexical index. */
static int doc_drop(episodic_index *x, size_t slot) {
    uint32_t d = x->doc[slot];
    if (d == NO_DOC) return 0;
    uint32_t *f = array_grow(x->free_docs, &x->free_cap, x->nfree + 1, sizeof *f, 64);
    if (!f) return -1; /* the number is not reused: a hole in the numbering */
    x->free_docs = f;
    lex_index_remove(x->lx, d);
    x->free_docs[x->nfree++] = d;
    x->doc[slot] = NO_DOC;
    return 0;
}

/* Sets slot's text to a copy of text (NULL: none) with terms. */
static int set_text(episodic_index *x, size_t slot, const char *text, const lex_terms *terms) {
    char *old = x->texts[slot];
    if (!text) {
        if (doc_drop(x, slot) != 0 && x->doc[slot] != NO_DOC) {
            lex_index_remove(x->lx, x->doc[slot]); /* the number is lost, not the removal */
            x->doc[slot] = NO_DOC;
        }
        if (old) x->text_bytes -= strlen(old) + 1;
        free(old);
        x->texts[slot] = NULL;
        return 0;
    }
    char *copy = strdup(text);
    if (!copy) return -1;
    if (!x->lx && !(x->lx = lex_index_create())) {
        free(copy);
        return -1;
    }
    uint32_t d = x->doc[slot];
    int took = d == NO_DOC;
    if (took && doc_take(x, slot, &d) != 0) {
        free(copy);
        return -1;
    }
    x->doc[slot] = d;
    lex_terms none = {0};
    if (lex_index_put(x->lx, d, terms ? terms : &none) != 0) {
        /* lex_index_put left d absent: a number just taken goes back (a
         * kept one stays slot's, with no terms). */
        if (took) doc_drop(x, slot);
        free(copy);
        return -1;
    }
    if (old) x->text_bytes -= strlen(old) + 1;
    free(old);
    x->texts[slot] = copy;
    x->text_bytes += strlen(copy) + 1;
    return 0;
}

int episodic_index_put(episodic_index *x, const vs_id *id, const float *vec, const char *text,
                       const lex_terms *terms, json_t *payload, const tier_meta *meta) {
    tier_meta copy;
    if (meta_copy(&copy, meta) != 0) {
        meta_clear(&copy);
        return -1;
    }
    long owner = owner_intern(x, copy.owner);
    if (owner < 0) {
        meta_clear(&copy);
        return -1;
    }
    long slot = episodic_index_find(x, id);
    int fresh = slot < 0;
    if (fresh) {
        if (x->n == x->cap && grow(x) != 0) {
            meta_clear(&copy);
            return -1;
        }
        if (2 * (x->n + 1) > x->tcap && rehash(x, x->tcap * 2) != 0) {
            meta_clear(&copy);
            return -1;
        }
        slot = (long)x->n;
        x->texts[slot] = NULL;
        x->doc[slot] = NO_DOC;
        x->novec[slot] = 0;
    }
    /* The text first: the one step that can fail once the slot exists. */
    if (set_text(x, (size_t)slot, text, terms) != 0) {
        meta_clear(&copy);
        return -1;
    }
    if (fresh) {
        x->n++;
        x->ids[slot] = *id;
        x->table[probe(x, id)] = (size_t)slot + 1;
    } else {
        meta_clear(&x->metas[slot]);
        json_decref(x->payloads[slot]);
    }
    float *dst = x->vecs + (size_t)slot * x->dims;
    unsigned char was = x->novec[slot]; /* 0 for a fresh slot */
    if (vec && x->dims) {
        memcpy(dst, vec, (size_t)x->dims * sizeof(float));
        if (x->distance == VS_COSINE) episodic_index_normalize(dst, x->dims);
    } else if (x->dims) {
        memset(dst, 0, (size_t)x->dims * sizeof(float));
    }
    x->novec[slot] = (unsigned char)!(vec && x->dims);
    x->nnovec = x->nnovec - was + x->novec[slot];
    x->metas[slot] = copy;
    x->reader_key[slot] = (uint32_t)owner << LABEL_BITS | ((uint32_t)copy.label & 7);
    x->payloads[slot] = payload ? json_incref(payload) : NULL;
    return 0;
}

int episodic_index_remove(episodic_index *x, const vs_id *id) {
    size_t mask = x->tcap - 1, i = probe(x, id);
    if (!x->table[i]) return -1;
    size_t slot = x->table[i] - 1, last = x->n - 1;
    meta_clear(&x->metas[slot]);
    json_decref(x->payloads[slot]);
    set_text(x, slot, NULL, NULL); /* cannot fail */
    x->nnovec -= x->novec[slot];

    /* Backward-shift deletion keeps every probe chain unbroken without
     * tombstones. */
    x->table[i] = 0;
    for (size_t j = (i + 1) & mask; x->table[j]; j = (j + 1) & mask) {
        size_t home = id_hash(&x->ids[x->table[j] - 1]) & mask;
        /* Move j's entry into the hole at i unless its home lies in (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            x->table[i] = x->table[j];
            x->table[j] = 0;
            i = j;
        }
    }

    if (slot != last) { /* the last point fills the hole */
        x->ids[slot] = x->ids[last];
        x->metas[slot] = x->metas[last];
        x->reader_key[slot] = x->reader_key[last];
        x->payloads[slot] = x->payloads[last];
        x->texts[slot] = x->texts[last];
        x->novec[slot] = x->novec[last];
        x->doc[slot] = x->doc[last];
        if (x->doc[slot] != NO_DOC) x->doc_slot[x->doc[slot]] = slot;
        memcpy(x->vecs + slot * (size_t)x->dims, x->vecs + last * (size_t)x->dims,
               (size_t)x->dims * sizeof(float));
        x->table[probe(x, &x->ids[slot])] = slot + 1;
    }
    x->n--;
    return 0;
}

/* ---- search ---- */

/* Internal scores are "higher is better": dot products as they are,
 * squared distances negated. */
typedef struct heap {
    episodic_index_hit *h;
    size_t n, k;
    const episodic_index *x;
} heap;

/* 1 if a is worse than b: lower score, or equal score and larger id. */
static int worse(const heap *hp, const episodic_index_hit *a, const episodic_index_hit *b) {
    if (a->score != b->score) return a->score < b->score;
    return vs_id_cmp(&hp->x->ids[a->slot], &hp->x->ids[b->slot]) > 0;
}

static void sift_down(heap *hp, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < hp->n && worse(hp, &hp->h[l], &hp->h[m])) m = l;
        if (r < hp->n && worse(hp, &hp->h[r], &hp->h[m])) m = r;
        if (m == i) return;
        episodic_index_hit t = hp->h[i];
        hp->h[i] = hp->h[m];
        hp->h[m] = t;
        i = m;
    }
}

static void sift_up(heap *hp, size_t i) {
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!worse(hp, &hp->h[i], &hp->h[p])) return;
        episodic_index_hit t = hp->h[i];
        hp->h[i] = hp->h[p];
        hp->h[p] = t;
        i = p;
    }
}

/* The min-heap root is the worst kept hit: a candidate only gets in (and
 * only then pays for accept, the read diode and filter) if it beats it. */
static int admits(const heap *hp, const episodic_index_hit *c) {
    return hp->n < hp->k || worse(hp, &hp->h[0], c);
}

static void push(heap *hp, const episodic_index_hit *c) {
    if (hp->n < hp->k) {
        hp->h[hp->n++] = *c;
        sift_up(hp, hp->n - 1);
    } else {
        hp->h[0] = *c;
        sift_down(hp, 0);
    }
}

long episodic_index_search(const episodic_index *x, const float *q, size_t k, int has_threshold,
                           float threshold, episodic_index_accept_fn accept, void *arg,
                           episodic_index_hit *out) {
    if (k == 0 || x->n == 0 || x->dims == 0) return 0;
    int euclid = x->distance == VS_EUCLID;
    if (has_threshold && euclid && threshold < 0) return 0;
    /* Compared in the internal "higher is better" form. */
    float t = has_threshold ? (euclid ? -threshold * threshold : threshold) : 0;
    float scores[BLOCK];
    heap hp = {out, 0, k, x};

    for (size_t base = 0; base < x->n; base += BLOCK) {
        size_t m = x->n - base < BLOCK ? x->n - base : BLOCK;
        episodic_index_score_block(x->distance, q, x->vecs + base * (size_t)x->dims, m, x->dims,
                                   scores);
        for (size_t i = 0; i < m; i++) {
            episodic_index_hit c = {base + i, euclid ? -scores[i] : scores[i]};
            if (x->nnovec && x->novec[c.slot]) continue; /* text only */
            if (has_threshold && c.score < t) continue;
            if (!admits(&hp, &c)) continue;
            if (accept && !accept(x, c.slot, arg)) continue;
            push(&hp, &c);
        }
    }

    /* Heap-sort the kept hits: repeatedly move the worst to the end. */
    size_t n = hp.n;
    while (hp.n > 1) {
        episodic_index_hit t2 = hp.h[0];
        hp.h[0] = hp.h[hp.n - 1];
        hp.h[hp.n - 1] = t2;
        hp.n--;
        sift_down(&hp, 0);
    }
    for (size_t i = 0; i < n; i++)
        if (euclid) out[i].score = sqrtf(-out[i].score);
    return (long)n;
}

/* ---- text search ---- */

typedef struct text_search {
    const episodic_index *x;
    episodic_index_accept_fn accept;
    void *arg;
} text_search;

static int text_accept(void *arg, uint32_t doc) {
    const text_search *ts = arg;
    return !ts->accept || ts->accept(ts->x, ts->x->doc_slot[doc], ts->arg);
}

static int text_before(void *arg, uint32_t a, uint32_t b) {
    const text_search *ts = arg;
    return vs_id_cmp(&ts->x->ids[ts->x->doc_slot[a]], &ts->x->ids[ts->x->doc_slot[b]]) < 0;
}

long episodic_index_search_text(const episodic_index *x, const lex_terms *q, size_t k,
                                int has_threshold, float threshold, episodic_index_accept_fn accept,
                                const episodic_index_reader *reader, void *arg,
                                episodic_index_hit *out) {
    if (k == 0 || !x->lx) return 0;
    lex_hit *hits = malloc(k * sizeof *hits);
    if (!hits) return -1;
    text_search ts = {x, accept, arg};
    lex_search_how how = {text_accept, text_before, &ts, NULL};
    unsigned char *vis = NULL;
    if (reader) { /* one pass over the slots' keys: cheaper than asking per posting */
        if (!(vis = calloc(x->ndocs ? x->ndocs : 1, 1))) {
            free(hits);
            return -1;
        }
        long owner = reader->owner ? owner_find(x, reader->owner) : -1;
        uint32_t max = reader->max_label < 0 ? 0 : (uint32_t)reader->max_label;
        if (!reader->owner) {
            for (size_t slot = 0; slot < x->n; slot++)
                if (x->doc[slot] != NO_DOC) vis[x->doc[slot]] = (x->reader_key[slot] & 7) <= max;
        } else if (owner >= 0) { /* an owner of no point sees nothing */
            for (size_t slot = 0; slot < x->n; slot++) {
                uint32_t key = x->reader_key[slot];
                if (x->doc[slot] != NO_DOC)
                    vis[x->doc[slot]] = key >> LABEL_BITS == (uint32_t)owner && (key & 7) <= max;
            }
        }
        how.visible = vis;
    }
    size_t n = 0;
    int rc = lex_index_search(x->lx, q, k, &how, hits, &n);
    free(vis);
    if (rc != 0) {
        free(hits);
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (has_threshold && hits[i].score < threshold) break; /* best first */
        out[kept++] = (episodic_index_hit){x->doc_slot[hits[i].doc], (float)hits[i].score};
    }
    free(hits);
    return (long)kept;
}
