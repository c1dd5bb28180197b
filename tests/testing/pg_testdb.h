// pg_testdb: a throw-away PostgreSQL database per test, created from the
// server at MEMORYD_TEST_PG_URL (make test starts it) and dropped after.
#ifndef MEMORYD_TESTS_TESTING_PG_TESTDB_H
#define MEMORYD_TESTS_TESTING_PG_TESTDB_H

#include <string>

class PgTestDb {
 public:
  PgTestDb();   // creates the database; check ok() and error()
  ~PgTestDb();  // drops it (WITH FORCE)
  bool ok() const { return !url_.empty(); }
  const std::string& error() const { return error_; }
  // libpq connection string for the new database.
  const std::string& url() const { return url_; }
  const std::string& name() const { return name_; }

 private:
  std::string admin_url_, url_, name_, error_;
};

// The Redis URL for tests (MEMORYD_TEST_REDIS_URL) or "".
std::string TestRedisUrl();

#endif
