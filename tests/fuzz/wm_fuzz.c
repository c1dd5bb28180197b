/* wm_fuzz: working-memory paths and rendering on arbitrary bytes (a
 * client's paths; documents a client wrote). The first byte picks the
 * budget; the rest is lines, each normalized as a path. A path it accepts
 * is normalized (one leading `/`, no empty segment, only [A-Za-z0-9_ -/]),
 * within bounds and a fixed point; the accepted ones, sorted and unique,
 * are rendered FULL and TREE with their own line as content, and every
 * rendering stays within the budget in characters, counts them right, and
 * is the FULL text whenever that fits. */
#include <string.h>

#include "service/core/arena.h"
#include "service/core/text.h"
#include "service/working/wm_path.h"
#include "service/working/wm_render.h"
#include "tests/fuzz/fuzz_target.h"

#define MAX_DOCS 64

static void check_normalized(const char *p) {
  size_t n = strlen(p);
  FUZZ_CHECK(n >= 2 && n <= WM_PATH_MAX && p[0] == '/' && p[n - 1] != '/' && p[n - 1] != ' ');
  for (size_t i = 0; i < n; i++) {
    char c = p[i];
    FUZZ_CHECK((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == ' ' || c == '-' || c == '/');
    if (c == '/') FUZZ_CHECK(p[i + 1] != '/' && p[i + 1] != ' ' && (i == 0 || p[i - 1] != ' '));
  }
  char again[WM_PATH_MAX + 1];
  FUZZ_CHECK(wm_path_normalize(p, n, 0, again, NULL, 0) == 0 && strcmp(again, p) == 0);
}

static int by_path(const void *a, const void *b) {
  return strcmp(((const wm_doc *)a)->path, ((const wm_doc *)b)->path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int64_t budget = 1 + (int64_t)data[0] * 4;
  arena *a = arena_create();
  if (!a) return 0;
  wm_doc docs[MAX_DOCS];
  size_t n = 0;
  const char *s = (const char *)data + 1, *end = (const char *)data + size;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    size_t len = (size_t)((nl ? nl : end) - s);
    char *out = arena_alloc(a, WM_PATH_MAX + 1);
    char err[256];
    if (out && wm_path_normalize(s, len, 0, out, err, sizeof err) == 0) {
      check_normalized(out);
      int dup = 0;
      for (size_t i = 0; i < n; i++) dup |= strcmp(docs[i].path, out) == 0;
      if (!dup && n < MAX_DOCS) docs[n++] = (wm_doc){out, out, (int64_t)strlen(out)};
    } else if (out) {
      FUZZ_CHECK(err[0] != '\0');
    }
    s += len + 1;
  }
  qsort(docs, n, sizeof docs[0], by_path);
  for (int tree = 0; tree < 2; tree++) {
    wm_rendered r;
    if (wm_render(a, docs, n, tree, budget, &r) != 0) break;
    FUZZ_CHECK(strlen(r.text) == r.len);
    FUZZ_CHECK(text_utf8_chars(r.text) == r.chars && r.chars <= budget);
    FUZZ_CHECK(r.omitted >= 0 && (size_t)r.omitted <= n && (r.omitted > 0) == r.truncated);
    int64_t full = wm_render_full_chars(docs, n);
    FUZZ_CHECK(tree ? r.tree : (r.tree == (full > budget)));
    if (!r.tree) FUZZ_CHECK(r.chars == full);
  }
  arena_free(a);
  return 0;
}
