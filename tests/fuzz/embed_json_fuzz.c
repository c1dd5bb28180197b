/* embed_json_fuzz: the embedder's answer parser and error text on
 * arbitrary bytes (whatever answers at --embedder-url). The first byte
 * picks the input count (1..8) and the length asked (0: any); the parser
 * must stay inside the buffer and either give exactly n vectors of the
 * promised length with finite components, or fail with a message and no
 * vectors (ASan's leak check sees a forgotten json_decref). */
#include <math.h>
#include <string.h>

#include "service/core/arena.h"
#include "service/core/status.h"
#include "service/embed/embed_json.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t n = 1 + (data[0] & 7);
  int want = (data[0] >> 3) & 3; /* 0: any, else 1..3 */
  const char *body = (const char *)data + 1;
  size_t len = size - 1;
  /* An exact-size copy: a read past the end is an ASan report. */
  char *b = malloc(len ? len : 1);
  if (!b) return 0;
  memcpy(b, body, len);
  arena *a = arena_create();
  if (!a) {
    free(b);
    return 0;
  }
  float *v = NULL;
  int dims = -1;
  char err[256];
  err[0] = '\0';
  int rc = embed_json_parse(b, len, n, want, a, &v, &dims, err, sizeof err);
  if (rc == STATUS_OK) {
    FUZZ_CHECK(v != NULL && dims >= 1 && dims <= EMBED_MAX_DIMS);
    FUZZ_CHECK(want == 0 || dims == want);
    for (size_t i = 0; i < n * (size_t)dims; i++) FUZZ_CHECK(isfinite(v[i]));
  } else {
    FUZZ_CHECK(rc == STATUS_EINTERNAL || rc == STATUS_ENOMEM || rc == STATUS_EPRECONDITION);
    FUZZ_CHECK(v == NULL && err[0]);
    FUZZ_CHECK(rc != STATUS_EPRECONDITION || (want > 0 && dims != want && dims > 0));
  }
  char text[320]; /* the HTTP client's size */
  embed_json_error_text(b, len, text, sizeof text);
  FUZZ_CHECK(strlen(text) < sizeof text && text[0]);
  for (size_t i = 0; text[i]; i++) FUZZ_CHECK(text[i] >= 0x20 && text[i] < 0x7f);
  arena_free(a);
  free(b);
  return 0;
}
