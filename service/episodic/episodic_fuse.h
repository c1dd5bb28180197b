/* episodic_fuse (efuse_): a hybrid search's fusion (episodic_memory.proto's
 * SEARCH_MODE_HYBRID), apart from any I/O: the lexical and the vector
 * part's hits, each best first, merged by point id and ranked by
 * reciprocal-rank fusion (tier/tier_rank.h). */
#ifndef MEMORYD_EPISODIC_EPISODIC_FUSE_H
#define MEMORYD_EPISODIC_EPISODIC_FUSE_H

#include <stddef.h>

#include "service/vstore/vstore.h"

/* One fused hit: the point as each part found it (NULL: not found by that
 * part; the two are the same point when both found it) and its rank there
 * (from 1; 0: not found). */
typedef struct episodic_fuse_hit {
    const vs_hit *lex, *vec;
    int lex_rank, vec_rank;
    double score;
} episodic_fuse_hit;

/* Fuses lex[0..nl) and vec[0..nv) with weights wl and wv into out (room
 * for nl + nv), best first (ties by point id); returns how many, or -1
 * when out of memory. The hits stay the caller's. */
long episodic_fuse(const vs_hit *lex, size_t nl, const vs_hit *vec, size_t nv, double wl, double wv,
                   episodic_fuse_hit *out);

/* The point a fused hit stands for (the lexical part's copy first). */
static inline const vs_hit *episodic_fuse_point(const episodic_fuse_hit *h) {
    return h->lex ? h->lex : h->vec;
}

#endif
