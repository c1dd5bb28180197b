/* episodic_index (eidx): the exact nearest-neighbour index of one
 * collection in memory: vectors in one contiguous float array (slot i at
 * vectors + i * dims), ids, metadata and payloads beside it, and an id ->
 * slot hash. Search scores every accepted slot with loops the compiler
 * vectorizes and keeps the best k in a heap. Pure computation, no I/O and
 * no locking: the embedded backend wraps each index in a rwlock (search
 * under the read lock, put/remove under the write lock).
 *
 * Scores: COSINE and DOT score the dot product (vectors of a COSINE index
 * are stored unit length: eidx_put normalizes), higher is better; EUCLID
 * scores the euclidean distance, lower is better. */
#ifndef MEMORYD_EPISODIC_EPISODIC_INDEX_H
#define MEMORYD_EPISODIC_EPISODIC_INDEX_H

#include <stddef.h>

#include "service/episodic/vstore.h"

typedef struct eidx eidx;

/* dims 1..VS_MAX_DIMS, distance VS_COSINE/VS_DOT/VS_EUCLID. NULL when out
 * of memory. */
eidx *eidx_create(int dims, int distance);
/* Accepts NULL; drops the payload references. */
void eidx_free(eidx *x);

size_t eidx_count(const eidx *x);
int eidx_dims(const eidx *x);
int eidx_distance(const eidx *x);
/* Bytes held (vectors, metadata, hash; payloads not counted). */
size_t eidx_bytes(const eidx *x);

/* Inserts id or replaces its point. Copies vec (normalized for COSINE)
 * and meta's strings; takes a new reference to payload (may be NULL).
 * Returns 0 or -1 when out of memory (the index is unchanged). */
int eidx_put(eidx *x, const vs_id *id, const float *vec, json_t *payload, const tier_meta *meta);
/* Removes id: 0, or -1 when absent. The last slot moves into the hole, so
 * slot numbers are only stable between changes. */
int eidx_remove(eidx *x, const vs_id *id);

/* The slot of id, or -1. */
long eidx_find(const eidx *x, const vs_id *id);
/* Slot accessors; slot < eidx_count. Pointers are valid until the next
 * put/remove/free. */
const vs_id *eidx_id(const eidx *x, size_t slot);
const float *eidx_vector(const eidx *x, size_t slot);
json_t *eidx_payload(const eidx *x, size_t slot); /* borrowed; may be NULL */
const tier_meta *eidx_meta(const eidx *x, size_t slot);

/* Decides whether a slot takes part in a search (read diode, filter). */
typedef int (*eidx_accept_fn)(const eidx *x, size_t slot, void *arg);

typedef struct eidx_hit {
    size_t slot;
    float score;
} eidx_hit;

/* The k best slots for query q (dims components; normalized by the
 * caller for COSINE) among those accept admits (accept NULL: all) and,
 * with has_threshold, whose score is at least threshold (COSINE, DOT) or
 * at most threshold (EUCLID). Writes them best first (ties by id) to out,
 * which holds k entries; returns how many. -1 when out of memory. */
long eidx_search(const eidx *x, const float *q, size_t k, int has_threshold, float threshold,
                 eidx_accept_fn accept, void *arg, eidx_hit *out);

/* Scales v to unit length in place (a zero vector stays zero). */
void eidx_normalize(float *v, int dims);

/* The kernel eidx_search uses, exposed for benchmarks: scores of n
 * contiguous vectors against q into out (dot products, or squared
 * euclidean distances for VS_EUCLID). */
void eidx_score_block(int distance, const float *q, const float *base, size_t n, int dims,
                      float *out);

#endif
