/* traceparent_fuzz: traceparent_parse on arbitrary header values (a
 * client sends them). A value it accepts has lower-case hex ids that are
 * not all zeros and are copied from the input; trace_ctx_start always
 * leaves a usable trace id, and the formatted traceparent parses back to
 * the same trace. */
#include <string.h>

#include "service/core/traceparent.h"
#include "tests/fuzz/fuzz_target.h"

static int lower_hex_nonzero(const char *s, size_t n) {
  int nonzero = 0;
  for (size_t i = 0; i < n; i++) {
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    nonzero |= s[i] != '0';
  }
  return nonzero && s[n] == '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy: a read past the end is an ASan report. */
  char *v = malloc(size ? size : 1);
  if (!v) return 0;
  memcpy(v, data, size);
  char tid[TRACE_ID_HEX + 1], pid[TRACE_SPAN_HEX + 1];
  uint8_t flags;
  if (traceparent_parse(v, size, tid, pid, &flags) == 0) {
    FUZZ_CHECK(size >= TRACEPARENT_LEN);
    FUZZ_CHECK(lower_hex_nonzero(tid, TRACE_ID_HEX));
    FUZZ_CHECK(lower_hex_nonzero(pid, TRACE_SPAN_HEX));
    FUZZ_CHECK(memcmp(tid, v + 3, TRACE_ID_HEX) == 0);
  }
  trace_ctx t;
  trace_ctx_start(&t, v, size);
  FUZZ_CHECK(lower_hex_nonzero(t.trace_id, TRACE_ID_HEX));
  FUZZ_CHECK(lower_hex_nonzero(t.span_id, TRACE_SPAN_HEX));
  char out[TRACEPARENT_LEN + 1];
  trace_ctx_format(&t, out);
  FUZZ_CHECK(strlen(out) == TRACEPARENT_LEN);
  FUZZ_CHECK(traceparent_parse(out, strlen(out), tid, pid, &flags) == 0);
  FUZZ_CHECK(strcmp(tid, t.trace_id) == 0 && strcmp(pid, t.span_id) == 0);
  free(v);
  return 0;
}
