/* jwt_fuzz: jwt_verify on arbitrary bytes. Tokens arrive from any caller
 * in the authorization header, before anything about them is known, so
 * this is the first parser an attacker reaches. The key set is fixed (one
 * generated key); random bytes must never verify, and a rejected token
 * must say why and leave nothing allocated. Inputs containing a '\n' are
 * split: the part before is signed as a payload with the real key and the
 * rest ignored, so claim parsing is reached past the signature check. */
#include <stdlib.h>
#include <string.h>

#include "service/auth/jwks.h"
#include "service/auth/jwt.h"
#include "tests/fuzz/fuzz_keys.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_keys_setup();
  char err[512];
  jwt_claims *claims = NULL;
  const char *nl = memchr(data, '\n', size);
  if (nl) {
    /* A signed token around fuzzed claims. */
    size_t plen = (size_t)(nl - (const char *)data);
    char *payload = malloc(plen + 1);
    memcpy(payload, data, plen);
    payload[plen] = '\0';
    char *token = NULL;
    if (jwt_sign(fuzz_priv, "fuzz", payload, &token, err, sizeof err) == JWT_OK) {
      int rc =
          jwt_verify(fuzz_jwks, token, strlen(token), 1700000000, 60, &claims, err, sizeof err);
      if (rc == JWT_OK) {
        FUZZ_CHECK(claims && claims->sub && claims->sub[0] && claims->tenant && claims->jti &&
                   claims->nscopes >= 1);
        FUZZ_CHECK(claims->lvl >= JWT_LABEL_PUBLIC && claims->lvl <= claims->clr &&
                   claims->clr <= JWT_LABEL_SECRET);
        FUZZ_CHECK(!claims->nanc ||
                   (claims->parent && strcmp(claims->parent, claims->anc[claims->nanc - 1]) == 0));
        char *again = NULL;
        FUZZ_CHECK(jwt_claims_render(claims, &again) == 0);
        free(again);
      } else {
        FUZZ_CHECK(claims == NULL && err[0]);
      }
      jwt_claims_free(claims);
      claims = NULL;
      free(token);
    }
    free(payload);
    return 0;
  }
  err[0] = '\0';
  int rc =
      jwt_verify(fuzz_jwks, (const char *)data, size, 1700000000, 60, &claims, err, sizeof err);
  /* Without our private key nothing can verify. */
  FUZZ_CHECK(rc != JWT_OK);
  FUZZ_CHECK(claims == NULL && err[0] != '\0');
  return 0;
}
