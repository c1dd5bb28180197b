// pg_server: a private PostgreSQL cluster for one test (initdb into a fresh
// directory under /tmp, started on a free loopback port), which the test may
// stop and start again to simulate a PostgreSQL restart. Slow (initdb takes
// a second or two): use it only in tests that must restart PostgreSQL;
// others use PgTestDb on the shared server `make test` starts.
//
// PostgreSQL refuses to run as root: when the test runs as root (CI),
// initdb and pg_ctl run as the `postgres` user through runuser, and the
// directory is created outside the Bazel sandbox (which that user could not
// reach). The server binaries come from MEMORYD_DEV_PG_BIN or the newest
// /usr/lib/postgresql/<version>/bin, as scripts/devstack.sh finds them.
#ifndef MEMORYD_TESTS_TESTING_PG_SERVER_H
#define MEMORYD_TESTS_TESTING_PG_SERVER_H

#include <string>
#include <vector>

class PgServer {
 public:
  PgServer();   // initdb + start; check ok() and error()
  ~PgServer();  // stops it (immediate) and removes the directory
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  // libpq connection string for the cluster's `postgres` database.
  std::string url() const;
  bool running() const { return running_; }

  bool Stop();   // pg_ctl stop -m fast; false with error() on failure
  bool Start();  // starts again on the same port; waits until it accepts connections
  // SIGSTOP / SIGCONT to the postmaster and every process it started: a
  // PostgreSQL that stops answering without closing a socket (a hung host).
  // Connections still open and connect; nothing is answered until Thaw.
  bool Freeze();
  bool Thaw();

 private:
  bool Run(const std::vector<std::string>& argv, const std::string& what);
  bool SignalAll(int sig, const std::string& what);
  std::string LogTail() const;
  std::string bin_, dir_, data_;
  int port_ = 0;
  bool ok_ = false, running_ = false, as_postgres_ = false, frozen_ = false;
  std::string error_;
};

#endif
