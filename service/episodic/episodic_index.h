/* episodic_index: one collection in memory: the exact
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
 * are stored unit length: episodic_index_put normalizes), higher is better; EUCLID
 * scores the euclidean distance, lower is better. */
#ifndef MEMORYD_EPISODIC_EPISODIC_INDEX_H
#define MEMORYD_EPISODIC_EPISODIC_INDEX_H

#include <stddef.h>

#include "service/lexical/lex_index.h"
#include "service/vstore/vstore.h"

typedef struct episodic_index episodic_index;

/* dims 0..VS_MAX_DIMS (0: no vectors yet, texts only, until
 * episodic_index_set_dims), distance VS_COSINE/VS_DOT/VS_EUCLID. NULL when out of
 * memory. */
episodic_index *episodic_index_create(int dims, int distance);
/* Gives an index of dims 0 its vector length (the collection's first
 * vector claimed it): 0, or -1 (unchanged) when out of memory or the
 * index has a length already. */
int episodic_index_set_dims(episodic_index *x, int dims);
/* Accepts NULL; drops the payload references. */
void episodic_index_free(episodic_index *x);

size_t episodic_index_count(const episodic_index *x);
int episodic_index_dims(const episodic_index *x);
int episodic_index_distance(const episodic_index *x);
/* Bytes held (vectors, metadata, hash, texts and their lexical index;
 * payloads not counted). */
size_t episodic_index_bytes(const episodic_index *x);
/* Points with a text. */
size_t episodic_index_texts(const episodic_index *x);

/* Inserts id or replaces its point. Copies vec (dims components,
 * normalized for COSINE; NULL: none, or the index has dims 0), text (NULL:
 * none) and meta's strings; terms are text's analysis (lex_text.h), which
 * the lexical index keeps; takes a new reference to payload (may be NULL).
 * Returns 0 or -1 when out of memory (a new id is then absent; a replaced
 * point may have lost its text's terms). */
int episodic_index_put(episodic_index *x, const vs_id *id, const float *vec, const char *text,
                       const lex_terms *terms, json_t *payload, const tier_meta *meta);
/* Removes id: 0, or -1 when absent. The last slot moves into the hole, so
 * slot numbers are only stable between changes. */
int episodic_index_remove(episodic_index *x, const vs_id *id);

/* The slot of id, or -1. */
long episodic_index_find(const episodic_index *x, const vs_id *id);
/* Slot accessors; slot < episodic_index_count. Pointers are valid until the next
 * put/remove/free. */
const vs_id *episodic_index_id(const episodic_index *x, size_t slot);
const float *episodic_index_vector(const episodic_index *x,
                                   size_t slot); /* NULL: the point has none */
const char *episodic_index_text(const episodic_index *x,
                                size_t slot);                         /* NULL: the point has none */
json_t *episodic_index_payload(const episodic_index *x, size_t slot); /* borrowed; may be NULL */
const tier_meta *episodic_index_meta(const episodic_index *x, size_t slot);

/* Decides whether a slot takes part in a search (read diode, filter). */
typedef int (*episodic_index_accept_fn)(const episodic_index *x, size_t slot, void *arg);

typedef struct episodic_index_hit {
    size_t slot;
    float score;
} episodic_index_hit;

/* The k best slots for query q (dims components; normalized by the
 * caller for COSINE) among those with a vector that accept admits (accept NULL: all) and,
 * with has_threshold, whose score is at least threshold (COSINE, DOT) or
 * at most threshold (EUCLID). Writes them best first (ties by id) to out,
 * which holds k entries; returns how many. -1 when out of memory. */
long episodic_index_search(const episodic_index *x, const float *q, size_t k, int has_threshold,
                           float threshold, episodic_index_accept_fn accept, void *arg,
                           episodic_index_hit *out);

/* Which points a caller may see at all, within the collection's tenant
 * (the read diode): those of owner (NULL: of any owner) labelled
 * max_label or lower. */
typedef struct episodic_index_reader {
    const char *owner;
    int max_label;
} episodic_index_reader;

/* The k best slots by BM25 for the terms q among those accept admits,
 * with has_threshold only those scoring at least threshold: best first
 * (ties by id) into out (k entries); returns how many, or -1 when out of
 * memory. Points without a text never match. reader (NULL: sees every
 * point) says which points the caller may see at all (accept adds its
 * filters, and must not admit a point reader hides): the scores are
 * computed over those (lex_index.h), so they tell nothing of what hidden
 * points hold. */
long episodic_index_search_text(const episodic_index *x, const lex_terms *q, size_t k,
                                int has_threshold, float threshold, episodic_index_accept_fn accept,
                                const episodic_index_reader *reader, void *arg,
                                episodic_index_hit *out);

/* Scales v to unit length in place (a zero vector stays zero). */
void episodic_index_normalize(float *v, int dims);

/* The kernel episodic_index_search uses, exposed for benchmarks: scores of n
 * contiguous vectors against q into out (dot products, or squared
 * euclidean distances for VS_EUCLID). */
void episodic_index_score_block(int distance, const float *q, const float *base, size_t n, int dims,
                                float *out);

#endif
