/* lex_text: text into the terms ranked retrieval matches (lex_index.h),
 * apart from any I/O so it can be unit-tested and fuzzed.
 *
 * A word is a run of ASCII letters and digits, apostrophes between them,
 * and any bytes of 0x80 and up (UTF-8's multibyte letters, kept as they
 * are); ASCII letters are lower-cased. Words of more than LEX_WORD_MAX
 * bytes are dropped, and so are the language's stop words. The rest go
 * through the language's Snowball stemmer (libstemmer), so "painted",
 * "painting" and "paints" are one term. Besides these words, every two
 * words that follow each other (stop words skipped) make a pair term "a b"
 * (terms never hold a space otherwise): a phrase or a name found whole
 * scores above the same words scattered.
 *
 * An analyzer holds a stemmer, which is not thread-safe: one per thread,
 * or one behind the caller's lock. */
#ifndef MEMORYD_LEXICAL_LEX_TEXT_H
#define MEMORYD_LEXICAL_LEX_TEXT_H

#include <stddef.h>
#include <stdint.h>

#define LEX_WORD_MAX 64    /* bytes of a word; longer ones are dropped */
#define LEX_TERMS_MAX 4096 /* words of one text; the rest is not indexed */

typedef struct lex_analyzer lex_analyzer;

/* The analyzer of language ("english": a Snowball algorithm name that
 * libstemmer knows, lower case). NULL when the language is unknown or
 * memory is short. */
lex_analyzer *lex_analyzer_create(const char *language);
void lex_analyzer_free(lex_analyzer *a);
/* The calling thread's analyzer of language, made on its first use and
 * freed when the thread exits (a thread keeps one: asking for another
 * language replaces it). For threads of a pool that analyze under no
 * common lock. NULL as lex_analyzer_create. */
lex_analyzer *lex_analyzer_of_thread(const char *language);
/* The languages lex_analyzer_create takes (libstemmer's list, static). */
const char **lex_languages(void);

/* The terms of one text: words first, in text order (repeats kept, so a
 * word's count is its frequency), then the pairs. Owned by the caller:
 * zero it before the first use, lex_terms_free when done (reusable in
 * between: each analysis starts it afresh). */
typedef struct lex_terms {
    char *buf; /* the terms, each NUL-terminated */
    size_t len, cap;
    uint32_t *off; /* where each term starts in buf */
    size_t n, ncap;
    size_t nwords; /* off[0..nwords) are words, off[nwords..n) pairs */
} lex_terms;

void lex_terms_free(lex_terms *t);
static inline const char *lex_term(const lex_terms *t, size_t i) { return t->buf + t->off[i]; }

/* Analyzes text[0..len) into *t: 0, or -1 when out of memory (*t then
 * holds what was analyzed before). Never fails on its input. */
int lex_analyze(lex_analyzer *a, const char *text, size_t len, lex_terms *t);

#endif
