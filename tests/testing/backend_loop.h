// backend_loop: memoryd's event loop and its asynchronous PostgreSQL pool
// (service/store/evloop.h, apg.h), started as main.c starts them, for
// in-process tests.
#ifndef MEMORYD_TESTS_TESTING_BACKEND_LOOP_H
#define MEMORYD_TESTS_TESTING_BACKEND_LOOP_H

#include <string>

extern "C" {
#include "service/store/apg.h"
#include "service/store/evloop.h"
}

struct BackendLoopOptions {
  int size = 4;
  int max_queue = 1024;
  int connect_timeout_ms = 5000;
  int64_t default_timeout_ms = 30000;
};

// Starts the loop and the pool on url: true with *loop and *pool (free both
// with StopBackendLoop), or false with the reason in *err.
bool StartBackendLoop(const std::string& url, const BackendLoopOptions& o, evloop** loop,
                      apg** pool, std::string* err);
// Frees the pool, then the loop (either may be NULL already) and clears both.
void StopBackendLoop(evloop** loop, apg** pool);

#endif
