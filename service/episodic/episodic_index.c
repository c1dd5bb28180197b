/* episodic_index: exact search over contiguous float arrays. The scoring
 * loops keep 16 independent partial sums so the compiler can vectorize
 * them without reassociating one long sum (which it may not do without
 * -ffast-math); eidx_score_block has an AVX2+FMA clone picked at load time
 * by the CPU it runs on. */
#include "service/episodic/episodic_index.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LANES 16
#define BLOCK 256 /* vectors scored per kernel call */

struct eidx {
    int dims, distance;
    size_t n, cap;
    float *vecs; /* cap * dims, 64-byte aligned */
    vs_id *ids;
    tier_meta *metas; /* owner and pii_kinds owned (malloc) */
    json_t **payloads;
    size_t *table; /* open addressing: slot + 1, 0 = empty */
    size_t tcap;   /* power of two, > 2 * n */
};

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
eidx_score_block(int distance, const float *q, const float *base, size_t n, int dims, float *out) {
    if (distance == VS_EUCLID) {
        for (size_t i = 0; i < n; i++) out[i] = sqdist(q, base + i * (size_t)dims, dims);
    } else {
        for (size_t i = 0; i < n; i++) out[i] = dot(q, base + i * (size_t)dims, dims);
    }
}

void eidx_normalize(float *v, int dims) {
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
        h = 1469598103934665603ull;
        for (const char *p = id->uuid; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
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
static size_t probe(const eidx *x, const vs_id *id) {
    size_t mask = x->tcap - 1, i = id_hash(id) & mask;
    while (x->table[i] && !id_eq(&x->ids[x->table[i] - 1], id)) i = (i + 1) & mask;
    return i;
}

static int rehash(eidx *x, size_t tcap) {
    size_t *t = calloc(tcap, sizeof *t);
    if (!t) return -1;
    free(x->table);
    x->table = t;
    x->tcap = tcap;
    for (size_t s = 0; s < x->n; s++) x->table[probe(x, &x->ids[s])] = s + 1;
    return 0;
}

long eidx_find(const eidx *x, const vs_id *id) {
    size_t i = probe(x, id);
    return x->table[i] ? (long)(x->table[i] - 1) : -1;
}

/* ---- lifecycle ---- */

eidx *eidx_create(int dims, int distance) {
    assert(dims >= 1 && dims <= VS_MAX_DIMS);
    eidx *x = calloc(1, sizeof *x);
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

void eidx_free(eidx *x) {
    if (!x) return;
    for (size_t s = 0; s < x->n; s++) {
        meta_clear(&x->metas[s]);
        json_decref(x->payloads[s]);
    }
    free(x->vecs);
    free(x->ids);
    free(x->metas);
    free(x->payloads);
    free(x->table);
    free(x);
}

size_t eidx_count(const eidx *x) { return x->n; }
int eidx_dims(const eidx *x) { return x->dims; }
int eidx_distance(const eidx *x) { return x->distance; }

size_t eidx_bytes(const eidx *x) {
    return x->cap * ((size_t)x->dims * sizeof(float) + sizeof(vs_id) + sizeof(tier_meta) +
                     sizeof(json_t *)) +
           x->tcap * sizeof(size_t);
}

const vs_id *eidx_id(const eidx *x, size_t slot) { return &x->ids[slot]; }
const float *eidx_vector(const eidx *x, size_t slot) { return x->vecs + slot * (size_t)x->dims; }
json_t *eidx_payload(const eidx *x, size_t slot) { return x->payloads[slot]; }
const tier_meta *eidx_meta(const eidx *x, size_t slot) { return &x->metas[slot]; }

static int grow(eidx *x) {
    size_t cap = x->cap ? x->cap * 2 : 64;
    size_t vbytes = cap * (size_t)x->dims * sizeof(float);
    vbytes = (vbytes + 63) & ~(size_t)63;
    float *v = aligned_alloc(64, vbytes);
    if (!v) return -1;
    if (x->n) memcpy(v, x->vecs, x->n * (size_t)x->dims * sizeof(float));
    vs_id *ids = realloc(x->ids, cap * sizeof *ids);
    if (!ids) {
        free(v);
        return -1;
    }
    x->ids = ids;
    tier_meta *m = realloc(x->metas, cap * sizeof *m);
    if (!m) {
        free(v);
        return -1;
    }
    x->metas = m;
    json_t **p = realloc(x->payloads, cap * sizeof *p);
    if (!p) {
        free(v);
        return -1;
    }
    x->payloads = p;
    free(x->vecs);
    x->vecs = v;
    x->cap = cap;
    return 0;
}

int eidx_put(eidx *x, const vs_id *id, const float *vec, json_t *payload, const tier_meta *meta) {
    tier_meta copy;
    if (meta_copy(&copy, meta) != 0) {
        meta_clear(&copy);
        return -1;
    }
    long slot = eidx_find(x, id);
    if (slot < 0) {
        if (x->n == x->cap && grow(x) != 0) {
            meta_clear(&copy);
            return -1;
        }
        if (2 * (x->n + 1) > x->tcap && rehash(x, x->tcap * 2) != 0) {
            meta_clear(&copy);
            return -1;
        }
        slot = (long)x->n++;
        x->ids[slot] = *id;
        x->table[probe(x, id)] = (size_t)slot + 1;
    } else {
        meta_clear(&x->metas[slot]);
        json_decref(x->payloads[slot]);
    }
    float *dst = x->vecs + (size_t)slot * x->dims;
    memcpy(dst, vec, (size_t)x->dims * sizeof(float));
    if (x->distance == VS_COSINE) eidx_normalize(dst, x->dims);
    x->metas[slot] = copy;
    x->payloads[slot] = payload ? json_incref(payload) : NULL;
    return 0;
}

int eidx_remove(eidx *x, const vs_id *id) {
    size_t mask = x->tcap - 1, i = probe(x, id);
    if (!x->table[i]) return -1;
    size_t slot = x->table[i] - 1, last = x->n - 1;
    meta_clear(&x->metas[slot]);
    json_decref(x->payloads[slot]);

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
        x->payloads[slot] = x->payloads[last];
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
    eidx_hit *h;
    size_t n, k;
    const eidx *x;
} heap;

/* 1 if a is worse than b: lower score, or equal score and larger id. */
static int worse(const heap *hp, const eidx_hit *a, const eidx_hit *b) {
    if (a->score != b->score) return a->score < b->score;
    return vs_id_cmp(&hp->x->ids[a->slot], &hp->x->ids[b->slot]) > 0;
}

static void sift_down(heap *hp, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < hp->n && worse(hp, &hp->h[l], &hp->h[m])) m = l;
        if (r < hp->n && worse(hp, &hp->h[r], &hp->h[m])) m = r;
        if (m == i) return;
        eidx_hit t = hp->h[i];
        hp->h[i] = hp->h[m];
        hp->h[m] = t;
        i = m;
    }
}

static void sift_up(heap *hp, size_t i) {
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!worse(hp, &hp->h[i], &hp->h[p])) return;
        eidx_hit t = hp->h[i];
        hp->h[i] = hp->h[p];
        hp->h[p] = t;
        i = p;
    }
}

/* The min-heap root is the worst kept hit: a candidate only gets in (and
 * only then pays for accept, the read diode and filter) if it beats it. */
static int admits(const heap *hp, const eidx_hit *c) {
    return hp->n < hp->k || worse(hp, &hp->h[0], c);
}

static void push(heap *hp, const eidx_hit *c) {
    if (hp->n < hp->k) {
        hp->h[hp->n++] = *c;
        sift_up(hp, hp->n - 1);
    } else {
        hp->h[0] = *c;
        sift_down(hp, 0);
    }
}

long eidx_search(const eidx *x, const float *q, size_t k, int has_threshold, float threshold,
                 eidx_accept_fn accept, void *arg, eidx_hit *out) {
    if (k == 0 || x->n == 0) return 0;
    int euclid = x->distance == VS_EUCLID;
    if (has_threshold && euclid && threshold < 0) return 0;
    /* Compared in the internal "higher is better" form. */
    float t = has_threshold ? (euclid ? -threshold * threshold : threshold) : 0;
    float scores[BLOCK];
    heap hp = {out, 0, k, x};

    for (size_t base = 0; base < x->n; base += BLOCK) {
        size_t m = x->n - base < BLOCK ? x->n - base : BLOCK;
        eidx_score_block(x->distance, q, x->vecs + base * (size_t)x->dims, m, x->dims, scores);
        for (size_t i = 0; i < m; i++) {
            eidx_hit c = {base + i, euclid ? -scores[i] : scores[i]};
            if (has_threshold && c.score < t) continue;
            if (!admits(&hp, &c)) continue;
            if (accept && !accept(x, c.slot, arg)) continue;
            push(&hp, &c);
        }
    }

    /* Heap-sort the kept hits: repeatedly move the worst to the end. */
    size_t n = hp.n;
    while (hp.n > 1) {
        eidx_hit t2 = hp.h[0];
        hp.h[0] = hp.h[hp.n - 1];
        hp.h[hp.n - 1] = t2;
        hp.n--;
        sift_down(&hp, 0);
    }
    for (size_t i = 0; i < n; i++)
        if (euclid) out[i].score = sqrtf(-out[i].score);
    return (long)n;
}
