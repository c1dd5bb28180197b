/* cache_codec_fuzz: the cache tier's parsers on arbitrary bytes. Redis
 * values come back from a server other replicas (or anyone with access to
 * Redis) write, and invalidation messages arrive over pub/sub, so both are
 * untrusted: checked for memory safety and for their headers' promises. A
 * value that decodes re-encodes to the very same bytes; a message that
 * splits yields a key inside the message. */
#include <string.h>

#include "service/cache/cache_codec.h"
#include "service/core/arena.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Exact-size copies: reads past the end are ASan reports. */
  uint8_t *b = malloc(size ? size : 1);
  if (!b) return 0;
  if (size) memcpy(b, data, size);

  cache_item *it = cache_blob_decode(b, size);
  if (it) {
    FUZZ_CHECK(!it->absent);
    FUZZ_CHECK(it->label >= 0 && it->label <= 255);
    FUZZ_CHECK(strlen(it->owner) + it->value_len + CACHE_HEADER_BYTES == size);
    arena *a = arena_create();
    size_t n = 0;
    uint8_t *again = a ? cache_blob_encode(a, it, &n) : NULL;
    if (again) {
      FUZZ_CHECK(n == size);
      FUZZ_CHECK(memcmp(again, b, size) == 0);
    }
    arena_free(a);
    cache_item_unref(it);
  }

  const char *key = NULL;
  size_t klen = 0;
  int rc = cache_inval_decode((const char *)b, size, "0123456789abcdef", &key, &klen);
  /* -1 malformed, 0 a key, 1 our own, 2 a prefix (an erasure's flush). */
  FUZZ_CHECK(rc >= -1 && rc <= 2);
  if (rc >= 0) {
    FUZZ_CHECK(klen > 0);
    FUZZ_CHECK(key == (const char *)b + CACHE_REPLICA_ID_LEN + 1);
    FUZZ_CHECK(key + klen == (const char *)b + size);
    char sep = (char)b[CACHE_REPLICA_ID_LEN];
    FUZZ_CHECK(rc == 1 || (rc == 2) == (sep == '*'));
    /* What encode writes decodes to the same. */
    char *again = malloc(CACHE_INVAL_BYTES(klen));
    FUZZ_CHECK(again != NULL);
    size_t n = rc == 2 || (rc == 1 && sep == '*')
                   ? cache_inval_encode_prefix((const char *)b, key, klen, again)
                   : cache_inval_encode((const char *)b, key, klen, again);
    FUZZ_CHECK(n == size && memcmp(again, b, size) == 0);
    free(again);
  }
  free(b);
  return 0;
}
