/* pii_fuzz: the PII detectors on arbitrary bytes (every written value and
 * payload string passes through them). Checks the header's promises: hits
 * in bounds, ordered, non-overlapping, their kinds OR'ed into the result;
 * redaction sized exactly by its dry run and redacting every hit. */
#include <stdlib.h>
#include <string.h>

#include "service/pii/pii.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data;
  pii_hit hits[64];
  size_t n = 0;
  unsigned kinds = pii_scan(s, size, hits, 64, &n);
  unsigned seen = 0;
  size_t end = 0;
  for (size_t i = 0; i < n && i < 64; i++) {
    FUZZ_CHECK(hits[i].len > 0 && hits[i].start >= end && hits[i].start + hits[i].len <= size);
    FUZZ_CHECK(hits[i].kind && (hits[i].kind & (hits[i].kind - 1)) == 0);
    end = hits[i].start + hits[i].len;
    seen |= hits[i].kind;
  }
  FUZZ_CHECK(n > 64 || seen == kinds);
  unsigned rkinds = 0;
  size_t need = pii_redact(s, size, NULL, 0, &rkinds);
  FUZZ_CHECK(rkinds == kinds);
  char *out = malloc(need + 1);
  if (!out) return 0;
  FUZZ_CHECK(pii_redact(s, size, out, need + 1, NULL) == need);
  FUZZ_CHECK(out[need] == '\0');
  FUZZ_CHECK(kinds != 0 || (need == size && memcmp(out, s, size) == 0));
  free(out);
  return 0;
}
