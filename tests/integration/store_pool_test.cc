// pg_pool and redis_pool against the real PostgreSQL and Redis of
// `make test`: limits, deadlines, reconnection after a killed connection,
// and the fast "reconnecting" answer during backoff.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

#include "tests/testing/pg_testdb.h"
#include "tests/testing/ports.h"

extern "C" {
#include "service/store/pg_pool.h"
#include "service/store/redis_pool.h"
}

namespace {

int64_t NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

class PgPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    char err[256] = "";
    ASSERT_EQ(0, pg_pool_create(db_.url().c_str(), 2, 5, &pool_, err, sizeof err)) << err;
  }
  void TearDown() override { pg_pool_free(pool_); }
  PgTestDb db_;
  pg_pool* pool_ = nullptr;
};

TEST_F(PgPoolTest, PingAnswers) { EXPECT_EQ(0, pg_pool_ping(pool_, NowMs() + 2000)); }

TEST_F(PgPoolTest, FullPoolTimesOutAtTheDeadlineThenRecovers) {
  char err[256] = "";
  PGconn* a = pg_pool_acquire(pool_, NowMs() + 2000, err, sizeof err);
  PGconn* b = pg_pool_acquire(pool_, NowMs() + 2000, err, sizeof err);
  ASSERT_NE(nullptr, a) << err;
  ASSERT_NE(nullptr, b) << err;
  EXPECT_NE(a, b);
  int64_t start = NowMs();
  EXPECT_EQ(nullptr, pg_pool_acquire(pool_, start + 150, err, sizeof err));
  int64_t took = NowMs() - start;
  EXPECT_GE(took, 140);
  EXPECT_LT(took, 1500);
  EXPECT_NE(nullptr, strstr(err, "no postgres connection free before the deadline")) << err;
  pg_pool_release(pool_, a, 0);
  PGconn* again = pg_pool_acquire(pool_, NowMs() + 500, err, sizeof err);
  EXPECT_EQ(a, again);
  pg_pool_release(pool_, again, 0);
  pg_pool_release(pool_, b, 0);
}

TEST_F(PgPoolTest, KilledConnectionIsReplaced) {
  char err[256] = "";
  PGconn* c = pg_pool_acquire(pool_, NowMs() + 2000, err, sizeof err);
  ASSERT_NE(nullptr, c) << err;
  int pid = PQbackendPID(c);
  pg_pool_release(pool_, c, 0);
  // Another session kills that backend, as a Postgres restart would.
  PGconn* admin = PQconnectdb(db_.url().c_str());
  ASSERT_EQ(CONNECTION_OK, PQstatus(admin));
  std::string sql = "SELECT pg_terminate_backend(" + std::to_string(pid) + ")";
  PQclear(PQexec(admin, sql.c_str()));
  PQfinish(admin);
  // The first use notices and drops the dead connection...
  EXPECT_EQ(-1, pg_pool_ping(pool_, NowMs() + 2000));
  // ...and the next gets a fresh one.
  EXPECT_EQ(0, pg_pool_ping(pool_, NowMs() + 2000));
}

TEST_F(PgPoolTest, ConnectionLeftInATransactionIsNotReused) {
  char err[256] = "";
  PGconn* c = pg_pool_acquire(pool_, NowMs() + 2000, err, sizeof err);
  ASSERT_NE(nullptr, c);
  int pid = PQbackendPID(c);
  PQclear(PQexec(c, "BEGIN"));
  pg_pool_release(pool_, c, 0);  // the pool must not hand out an open transaction
  PGconn* d = pg_pool_acquire(pool_, NowMs() + 2000, err, sizeof err);
  ASSERT_NE(nullptr, d) << err;
  EXPECT_EQ(PQTRANS_IDLE, PQtransactionStatus(d));
  EXPECT_NE(pid, PQbackendPID(d));
  pg_pool_release(pool_, d, 0);
}

TEST(PgPoolStartTest, UnreachablePostgresFailsCreateWithReason) {
  std::string url = "postgresql://memoryd@127.0.0.1:" + std::to_string(ClosedPort()) + "/x";
  pg_pool* p = nullptr;
  char err[256] = "";
  EXPECT_EQ(-1, pg_pool_create(url.c_str(), 2, 2, &p, err, sizeof err));
  EXPECT_EQ(nullptr, p);
  EXPECT_NE(nullptr, strstr(err, "PostgreSQL unavailable")) << err;
}

TEST(RedisPoolTest, PingAnswersOnTheTestRedis) {
  std::string url = TestRedisUrl();
  ASSERT_FALSE(url.empty()) << "MEMORYD_TEST_REDIS_URL is not set: run the tests with `make test`";
  redis_pool* p = nullptr;
  char err[256] = "";
  ASSERT_EQ(0, redis_pool_create(url.c_str(), 2, 1000, &p, err, sizeof err)) << err;
  EXPECT_EQ(0, redis_pool_ping(p, NowMs() + 1000));
  redis_pool_free(p);
}

TEST(RedisPoolTest, UnreachableRedisBacksOffWithAFastAnswer) {
  std::string url = "redis://127.0.0.1:" + std::to_string(ClosedPort());
  redis_pool* p = nullptr;
  char err[256] = "";
  ASSERT_EQ(1, redis_pool_create(url.c_str(), 2, 1000, &p, err, sizeof err));
  EXPECT_NE(nullptr, strstr(err, "Redis unavailable")) << err;
  int64_t start = NowMs();
  EXPECT_EQ(nullptr, redis_pool_acquire(p, start + 1000, err, sizeof err));
  EXPECT_LT(NowMs() - start, 50);  // in backoff: no new connect attempt
  EXPECT_NE(nullptr, strstr(err, "reconnecting")) << err;
  redis_pool_free(p);
}

TEST(RedisPoolTest, MalformedUrlIsRefused) {
  redis_pool* p = nullptr;
  char err[256] = "";
  EXPECT_EQ(-1, redis_pool_create("http://nope", 2, 1000, &p, err, sizeof err));
  EXPECT_EQ(nullptr, p);
  EXPECT_NE(nullptr, strstr(err, "redis://")) << err;
}

}  // namespace
