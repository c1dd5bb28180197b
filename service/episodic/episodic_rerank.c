/* episodic_rerank: see episodic_rerank.h. */
#include "service/episodic/episodic_rerank.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/hash.h"

/* ---- recency ---- */

static double worse_by(double score, double factor, int higher_better) {
    if (higher_better && score >= 0) return score * factor;
    return score / factor; /* negative similarities, distances: away from best */
}

/* qsort is not stable: equal scores are ordered by index, which callers
 * number in their hits' order. */
static int by_score_high(const void *a, const void *b) {
    const episodic_rerank_item *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int by_score_low(const void *a, const void *b) {
    const episodic_rerank_item *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

void episodic_rerank_recency(episodic_rerank_item *v, size_t n, int higher_better, int64_t now_us,
                             int64_t half_life_us) {
    for (size_t i = 0; i < n; i++) {
        int64_t age = now_us - v[i].point->meta.update_us;
        double lives = age > 0 ? (double)age / (double)half_life_us : 0;
        if (lives > EPISODIC_RERANK_MAX_HALF_LIVES) lives = EPISODIC_RERANK_MAX_HALF_LIVES;
        v[i].score = worse_by(v[i].score, exp2(-lives), higher_better);
    }
    /* Ties keep the order the items came in (index, the caller's). */
    qsort(v, n, sizeof *v, higher_better ? by_score_high : by_score_low);
}

/* ---- similarity ---- */

/* Vectors are compared by their dot product over the product of their
 * norms, each norm worked out once per item. */
static double dot(const float *a, const float *b, int dims) {
    double ab = 0;
    for (int i = 0; i < dims; i++) ab += (double)a[i] * b[i];
    return ab;
}

/* A text's distinct words as sorted 64-bit hashes (FNV-1a). */
typedef struct word_set {
    uint64_t *h;
    size_t n;
} word_set;

static int by_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int word_set_of(lex_analyzer *an, const char *text, lex_terms *t, word_set *out) {
    *out = (word_set){0};
    if (!text || !an) return 0;
    if (lex_analyze(an, text, strlen(text), t) != 0) return -1;
    if (!t->nwords) return 0;
    out->h = malloc(t->nwords * sizeof *out->h);
    if (!out->h) return -1;
    for (size_t i = 0; i < t->nwords; i++) out->h[i] = hash_fnv1a_str(lex_term(t, i));
    qsort(out->h, t->nwords, sizeof *out->h, by_u64);
    size_t k = 0;
    for (size_t i = 0; i < t->nwords; i++)
        if (!k || out->h[i] != out->h[k - 1]) out->h[k++] = out->h[i];
    out->n = k;
    return 0;
}

static double jaccard(const word_set *a, const word_set *b) {
    if (!a->n || !b->n) return 0;
    size_t i = 0, j = 0, both = 0;
    while (i < a->n && j < b->n) {
        if (a->h[i] == b->h[j]) both++, i++, j++;
        else if (a->h[i] < b->h[j]) i++;
        else j++;
    }
    return (double)both / (double)(a->n + b->n - both);
}

/* What episodic_rerank_mmr knows of an item: its words, and its vector's inverse
 * norm (0: no vector, or a zero one). */
typedef struct mmr_item {
    word_set words;
    double inv_norm;
} mmr_item;

static double similarity(const episodic_rerank_item *x, const mmr_item *mx,
                         const episodic_rerank_item *y, const mmr_item *my, int dims) {
    if (x->point->vector && y->point->vector && dims > 0)
        return dot(x->point->vector, y->point->vector, dims) * mx->inv_norm * my->inv_norm;
    return jaccard(&mx->words, &my->words);
}

/* ---- maximal marginal relevance ---- */

/* A score against the best one (v is best first): score / best, or for
 * distances best / distance, within 0..1; a best score of 0 or less (no
 * scale to measure by) makes every hit equally relevant. Measured against
 * the best rather than stretched between the best and the worst, so a hit's
 * relevance does not depend on what else the pool holds. */
static double relevance(double s, double best, double worst, int higher_better) {
    double r;
    if (higher_better && best <= 0) r = best > worst ? (s - worst) / (best - worst) : 1;
    else if (higher_better) r = s / best;
    else r = s > 0 ? best / s : 1;
    return r < 0 ? 0 : r > 1 ? 1 : r;
}

int episodic_rerank_mmr(episodic_rerank_item *v, size_t n, size_t want, int higher_better,
                        double diversity, int dims, lex_analyzer *an, int (*expired)(void *arg),
                        void *arg) {
    if (n < 2 || want == 0) return 0;
    if (want > n) want = n;
    mmr_item *m = calloc(n, sizeof *m);
    double *rel = malloc(n * sizeof *rel), *nearest = malloc(n * sizeof *nearest);
    episodic_rerank_item *out = malloc(n * sizeof *out);
    char *taken = calloc(n, 1);
    lex_terms t = {0};
    int rc = m && rel && nearest && out && taken ? STATUS_OK : STATUS_ENOMEM;
    double worst = v[0].score;
    int all_vectors = dims > 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const vs_point *p = v[i].point;
        if (p->vector && dims > 0) {
            double nn = dot(p->vector, p->vector, dims);
            m[i].inv_norm = nn > 0 ? 1 / sqrt(nn) : 0;
        } else {
            all_vectors = 0;
        }
        if (higher_better ? v[i].score < worst : v[i].score > worst) worst = v[i].score;
    }
    /* Words, when some pair is compared by them: then every text's, since
     * a point with a vector may meet one without. */
    for (size_t i = 0; rc == 0 && !all_vectors && i < n; i++)
        if (word_set_of(an, v[i].point->text, &t, &m[i].words) != 0) rc = STATUS_ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rel[i] = relevance(v[i].score, v[0].score, worst, higher_better);
        nearest[i] = -INFINITY; /* nothing taken yet */
    }
    for (size_t k = 0; rc == 0 && k < want; k++) {
        if (expired && expired(arg)) {
            rc = STATUS_ETIMEOUT;
            break;
        }
        size_t best = n;
        double best_mmr = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            if (taken[i]) continue;
            double penalty = k ? nearest[i] : 0;
            double mmr = (1 - diversity) * rel[i] - diversity * penalty;
            if (best == n || mmr > best_mmr) best = i, best_mmr = mmr; /* ties: the earlier */
        }
        taken[best] = 1;
        out[k] = v[best];
        for (size_t i = 0; i < n; i++) {
            if (taken[i]) continue;
            double s = similarity(&v[i], &m[i], &v[best], &m[best], dims);
            if (s > nearest[i]) nearest[i] = s;
        }
    }
    if (rc == 0) {
        size_t k = want;
        for (size_t i = 0; i < n; i++)
            if (!taken[i]) out[k++] = v[i];
        memcpy(v, out, n * sizeof *v);
    }
    for (size_t i = 0; m && i < n; i++) free(m[i].words.h);
    free(m);
    free(rel);
    free(nearest);
    free(out);
    free(taken);
    lex_terms_free(&t);
    return rc;
}
