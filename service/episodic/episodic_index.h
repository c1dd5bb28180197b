/* episodic_index (eidx): one collection in memory: the exact
 * nearest-neighbour index of its vectors, in one contiguous float array
 * (slot i at vectors + i * dims), ids, metadata, payloads and texts beside
 * it, an id -> slot hash, and the texts' lexical index (lexical/
 * lex_index.h: BM25). Vector search scores every accepted slot with loops
 * the compiler vectorizes and keeps the best k in a heap; text search asks
 * the lexical index. A point has a vector, a text or both. Pure
 * computation, no I/O and no locking: the embedded backend wraps each
 * index in a rwlock (searches under the read lock, put/remove under the
 * write lock).
 *
 * Scores: COSINE and DOT score the dot product (vectors of a COSINE index
 * are stored unit length: eidx_put normalizes), higher is better; EUCLID
 * scores the euclidean distance, lower is better. */
#ifndef MEMORYD_EPISODIC_EPISODIC_INDEX_H
#define MEMORYD_EPISODIC_EPISODIC_INDEX_H

#include <stddef.h>

#include "service/episodic/vstore.h"
#include "service/lexical/lex_index.h"

typedef struct eidx eidx;

/* dims 0..VS_MAX_DIMS (0: no vectors yet, texts only, until
 * eidx_set_dims), distance VS_COSINE/VS_DOT/VS_EUCLID. NULL when out of
 * memory. */
eidx *eidx_create(int dims, int distance);
/* Gives an index of dims 0 its vector length (the collection's first
 * vector claimed it): 0, or -1 (unchanged) when out of memory or the
 * index has a length already. */
int eidx_set_dims(eidx *x, int dims);
/* Accepts NULL; drops the payload references. */
void eidx_free(eidx *x);

size_t eidx_count(const eidx *x);
int eidx_dims(const eidx *x);
int eidx_distance(const eidx *x);
/* Bytes held (vectors, metadata, hash, texts and their lexical index;
 * payloads not counted). */
size_t eidx_bytes(const eidx *x);
/* Points with a text. */
size_t eidx_texts(const eidx *x);

/* Inserts id or replaces its point. Copies vec (dims components,
 * normalized for COSINE; NULL: none, or the index has dims 0), text (NULL:
 * none) and meta's strings; terms are text's analysis (lex_text.h), which
 * the lexical index keeps; takes a new reference to payload (may be NULL).
 * Returns 0 or -1 when out of memory (a new id is then absent; a replaced
 * point may have lost its text's terms). */
int eidx_put(eidx *x, const vs_id *id, const float *vec, const char *text, const lex_terms *terms,
             json_t *payload, const tier_meta *meta);
/* Removes id: 0, or -1 when absent. The last slot moves into the hole, so
 * slot numbers are only stable between changes. */
int eidx_remove(eidx *x, const vs_id *id);

/* The slot of id, or -1. */
long eidx_find(const eidx *x, const vs_id *id);
/* Slot accessors; slot < eidx_count. Pointers are valid until the next
 * put/remove/free. */
const vs_id *eidx_id(const eidx *x, size_t slot);
const float *eidx_vector(const eidx *x, size_t slot); /* NULL: the point has none */
const char *eidx_text(const eidx *x, size_t slot);    /* NULL: the point has none */
json_t *eidx_payload(const eidx *x, size_t slot);     /* borrowed; may be NULL */
const tier_meta *eidx_meta(const eidx *x, size_t slot);

/* Decides whether a slot takes part in a search (read diode, filter). */
typedef int (*eidx_accept_fn)(const eidx *x, size_t slot, void *arg);

typedef struct eidx_hit {
    size_t slot;
    float score;
} eidx_hit;

/* The k best slots for query q (dims components; normalized by the
 * caller for COSINE) among those with a vector that accept admits (accept NULL: all) and,
 * with has_threshold, whose score is at least threshold (COSINE, DOT) or
 * at most threshold (EUCLID). Writes them best first (ties by id) to out,
 * which holds k entries; returns how many. -1 when out of memory. */
long eidx_search(const eidx *x, const float *q, size_t k, int has_threshold, float threshold,
                 eidx_accept_fn accept, void *arg, eidx_hit *out);

/* Which points a caller may see at all, within the collection's tenant
 * (the read diode): those of owner (NULL: of any owner) labelled
 * max_label or lower. */
typedef struct eidx_reader {
    const char *owner;
    int max_label;
} eidx_reader;

/* The k best slots by BM25 for the terms q among those accept admits,
 * with has_threshold only those scoring at least threshold: best first
 * (ties by id) into out (k entries); returns how many, or -1 when out of
 * memory. Points without a text never match. reader (NULL: sees every
 * point) says which points the caller may see at all (accept adds its
 * filters, and must not admit a point reader hides): the scores are
 * computed over those (lex_index.h), so they tell nothing of what hidden
 * points hold. */
long eidx_search_text(const eidx *x, const lex_terms *q, size_t k, int has_threshold,
                      float threshold, eidx_accept_fn accept, const eidx_reader *reader, void *arg,
                      eidx_hit *out);

/* Scales v to unit length in place (a zero vector stays zero). */
void eidx_normalize(float *v, int dims);

/* The kernel eidx_search uses, exposed for benchmarks: scores of n
 * contiguous vectors against q into out (dot products, or squared
 * euclidean distances for VS_EUCLID). */
void eidx_score_block(int distance, const float *q, const float *base, size_t n, int dims,
                      float *out);

#endif
