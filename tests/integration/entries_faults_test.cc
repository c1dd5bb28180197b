// The Entries tier in-process against a real PostgreSQL (entries_fixture.h):
// Deadlines, PostgreSQL trouble (blocked rows, killed connections) and
// the audit trail of writes and reads.
#include "tests/integration/entries_fixture.h"

namespace entries_testing {
namespace {

// ---- deadlines ----

TEST_F(EntriesTest, AWriteBlockedPastItsDeadlineEndsAndFreesItsConnection) {
  Put("dl:x:y", "k", "v");
  PGresult* r = PQexec(conn_, "BEGIN; SELECT 1 FROM entries WHERE key = 'k' FOR UPDATE");
  ASSERT_EQ(PGRES_TUPLES_OK, PQresultStatus(r)) << PQresultErrorMessage(r);
  PQclear(r);
  // More blocked calls than the pool has connections: each must give its
  // connection back when its statement_timeout fires.
  for (int i = 0; i < 6; i++) {
    auto res = Unary(ch_, kWrite, W("dl:x:y", "k", "blocked").SerializeAsString(), 300,
                     {{"x-test-principal", Who().Json()}});
    EXPECT_EQ(Code::DEADLINE_EXCEEDED, res.status.error_code()) << res.status.error_message();
  }
  // Let every server-side deadline pass (grpc-timeout is rounded up) before
  // the lock goes: none of the timed-out writes may then commit.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Nor is any of them still waiting for the row in PostgreSQL: their
  // connections were closed (the server notices within 100 ms).
  int waiting = -1;
  for (int i = 0; i < 100 && waiting != 0; i++) {
    waiting = Count(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'");
    if (waiting != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(0, waiting) << "timed-out writes still wait for the row";
  r = PQexec(conn_, "ROLLBACK");
  PQclear(r);
  auto t0 = std::chrono::steady_clock::now();
  auto wr = Put("dl:x:y", "k", "after");
  EXPECT_EQ(2, wr.meta().version());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// ---- PostgreSQL trouble ----

TEST_F(EntriesTest, KilledConnectionsGiveUnavailableOrSuccessNeverACrash) {
  Put("pg:x:y", "k", "v");
  for (int round = 0; round < 3; round++) {
    PGresult* r = PQexec(conn_,
                         "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                         " WHERE datname = current_database() AND pid <> pg_backend_pid()");
    ASSERT_EQ(PGRES_TUPLES_OK, PQresultStatus(r)) << PQresultErrorMessage(r);
    PQclear(r);
    EntriesReadResponse rr;
    grpc::Status st = Read("pg:x:y", "k", &rr);
    EXPECT_TRUE(st.ok() || st.error_code() == Code::UNAVAILABLE) << st.error_message();
    EntriesWriteResponse wr;
    st = Call(kWrite, W("pg:x:y", "k" + std::to_string(round), "v"), &wr);
    EXPECT_TRUE(st.ok() || st.error_code() == Code::UNAVAILABLE) << st.error_message();
    EntriesListRequest l;
    EntriesListResponse lr;
    st = Call(kList, l, &lr);
    EXPECT_TRUE(st.ok() || st.error_code() == Code::UNAVAILABLE) << st.error_message();
  }
  // And the service recovers by itself.
  EntriesReadResponse rr;
  grpc::Status st;
  for (int i = 0; i < 5; i++) {
    st = Read("pg:x:y", "k", &rr);
    if (st.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ("v", rr.entry().value());
}

// ---- audit ----

TEST_F(EntriesTest, WritesAreAuditedInTheirTransactionAndReadsByTarget) {
  Put("au:x:y", "k1", "v");
  // Written inside the data's transaction: there as soon as Write returns.
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/Write'"
                     " AND 'au:x:y/k1' = ANY(target_ids) AND status_code = 0"
                     " AND principal = 'alice' AND tenant = 't1'"));
  EntriesDeleteEntryRequest d;
  d.set_namespace_("au:x:y");
  d.set_key("k1");
  EntriesDeleteEntryResponse dr;
  ASSERT_TRUE(Call(kDelete, d, &dr).ok());
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method ="
                     " '/memory.v1.Entries/DeleteEntry' AND 'au:x:y/k1' = ANY(target_ids)"));
  Put("au:x:y", "k2", "v");
  Put("au:x:y", "k3", "v");
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("au:x:y", "k2", &rr).ok());
  ASSERT_EQ(2u, ListAll("au:*:*", "*").size());
  // A failed write is audited too, by the observer, with its status.
  EntriesWriteResponse wr;
  EntriesWriteRequest cas = W("au:x:y", "k2", "v");
  cas.set_expected_version(9);
  EXPECT_EQ(Code::ABORTED, Call(kWrite, cas, &wr).error_code());
  ASSERT_EQ(0, audit_flush(aud_, rpc_now_ms() + 5000));
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/Read'"
                     " AND target_ids = ARRAY['au:x:y/k2']"));
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/List'"
                     " AND target_ids @> ARRAY['au:x:y/k2', 'au:x:y/k3']"));
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/Write'"
                     " AND 'au:x:y/k2' = ANY(target_ids) AND status_code = 10"));
  // Each write is recorded once (in its transaction, not again by the observer).
  EXPECT_EQ(3, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/Write'"
                     " AND status_code = 0"));
}

}  // namespace
}  // namespace entries_testing
