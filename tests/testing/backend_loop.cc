// backend_loop: see backend_loop.h.
#include "tests/testing/backend_loop.h"

bool StartBackendLoop(const std::string& url, const BackendLoopOptions& o, evloop** loop,
                      apg** pool, std::string* err) {
  char buf[256] = "";
  if (evloop_create("test", loop, buf, sizeof buf) != 0) {
    *err = buf;
    return false;
  }
  apg_options po = {};
  po.url = url.c_str();
  po.size = o.size;
  po.max_queue = o.max_queue;
  po.connect_timeout_ms = o.connect_timeout_ms;
  po.default_timeout_ms = o.default_timeout_ms;
  if (apg_create(*loop, &po, pool, buf, sizeof buf) != 0) {
    *err = buf;
    evloop_free(*loop);
    *loop = nullptr;
    return false;
  }
  return true;
}

void StopBackendLoop(evloop** loop, apg** pool) {
  apg_free(*pool);
  evloop_free(*loop);
  *pool = nullptr;
  *loop = nullptr;
}
