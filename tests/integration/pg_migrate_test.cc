// Schema migrations against a real PostgreSQL: applied once, idempotent,
// recorded, rolled back on failure.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "tests/testing/pg_testdb.h"

extern "C" {
#include "service/store/pg_migrate.h"
}

namespace {

class MigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    conn_ = PQconnectdb(db_.url().c_str());
    ASSERT_EQ(CONNECTION_OK, PQstatus(conn_)) << PQerrorMessage(conn_);
  }
  void TearDown() override { PQfinish(conn_); }
  int Count(const char* sql) {
    PGresult* r = PQexec(conn_, sql);
    int n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return n;
  }
  PgTestDb db_;
  PGconn* conn_ = nullptr;
};

TEST_F(MigrateTest, AppliesEveryMigrationOnAnEmptyDatabase) {
  int applied = -1;
  char err[512] = "";
  ASSERT_EQ(
      0, pg_migrate(conn_, memoryd_migrations, memoryd_migrations_count, &applied, err, sizeof err))
      << err;
  EXPECT_EQ(static_cast<int>(memoryd_migrations_count), applied);
  EXPECT_EQ(memoryd_migrations[memoryd_migrations_count - 1].version,
            pg_migrate_current_version(conn_));
  EXPECT_EQ(1, Count("SELECT count(*) FROM information_schema.tables "
                     "WHERE table_name = 'server_instances'"));
}

TEST_F(MigrateTest, SecondRunAppliesNothingAndSucceeds) {
  int applied = -1;
  char err[512] = "";
  ASSERT_EQ(
      0, pg_migrate(conn_, memoryd_migrations, memoryd_migrations_count, &applied, err, sizeof err))
      << err;
  ASSERT_EQ(
      0, pg_migrate(conn_, memoryd_migrations, memoryd_migrations_count, &applied, err, sizeof err))
      << err;
  EXPECT_EQ(0, applied);
  EXPECT_EQ(static_cast<int>(memoryd_migrations_count),
            Count("SELECT count(*) FROM schema_migrations"));
}

// Partitioning the audit trail (migration 16) keeps the rows written
// before it, as the first partition (to the midnight after the newest),
// keeps ids growing from where they were, and new rows land in their day.
TEST_F(MigrateTest, TheAuditTrailIsPartitionedWithItsRowsKept) {
  size_t before = 0;
  while (before < memoryd_migrations_count && memoryd_migrations[before].version < 16) before++;
  ASSERT_LT(before, memoryd_migrations_count);
  int applied = -1;
  char err[512] = "";
  ASSERT_EQ(0, pg_migrate(conn_, memoryd_migrations, before, &applied, err, sizeof err)) << err;
  PQclear(PQexec(conn_,
                 "INSERT INTO audit_log (time, tenant, method, status_code, duration_us)"
                 " SELECT now() - g * interval '1 day', 't', '/m', 0, 1"
                 " FROM generate_series(1, 30) g"));
  ASSERT_EQ(30, Count("SELECT count(*) FROM audit_log"));
  int max_id = Count("SELECT max(id) FROM audit_log");
  ASSERT_EQ(
      0, pg_migrate(conn_, memoryd_migrations, memoryd_migrations_count, &applied, err, sizeof err))
      << err;
  EXPECT_EQ(30, Count("SELECT count(*) FROM audit_log"));
  // The old rows are one partition, named after the midnight after the newest.
  EXPECT_EQ(1, Count("SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relname ="
                     " 'audit_log_upto_' || to_char((now() AT TIME ZONE 'UTC')::date,"
                     " 'YYYYMMDD')"));
  PQclear(PQexec(conn_,
                 "INSERT INTO audit_log (time, tenant, method, status_code, duration_us)"
                 " VALUES (now() + interval '2 days', 't', '/m', 0, 1)"));
  EXPECT_EQ(31, Count("SELECT count(*) FROM audit_log"));
  EXPECT_EQ(max_id + 1, Count("SELECT max(id) FROM audit_log"));
  EXPECT_EQ(0, Count("SELECT count(*) FROM audit_log_default"));
}

TEST_F(MigrateTest, FailingMigrationIsRolledBackAndNamed) {
  const pg_migration list[] = {
      {1, "good", "CREATE TABLE t_good (id int)"},
      {2, "bad", "CREATE TABLE t_half (id int); SELECT * FROM no_such_table"},
  };
  int applied = -1;
  char err[512] = "";
  EXPECT_EQ(-1, pg_migrate(conn_, list, 2, &applied, err, sizeof err));
  EXPECT_EQ(1, applied);
  EXPECT_NE(nullptr, strstr(err, "migration 2 (bad)")) << err;
  EXPECT_NE(nullptr, strstr(err, "no_such_table")) << err;
  // Migration 2's first statement must not survive its failure.
  EXPECT_EQ(0, Count("SELECT count(*) FROM information_schema.tables "
                     "WHERE table_name = 't_half'"));
  EXPECT_EQ(1, pg_migrate_current_version(conn_));
  EXPECT_EQ(PQTRANS_IDLE, PQtransactionStatus(conn_));
}

TEST_F(MigrateTest, OutOfOrderListIsRefused) {
  const pg_migration list[] = {{2, "b", "SELECT 1"}, {1, "a", "SELECT 1"}};
  int applied = -1;
  char err[512] = "";
  EXPECT_EQ(-1, pg_migrate(conn_, list, 2, &applied, err, sizeof err));
  EXPECT_NE(nullptr, strstr(err, "out of order")) << err;
  EXPECT_EQ(0, applied);
}

}  // namespace
