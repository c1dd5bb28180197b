/* lex_text: see lex_text.h. */
#include "service/lexical/lex_text.h"

#include <libstemmer.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/array.h"

struct lex_analyzer {
    struct sb_stemmer *stem;
    int english;    /* the stop words below are English's */
    char *language; /* as asked for */
};

/* Snowball's English stop word list (snowballstem.org), sorted for
 * bsearch; contractions are left to the stemmer. Other languages keep
 * every word: their stop words would weigh little anyway (low IDF). */
static const char *const english_stop[] = {
    "a",      "about",    "above",      "after",      "again",   "against", "all",     "am",
    "an",     "and",      "any",        "are",        "as",      "at",      "be",      "because",
    "been",   "before",   "being",      "below",      "between", "both",    "but",     "by",
    "could",  "did",      "do",         "does",       "doing",   "down",    "during",  "each",
    "few",    "for",      "from",       "further",    "had",     "has",     "have",    "having",
    "he",     "her",      "here",       "hers",       "herself", "him",     "himself", "his",
    "how",    "i",        "if",         "in",         "into",    "is",      "it",      "its",
    "itself", "me",       "more",       "most",       "my",      "myself",  "no",      "nor",
    "not",    "of",       "off",        "on",         "once",    "only",    "or",      "other",
    "ought",  "our",      "ours",       "ourselves",  "out",     "over",    "own",     "same",
    "she",    "should",   "so",         "some",       "such",    "than",    "that",    "the",
    "their",  "theirs",   "them",       "themselves", "then",    "there",   "these",   "they",
    "this",   "those",    "through",    "to",         "too",     "under",   "until",   "up",
    "very",   "was",      "we",         "were",       "what",    "when",    "where",   "which",
    "while",  "who",      "whom",       "why",        "with",    "would",   "you",     "your",
    "yours",  "yourself", "yourselves",
};

static int cmp_word(const void *k, const void *e) {
    return strcmp((const char *)k, *(const char *const *)e);
}

static int is_stop(const lex_analyzer *a, const char *w) {
    return a->english && bsearch(w, english_stop, sizeof english_stop / sizeof english_stop[0],
                                 sizeof english_stop[0], cmp_word) != NULL;
}

const char **lex_languages(void) { return sb_stemmer_list(); }

lex_analyzer *lex_analyzer_create(const char *language) {
    lex_analyzer *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    /* UTF-8: the stemmers leave bytes they do not know alone. */
    if (!(a->stem = sb_stemmer_new(language, "UTF_8"))) {
        free(a);
        return NULL;
    }
    a->english = strcmp(language, "english") == 0 || strcmp(language, "en") == 0;
    if (!(a->language = strdup(language))) {
        lex_analyzer_free(a);
        return NULL;
    }
    return a;
}

void lex_analyzer_free(lex_analyzer *a) {
    if (!a) return;
    sb_stemmer_delete(a->stem);
    free(a->language);
    free(a);
}

/* Each thread's analyzer, freed by the key's destructor at thread exit. */
static pthread_key_t thread_key;
static pthread_once_t thread_once = PTHREAD_ONCE_INIT;
static int thread_key_ok;

static void thread_analyzer_free(void *a) { lex_analyzer_free(a); }
static void make_thread_key(void) {
    thread_key_ok = pthread_key_create(&thread_key, thread_analyzer_free) == 0;
}

lex_analyzer *lex_analyzer_of_thread(const char *language) {
    pthread_once(&thread_once, make_thread_key);
    if (!thread_key_ok) return NULL;
    lex_analyzer *a = pthread_getspecific(thread_key);
    if (a && strcmp(a->language, language) == 0) return a;
    lex_analyzer *made = lex_analyzer_create(language);
    if (!made || pthread_setspecific(thread_key, made) != 0) {
        lex_analyzer_free(made);
        return NULL;
    }
    lex_analyzer_free(a);
    return made;
}

void lex_terms_free(lex_terms *t) {
    free(t->buf);
    free(t->off);
    *t = (lex_terms){0};
}

/* Appends term s[0..n) (NUL-terminated in buf): 0, or -1 when out of memory. */
static int push(lex_terms *t, const char *s, size_t n) {
    char *b = array_grow(t->buf, &t->cap, t->len + n + 1, 1, 256);
    if (!b) return -1;
    t->buf = b;
    uint32_t *o = array_grow(t->off, &t->ncap, t->n + 1, sizeof *o, 32);
    if (!o) return -1;
    t->off = o;
    t->off[t->n++] = (uint32_t)t->len;
    memcpy(t->buf + t->len, s, n);
    t->buf[t->len + n] = '\0';
    t->len += n + 1;
    return 0;
}

static int word_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

int lex_analyze(lex_analyzer *a, const char *text, size_t len, lex_terms *t) {
    t->len = t->n = t->nwords = 0;
    char w[LEX_WORD_MAX + 1];
    size_t i = 0;
    while (i < len && t->n < LEX_TERMS_MAX) {
        while (i < len && !word_byte((unsigned char)text[i])) i++;
        size_t n = 0;
        int too_long = 0;
        for (; i < len; i++) {
            unsigned char c = (unsigned char)text[i];
            /* an apostrophe between word bytes stays ("don't", "alice's") */
            int inner = c == '\'' && n > 0 && i + 1 < len && word_byte((unsigned char)text[i + 1]);
            if (!word_byte(c) && !inner) break;
            if (n == LEX_WORD_MAX) too_long = 1;
            else w[n++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        if (n == 0 || too_long) continue;
        w[n] = '\0';
        if (is_stop(a, w)) continue;
        const sb_symbol *s = sb_stemmer_stem(a->stem, (const sb_symbol *)w, (int)n);
        if (!s) return -1; /* libstemmer's only failure is memory */
        int sl = sb_stemmer_length(a->stem);
        if (sl <= 0) continue;
        if (push(t, (const char *)s, (size_t)sl) != 0) return -1;
    }
    t->nwords = t->n;
    for (size_t k = 1; k < t->nwords; k++) {
        const char *x = lex_term(t, k - 1), *y = lex_term(t, k);
        size_t xl = strlen(x), yl = strlen(y);
        char pair[2 * LEX_WORD_MAX + 2];
        if (xl + yl + 1 >= sizeof pair) continue;
        memcpy(pair, x, xl);
        pair[xl] = ' ';
        memcpy(pair + xl + 1, y, yl);
        if (push(t, pair, xl + yl + 1) != 0) return -1;
    }
    return 0;
}
