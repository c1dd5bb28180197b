// memoryd_fixture: a real memoryd on a throw-away database for tests that
// are not C++ (python_client_test), built on the same harness as the C++
// tests (tests/testing). Once memoryd serves it prints two lines on stdout,
// "address 127.0.0.1:PORT" and "token JWT" (a capability token memoryd
// accepts: tenant "clients", principal "client-test", scopes global:read
// global:write blackboard:read:all blackboard:write — minted here because the signing key is the
// harness's), then waits for its stdin to close (the test ended or died), stops memoryd with
// SIGTERM, drops the database and exits with memoryd's exit status. When memoryd cannot start (no
// MEMORYD_TEST_PG_URL, PostgreSQL down, ...) it says why on stderr and exits 1 without printing
// anything.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/clients/client_test_support.h"

int main() {
  client_test::TestMemoryd server;
  if (!server.ok()) {
    std::fprintf(stderr, "memoryd_fixture: %s\n", server.error().c_str());
    return 1;
  }
  std::printf("address %s\n", server.address().c_str());
  std::printf(
      "token %s\n",
      server.Token("global:read global:write blackboard:read:all blackboard:write").c_str());
  std::fflush(stdout);
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {
  }
  int code = server.Stop();
  if (code != 0) std::fprintf(stderr, "memoryd_fixture: memoryd log:\n%s", server.Log().c_str());
  return code == 0 ? 0 : 1;
}
