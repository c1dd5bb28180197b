/* sess_record_fuzz: sess_rec_parse on arbitrary bytes (what a Redis
 * script answered, which a compromised or corrupted Redis controls). The
 * first byte says whether the tail is the value or its size. A record it
 * accepts has a label of 1 to 4, an owner that is a non-empty copy from the
 * blob, kinds that are non-empty and comma-free, a value inside the blob
 * of the size it reports; and the kinds render back to the field they
 * came from. */
#include <string.h>

#include "service/core/arena.h"
#include "service/session/sess_record.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int with_value = data[0] & 1;
  /* An exact-size copy: a read past the end is an ASan report. */
  size_t n = size - 1;
  char *blob = malloc(n ? n : 1);
  arena *a = arena_create();
  if (!blob || !a) {
    free(blob);
    arena_free(a);
    return 0;
  }
  memcpy(blob, data + 1, n);
  sess_rec r;
  if (sess_rec_parse(a, blob, n, with_value, &r) == 0) {
    FUZZ_CHECK(r.label >= 1 && r.label <= 4);
    FUZZ_CHECK(r.owner && r.owner[0] && strlen(r.owner) <= n);
    FUZZ_CHECK(r.version >= 0 && r.size >= 0);
    for (size_t i = 0; i < r.npii; i++)
      FUZZ_CHECK(r.pii_kinds[i][0] && !strchr(r.pii_kinds[i], ','));
    if (with_value) {
      FUZZ_CHECK(r.has_value && r.value >= (const uint8_t *)blob);
      FUZZ_CHECK(r.value + r.size == (const uint8_t *)blob + n);
    }
    const char *field = sess_rec_pii_field(a, r.pii_kinds, r.npii);
    FUZZ_CHECK(field &&
               (r.npii ? memmem(blob, n, field, strlen(field)) != NULL : strcmp(field, "-") == 0));
  }
  arena_free(a);
  free(blob);
  return 0;
}
