// The audit trail's retention (audit/audit_keeper.h) through the binary:
// the trail lives in day partitions; a sweep drops whole the days past
// --audit-retention and, with --audit-max-mib, the oldest past days until
// the trail fits, never today's; rows that fell into the default partition
// are pruned by age; the days ahead are made at start-up.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"

namespace {

class AuditRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    // A first start makes the schema (and today's partitions).
    Start({"--retention-sweep-ms=0"});
    pg_ = std::make_unique<PgSession>(db_.url());
    ASSERT_TRUE(pg_->ok()) << pg_->error();
  }
  void TearDown() override {
    if (m_) {
      EXPECT_EQ(0, m_->Stop(SIGTERM, 10000)) << m_->Log();
    }
  }

  void Start(std::vector<std::string> flags) {
    if (m_) {
      ASSERT_EQ(0, m_->Stop(SIGTERM, 10000)) << m_->Log();
    }
    flags.insert(flags.begin(), {"--pg-url=" + db_.url(), "--shutdown-grace=1"});
    m_ = std::make_unique<MemorydProcess>(flags);
    ASSERT_TRUE(m_->Start()) << m_->Log();
  }

  // n audit rows of tenant `tag`, `days_ago` days before now, each with a
  // request id of `pad` bytes (to give a day its size).
  void Rows(const std::string& tag, int days_ago, int n, int pad = 0) {
    pg_->Value(
        "INSERT INTO audit_log (time, tenant, principal, method, status_code, duration_us,"
        " request_id) SELECT now() - interval '" +
        std::to_string(days_ago) + " days', '" + tag + "', 'p', '/m', 0, 1, repeat('x', " +
        std::to_string(pad) + ") || g FROM generate_series(1, " + std::to_string(n) + ") g");
  }
  int Count(const std::string& tag) {
    return std::stoi(pg_->Value("SELECT count(*) FROM audit_log WHERE tenant = '" + tag + "'"));
  }
  // Waits (up to 20 s) for the sweeper's round to be logged n times.
  bool Kept(int n) {
    for (int i = 0; i < 200; i++) {
      std::string log = m_->Log();
      size_t at = 0;
      int seen = 0;
      while ((at = log.find("\"audit trail kept\"", at)) != std::string::npos) seen++, at++;
      if (seen >= n) return true;
      usleep(100 * 1000);
    }
    return false;
  }

  PgTestDb db_;
  std::unique_ptr<MemorydProcess> m_;
  std::unique_ptr<PgSession> pg_;
};

TEST_F(AuditRetentionTest, TheDaysAheadAreMadeAtStartUp) {
  // Today and the next seven days, each its own partition.
  EXPECT_EQ(
      "8",
      pg_->Value(
          "SELECT count(*) FROM pg_class WHERE relname LIKE 'audit_log_upto_%' AND relkind = 'r'"));
  EXPECT_EQ("t", pg_->Value("SELECT to_regclass('audit_log_upto_' || to_char((now() AT TIME "
                            "ZONE 'UTC')::date + 1, 'YYYYMMDD')) IS NOT NULL"));
  // A row of today lands in today's partition, not the default one.
  Rows("today", 0, 1);
  EXPECT_EQ("0", pg_->Value("SELECT count(*) FROM audit_log_default"));
}

TEST_F(AuditRetentionTest, DaysPastTheRetentionAreDroppedWholeAndTheDefaultPruned) {
  pg_->Value("SELECT memoryd_audit_partitions((now() AT TIME ZONE 'UTC')::date - 10, 10)");
  Rows("old", 9, 50);
  Rows("edge", 6, 5);
  Rows("recent", 2, 50);
  Rows("now", 0, 5);
  // A day with no partition of its own: its rows are in the default partition.
  Rows("stray", 40, 3);
  ASSERT_EQ("3", pg_->Value("SELECT count(*) FROM audit_log_default"));
  std::string old_day =
      pg_->Value("SELECT to_char((now() AT TIME ZONE 'UTC')::date - 8, 'YYYYMMDD')");

  Start({"--audit-retention=5d", "--retention=off", "--retention-pii=off",
         "--retention-sweep-ms=200"});
  ASSERT_TRUE(Kept(1)) << m_->Log();
  EXPECT_EQ(0, Count("old"));
  EXPECT_EQ(0, Count("edge"));  // its whole day ended more than 5 days ago
  EXPECT_EQ(50, Count("recent"));
  EXPECT_EQ(5, Count("now"));
  EXPECT_EQ(0, Count("stray"));
  EXPECT_EQ("f", pg_->Value("SELECT to_regclass('audit_log_upto_" + old_day + "') IS NOT NULL"));
  EXPECT_NE(std::string::npos, m_->Log().find("a day's partition dropped")) << m_->Log();
}

TEST_F(AuditRetentionTest, TheSizeGuardDropsTheOldestPastDaysButNeverToday) {
  pg_->Value("SELECT memoryd_audit_partitions((now() AT TIME ZONE 'UTC')::date - 4, 4)");
  Rows("big", 3, 6000, 1000);  // about 7 MiB with its indexes
  Rows("small", 1, 100);
  Rows("today", 0, 6000, 1000);  // today's is never dropped, whatever its size
  Start({"--audit-retention=off", "--audit-max-mib=12", "--retention=off", "--retention-pii=off",
         "--retention-sweep-ms=200"});
  ASSERT_TRUE(Kept(1)) << m_->Log();
  EXPECT_EQ(0, Count("big"));
  EXPECT_EQ(100, Count("small"));
  EXPECT_EQ(6000, Count("today"));
  EXPECT_NE(std::string::npos, m_->Log().find("size guard (--audit-max-mib)")) << m_->Log();
}

}  // namespace
