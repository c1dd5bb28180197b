/* tier_rank: reciprocal-rank fusion, the one way memoryd merges rankings
 * of different kinds (the Router's hybrid query, EpisodicMemory's hybrid
 * search): a result at rank r (from 1) of a part scores
 * weight / (TIER_RRF_K + r), summed over the parts that found it. Ranks,
 * not scores, are fused, so parts whose scores live on different scales
 * (BM25, cosine, graph depth) weigh alike. K = 60 is Cormack, Clarke and
 * Buettcher's constant (SIGIR 2009): it keeps a part's very first ranks
 * from drowning the others. */
#ifndef MEMORYD_TIER_TIER_RANK_H
#define MEMORYD_TIER_TIER_RANK_H

#define TIER_RRF_K 60

static inline double tier_rrf(double weight, long rank) {
    return weight / (TIER_RRF_K + (double)rank);
}

#endif
