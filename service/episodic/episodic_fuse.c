/* episodic_fuse: see episodic_fuse.h. */
#include "service/episodic/episodic_fuse.h"

#include <stdlib.h>

#include "service/tier/tier_rank.h"

/* The lexical hits, as pointers sorted by point id, to find a vector
 * hit's lexical twin by binary search. */
static int by_id(const void *a, const void *b) {
    return vs_id_cmp(&(*(const vs_hit *const *)a)->point.id,
                     &(*(const vs_hit *const *)b)->point.id);
}

static int by_score(const void *a, const void *b) {
    const episodic_fuse_hit *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return vs_id_cmp(&episodic_fuse_point(x)->point.id, &episodic_fuse_point(y)->point.id);
}

/* The index into lex of id, by binary search over order; -1 when absent. */
static long find(const vs_hit *lex, const vs_hit *const *order, size_t nl, const vs_id *id) {
    size_t lo = 0, hi = nl;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = vs_id_cmp(&order[mid]->point.id, id);
        if (c == 0) return order[mid] - lex;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

long episodic_fuse(const vs_hit *lex, size_t nl, const vs_hit *vec, size_t nv, double wl, double wv,
                   episodic_fuse_hit *out) {
    const vs_hit **order = malloc((nl ? nl : 1) * sizeof *order);
    if (!order) return -1;
    for (size_t i = 0; i < nl; i++) {
        order[i] = &lex[i];
        out[i] = (episodic_fuse_hit){
            .lex = &lex[i], .lex_rank = (int)i + 1, .score = tier_rrf(wl, (long)i + 1)};
    }
    qsort(order, nl, sizeof *order, by_id);
    size_t n = nl;
    for (size_t j = 0; j < nv; j++) {
        long twin = find(lex, order, nl, &vec[j].point.id);
        episodic_fuse_hit *h = twin >= 0 ? &out[twin] : &out[n++];
        if (twin < 0) *h = (episodic_fuse_hit){0};
        h->vec = &vec[j];
        h->vec_rank = (int)j + 1;
        h->score += tier_rrf(wv, (long)j + 1);
    }
    free(order);
    qsort(out, n, sizeof *out, by_score);
    return (long)n;
}
