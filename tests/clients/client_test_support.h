// client_test_support: what the client tests share — one real memoryd on
// its own throw-away database for a whole test suite and tokens it accepts,
// a port nothing listens on, and running an example binary with its output
// captured.
#ifndef MEMORYD_TESTS_CLIENTS_CLIENT_TEST_SUPPORT_H
#define MEMORYD_TESTS_CLIENTS_CLIENT_TEST_SUPPORT_H

#include <memory>
#include <string>
#include <vector>

#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/ports.h"

namespace client_test {

// A memoryd serving a database of its own (needs MEMORYD_TEST_PG_URL, and
// uses MEMORYD_TEST_REDIS_URL when set). Construction starts it; check
// ok() and error() (which holds memoryd's log when it did not start). The
// destructor stops it (SIGTERM) and drops the database.
class TestMemoryd {
 public:
  // extra: more memoryd flags (e.g. an embedder's).
  explicit TestMemoryd(const std::vector<std::string>& extra = {});
  ~TestMemoryd();
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int port() const;
  std::string address() const;  // "127.0.0.1:PORT"
  std::string Log();
  // Stops memoryd (SIGTERM, 10 s) once; its exit status, -1 on timeout.
  int Stop();
  // A capability token memoryd accepts: tenant "clients", principal
  // "client-test", the given space-separated scopes.
  std::string Token(const std::string& scope);

 private:
  PgTestDb db_;
  std::unique_ptr<MemorydProcess> process_;
  bool ok_ = false;
  bool stopped_ = false;
  int exit_code_ = -1;
  std::string error_;
};

// path (relative to the workspace, e.g. "clients/cpp/example") in the
// test's runfiles.
std::string Runfile(const std::string& path);

struct CommandResult {
  int exit_code = -1;  // -1: did not exit normally (signal, exec failure)
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] with argv, waits for it, returns its exit code and output.
// Its environment is this process's, with the "NAME=value" entries of env
// added (replacing an inherited NAME).
CommandResult Run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});

}  // namespace client_test

#endif
