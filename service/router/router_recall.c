/* router_recall: a recall's graph part, the words of its text; see
 * router_internal.h. */
#include <string.h>
#include <strings.h>

#include "service/router/router_internal.h"

/* The graph part of a recall: the text's words, any of them, in web-search
 * syntax ("a or b or c"), within RECALL_QUERY_MAX bytes; "" when the text
 * has none. A word is a run of letters and digits (any non-ASCII byte
 * counts as one, so words of every script stay whole). The graph's text
 * search has no stop words (PostgreSQL's 'simple' configuration), so the
 * commonest English function words are left out here: "what did I say
 * about the trip" looks for "say or trip", not for every entity with a
 * "the" in it. */
static int word_byte(unsigned char c) {
    return c >= 0x80 || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

static int stop_word(const unsigned char *w, size_t n) {
    static const char *const stop[] = {
        "a",    "about", "an",   "and",  "are",   "as",   "at",   "be",    "but",   "by",
        "can",  "could", "did",  "do",   "does",  "for",  "from", "had",   "has",   "have",
        "he",   "her",   "his",  "how",  "i",     "if",   "in",   "into",  "is",    "it",
        "its",  "me",    "my",   "no",   "not",   "of",   "on",   "or",    "our",   "she",
        "so",   "than",  "that", "the",  "their", "them", "then", "there", "these", "they",
        "this", "to",    "was",  "we",   "were",  "what", "when", "where", "which", "who",
        "whom", "why",   "will", "with", "would", "you",  "your"};
    if (n > 5) return 0;
    for (size_t k = 0; k < sizeof stop / sizeof stop[0]; k++)
        if (strlen(stop[k]) == n && strncasecmp((const char *)w, stop[k], n) == 0) return 1;
    return 0;
}

const char *router_recall_words(arena *a, const char *text) {
    char *out = arena_alloc(a, RECALL_QUERY_MAX + 1);
    if (!out) return NULL;
    size_t at = 0;
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        while (*s && !word_byte(*s)) s++;
        const unsigned char *w = s;
        while (*s && word_byte(*s)) s++;
        size_t n = (size_t)(s - w), sep = at ? 4 : 0;
        if (n == 0 || stop_word(w, n) || at + sep + n > RECALL_QUERY_MAX) continue;
        if (sep) memcpy(out + at, " or ", sep);
        memcpy(out + at + sep, w, n);
        at += sep + n;
    }
    out[at] = '\0';
    return out;
}
