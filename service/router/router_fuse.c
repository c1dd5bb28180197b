/* router_fuse: reciprocal-rank fusion; see router_fuse.h. */
#include "service/router/router_fuse.h"

#include <string.h>

double rfuse_graph_weight(int traversal, int depth) {
    return traversal ? 1.0 + 1.0 / (1.0 + depth) : 1.0;
}

/* The entity a fused result refers to (NULL: a point naming none). */
static const char *key_of(const rfuse_result *r, const rfuse_entity *ents,
                          const char *const *point_entity) {
    return r->entity >= 0 ? ents[r->entity].id : point_entity[r->point];
}

/* Orders by score, highest first; ties: graph results, then the lower
 * rank (the index within the part). */
static int before(const rfuse_result *a, const rfuse_result *b) {
    if (a->score != b->score) return a->score > b->score;
    if ((a->entity >= 0) != (b->entity >= 0)) return a->entity >= 0;
    return (a->entity >= 0 ? a->entity : a->point) < (b->entity >= 0 ? b->entity : b->point);
}

size_t rfuse(const rfuse_entity *ents, size_t ne, int traversal, const char *const *point_entity,
             size_t np, rfuse_result *out) {
    size_t n = 0;
    for (size_t i = 0; i < ne; i++)
        out[n++] = (rfuse_result){
            tier_rrf(rfuse_graph_weight(traversal, ents[i].depth), (long)i + 1), (long)i, -1};
    for (size_t j = 0; j < np; j++) {
        double term = tier_rrf(1.0, (long)j + 1);
        const char *key = point_entity[j];
        size_t at = n;
        /* Parts hold at most 1000 results each: a linear scan is enough. */
        for (size_t k = 0; key && k < n; k++) {
            const char *other = key_of(&out[k], ents, point_entity);
            if (other && strcmp(other, key) == 0) {
                at = k;
                break;
            }
        }
        if (at == n) {
            out[n++] = (rfuse_result){term, -1, (long)j};
        } else if (out[at].entity >= 0 && out[at].point < 0) {
            /* The entity's first (best-ranked) point: the vector part's
             * contribution. Later points naming it add nothing. */
            out[at].point = (long)j;
            out[at].score += term;
        }
    }
    /* Insertion sort: stable and at most 2000 results. */
    for (size_t i = 1; i < n; i++) {
        rfuse_result x = out[i];
        size_t j = i;
        for (; j > 0 && before(&x, &out[j - 1]); j--) out[j] = out[j - 1];
        out[j] = x;
    }
    return n;
}
