/* receipt_fuzz: Forget receipts from outside. `memoryd receipt verify`
 * reads a receipt someone hands over (a data subject, an auditor), and
 * ListReceipts parses stored payloads. Random bytes must never verify
 * (jws_verify with the receipt typ); a payload that parses renders back to
 * JSON that parses to the same receipt. Inputs with a '\n': the part
 * before it is signed as a payload with the real key, so the payload
 * parser is reached past the signature check. */
#include <stdlib.h>
#include <string.h>

#include "service/auth/jwks.h"
#include "service/privacy/privacy_receipt.h"
#include "tests/fuzz/fuzz_keys.h"
#include "tests/fuzz/fuzz_target.h"

/* A parsed receipt renders to JSON that parses to the same receipt. */
static void round_trip(arena *a, const privacy_receipt *r) {
  char *json = privacy_receipt_json(r);
  FUZZ_CHECK(json != NULL);
  privacy_receipt again;
  char err[256];
  FUZZ_CHECK(privacy_receipt_parse(a, json, strlen(json), &again, err, sizeof err) == 0);
  FUZZ_CHECK(strcmp(again.receipt_id, r->receipt_id) == 0 && again.dry_run == r->dry_run &&
             again.complete_us == r->complete_us && !again.principal == !r->principal);
  for (int t = 1; t <= privacy_tiers(); t++) FUZZ_CHECK(again.counts[t] == r->counts[t]);
  free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_keys_setup();
  arena *a = arena_create();
  FUZZ_CHECK(a != NULL);
  char err[512];
  privacy_receipt r;
  const char *nl = memchr(data, '\n', size);
  if (nl) {
    size_t plen = (size_t)(nl - (const char *)data);
    if (privacy_receipt_parse(a, (const char *)data, plen, &r, err, sizeof err) == 0)
      round_trip(a, &r);
    else
      FUZZ_CHECK(err[0] != '\0');
  } else {
    err[0] = '\0';
    const char *kid = NULL;
    /* Without our private key nothing verifies. */
    FUZZ_CHECK(privacy_receipt_verify(fuzz_jwks, (const char *)data, size, a, &r, &kid, err,
                                      sizeof err) != 0);
    FUZZ_CHECK(err[0] != '\0');
  }
  arena_free(a);
  return 0;
}
