/* gen_deep_nesting: writes a memory.v1.BlackboardPostRequest whose `value`
 * (a google.protobuf.Value) nests list_value -> values -> list_value ...
 * DEPTH times, as a regression seed for request_decode_fuzz.
 *
 * protobuf-c's unpack recurses once per nested message with no depth limit,
 * and google.protobuf.Value/Struct/ListValue (and memory.v1.Filter) are
 * recursive types that many requests carry. A few tens of KiB of nesting
 * exhaust a worker thread's 8 MiB stack. Generated at build time so no
 * 100 KiB binary is checked in.
 *
 * usage: gen_deep_nesting DEPTH OUT */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prepends tag and length to the message that ends at buf + cap. */
static size_t wrap(uint8_t *buf, size_t cap, size_t len, uint8_t tag) {
  uint8_t hdr[11];
  size_t n = 0;
  hdr[n++] = tag;
  uint64_t v = len;
  do {
    hdr[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) hdr[n] |= 0x80;
    n++;
  } while (v);
  if (len + n > cap) {
    fprintf(stderr, "gen_deep_nesting: buffer too small\n");
    exit(1);
  }
  memcpy(buf + cap - len - n, hdr, n);
  return len + n;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: gen_deep_nesting DEPTH OUT\n");
    return 2;
  }
  long depth = strtol(argv[1], NULL, 10);
  size_t cap = 64u << 20;
  uint8_t *buf = malloc(cap);
  if (!buf || depth < 1) return 1;
  size_t len = 0; /* innermost: an empty Value */
  for (long i = 0; i < depth; i++) {
    len = wrap(buf, cap, len, 0x0a); /* ListValue.values = 1 */
    len = wrap(buf, cap, len, 0x32); /* Value.list_value = 6 */
  }
  len = wrap(buf, cap, len, 0x1a); /* BlackboardPostRequest.value = 3 */
  FILE *f = fopen(argv[2], "wb");
  if (!f || fwrite(buf + cap - len, 1, len, f) != len || fclose(f) != 0) {
    perror(argv[2]);
    return 1;
  }
  free(buf);
  return 0;
}
