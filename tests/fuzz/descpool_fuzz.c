/* descpool_fuzz: descpool_create on arbitrary bytes, then every query of
 * descpool.h on what it indexed. Reflection serves the set protoc wrote at
 * build time, but descpool is a parser with a public API (see descpool.h):
 * it must reject or index anything without reading out of bounds, and the
 * index must be self-consistent (file names find their files, closures are
 * duplicate-free and start with the file asked for, services resolve). */
#include <string.h>

#include "service/reflection/descpool.h"
#include "tests/fuzz/fuzz_target.h"

/* Lookups of names nobody indexed, including ones just short of and past
 * descpool_has_method_path's 512-byte buffer. */
static void probe_fixed_names(const descpool *p) {
  static const char *const names[] = {"",
                                      ".",
                                      "/",
                                      "//",
                                      "/a/",
                                      "/a/b",
                                      "a.b",
                                      ".a.b",
                                      "grpc.health.v1.Health",
                                      "/grpc.health.v1.Health/Check"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    descpool_find_symbol(p, names[i]);
    descpool_is_message(p, names[i]);
    descpool_find_file(p, names[i]);
    descpool_has_method_path(p, names[i]);
  }
  char big[1100];
  for (size_t len = 505; len < 520; len++) {
    memset(big, 'x', sizeof big);
    big[0] = '/';
    big[len / 2] = '/';
    big[len] = '\0';
    descpool_has_method_path(p, big);
  }
  memset(big, 'y', sizeof big - 1);
  big[0] = '/';
  big[600] = '/';
  big[sizeof big - 1] = '\0';
  descpool_has_method_path(p, big);
  descpool_find_symbol(p, big + 1);
}

/* A name taken from the input's tail: lets the fuzzer steer lookups at
 * whatever it put into the set. */
static char *tail_name(const uint8_t *data, size_t size) {
  size_t n = size < 64 ? size : 64;
  char *s = malloc(n + 1);
  if (!s) abort();
  memcpy(s, data + size - n, n);
  s[n] = '\0';
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  descpool *p = NULL;
  if (descpool_create(data, size, &p) != 0) {
    descpool_free(NULL); /* documented as a no-op */
    return 0;
  }
  size_t nfiles = descpool_file_count(p);
  int *closure = malloc((nfiles ? nfiles : 1) * sizeof *closure);
  if (!closure) abort();
  for (size_t i = 0; i < nfiles; i++) {
    const char *name = descpool_file_name(p, (int)i);
    FUZZ_CHECK(name != NULL);
    int found = descpool_find_file(p, name);
    /* Duplicate names resolve to the first file of that name. */
    FUZZ_CHECK(found >= 0 && (size_t)found <= i);
    const uint8_t *bytes;
    size_t len;
    descpool_file_bytes(p, (int)i, &bytes, &len);
    FUZZ_CHECK(bytes >= data && len <= size && (size_t)(bytes - data) <= size - len);

    size_t n = descpool_file_closure(p, (int)i, closure);
    FUZZ_CHECK(n >= 1 && n <= nfiles && closure[0] == (int)i);
    for (size_t a = 0; a < n; a++) {
      FUZZ_CHECK(closure[a] >= 0 && (size_t)closure[a] < nfiles);
      for (size_t b = a + 1; b < n; b++) FUZZ_CHECK(closure[a] != closure[b]);
    }
    descpool_find_symbol(p, name);
  }
  free(closure);

  char path[1200];
  for (size_t i = 0; i < descpool_service_count(p); i++) {
    const char *svc = descpool_service_name(p, i);
    FUZZ_CHECK(svc != NULL);
    int file = descpool_find_symbol(p, svc);
    snprintf(path, sizeof path, "/%s/%s", svc, "Check");
    descpool_has_method_path(p, path);
    snprintf(path, sizeof path, "/%s/", svc);
    /* Names protoc could have written (no leading dot, no slash) must
     * resolve; junk ones only must not crash. */
    if (svc[0] != '.' && !strchr(svc, '/')) {
      FUZZ_CHECK(file >= 0 && (size_t)file < nfiles);
      FUZZ_CHECK(!descpool_has_method_path(p, path)); /* no method name */
    }
  }

  probe_fixed_names(p);
  char *t = tail_name(data, size);
  descpool_find_symbol(p, t);
  descpool_is_message(p, t);
  descpool_find_file(p, t);
  snprintf(path, sizeof path, "/%s", t);
  descpool_has_method_path(p, path);
  free(t);
  descpool_free(p);
  return 0;
}
