/* episodic_rerank (erank_): a ranked search's recency boost and its
 * de-duplication by maximal marginal relevance (common.proto
 * RecallOptions), apart from any I/O: they reorder hits a search already
 * found, best first. */
#ifndef MEMORYD_EPISODIC_EPISODIC_RERANK_H
#define MEMORYD_EPISODIC_EPISODIC_RERANK_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/status.h"
#include "service/lexical/lex_text.h"
#include "service/vstore/vstore.h"

/* The boost's factor stops at 2^-EPISODIC_RERANK_MAX_HALF_LIVES: a memory that old
 * still ranks by its relevance among those as old. */
#define EPISODIC_RERANK_MAX_HALF_LIVES 20

/* One hit being re-ranked: its point (its vector, text and update time
 * are read; borrowed) and its score, which the boost changes. */
typedef struct episodic_rerank_item {
    const vs_point *point;
    double score;
    size_t index; /* the caller's, carried along */
} episodic_rerank_item;

/* How scores order: higher is better (BM25, RRF, COSINE, DOT) or lower
 * (EUCLID distances). */
#define EPISODIC_RERANK_HIGHER_BETTER 1
#define EPISODIC_RERANK_LOWER_BETTER 0

/* Makes each score worse by 2^(-age / half_life_us), age = now_us - the
 * point's update time (0 when in the future), then sorts v[0..n) best
 * first; equal scores keep their order. */
void episodic_rerank_recency(episodic_rerank_item *v, size_t n, int higher_better, int64_t now_us,
                             int64_t half_life_us);

/* Reorders v[0..n) so that its first want items are those maximal
 * marginal relevance takes one by one with diversity (0..1]: the next is
 * the one of best (1 - diversity) * relevance - diversity * (its highest
 * similarity to one already taken), relevance the score over v[0]'s (v
 * is best first; for distances v[0]'s over the distance), 0..1 (when the
 * best score is 0 or less, scaled between the worst and the best
 * instead). Similarity: the cosine of the two vectors (dims components)
 * when both points have one, else the Jaccard overlap of their texts'
 * words as an analyzes them, else 0. The rest follow in their order.
 * expired (NULL: never) is asked between picks: it costs want * n
 * similarities. STATUS_OK; STATUS_ENOMEM, or STATUS_ETIMEOUT when expired
 * said so (v unchanged either way). */
int episodic_rerank_mmr(episodic_rerank_item *v, size_t n, size_t want, int higher_better,
                        double diversity, int dims, lex_analyzer *an, int (*expired)(void *arg),
                        void *arg);

#endif
