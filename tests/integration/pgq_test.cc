// pgq against a real PostgreSQL: statement timeouts cover reads sent
// without an explicit transaction, statements are prepared once per
// connection (and never confused when only their parameter types differ),
// and a dead pooled connection is replaced without losing its statements'
// correctness.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

extern "C" {
#include "service/core/clock.h"
#include "service/store/pg_pool.h"
#include "service/store/pgq.h"
}
#include "tests/testing/pg_server.h"
#include "tests/testing/pg_testdb.h"

namespace {

int64_t NowMs() { return clock_mono_ms(nullptr); }

class PgqTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    char err[256];
    ASSERT_EQ(0, pg_pool_create(db_.url().c_str(), 1, 5, &pool_, err, sizeof err)) << err;
  }
  void TearDown() override { pg_pool_free(pool_); }

  // Runs sql (one statement, its parameters added by bind) as a read:
  // pipeline, no explicit transaction.
  int Read(const std::string& sql, const std::function<void(pgq_sql*)>& bind, int64_t deadline_ms,
           std::string* first) {
    pgq_session ss;
    int rc = pgq_begin(&ss, pool_, "test", deadline_ms, 30000, err_, sizeof err_);
    if (rc != STATUS_OK) return rc;
    pgq_sql b = {};
    pgq_sql_add(&b, "%s", sql.c_str());
    if (bind) bind(&b);
    PGresult* r = nullptr;
    rc = pgq_pipeline(&ss, "test", nullptr, &b, 1, &r);
    if (rc == STATUS_OK && first && PQntuples(r) > 0)
      first->assign(PQgetvalue(r, 0, 0), PQgetlength(r, 0, 0));
    PQclear(r);
    pgq_end(&ss);
    return rc;
  }

  // How many prepared statements of this connection hold text.
  int PreparedCount(const std::string& text) {
    pgq_session ss;
    EXPECT_EQ(STATUS_OK, pgq_begin(&ss, pool_, "test", INT64_MAX, 30000, err_, sizeof err_));
    const char* vals[1] = {text.c_str()};
    PGresult* r =
        PQexecParams(ss.conn, "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", 1,
                     nullptr, vals, nullptr, nullptr, 0);
    int n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    pgq_end(&ss);
    return n;
  }

  PgTestDb db_;
  pg_pool* pool_ = nullptr;
  char err_[512] = "";
};

TEST_F(PgqTest, AReadWithoutATransactionIsCancelledAtTheDeadline) {
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(STATUS_ETIMEOUT, Read("SELECT pg_sleep(5)", nullptr, NowMs() + 200, nullptr)) << err_;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_NE(nullptr, strstr(err_, "deadline")) << err_;
  // The connection is usable afterwards and the timeout did not stick to
  // the session (SET LOCAL semantics): a 300 ms sleep without a deadline
  // completes.
  std::string got;
  EXPECT_EQ(STATUS_OK, Read("SELECT pg_sleep(0.3)::text", nullptr, INT64_MAX, &got)) << err_;
}

TEST_F(PgqTest, TheTimeoutCoversExplicitTransactionsToo) {
  pgq_session ss;
  ASSERT_EQ(STATUS_OK, pgq_begin(&ss, pool_, "test", NowMs() + 200, 30000, err_, sizeof err_));
  pgq_sql b = {};
  pgq_sql_add(&b, "SELECT pg_sleep(5)");
  PGresult* r = nullptr;
  EXPECT_EQ(STATUS_ETIMEOUT, pgq_pipeline(&ss, "test", "BEGIN", &b, 0, &r));
  PQclear(r);
  pgq_end(&ss);
}

TEST_F(PgqTest, AStatementIsPreparedOnceAndThenExecutedByName) {
  const std::string sql = "SELECT $1::text || '-pgq-test'";
  for (int i = 0; i < 3; i++) {
    std::string got;
    ASSERT_EQ(STATUS_OK, Read(
                             sql, [](pgq_sql* b) { pgq_text(b, "x"); }, INT64_MAX, &got))
        << err_;
    EXPECT_EQ("x-pgq-test", got);
  }
  EXPECT_EQ(1, PreparedCount(sql));
}

TEST_F(PgqTest, TheSameTextWithOtherParameterTypesIsAnotherStatement) {
  const std::string sql = "SELECT pg_typeof($1)::text";
  std::string got;
  auto as_text = [](pgq_sql* b) { pgq_text(b, "5"); };
  auto as_int8 = [](pgq_sql* b) { pgq_int8(b, 5); };
  ASSERT_EQ(STATUS_OK, Read(sql, as_text, INT64_MAX, &got)) << err_;
  EXPECT_EQ("text", got);
  ASSERT_EQ(STATUS_OK, Read(sql, as_int8, INT64_MAX, &got)) << err_;
  EXPECT_EQ("bigint", got);
  ASSERT_EQ(STATUS_OK, Read(sql, as_text, INT64_MAX, &got)) << err_;
  EXPECT_EQ("text", got);
}

TEST_F(PgqTest, AKilledConnectionIsReplacedAndItsStatementsPreparedAgain) {
  const std::string sql = "SELECT $1::text || '-again'";
  std::string got;
  ASSERT_EQ(STATUS_OK, Read(
                           sql, [](pgq_sql* b) { pgq_text(b, "a"); }, INT64_MAX, &got))
      << err_;
  // Kill the pooled connection's backend from another session.
  pgq_session ss;
  ASSERT_EQ(STATUS_OK, pgq_begin(&ss, pool_, "test", INT64_MAX, 30000, err_, sizeof err_));
  int pid = PQbackendPID(ss.conn);
  pgq_end(&ss);
  PGconn* admin = PQconnectdb(db_.url().c_str());
  ASSERT_EQ(CONNECTION_OK, PQstatus(admin));
  PQclear(PQexec(admin, ("SELECT pg_terminate_backend(" + std::to_string(pid) + ")").c_str()));
  PQfinish(admin);
  // pgq_run retries on a fresh connection, which prepares the statement anew.
  struct Arg {
    const std::string* sql;
    std::string got;
  } arg{&sql, ""};
  auto fn = [](pgq_session* s, void* a) -> int {
    Arg* x = static_cast<Arg*>(a);
    pgq_sql b = {};
    pgq_sql_add(&b, "%s", x->sql->c_str());
    pgq_text(&b, "b");
    PGresult* r = nullptr;
    int rc = pgq_pipeline(s, "test", nullptr, &b, 1, &r);
    if (rc == STATUS_OK) x->got.assign(PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
  };
  ASSERT_EQ(STATUS_OK,
            pgq_run(pool_, "test", INT64_MAX, 30000, nullptr, err_, sizeof err_, fn, &arg))
      << err_;
  EXPECT_EQ("b-again", arg.got);
  EXPECT_EQ(1, PreparedCount(sql));
}

// A cancel fired on another thread while pgq_run's statement waits (on a
// lock, with no deadline) ends it at once, STATUS_ECANCELLED, leaves no
// session waiting, and is not retried; the pool serves the next call.
TEST_F(PgqTest, ACancelCutsTheWaitingStatementAtOnce) {
  auto admin = std::make_unique<PgSession>(db_.url());
  ASSERT_TRUE(admin->ok()) << admin->error();
  admin->Value("CREATE TABLE IF NOT EXISTS locked_t (x int)");
  admin->Value("BEGIN");
  admin->Value("LOCK TABLE locked_t IN ACCESS EXCLUSIVE MODE");
  cancel_token cancel;
  cancel_init(&cancel);
  int calls = 0;
  auto fn = [](pgq_session* s, void* a) -> int {
    ++*static_cast<int*>(a);
    pgq_sql b = {};
    pgq_sql_add(&b, "SELECT count(*) FROM locked_t");
    PGresult* r = nullptr;
    int rc = pgq_pipeline(s, "count", nullptr, &b, 1, &r);
    PQclear(r);
    return rc;
  };
  int rc = 0;
  int64_t ended = 0;
  std::thread t([&] {
    rc = pgq_run(pool_, "test", INT64_MAX, 30000, &cancel, err_, sizeof err_, fn, &calls);
    ended = NowMs();
  });
  bool blocked = false;
  for (int i = 0; i < 500 && !blocked; i++) {
    blocked = admin->LockWaiters() == 1;
    if (!blocked) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(blocked);  // not ASSERT: the thread must be joined
  int64_t fired = NowMs();
  cancel_fire(&cancel);
  t.join();
  ASSERT_TRUE(blocked);
  EXPECT_EQ(STATUS_ECANCELLED, rc) << err_;
  EXPECT_LT(ended - fired, 500) << "the cancel took " << ended - fired << " ms";
  EXPECT_EQ(1, calls) << "a cancelled run was retried";
  bool gone = false;
  for (int i = 0; i < 100 && !gone; i++) {
    gone = admin->LockWaiters() == 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the cancelled statement still waits on the lock";
  admin->Value("ROLLBACK");
  admin.reset();
  std::string got;
  EXPECT_EQ(STATUS_OK, Read("SELECT 'next'", nullptr, INT64_MAX, &got)) << err_;
  EXPECT_EQ("next", got);
  // A token fired before the run: nothing is sent.
  calls = 0;
  EXPECT_EQ(STATUS_ECANCELLED,
            pgq_run(pool_, "test", INT64_MAX, 30000, &cancel, err_, sizeof err_, fn, &calls));
  EXPECT_EQ(0, calls);
}

}  // namespace

// A server that stops answering (SIGSTOP: connections stay open, nothing is
// answered, so statement_timeout never fires): the pool's watchdog ends the
// round trip shortly after the deadline, the session reports the deadline,
// and after SIGCONT the pool serves again on a fresh connection.
TEST(PgqFrozenTest, AFrozenServerCostsNoMoreThanTheDeadline) {
  PgServer pg;
  ASSERT_TRUE(pg.ok()) << pg.error();
  pg_pool* pool = nullptr;
  char err[512] = "";
  ASSERT_EQ(0, pg_pool_create(pg.url().c_str(), 2, 5, &pool, err, sizeof err)) << err;
  auto read = [&](int64_t deadline_ms) {
    pgq_session ss;
    int rc = pgq_begin(&ss, pool, "test", deadline_ms, 30000, err, sizeof err);
    if (rc != STATUS_OK) return rc;
    pgq_sql b = {};
    pgq_sql_add(&b, "SELECT 1");
    PGresult* r = nullptr;
    rc = pgq_pipeline(&ss, "frozen read", nullptr, &b, 1, &r);
    PQclear(r);
    pgq_end(&ss);
    return rc;
  };
  ASSERT_EQ(STATUS_OK, read(NowMs() + 2000)) << err;
  ASSERT_TRUE(pg.Freeze()) << pg.error();
  int64_t start = NowMs();
  EXPECT_EQ(STATUS_ETIMEOUT, read(start + 300)) << err;
  int64_t took = NowMs() - start;
  EXPECT_GE(took, 290);
  EXPECT_LT(took, 300 + 250) << "the round trip outlived its deadline";
  EXPECT_NE(nullptr, strstr(err, "did not answer")) << err;
  // A new connection is not waited for past the deadline either.
  start = NowMs();
  int rc = read(start + 300);
  EXPECT_TRUE(rc == STATUS_ETIMEOUT || rc == STATUS_EUNAVAILABLE) << rc << ": " << err;
  EXPECT_LT(NowMs() - start, 300 + 250) << err;
  ASSERT_TRUE(pg.Thaw()) << pg.error();
  int ok = -1;
  for (int i = 0; i < 100 && ok != STATUS_OK; i++) {
    ok = read(NowMs() + 2000);
    if (ok != STATUS_OK) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(STATUS_OK, ok) << err;
  pg_pool_free(pool);
}
