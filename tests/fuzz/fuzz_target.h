/* fuzz_target: the libFuzzer entry point every tests/fuzz target defines.
 * The same object links either against libFuzzer (tests/fuzz/run.sh, clang)
 * or against replay_main.c (the gcc cc_test that `make test` runs). */
#ifndef MEMORYD_TESTS_FUZZ_FUZZ_TARGET_H
#define MEMORYD_TESTS_FUZZ_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Must not keep pointers into data (the driver frees it after the call) and
 * must abort() when an invariant fails, so both drivers see a crash. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Crash on a failed invariant even with -DNDEBUG: assert() would vanish
 * there and the target would silently stop checking. */
#define FUZZ_CHECK(cond)                                       \
  do {                                                         \
    if (!(cond)) fuzz_check_failed(#cond, __FILE__, __LINE__); \
  } while (0)

static inline _Noreturn void fuzz_check_failed(const char *what, const char *file, int line) {
  fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", file, line, what);
  abort();
}

#endif
