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
//
//   memoryd_fixture [--scope=SCOPES] [--token=NAME=SCOPES]... [--embedder]
//
// --scope replaces the first token's scopes; each --token adds a line
// "token-NAME JWT" (same tenant and principal, those scopes) after it, for
// tests that need a narrower or a second token. --embedder starts the
// embedder contract stand-in (tests/contract/) and gives it to memoryd
// (--embedder-url, --embedder-model=standin-embed-16), for text queries.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tests/clients/client_test_support.h"
#include "tests/testing/embedder_standin.h"

int main(int argc, char** argv) {
  std::string scope = "global:read global:write blackboard:read:all blackboard:write";
  std::vector<std::pair<std::string, std::string>> extra;
  bool embedder = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    size_t eq;
    if (a == "--embedder") {
      embedder = true;
    } else if (a.rfind("--scope=", 0) == 0) {
      scope = a.substr(8);
    } else if (a.rfind("--token=", 0) == 0 && (eq = a.find('=', 8)) != std::string::npos) {
      extra.emplace_back(a.substr(8, eq - 8), a.substr(eq + 1));
    } else {
      std::fprintf(stderr, "memoryd_fixture: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  EmbedderStandin standin;
  std::vector<std::string> flags;
  if (embedder) {
    if (!standin.Start()) {
      std::fprintf(stderr, "memoryd_fixture: the embedder stand-in did not start:\n%s",
                   standin.Log().c_str());
      return 1;
    }
    flags = {"--embedder-url=" + standin.base_url(), "--embedder-model=standin-embed-16"};
  }
  client_test::TestMemoryd server(flags);
  if (!server.ok()) {
    std::fprintf(stderr, "memoryd_fixture: %s\n", server.error().c_str());
    return 1;
  }
  std::printf("address %s\n", server.address().c_str());
  std::printf("token %s\n", server.Token(scope).c_str());
  for (const auto& t : extra)
    std::printf("token-%s %s\n", t.first.c_str(), server.Token(t.second).c_str());
  std::fflush(stdout);
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {
  }
  int code = server.Stop();
  if (code != 0) std::fprintf(stderr, "memoryd_fixture: memoryd log:\n%s", server.Log().c_str());
  return code == 0 ? 0 : 1;
}
