/* bb_codec_fuzz: the blackboard's parsers on arbitrary bytes. Item headers
 * and events come back from Redis, which other replicas (or anyone with
 * access to it) write, and events arrive over pub/sub: untrusted. Checked
 * for memory safety and for the parsers' promises: every slice they return
 * lies inside the input, in order, and an event's value is there exactly
 * when it is a PUT. */
#include <stdint.h>
#include <string.h>

#include "service/blackboard/bb_codec.h"
#include "tests/fuzz/fuzz_target.h"

static int inside(const char *b, size_t size, const char *p, size_t n) {
  return p >= b && (size_t)(p - b) <= size && n <= size - (size_t)(p - b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Exact-size copies: reads past the end are ASan reports. */
  char *b = malloc(size ? size : 1);
  if (!b) return 0;
  if (size) memcpy(b, data, size);

  bb_header h;
  size_t used = 0;
  if (bb_header_parse(b, size, &h, &used) == 0) {
    FUZZ_CHECK(used <= size);
    FUZZ_CHECK(inside(b, used, h.owner, h.owner_len));
    FUZZ_CHECK(h.owner + h.owner_len == b + used);
    FUZZ_CHECK(h.label >= 1 && h.label <= 4);
    FUZZ_CHECK(h.version >= 0 && h.size >= 0 && h.lease_ms >= 0);
  }

  bb_event ev;
  if (bb_event_parse(b, size, &ev) == 0) {
    FUZZ_CHECK(ev.kind == BB_PUT || ev.kind == BB_DELETE || ev.kind == BB_LEASE_EXPIRED);
    FUZZ_CHECK(ev.rev >= 1);
    FUZZ_CHECK(inside(b, size, ev.id, ev.id_len));
    FUZZ_CHECK(inside(b, size, ev.key, ev.key_len) && ev.key_len > 0);
    FUZZ_CHECK(ev.id + ev.id_len <= ev.key);
    FUZZ_CHECK(inside(b, size, ev.h.owner, ev.h.owner_len));
    FUZZ_CHECK(ev.key + ev.key_len <= ev.h.owner);
    FUZZ_CHECK(ev.json + ev.json_len == b + size);
    FUZZ_CHECK(ev.h.owner + ev.h.owner_len == ev.json);
    FUZZ_CHECK((ev.kind == BB_PUT) == (ev.json_len > 0));
  }
  free(b);
  return 0;
}
