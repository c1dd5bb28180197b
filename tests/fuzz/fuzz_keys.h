/* fuzz_keys: one generated Ed25519 key and the key set holding its public
 * half (kid "fuzz"), for the fuzz targets that verify signatures (tokens,
 * Forget receipts). Made once per process; aborts when it cannot be. */
#ifndef MEMORYD_TESTS_FUZZ_FUZZ_KEYS_H
#define MEMORYD_TESTS_FUZZ_FUZZ_KEYS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/jwks.h"

static jwks *fuzz_jwks;
static EVP_PKEY *fuzz_priv;

static void fuzz_keys_setup(void) {
  if (fuzz_jwks) return;
  char *pub = NULL;
  if (jwks_generate_ed25519(&fuzz_priv) != 0 || jwks_render_public(fuzz_priv, "fuzz", &pub) != 0)
    abort();
  size_t n = strlen(pub) + 16;
  char *doc = malloc(n);
  if (!doc) abort();
  snprintf(doc, n, "{\"keys\":[%s]}", pub);
  char err[256];
  if (jwks_parse(doc, strlen(doc), &fuzz_jwks, err, sizeof err) != 0) abort();
  free(pub);
  free(doc);
}

#endif
