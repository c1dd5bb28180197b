/* lex_index: an in-memory inverted index over short texts, ranked by
 * Okapi BM25: term-frequency saturation (k1), length normalisation (b)
 * and inverse document frequency over the index's live documents, with OR
 * semantics (a document sharing 2 of a question's 8 terms still ranks).
 * Terms come from lex_text.h; its pair terms ("a b") are scored as terms
 * of their own, so a phrase or name found whole ranks above its words
 * scattered.
 *
 * Documents are numbered by the caller (a dense slot number: the index
 * keeps per-document state in an array indexed by it). Replacing or
 * removing a document is O(its terms): postings of removed documents are
 * skipped by their generation and dropped when they make up half of a
 * term's postings.
 *
 * Not thread-safe: searches may run together, but not with a change (the
 * caller's read/write lock). */
#ifndef MEMORYD_LEXICAL_LEX_INDEX_H
#define MEMORYD_LEXICAL_LEX_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "service/lexical/lex_text.h"

#define LEX_BM25_K1 1.2
#define LEX_BM25_B 0.75

typedef struct lex_index lex_index;

/* NULL when out of memory. */
lex_index *lex_index_create(void);
void lex_index_free(lex_index *x);

/* Indexes document doc with terms t (replacing what doc held): 0, or -1
 * when out of memory (doc is then absent). */
int lex_index_put(lex_index *x, uint32_t doc, const lex_terms *t);
/* Removes doc (nothing when absent). */
void lex_index_remove(lex_index *x, uint32_t doc);

/* Live documents, and the bytes the index holds (for the memory budget). */
size_t lex_index_docs(const lex_index *x);
size_t lex_index_bytes(const lex_index *x);

/* The filter a search applies to each candidate before it may enter the
 * results (the read diode, payload filters): nonzero to keep it. */
typedef int (*lex_accept_fn)(void *arg, uint32_t doc);
/* The order of two documents of equal score: nonzero when a comes first
 * (by the caller's ids, so that the cut at k and the pages after it do
 * not depend on how documents happened to be numbered). */
typedef int (*lex_before_fn)(void *arg, uint32_t a, uint32_t b);

/* How a search filters and orders; NULL fields: keep all, lower number
 * first. visible: per document number (as many as the caller has
 * numbered), nonzero when the caller may see the document at all (the
 * read diode, not its own filters): a term's document frequency counts
 * only those, so neither the scores nor the order say whether hidden
 * documents hold a word (the document count and average length stay the
 * index's, which say how many there are and how long, not what they
 * hold). accept must keep no document visible drops. */
typedef struct lex_search_how {
    lex_accept_fn accept;
    lex_before_fn before;
    void *arg; /* for both */
    const unsigned char *visible;
} lex_search_how;

typedef struct lex_hit {
    uint32_t doc;
    double score;
} lex_hit;

/* The k best documents for the terms of q that how->accept keeps, best
 * first (ties in how->before's order), into out[0..*n): 0, or -1 when out
 * of memory. how may be NULL. A query without a term the index knows
 * finds nothing. */
int lex_index_search(const lex_index *x, const lex_terms *q, size_t k, const lex_search_how *how,
                     lex_hit *out, size_t *n);

#endif
