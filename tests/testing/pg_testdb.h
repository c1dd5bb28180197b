// pg_testdb: a throw-away PostgreSQL database per test, created from the
// server at MEMORYD_TEST_PG_URL (make test starts it) and dropped after.
#ifndef MEMORYD_TESTS_TESTING_PG_TESTDB_H
#define MEMORYD_TESTS_TESTING_PG_TESTDB_H

#include <string>

typedef struct pg_conn PGconn;  // libpq's, as libpq-fe.h declares it

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

// A test's own libpq session on a database (closed with the object), for
// locking tables and watching pg_stat_activity while memoryd works.
class PgSession {
 public:
  explicit PgSession(const std::string& url);
  ~PgSession();
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;
  bool ok() const;
  std::string error() const;
  PGconn* conn() { return conn_; }
  // Runs sql: the first value of its first row, or "" (no rows, a command).
  std::string Value(const std::string& sql);
  // Client sessions of this database, other than this one, waiting for a
  // lock. Client backends only (an autovacuum worker may wait for the same
  // table), and not told apart by query text: a statement prepared earlier
  // on its connection waits for the lock at Bind, before pg_stat_activity
  // shows its text. Fresh on every call, also inside a transaction. -1
  // when the query fails.
  int LockWaiters();

 private:
  PGconn* conn_;
};

// The Redis URL for tests (MEMORYD_TEST_REDIS_URL) or "".
std::string TestRedisUrl();

#endif
