/* lex_fuzz: lex_analyze on arbitrary text (memories and questions come
 * from clients), and the index fed what it makes. Words hold no space and
 * pairs exactly one, none is empty or longer than the analyzer allows;
 * a document indexed from the first half of the input is found by its own
 * words, never scored at or below zero, and gone once removed. */
#include <string.h>

#include "service/lexical/lex_index.h"
#include "service/lexical/lex_text.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static lex_analyzer *a;
  if (!a && !(a = lex_analyzer_create("english"))) return 0;
  /* An exact-size copy: a read past the end is an ASan report. */
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  lex_terms doc = {0}, q = {0};
  lex_index *x = lex_index_create();
  size_t half = size / 2;
  if (!x || lex_analyze(a, text, half, &doc) != 0 ||
      lex_analyze(a, text + half, size - half, &q) != 0)
    goto out;
  FUZZ_CHECK(doc.nwords <= LEX_TERMS_MAX && doc.nwords <= doc.n);
  for (size_t i = 0; i < doc.n; i++) {
    const char *t = lex_term(&doc, i), *sp = strchr(t, ' ');
    FUZZ_CHECK(t[0] != '\0');
    FUZZ_CHECK(i < doc.nwords ? sp == NULL && strlen(t) <= 2 * LEX_WORD_MAX
                              : sp != NULL && strchr(sp + 1, ' ') == NULL);
  }
  if (lex_index_put(x, 7, &doc) != 0) goto out;
  FUZZ_CHECK(lex_index_docs(x) == 1);
  lex_hit hits[4];
  size_t n;
  if (lex_index_search(x, &doc, 4, NULL, hits, &n) != 0) goto out;
  FUZZ_CHECK(n == (doc.n > 0 ? 1u : 0u));
  FUZZ_CHECK(n == 0 || (hits[0].doc == 7 && hits[0].score > 0));
  if (lex_index_search(x, &q, 4, NULL, hits, &n) != 0) goto out;
  FUZZ_CHECK(n <= 1);
  lex_index_remove(x, 7);
  FUZZ_CHECK(lex_index_docs(x) == 0);
  if (lex_index_search(x, &doc, 4, NULL, hits, &n) != 0) goto out;
  FUZZ_CHECK(n == 0);
out:
  lex_index_free(x);
  lex_terms_free(&doc);
  lex_terms_free(&q);
  free(text);
  return 0;
}
