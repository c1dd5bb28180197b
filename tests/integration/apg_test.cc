// evloop and apg (the asynchronous PostgreSQL client) against the real
// PostgreSQL of `make test`, and against a private PostgreSQL the test
// freezes (SIGSTOP) or stops: answers, the wait queue and its bound,
// deadlines and cancellation that end the statement on the server too,
// a lost connection, an unreachable and a frozen server.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/backend_loop.h"
#include "tests/testing/pg_server.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/ports.h"

extern "C" {
#include "service/core/arena.h"
#include "service/core/clock.h"
#include "service/core/status.h"
#include "service/store/pgq.h"
}

namespace {

int64_t NowMs() { return clock_mono_ms(nullptr); }

// One query and the wait for its answer (done runs on the loop thread).
struct Call {
  apg_query q{};
  pgq_sql sql{};
  std::mutex mu;
  std::condition_variable cv;
  bool answered = false;
  int status = 1;
  PGresult* res = nullptr;
  std::string err;
  int64_t answered_ms = 0;
  bool on_loop = false;
  evloop* loop = nullptr;

  explicit Call(const std::string& text, int64_t deadline_ms = INT64_MAX) {
    pgq_sql_add(&sql, "%s", text.c_str());
    q.sql = &sql;
    q.what = "test query";
    q.deadline_ms = deadline_ms;
    q.arg = this;
    q.done = [](apg_query* q, int status, PGresult* res) {
      Call* c = static_cast<Call*>(q->arg);
      std::lock_guard<std::mutex> g(c->mu);
      c->on_loop = c->loop && evloop_on_loop(c->loop);
      c->status = status;
      c->res = res;
      c->err = q->err;
      c->answered_ms = NowMs();
      c->answered = true;
      c->cv.notify_all();
    };
  }
  ~Call() { PQclear(res); }
  // Ready for q's next statement (a held transaction's): text replaces sql.
  void Next(const std::string& text) {
    std::lock_guard<std::mutex> g(mu);
    PQclear(res);
    res = nullptr;
    answered = false;
    sql = pgq_sql{};
    pgq_sql_add(&sql, "%s", text.c_str());
  }
  bool Wait(int ms = 10000) {
    std::unique_lock<std::mutex> g(mu);
    return cv.wait_for(g, std::chrono::milliseconds(ms), [&] { return answered; });
  }
};

class ApgTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(db_.ok()) << db_.error(); }
  void TearDown() override { StopBackendLoop(&loop_, &pool_); }
  void Open(const std::string& url, int size, int max_queue) {
    BackendLoopOptions o;
    o.size = size;
    o.max_queue = max_queue;
    o.connect_timeout_ms = 2000;
    o.default_timeout_ms = 5000;
    std::string err;
    ASSERT_TRUE(StartBackendLoop(url, o, &loop_, &pool_, &err)) << err;
  }
  void Submit(Call* c) {
    c->loop = loop_;
    apg_submit(pool_, &c->q);
  }
  // The number of sessions of this database running text (not ours).
  int Running(const std::string& text) {
    PGconn* admin = PQconnectdb(db_.url().c_str());
    EXPECT_EQ(CONNECTION_OK, PQstatus(admin)) << PQerrorMessage(admin);
    const char* vals[] = {text.c_str()};
    PGresult* r = PQexecParams(admin,
                               "SELECT count(*) FROM pg_stat_activity WHERE query = $1"
                               " AND pid <> pg_backend_pid()",
                               1, nullptr, vals, nullptr, nullptr, 0);
    int n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    PQfinish(admin);
    return n;
  }
  // Waits up to ms for n sessions to be running text.
  bool RunningWithin(const std::string& text, int n, int ms) {
    int64_t until = NowMs() + ms;
    do {
      if (Running(text) == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } while (NowMs() < until);
    return false;
  }
  // Sessions of this database left inside a transaction (not ours).
  int InTransaction() {
    PGconn* admin = PQconnectdb(db_.url().c_str());
    PGresult* r = PQexec(admin,
                         "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                         " AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()");
    int n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    PQfinish(admin);
    return n;
  }
  bool NoTransactionWithin(int ms) {
    int64_t until = NowMs() + ms;
    do {
      if (InTransaction() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } while (NowMs() < until);
    return false;
  }
  bool StartsWithin(const std::string& text, int ms) { return RunningWithin(text, 1, ms); }
  bool GoneWithin(const std::string& text, int ms) { return RunningWithin(text, 0, ms); }
  PgTestDb db_;
  evloop* loop_ = nullptr;
  apg* pool_ = nullptr;
};

struct Counter {
  std::atomic<int> ran{0};
  std::atomic<bool> on_loop{true};
  evloop* loop = nullptr;
  std::vector<int> order;
  std::mutex mu;
};

struct CountTask {
  evloop_task t;
  Counter* c;
  int n;
};

TEST(EvloopTest, PostedTasksRunOnTheLoopThreadInOrder) {
  char err[256] = "";
  evloop* loop = nullptr;
  ASSERT_EQ(0, evloop_create("order", &loop, err, sizeof err)) << err;
  Counter c;
  c.loop = loop;
  std::vector<CountTask> tasks(1000);
  for (int i = 0; i < 1000; i++) {
    tasks[i].c = &c;
    tasks[i].n = i;
    tasks[i].t.fn = [](evloop_task* t) {
      CountTask* ct = reinterpret_cast<CountTask*>(t);
      if (!evloop_on_loop(ct->c->loop)) ct->c->on_loop = false;
      std::lock_guard<std::mutex> g(ct->c->mu);
      ct->c->order.push_back(ct->n);
      ct->c->ran++;
    };
  }
  EXPECT_FALSE(evloop_on_loop(loop));
  for (auto& t : tasks) evloop_post(loop, &t.t);
  evloop_free(loop);  // runs what was posted before it returns
  EXPECT_EQ(1000, c.ran.load());
  EXPECT_TRUE(c.on_loop.load());
  for (int i = 0; i < 1000; i++) ASSERT_EQ(i, c.order[i]);
}

TEST_F(ApgTest, AnswersWithBinaryResultsOnTheLoopThread) {
  Open(db_.url(), 2, 16);
  Call c("");
  c.sql = pgq_sql{};
  pgq_sql_add(&c.sql, "SELECT $%d::text, $%d::int8", pgq_text(&c.sql, "ada"),
              pgq_int8(&c.sql, 1815));
  Submit(&c);
  ASSERT_TRUE(c.Wait());
  ASSERT_EQ(STATUS_OK, c.status) << c.err;
  EXPECT_TRUE(c.on_loop);
  ASSERT_EQ(1, PQntuples(c.res));
  arena* a = arena_create();
  EXPECT_STREQ("ada", pgq_col_str(a, c.res, 0, 0));
  int64_t v = 0;
  EXPECT_EQ(0, pgq_col_int(c.res, 0, 1, &v));
  EXPECT_EQ(1815, v);
  arena_free(a);
}

TEST_F(ApgTest, ManyConcurrentQueriesShareFewConnections) {
  Open(db_.url(), 2, 1000);
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < 300; i++) {
    calls.emplace_back(new Call(""));
    Call* c = calls.back().get();
    // The same statement each time: prepared once per connection.
    pgq_sql_add(&c->sql, "SELECT $%d::int8 * 2", pgq_int8(&c->sql, i));
  }
  for (auto& c : calls) Submit(c.get());
  for (int i = 0; i < 300; i++) {
    Call* c = calls[i].get();
    ASSERT_TRUE(c->Wait()) << i;
    ASSERT_EQ(STATUS_OK, c->status) << i << ": " << c->err;
    int64_t v = -1;
    ASSERT_EQ(0, pgq_col_int(c->res, 0, 0, &v));
    EXPECT_EQ(2 * i, v);
  }
  // The backlog asked for the pool's second connection; under load the
  // first may have answered everything before the second finished
  // connecting, so it may come up just after (never a third).
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (apg_connected(pool_) < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(2, apg_connected(pool_));
}

TEST_F(ApgTest, RefusedStatementSaysWhyAndTheConnectionGoesOn) {
  Open(db_.url(), 1, 16);
  Call bad("SELECT * FROM no_such_table");
  Submit(&bad);
  ASSERT_TRUE(bad.Wait());
  EXPECT_EQ(STATUS_EUNAVAILABLE, bad.status);
  EXPECT_NE(std::string::npos, bad.err.find("no_such_table")) << bad.err;
  EXPECT_STREQ("42P01", bad.q.sqlstate);
  Call good("SELECT 1");
  Submit(&good);
  ASSERT_TRUE(good.Wait());
  EXPECT_EQ(STATUS_OK, good.status) << good.err;
}

// A query that holds its connection runs its next statement in the same
// transaction (the tier kit's multi-statement reads and writes), while the
// other connection serves everyone else; the last statement commits.
TEST_F(ApgTest, HeldConnectionCarriesATransactionAcrossStatements) {
  Open(db_.url(), 2, 16);
  Call c("SELECT txid_current()::text, pg_backend_pid()::text", NowMs() + 10000);
  c.q.before = "BEGIN ISOLATION LEVEL REPEATABLE READ";
  c.q.hold = 1;
  Submit(&c);
  ASSERT_TRUE(c.Wait());
  ASSERT_EQ(STATUS_OK, c.status) << c.err;
  std::string txid = PQgetvalue(c.res, 0, 0), pid = PQgetvalue(c.res, 0, 1);
  EXPECT_EQ(1, InTransaction());
  // Others are served meanwhile: the held connection is not theirs.
  for (int i = 0; i < 5; i++) {
    Call other("SELECT pg_backend_pid()::text");
    Submit(&other);
    ASSERT_TRUE(other.Wait());
    ASSERT_EQ(STATUS_OK, other.status) << other.err;
    EXPECT_NE(pid, PQgetvalue(other.res, 0, 0));
  }
  c.Next("SELECT txid_current()::text, pg_backend_pid()::text");
  c.q.hold = 0;
  c.q.before = nullptr;
  c.q.after = "COMMIT";
  Submit(&c);
  ASSERT_TRUE(c.Wait());
  ASSERT_EQ(STATUS_OK, c.status) << c.err;
  EXPECT_EQ(txid, PQgetvalue(c.res, 0, 0)) << "the second statement ran in another transaction";
  EXPECT_EQ(pid, PQgetvalue(c.res, 0, 1));
  EXPECT_EQ(0, InTransaction()) << "COMMIT did not end the transaction";
}

// Between its statements a held transaction still ends by cancel or
// deadline: the resubmit is answered and the connection, with its open
// transaction, closed. A statement that fails never holds and leaves no
// transaction open. The pool serves on afterwards.
TEST_F(ApgTest, HeldTransactionEndsOnCancelDeadlineOrFailure) {
  Open(db_.url(), 1, 16);
  Call c("SELECT 1", NowMs() + 10000);
  c.q.before = "BEGIN";
  c.q.hold = 1;
  Submit(&c);
  ASSERT_TRUE(c.Wait());
  ASSERT_EQ(STATUS_OK, c.status) << c.err;
  apg_cancel(pool_, &c.q);
  c.Next("SELECT 2");
  c.q.hold = 0;
  Submit(&c);
  ASSERT_TRUE(c.Wait());
  EXPECT_EQ(STATUS_ECANCELLED, c.status) << c.err;
  EXPECT_TRUE(NoTransactionWithin(3000)) << "the cancelled transaction stayed open";

  Call d("SELECT 1", NowMs() + 300);
  d.q.before = "BEGIN";
  d.q.hold = 1;
  Submit(&d);
  ASSERT_TRUE(d.Wait());
  ASSERT_EQ(STATUS_OK, d.status) << d.err;
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  d.Next("SELECT 2");
  d.q.hold = 0;
  Submit(&d);
  ASSERT_TRUE(d.Wait());
  EXPECT_EQ(STATUS_ETIMEOUT, d.status) << d.err;
  EXPECT_TRUE(NoTransactionWithin(3000)) << "the expired transaction stayed open";

  // A next statement longer than its buffer ends the transaction too.
  Call o("SELECT 1", NowMs() + 10000);
  o.q.before = "BEGIN";
  o.q.hold = 1;
  Submit(&o);
  ASSERT_TRUE(o.Wait());
  ASSERT_EQ(STATUS_OK, o.status) << o.err;
  o.Next("SELECT 1 /* " + std::string(9000, 'x') + " */");
  ASSERT_TRUE(o.sql.overflow);
  o.q.hold = 0;
  Submit(&o);
  ASSERT_TRUE(o.Wait());
  EXPECT_EQ(STATUS_EINTERNAL, o.status) << o.err;
  EXPECT_TRUE(NoTransactionWithin(3000)) << "the transaction outlived its refused statement";

  Call f("SELECT * FROM no_such_table", NowMs() + 10000);
  f.q.before = "BEGIN";
  f.q.hold = 1;
  Submit(&f);
  ASSERT_TRUE(f.Wait());
  EXPECT_EQ(STATUS_EUNAVAILABLE, f.status);
  EXPECT_EQ(nullptr, f.q.held);
  EXPECT_TRUE(NoTransactionWithin(3000)) << "the failed transaction stayed open";

  Call again("SELECT 1");
  Submit(&again);
  ASSERT_TRUE(again.Wait());
  EXPECT_EQ(STATUS_OK, again.status) << again.err;
}

TEST_F(ApgTest, DeadlineEndsTheCallAndTheStatementOnTheServer) {
  Open(db_.url(), 1, 16);
  const std::string text = "SELECT pg_sleep(30) /* apg deadline */";
  int64_t start = NowMs();
  Call c(text, start + 300);
  Submit(&c);
  ASSERT_TRUE(c.Wait());
  EXPECT_EQ(STATUS_ETIMEOUT, c.status) << c.err;
  EXPECT_GE(c.answered_ms - start, 290);
  EXPECT_LT(c.answered_ms - start, 300 + 250) << "answered well after the deadline";
  EXPECT_NE(std::string::npos, c.err.find("deadline")) << c.err;
  // The server stops the statement once it sees the connection gone.
  EXPECT_TRUE(GoneWithin(text, 3000)) << "the statement still runs on the server";
  // And the pool serves again on a fresh connection.
  Call again("SELECT 1");
  Submit(&again);
  ASSERT_TRUE(again.Wait());
  EXPECT_EQ(STATUS_OK, again.status) << again.err;
}

TEST_F(ApgTest, CancelEndsARunningStatementOnTheServer) {
  Open(db_.url(), 1, 16);
  const std::string text = "SELECT pg_sleep(30) /* apg cancel */";
  Call c(text, NowMs() + 20000);
  Submit(&c);
  ASSERT_TRUE(StartsWithin(text, 5000)) << "the statement never started";
  int64_t cancel_at = NowMs();
  apg_cancel(pool_, &c.q);
  ASSERT_TRUE(c.Wait());
  EXPECT_EQ(STATUS_ECANCELLED, c.status) << c.err;
  EXPECT_LT(c.answered_ms - cancel_at, 250);
  EXPECT_TRUE(GoneWithin(text, 3000)) << "the statement still runs on the server";
}

TEST_F(ApgTest, WaitingCallEndsAtItsDeadlineAndTheQueueIsBounded) {
  Open(db_.url(), 1, 1);
  const std::string text = "SELECT pg_sleep(30) /* apg busy */";
  Call busy(text, NowMs() + 20000);
  Submit(&busy);
  ASSERT_TRUE(StartsWithin(text, 5000)) << "the statement never started";
  int64_t start = NowMs();
  Call waiting("SELECT 1", start + 300);
  Submit(&waiting);
  // One waits already: the next is refused at once, naming the limits.
  Call refused("SELECT 2", NowMs() + 20000);
  Submit(&refused);
  ASSERT_TRUE(refused.Wait());
  EXPECT_EQ(STATUS_EBUSY, refused.status) << refused.err;
  EXPECT_NE(std::string::npos, refused.err.find("--pg-queue-max")) << refused.err;
  EXPECT_LT(refused.answered_ms - start, 250);
  ASSERT_TRUE(waiting.Wait());
  EXPECT_EQ(STATUS_ETIMEOUT, waiting.status) << waiting.err;
  EXPECT_NE(std::string::npos, waiting.err.find("waiting for a PostgreSQL connection"))
      << waiting.err;
  EXPECT_GE(waiting.answered_ms - start, 290);
  EXPECT_LT(waiting.answered_ms - start, 300 + 250);
  apg_cancel(pool_, &busy.q);
  ASSERT_TRUE(busy.Wait());
  EXPECT_EQ(STATUS_ECANCELLED, busy.status);
}

// The health probe's ping goes ahead of the queue and past its bound: a
// pool busy with calls reads as up, not down.
TEST_F(ApgTest, PingGoesFirstSoABusyPoolReadsAsUp) {
  Open(db_.url(), 1, 1);
  const std::string text = "SELECT pg_sleep(0.3) /* apg ping */";
  Call busy(text, NowMs() + 5000);
  Submit(&busy);
  ASSERT_TRUE(StartsWithin(text, 5000)) << "the statement never started";
  Call waiting("SELECT 1", NowMs() + 5000);
  Submit(&waiting);  // the queue (1) is full now
  EXPECT_EQ(STATUS_OK, apg_ping(pool_, NowMs() + 3000));
  int64_t pinged_at = NowMs();
  ASSERT_TRUE(waiting.Wait());
  EXPECT_EQ(STATUS_OK, waiting.status) << waiting.err;
  EXPECT_GE(waiting.answered_ms, pinged_at - 5) << "the ping waited behind the queue";
  ASSERT_TRUE(busy.Wait());
}

TEST_F(ApgTest, KilledConnectionIsReplaced) {
  Open(db_.url(), 1, 16);
  Call pid("SELECT pg_backend_pid()");
  Submit(&pid);
  ASSERT_TRUE(pid.Wait());
  ASSERT_EQ(STATUS_OK, pid.status) << pid.err;
  int64_t backend = 0;
  ASSERT_EQ(0, pgq_col_int(pid.res, 0, 0, &backend));
  PGconn* admin = PQconnectdb(db_.url().c_str());
  ASSERT_EQ(CONNECTION_OK, PQstatus(admin));
  PQclear(PQexec(admin, ("SELECT pg_terminate_backend(" + std::to_string(backend) + ")").c_str()));
  PQfinish(admin);
  // The pool notices the closed socket while idle, or at the latest on
  // the next statement (UNAVAILABLE once); then a fresh connection serves.
  int ok_at = -1;
  for (int i = 0; i < 20 && ok_at < 0; i++) {
    Call c("SELECT 1");
    Submit(&c);
    ASSERT_TRUE(c.Wait());
    if (c.status == STATUS_OK)
      ok_at = i;
    else
      EXPECT_EQ(STATUS_EUNAVAILABLE, c.status) << c.err;
    if (ok_at < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(ok_at, 0) << "no fresh connection after the backend was killed";
  EXPECT_LE(ok_at, 1);
}

TEST_F(ApgTest, UnreachableServerFailsFast) {
  int port = FreePort();
  Open("postgresql://memoryd@127.0.0.1:" + std::to_string(port) + "/none", 2, 16);
  // The first connect attempts fail at once (connection refused).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int64_t start = NowMs();
  Call c("SELECT 1", start + 5000);
  Submit(&c);
  ASSERT_TRUE(c.Wait());
  EXPECT_EQ(STATUS_EUNAVAILABLE, c.status) << c.err;
  EXPECT_LT(c.answered_ms - start, 500) << "waited instead of failing fast";
  EXPECT_NE(std::string::npos, c.err.find("unreachable")) << c.err;
}

// A private server, so freezing it disturbs no other test.
class ApgFrozenTest : public ::testing::Test {
 protected:
  void TearDown() override { StopBackendLoop(&loop_, &pool_); }
  PgServer pg_;
  evloop* loop_ = nullptr;
  apg* pool_ = nullptr;
};

TEST_F(ApgFrozenTest, FrozenServerEndsCallsByTheirDeadlineAndRecoversAfterThaw) {
  ASSERT_TRUE(pg_.ok()) << pg_.error();
  BackendLoopOptions o;
  o.size = 2;
  o.max_queue = 16;
  o.connect_timeout_ms = 500;  // attempts on the frozen server give up soon
  o.default_timeout_ms = 5000;
  std::string err;
  ASSERT_TRUE(StartBackendLoop(pg_.url(), o, &loop_, &pool_, &err)) << err;
  {
    Call warm("SELECT 1");
    warm.loop = loop_;
    apg_submit(pool_, &warm.q);
    ASSERT_TRUE(warm.Wait());
    ASSERT_EQ(STATUS_OK, warm.status) << warm.err;
  }
  ASSERT_TRUE(pg_.Freeze()) << pg_.error();
  // Running, waiting: every call ends by its deadline (+ a wide margin for
  // a loaded CI machine), none hangs.
  std::vector<std::unique_ptr<Call>> calls;
  int64_t start = NowMs();
  for (int i = 0; i < 6; i++) {
    calls.emplace_back(new Call("SELECT 1", start + 200 + 50 * i));
    calls.back()->loop = loop_;
    apg_submit(pool_, &calls.back()->q);
  }
  for (int i = 0; i < 6; i++) {
    Call* c = calls[i].get();
    ASSERT_TRUE(c->Wait());
    EXPECT_EQ(STATUS_ETIMEOUT, c->status) << i << ": " << c->err;
    int64_t deadline = 200 + 50 * i;
    EXPECT_GE(c->answered_ms - start, deadline - 10) << i;
    EXPECT_LT(c->answered_ms - start, deadline + 250) << i << ": well past its deadline";
  }
  ASSERT_TRUE(pg_.Thaw()) << pg_.error();
  // Reconnection (the frozen attempts time out after 500 ms) and then
  // answers again, without a restart.
  int64_t until = NowMs() + 10000;
  int status = -1;
  while (status != STATUS_OK && NowMs() < until) {
    Call c("SELECT 1", NowMs() + 2000);
    c.loop = loop_;
    apg_submit(pool_, &c.q);
    ASSERT_TRUE(c.Wait());
    status = c.status;
    if (status != STATUS_OK) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(STATUS_OK, status) << "no answer within 10 s of the thaw";
}

TEST_F(ApgTest, FreeAnswersWhatIsStillRunning) {
  Open(db_.url(), 1, 16);
  Call running("SELECT pg_sleep(30) /* apg free */", NowMs() + 20000);
  Call waiting("SELECT 1", NowMs() + 20000);
  Submit(&running);
  Submit(&waiting);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  apg_free(pool_);
  pool_ = nullptr;
  ASSERT_TRUE(running.Wait(100));
  ASSERT_TRUE(waiting.Wait(100));
  EXPECT_EQ(STATUS_EUNAVAILABLE, running.status);
  EXPECT_EQ(STATUS_EUNAVAILABLE, waiting.status);
  EXPECT_NE(std::string::npos, running.err.find("shutting down")) << running.err;
}

}  // namespace
