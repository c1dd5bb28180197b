// Data diodes end to end: the real memoryd, real tokens, real PostgreSQL.
// What one token writes, another sees only when tenant, owner (unless
// :all) and label (<= clr) allow — in reads, lists, pages, searches and
// counts; writes are stamped max(requested, lvl); PII is refused (or
// redacted) before anything is stored; and every write and read leaves an
// audit row naming what it touched.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "memory/v1/audit.pb.h"
#include "memory/v1/entries.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using testing_client::Result;
using testing_client::Unary;

class DiodeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(db_.ok()) << db_.error(); }

  void Up(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=1"};
    args.insert(args.end(), extra.begin(), extra.end());
    m_ = std::make_unique<MemorydProcess>(args);
    ASSERT_TRUE(m_->Start()) << m_->Log();
    ch_ = testing_client::Connect(m_->port());
  }

  // A token for principal sub of tenant with the given breadth and labels.
  std::string Token(const std::string& tenant, const std::string& sub, const std::string& scope,
                    const std::string& clr = "SECRET", const std::string& lvl = "PUBLIC") {
    TestClaims c;
    c.tenant = tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = clr;
    c.lvl = lvl;
    c.ns = {"*:*:*"};
    return m_->keys()->Mint(c);
  }

  Result Call(const std::string& method, const google::protobuf::Message& req,
              const std::string& token) {
    return Unary(ch_, "/memory.v1." + method, req.SerializeAsString(), 10000,
                 {{"authorization", TestKeys::Bearer(token)}});
  }

  Result Write(const std::string& token, const std::string& ns, const std::string& key,
               const std::string& value, Label label = LABEL_UNSPECIFIED) {
    EntriesWriteRequest w;
    w.set_namespace_(ns);
    w.set_key(key);
    w.set_value(value);
    w.set_label(label);
    return Call("Entries/Write", w, token);
  }

  void MustWrite(const std::string& token, const std::string& ns, const std::string& key,
                 const std::string& value, Label label = LABEL_UNSPECIFIED) {
    Result r = Write(token, ns, key, value, label);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }

  Result Read(const std::string& token, const std::string& ns, const std::string& key) {
    EntriesReadRequest r;
    r.set_namespace_(ns);
    r.set_key(key);
    return Call("Entries/Read", r, token);
  }

  // Every "ns/key" a List returns for this token, following pages of size 2.
  std::set<std::string> ListAll(const std::string& token) {
    std::set<std::string> out;
    std::string page;
    for (int i = 0; i < 100; i++) {
      EntriesListRequest req;
      req.set_page_size(2);
      req.set_page_token(page);
      Result r = Call("Entries/List", req, token);
      EXPECT_TRUE(r.status.ok()) << r.status.error_message();
      EntriesListResponse resp;
      if (!r.status.ok() || !resp.ParseFromString(r.body)) break;
      for (const auto& e : resp.entries()) out.insert(e.namespace_() + "/" + e.key());
      page = resp.next_page_token();
      if (page.empty()) break;
    }
    return out;
  }

  std::set<std::string> Search(const std::string& token, const std::string& term) {
    EntriesSearchRequest req;
    req.set_term(term);
    Result r = Call("Entries/Search", req, token);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EntriesSearchResponse resp;
    resp.ParseFromString(r.body);
    std::set<std::string> out;
    for (const auto& e : resp.entries()) out.insert(e.namespace_() + "/" + e.key());
    return out;
  }

  int64_t Count(const std::string& token) {
    EntriesStatsRequest req;
    Result r = Call("Entries/Stats", req, token);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EntriesStatsResponse resp;
    resp.ParseFromString(r.body);
    return resp.entry_count();
  }

  PgTestDb db_;
  std::unique_ptr<MemorydProcess> m_;
  std::shared_ptr<grpc::Channel> ch_;
};

TEST_F(DiodeTest, NoTokenIsUnauthenticatedAndMissingScopeIsPermissionDenied) {
  Up();
  EntriesReadRequest r;
  r.set_namespace_("a:b:c");
  r.set_key("k");
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED,
            Unary(ch_, "/memory.v1.Entries/Read", r.SerializeAsString()).status.error_code());
  Result w = Write(Token("t1", "alice", "entries:read"), "a:b:c", "k", "v");
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED, w.status.error_code());
  EXPECT_NE(std::string::npos, w.status.error_message().find("entries:write"))
      << w.status.error_message();
}

TEST_F(DiodeTest, AKeyWithAnEmbeddedNulIsRefusedNotTruncated) {
  Up();
  std::string t = Token("t1", "alice", "entries:read entries:write");
  Result r = Write(t, "p:w:n", std::string("a\0b", 3), "v");
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("NUL")) << r.status.error_message();
  EXPECT_EQ(grpc::StatusCode::NOT_FOUND, Read(t, "p:w:n", "a").status.error_code());
}

TEST_F(DiodeTest, TenantANeverSeesTenantB) {
  Up();
  std::string a = Token("tenant-a", "alice", "entries:read:all entries:write");
  std::string b = Token("tenant-b", "bob", "entries:read:all entries:write");
  for (int i = 0; i < 5; i++)
    MustWrite(b, "shared:kb:doc", "b-" + std::to_string(i), "secret plans");
  MustWrite(a, "shared:kb:doc", "a-0", "our plans");
  EXPECT_EQ(grpc::StatusCode::NOT_FOUND, Read(a, "shared:kb:doc", "b-0").status.error_code());
  EXPECT_EQ(std::set<std::string>{"shared:kb:doc/a-0"}, ListAll(a));
  EXPECT_EQ(std::set<std::string>{"shared:kb:doc/a-0"}, Search(a, "plans"));
  EXPECT_EQ(1, Count(a));
  EXPECT_EQ(5, Count(b));
  EXPECT_EQ(5u, ListAll(b).size());
  // Writing B's key from A creates A's own entry; B's stays untouched.
  MustWrite(a, "shared:kb:doc", "b-0", "overwrite?");
  Result rb = Read(b, "shared:kb:doc", "b-0");
  ASSERT_TRUE(rb.status.ok());
  EntriesReadResponse resp;
  ASSERT_TRUE(resp.ParseFromString(rb.body));
  EXPECT_EQ("secret plans", resp.entry().value());
}

TEST_F(DiodeTest, OwnBreadthSeesOnlyOwnRecordsAllSeesTheTenant) {
  Up();
  std::string alice = Token("t1", "alice", "entries:read entries:write");
  std::string bob = Token("t1", "bob", "entries:read entries:write");
  std::string auditor = Token("t1", "carol", "entries:read:all");
  MustWrite(alice, "p:w:n", "alice-1", "x");
  MustWrite(bob, "p:w:n", "bob-1", "x");
  EXPECT_EQ(std::set<std::string>{"p:w:n/alice-1"}, ListAll(alice));
  EXPECT_EQ(grpc::StatusCode::NOT_FOUND, Read(alice, "p:w:n", "bob-1").status.error_code());
  EXPECT_EQ(1, Count(alice));
  EXPECT_EQ(2u, ListAll(auditor).size());
  EXPECT_TRUE(Read(auditor, "p:w:n", "bob-1").status.ok());
  // Modifying someone else's entry needs entries:write:all.
  Result w = Write(alice, "p:w:n", "bob-1", "mine now");
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED, w.status.error_code());
}

TEST_F(DiodeTest, ConfidentialIsInvisibleToAnInternalToken) {
  Up();
  std::string writer = Token("t1", "alice", "entries:read:all entries:write", "SECRET", "PUBLIC");
  std::string internal = Token("t1", "alice", "entries:read:all", "INTERNAL", "INTERNAL");
  MustWrite(writer, "p:w:n", "conf", "classified", LABEL_CONFIDENTIAL);
  MustWrite(writer, "p:w:n", "open", "classified", LABEL_INTERNAL);
  EXPECT_EQ(grpc::StatusCode::NOT_FOUND, Read(internal, "p:w:n", "conf").status.error_code());
  EXPECT_TRUE(Read(internal, "p:w:n", "open").status.ok());
  EXPECT_EQ(std::set<std::string>{"p:w:n/open"}, ListAll(internal));
  EXPECT_EQ(std::set<std::string>{"p:w:n/open"}, Search(internal, "classified"));
  EXPECT_EQ(1, Count(internal));
}

TEST_F(DiodeTest, SecretWriterAskingForPublicIsStoredAsSecret) {
  Up();
  std::string secret = Token("t1", "alice", "entries:read entries:write", "SECRET", "SECRET");
  Result r = Write(secret, "p:w:n", "k", "v", LABEL_PUBLIC);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EntriesWriteResponse w;
  ASSERT_TRUE(w.ParseFromString(r.body));
  EXPECT_EQ(LABEL_SECRET, w.meta().label());
  std::string pub = Token("t1", "alice", "entries:read", "CONFIDENTIAL", "PUBLIC");
  EXPECT_EQ(grpc::StatusCode::NOT_FOUND, Read(pub, "p:w:n", "k").status.error_code());
}

TEST_F(DiodeTest, EachPiiKindIsRejectedByNameAndNothingIsStored) {
  Up();
  std::string t = Token("t1", "alice", "entries:read entries:write");
  const std::pair<std::string, std::string> cases[] = {
      {"email", "mail alice@example.com"},
      {"phone", "call +1 415 555 2671"},
      {"payment_card", "card 4111 1111 1111 1111"},
      {"national_id", "ssn 123-45-6789"},
      {"iban", "iban DE89 3704 0044 0532 0130 00"},
      {"api_key", "key AKIAIOSFODNN7EXAMPLE"},
      {"private_key", "-----BEGIN PRIVATE KEY-----\nMC4CAQA=\n-----END PRIVATE KEY-----"},
      {"bearer_token", "Bearer abcdefghijklmnopqrstuvwxyz012345"},
  };
  for (const auto& c : cases) {
    Result r = Write(t, "p:w:n", "pii-" + c.first, c.second);
    EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, r.status.error_code()) << c.first;
    EXPECT_NE(std::string::npos, r.status.error_message().find(c.first))
        << c.first << ": " << r.status.error_message();
    EXPECT_EQ(grpc::StatusCode::NOT_FOUND, Read(t, "p:w:n", "pii-" + c.first).status.error_code());
  }
  EXPECT_EQ(0, Count(t));
}

TEST_F(DiodeTest, RedactPolicyStoresMarkersAndPiiWriteStoresAsIsWithKinds) {
  Up({"--pii-policy=redact"});
  std::string t = Token("t1", "alice", "entries:read entries:write");
  MustWrite(t, "p:w:n", "k", "mail alice@example.com now");
  Result r = Read(t, "p:w:n", "k");
  ASSERT_TRUE(r.status.ok());
  EntriesReadResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_EQ("mail [REDACTED:email] now", resp.entry().value());

  std::string pii = Token("t1", "alice", "entries:read entries:write pii:write");
  MustWrite(pii, "p:w:n", "k2", "mail alice@example.com now");
  r = Read(pii, "p:w:n", "k2");
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_EQ("mail alice@example.com now", resp.entry().value());
  ASSERT_EQ(1, resp.entry().meta().pii_kinds_size());
  EXPECT_EQ("email", resp.entry().meta().pii_kinds(0));

  // `pii:*` holds `pii:write` here as it does in Attenuate (which lets a
  // pii:* token mint a pii:write child): one matching rule for both.
  std::string star = Token("t1", "alice", "entries:read entries:write pii:*");
  MustWrite(star, "p:w:n", "k3", "mail alice@example.com now");
  r = Read(star, "p:w:n", "k3");
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_EQ("mail alice@example.com now", resp.entry().value());
}

// Page tokens are sealed with the deployment's key (server_secrets in
// PostgreSQL): another replica of the same database opens them, a memoryd of
// another database (another key) refuses them as INVALID_ARGUMENT before
// any query, as it refuses an altered one.
TEST_F(DiodeTest, PageTokensOpenOnEveryReplicaOfTheDeploymentOnly) {
  Up();
  std::string t = Token("t1", "alice", "entries:read entries:write");
  for (int i = 0; i < 3; i++) MustWrite(t, "p:w:n", "k" + std::to_string(i), "v");
  EntriesListRequest req;
  req.set_page_size(1);
  Result first = Call("Entries/List", req, t);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EntriesListResponse page;
  ASSERT_TRUE(page.ParseFromString(first.body));
  ASSERT_FALSE(page.next_page_token().empty());
  req.set_page_token(page.next_page_token());
  auto list_on = [&](int port) {
    return Unary(testing_client::Connect(port), "/memory.v1.Entries/List", req.SerializeAsString(),
                 10000, {{"authorization", TestKeys::Bearer(t)}});
  };
  // A second replica of this database: the token opens there.
  MemorydProcess same(
      {"--pg-url=" + db_.url(), "--shutdown-grace=1", "--jwks=" + m_->keys()->jwks_path()});
  ASSERT_TRUE(same.Start()) << same.Log();
  Result there = list_on(same.port());
  ASSERT_TRUE(there.status.ok()) << there.status.error_message();
  EntriesListResponse second;
  ASSERT_TRUE(second.ParseFromString(there.body));
  ASSERT_EQ(1, second.entries_size());
  EXPECT_EQ("k1", second.entries(0).key());
  // Another deployment (its own database, so its own key), same caller and
  // request: refused, and no ERROR line (nothing reached SQL).
  PgTestDb other_db;
  ASSERT_TRUE(other_db.ok()) << other_db.error();
  MemorydProcess other(
      {"--pg-url=" + other_db.url(), "--shutdown-grace=1", "--jwks=" + m_->keys()->jwks_path()});
  ASSERT_TRUE(other.Start()) << other.Log();
  Result refused = list_on(other.port());
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, refused.status.error_code())
      << refused.status.error_message();
  EXPECT_NE(std::string::npos, refused.status.error_message().find("page_token"))
      << refused.status.error_message();
  EXPECT_EQ(std::string::npos, other.Log().find("\"level\":\"error\"")) << other.Log();
}

TEST_F(DiodeTest, WritesAndReadsLeaveAuditRowsNamingTheirTargets) {
  Up();
  std::string t = Token("t1", "alice", "entries:read entries:write audit:read");
  MustWrite(t, "p:w:n", "k1", "v");
  MustWrite(t, "p:w:n", "k2", "v");
  ASSERT_TRUE(Read(t, "p:w:n", "k1").status.ok());
  EXPECT_EQ(2u, ListAll(t).size());
  // Read audit goes through a queue: give the writer a moment.
  std::map<std::string, std::vector<std::set<std::string>>> rows;
  for (int attempt = 0; attempt < 50; attempt++) {
    rows.clear();
    AuditListRequest req;
    req.set_page_size(100);
    Result r = Call("Audit/List", req, t);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    AuditListResponse resp;
    ASSERT_TRUE(resp.ParseFromString(r.body));
    for (const auto& rec : resp.records()) {
      EXPECT_EQ("alice", rec.principal());
      EXPECT_EQ("t1", rec.tenant());
      rows[rec.method()].push_back({rec.target_ids().begin(), rec.target_ids().end()});
    }
    if (rows["/memory.v1.Entries/List"].size() >= 1 && rows["/memory.v1.Entries/Read"].size() >= 1)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto& writes = rows["/memory.v1.Entries/Write"];
  ASSERT_EQ(2u, writes.size());
  EXPECT_TRUE(writes[0].count("p:w:n/k2") || writes[1].count("p:w:n/k2"));
  ASSERT_EQ(1u, rows["/memory.v1.Entries/Read"].size());
  EXPECT_EQ(std::set<std::string>{"p:w:n/k1"}, rows["/memory.v1.Entries/Read"][0]);
  ASSERT_GE(rows["/memory.v1.Entries/List"].size(), 1u);
  std::set<std::string> listed;
  for (auto& s : rows["/memory.v1.Entries/List"]) listed.insert(s.begin(), s.end());
  EXPECT_EQ((std::set<std::string>{"p:w:n/k1", "p:w:n/k2"}), listed);
}

}  // namespace
