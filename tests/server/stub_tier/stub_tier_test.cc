// stub_tier: a tier added to memoryd by its folder and one line of the
// tier table (memoryd_stub: main.c built with -DMEMORYD_TEST_TIER=stub) is
// erased by Forget, exported by Export, swept by the retention sweeper and
// reached by the Router, though neither Privacy nor the Router names it.
// Its notes live in stub_notes, which the test creates as the tier's
// migration would, and writes in SQL (the stub has no gRPC service).
#include <chrono>
#include <thread>

#include "tests/server/privacy_fixture.h"

namespace privacy_test {
namespace {

class StubTierTest : public PrivacyTest {
 protected:
  void SetUp() override {
    PrivacyTest::SetUp();
    MemorydProcess::UseBinary("tests/server/stub_tier/memoryd_stub");
    ASSERT_TRUE(pg_.ok()) << pg_.error();
    pg_.Value(
        "CREATE TABLE stub_notes (tenant text NOT NULL, owner text NOT NULL, key text NOT NULL, "
        "body jsonb NOT NULL DEFAULT '{}', label integer NOT NULL DEFAULT 1, pii_kinds text[] "
        "NOT NULL DEFAULT '{}', updated_at timestamptz NOT NULL DEFAULT now(), "
        "PRIMARY KEY (tenant, key))");
  }
  void TearDown() override {
    PrivacyTest::TearDown();
    MemorydProcess::UseBinary("service/memoryd");
  }

  // A note of owner in the test's tenant, last changed age_s ago.
  void Note(const std::string& owner, const std::string& key, std::string body, int age_s = 0) {
    for (size_t at = 0; (at = body.find('\'', at)) != std::string::npos; at += 2)
      body.insert(at, 1, '\'');  // as an SQL literal
    pg_.Value("INSERT INTO stub_notes (tenant, owner, key, body, updated_at) VALUES ('" + tenant_ +
              "', '" + owner + "', '" + key + "', '" + body + "', now() - interval '" +
              std::to_string(age_s) + " seconds')");
  }
  int Notes(const std::string& where) {
    return std::stoi(
        pg_.Value("SELECT count(*) FROM stub_notes WHERE tenant = '" + tenant_ + "' AND " + where));
  }

  PgSession pg_{db_.url()};
};

TEST_F(StubTierTest, ForgetErasesItAndCountsItUnderItsTier) {
  Replica& r = Launch();
  Note("alice", "a1", R"({"text":"alice's"})");
  Note("alice", "a2", R"({"text":"alice's too"})");
  Note("bob", "b1", R"({"text":"bob's","subject_id":"s-9"})");
  Note("bob", "b2", R"({"text":"bob's own"})");
  const std::string admin = Token("dpo", "privacy:forget:all privacy:read:all");

  ForgetReceipt dry = MustForget(r, admin, "alice", "", true);
  EXPECT_EQ(2, Counts(dry)[TIER_ENTRIES]);
  EXPECT_EQ(4, Notes("true"));  // a dry run erases nothing

  ForgetReceipt byOwner = MustForget(r, admin, "alice", "");
  EXPECT_EQ(2, Counts(byOwner)[TIER_ENTRIES]);
  EXPECT_EQ(0, Notes("owner = 'alice'"));
  ForgetReceipt bySubject = MustForget(r, admin, "", "s-9");
  EXPECT_EQ(1, Counts(bySubject)[TIER_ENTRIES]);
  EXPECT_EQ("b2", pg_.Value("SELECT string_agg(key, ',') FROM stub_notes"));
}

TEST_F(StubTierTest, ExportExportsItsRecordsWithinTheReadDiode) {
  Replica& r = Launch();
  Note("alice", "a1", R"({"text":"one"})");
  Note("alice", "a2", R"({"text":"two"})");
  Note("bob", "b1", R"({"text":"bob's"})");
  pg_.Value("UPDATE stub_notes SET label = 4 WHERE key = 'a2'");  // SECRET
  // Export reads a tier with its `<name>:read` scope.
  auto [recs, st] =
      Export(r, Token("alice", "privacy:export stub:read", "", "CONFIDENTIAL"), "alice", "");
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::vector<std::string> stub;
  for (const auto& rec : recs) {
    if (rec.kind() == "stub_note") {
      stub.push_back(rec.id());
      EXPECT_EQ(TIER_ENTRIES, rec.tier());
      EXPECT_EQ("one",
                rec.record().fields().at("body").struct_value().fields().at("text").string_value());
      EXPECT_EQ("alice", rec.meta().owner());
    }
  }
  // Not bob's (another owner), not a2 (above the caller's clearance).
  EXPECT_EQ(std::vector<std::string>{"a1"}, stub);
}

TEST_F(StubTierTest, TheRetentionSweeperSweepsItsTable) {
  Replica& r = Launch({"--retention=1h", "--retention-sweep-ms=200"});
  (void)r;
  Note("alice", "old", R"({"text":"old"})", 7200);
  Note("alice", "new", R"({"text":"new"})");
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Notes("key = 'old'") != 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(0, Notes("key = 'old'"));
  EXPECT_EQ(1, Notes("key = 'new'"));
}

TEST_F(StubTierTest, TheRouterReachesItWithTheReadDiodeInItsQuery) {
  Replica& r = Launch();
  Note("alice", "k1", R"({"text":"alice's note"})");
  Note("bob", "k2", R"({"text":"bob's note"})");
  auto recent = [&](const std::string& tok, const std::string& key, RouterQueryResponse* out) {
    RouterQueryRequest q;
    q.mutable_recent_lookup()->set_namespace_("agent:wf:n1");
    q.mutable_recent_lookup()->set_key(key);
    Result res = Call(r, "/memory.v1.Router/Query", q, tok);
    if (res.status.ok()) {
      EXPECT_TRUE(out->ParseFromString(res.body));
    }
    return res.status;
  };
  const std::string alice = Token("alice", "router:query entries:read");
  RouterQueryResponse got;
  ASSERT_TRUE(recent(alice, "k1", &got).ok());
  ASSERT_EQ(1, got.results_size());
  EXPECT_EQ("stub", got.results(0).entry().namespace_());
  EXPECT_NE(std::string::npos, got.results(0).entry().value().find("alice's note"));
  ASSERT_EQ(1, got.tiers_size());
  EXPECT_EQ(TIER_ENTRIES, got.tiers(0).tier());
  EXPECT_EQ(TIER_OUTCOME_ANSWERED, got.tiers(0).outcome());

  RouterQueryResponse hidden;  // bob's note: not alice's to read
  ASSERT_TRUE(recent(alice, "k2", &hidden).ok());
  EXPECT_EQ(0, hidden.results_size());
  RouterQueryResponse denied;  // the route's read scope
  grpc::Status st = recent(Token("alice", "router:query"), "k1", &denied);
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("entries:read")) << st.error_message();
  grpc::Status bad = recent(alice, "", &denied);  // the route's own checks
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, bad.error_code());
  EXPECT_NE(std::string::npos, bad.error_message().find("recent_lookup.key"))
      << bad.error_message();
}

}  // namespace
}  // namespace privacy_test
