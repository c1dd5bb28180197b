/* global_query_fuzz: what QueryEntities and ListTasks take from a request
 * before any SQL runs — property paths, predicate operands and page
 * tokens. The input's first byte picks the op, the second the operand
 * kind; the rest is split at its first NUL into a path and an operand.
 * Checks:
 * - a path that parses gives a text[] literal whose elements, unquoted,
 *   are exactly the path's dot-separated segments (no element can be lost,
 *   split or merged by quoting), and the containment prefilter document,
 *   when there is one, is valid JSON;
 * - compiled SQL never depends on the operand's or the path's content
 *   (they travel as parameters): a canonical path and operand of the same
 *   shape give the very same text; every $n refers to a parameter;
 * - page_token_decode never accepts garbage: a token that opens re-encodes
 *   to itself. */
#include <jansson.h>
#include <string.h>

#include "service/core/arena.h"
#include "service/core/text.h"
#include "service/global/global_query.h"
#include "service/pb/page_token.h"
#include "tests/fuzz/fuzz_target.h"

/* Unquotes the array literal lit ({"a","b\"c"}) and joins its elements
 * with dots into out. */
static void join_literal(const char *lit, char *out) {
  FUZZ_CHECK(*lit == '{');
  lit++;
  char *w = out;
  int first = 1;
  while (*lit != '}') {
    if (!first) {
      FUZZ_CHECK(*lit == ',');
      lit++;
      *w++ = '.';
    }
    first = 0;
    FUZZ_CHECK(*lit == '"');
    lit++;
    while (*lit != '"') {
      FUZZ_CHECK(*lit != '\0');
      if (*lit == '\\') lit++;
      *w++ = *lit++;
    }
    lit++;
  }
  FUZZ_CHECK(lit[1] == '\0');
  *w = '\0';
}

static void check_placeholders(const char *sql, int nparams) {
  for (const char *p = strchr(sql, '$'); p; p = strchr(p + 1, '$')) {
    int n = 0;
    const char *d = p + 1;
    while (*d >= '0' && *d <= '9') n = n * 10 + (*d++ - '0');
    FUZZ_CHECK(d > p + 1);
    FUZZ_CHECK(n >= 1 && n <= nparams);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > 4096) return 0;
  char *buf = malloc(size - 1);
  if (!buf) return 0;
  memcpy(buf, data + 2, size - 2);
  buf[size - 2] = '\0';
  const char *path = buf;
  size_t plen = strlen(buf);
  const char *value = plen + 1 < size - 2 ? buf + plen + 1 : "1";
  arena *a = arena_create();
  if (!a) {
    free(buf);
    return 0;
  }
  char why[256];
  const char *lit = NULL, *doc = NULL;
  if (global_path_parse(a, path, value, &lit, &doc, why, sizeof why) == 0) {
    char *joined = malloc(2 * plen + 2);
    FUZZ_CHECK(joined != NULL);
    join_literal(lit, joined);
    FUZZ_CHECK(strcmp(joined, path) == 0);
    free(joined);
    json_t *j = doc ? json_loads(doc, JSON_DECODE_ANY, NULL) : NULL;
    /* The document wraps the operand: valid JSON whenever the operand is
     * (and the path is UTF-8, which the service checks first). */
    json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
    if (doc && v && text_utf8_valid((const uint8_t *)path, plen)) FUZZ_CHECK(j != NULL);
    json_decref(j);
    json_decref(v);
  } else {
    FUZZ_CHECK(why[0] != '\0');
  }

  global_pred p = {path, data[0] % 10, (global_kind)(data[1] % 7), value};
  pgq_sql b = {0};
  int rc = global_pred_sql(&b, a, 0, &p, why, sizeof why);
  if (rc == 0 && !b.overflow) {
    check_placeholders(b.buf, b.params.n);
    /* The text depends on the op, the operand's kind and whether a
     * segment is numeric, never on the path's or operand's content:
     * a canonical path and operand give the same SQL. */
    int numeric = 0;
    for (const char *seg = path; seg; seg = strchr(seg, '.') ? strchr(seg, '.') + 1 : NULL) {
      size_t n = strcspn(seg, ".");
      numeric |= n > 0 && strspn(seg, "0123456789") == n;
    }
    global_pred c = {numeric ? "0" : "x", p.op, p.kind, "1"};
    pgq_sql cb = {0};
    FUZZ_CHECK(global_pred_sql(&cb, a, 0, &c, why, sizeof why) == 0);
    FUZZ_CHECK(strcmp(cb.buf, b.buf) == 0);
    FUZZ_CHECK(cb.params.n == b.params.n);
  } else if (rc == -1) {
    FUZZ_CHECK(strncmp(why, "predicates[0].", 14) == 0);
  }

  /* The same bytes as a page token. */
  const char *bind[] = {"t", "p"};
  const char *fields[2];
  if (page_token_decode(a, "fuzz", bind, 2, path, fields, 2) == 0) {
    char *again = page_token_encode(a, "fuzz", bind, 2, fields, 2);
    FUZZ_CHECK(again != NULL && strcmp(again, path) == 0);
  }
  arena_free(a);
  free(buf);
  return 0;
}
