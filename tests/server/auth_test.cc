// Capability tokens through the real memoryd binary: every way a token can
// be bad is UNAUTHENTICATED, a good token without the method's scope is
// PERMISSION_DENIED, keys rotate without a restart, Attenuate never widens
// a claim, and Revoke takes a token (and its descendants) out on every
// replica.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "grpc/health/v1/health.pb.h"
#include "memory/v1/access.pb.h"
#include "memory/v1/audit.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using memory::v1::AccessAttenuateRequest;
using memory::v1::AccessAttenuateResponse;
using memory::v1::AccessRevokeRequest;
using memory::v1::AccessWhoAmIResponse;
using testing_client::Result;
using testing_client::Unary;

const char kWhoAmI[] = "/memory.v1.Access/WhoAmI";
const char kAttenuate[] = "/memory.v1.Access/Attenuate";
const char kRevoke[] = "/memory.v1.Access/Revoke";
const char kCheck[] = "/grpc.health.v1.Health/Check";

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(db_.ok()) << db_.error(); }

  std::unique_ptr<MemorydProcess> Launch(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=1",
                                     "--revocation-poll-ms=100"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(p->Start()) << p->Log();
    return p;
  }

  void Up(std::vector<std::string> extra = {}) {
    m_ = Launch(extra);
    ch_ = testing_client::Connect(m_->port());
  }
  TestKeys& keys() { return *m_->keys(); }

  Result Call(const std::string& method, const std::string& body, const std::string& token) {
    std::map<std::string, std::string> md;
    if (!token.empty()) md["authorization"] = TestKeys::Bearer(token);
    return Unary(ch_, method, body, 5000, md);
  }
  Result WhoAmI(const std::string& token) { return Call(kWhoAmI, "", token); }

  void ExpectUnauthenticated(const std::string& token, const std::string& why_part) {
    Result r = WhoAmI(token);
    EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, r.status.error_code()) << r.status.error_message();
    EXPECT_NE(std::string::npos, r.status.error_message().find(why_part))
        << "message: " << r.status.error_message();
  }

  AccessAttenuateResponse Attenuate(const std::string& token, const AccessAttenuateRequest& req,
                                    grpc::StatusCode want = grpc::StatusCode::OK,
                                    const std::string& why_part = "") {
    Result r = Call(kAttenuate, req.SerializeAsString(), token);
    EXPECT_EQ(want, r.status.error_code()) << r.status.error_message();
    if (!why_part.empty()) {
      EXPECT_NE(std::string::npos, r.status.error_message().find(why_part))
          << "message: " << r.status.error_message();
    }
    AccessAttenuateResponse out;
    if (r.status.ok()) {
      EXPECT_TRUE(out.ParseFromString(r.body));
    }
    return out;
  }

  static AccessAttenuateRequest Narrow(std::vector<std::string> scopes) {
    AccessAttenuateRequest req;
    for (auto& s : scopes) req.add_scopes(s);
    return req;
  }

  PgTestDb db_;
  std::unique_ptr<MemorydProcess> m_;
  std::shared_ptr<grpc::Channel> ch_;
};

// Attenuate and Revoke are writes: each is answered only once its audit
// row is committed with it, so memoryd killed the moment the answer
// arrives leaves the row behind (through the audit queue, which waits up to
// 10 ms to batch, it died with the process).
TEST_F(AuthTest, AttenuateAndRevokeAreAuditedBeforeTheyAreAnswered) {
  PgSession db(db_.url());
  ASSERT_TRUE(db.ok()) << db.error();
  Up();
  auto first = std::move(m_);  // owns the keys every later process trusts
  TestClaims c;
  c.scope = "entries:read access:attenuate";
  std::string root = first->keys()->Mint(c);
  auto killed_after = [&](MemorydProcess* p, const char* method, const std::string& body,
                          const std::string& token, const std::string& rid) {
    auto ch = testing_client::Connect(p->port());
    Result r = Unary(ch, method, body, 5000,
                     {{"authorization", TestKeys::Bearer(token)}, {"x-request-id", rid}});
    kill(p->pid(), SIGKILL);
    p->Wait(5000);
    EXPECT_TRUE(r.status.ok()) << method << ": " << r.status.error_message();
    return std::make_pair(r, db.Value("SELECT count(*) || '|' || min(target_ids::text) FROM "
                                      "audit_log WHERE status_code = 0 AND request_id = '" +
                                      rid + "'"));
  };
  auto att = killed_after(first.get(), kAttenuate, Narrow({"entries:read"}).SerializeAsString(),
                          root, "w-attenuate");
  AccessAttenuateResponse child;
  ASSERT_TRUE(child.ParseFromString(att.first.body));
  EXPECT_EQ("1|{" + child.claims().token_id() + "}", att.second);
  auto second = Launch({"--jwks=" + first->keys()->jwks_path()});
  AccessRevokeRequest rev;
  rev.set_token_id(child.claims().token_id());
  EXPECT_EQ("1|{" + child.claims().token_id() + "}",
            killed_after(second.get(), kRevoke, rev.SerializeAsString(), root, "w-revoke").second);
}

TEST_F(AuthTest, NoTokenIsUnauthenticatedAndSaysWhatToSend) {
  Up();
  Result r = WhoAmI("");
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("authorization: Bearer"))
      << r.status.error_message();
  r = Unary(ch_, kWhoAmI, "", 5000, {{"authorization", "Basic dXNlcjpwYXNz"}});
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, r.status.error_code());
}

TEST_F(AuthTest, ValidTokenIsAcceptedAndWhoAmIReportsItsClaims) {
  Up();
  TestClaims c;
  c.sub = "agent-7";
  c.tenant = "acme";
  c.scope = "entries:read entries:write:all";
  c.ns = {"planner:*:*", "shared:kb:*"};
  c.clr = "CONFIDENTIAL";
  c.lvl = "INTERNAL";
  c.jti = "tok-1";
  Result r = WhoAmI(keys().Mint(c));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  AccessWhoAmIResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_EQ("agent-7", resp.claims().principal());
  EXPECT_EQ("acme", resp.claims().tenant());
  EXPECT_EQ("tok-1", resp.claims().token_id());
  ASSERT_EQ(2, resp.claims().scopes_size());
  EXPECT_EQ("entries:write:all", resp.claims().scopes(1));
  ASSERT_EQ(2, resp.claims().namespaces_size());
  EXPECT_EQ(memory::v1::LABEL_CONFIDENTIAL, resp.claims().read_ceiling());
  EXPECT_EQ(memory::v1::LABEL_INTERNAL, resp.claims().write_floor());
  EXPECT_GT(resp.claims().expire_time().seconds(), time(nullptr));
}

TEST_F(AuthTest, ForgedSignatureIsUnauthenticated) {
  Up();
  ExpectUnauthenticated(keys().MintForged(TestClaims()), "signature");
}

TEST_F(AuthTest, AlgNoneIsUnauthenticated) {
  Up();
  ExpectUnauthenticated(TestKeys::MintAlgNone(TestClaims()), "alg");
}

TEST_F(AuthTest, Hs256WithThePublicKeyAsSecretIsUnauthenticated) {
  Up();
  ExpectUnauthenticated(keys().MintHs256WithPublicKey(TestClaims()), "alg");
}

TEST_F(AuthTest, ExpiredTokenIsUnauthenticated) {
  Up();
  TestClaims c;
  c.exp_in_s = -3600;  // far beyond the 60 s skew
  ExpectUnauthenticated(keys().Mint(c), "expired");
}

TEST_F(AuthTest, ExpiryWithinTheConfiguredSkewIsAccepted) {
  Up({"--token-skew=120"});
  TestClaims c;
  c.exp_in_s = -30;
  EXPECT_TRUE(WhoAmI(keys().Mint(c)).status.ok());
}

TEST_F(AuthTest, FutureNotBeforeIsUnauthenticated) {
  Up();
  TestClaims c;
  c.with_nbf = true;
  c.nbf_in_s = 3600;
  ExpectUnauthenticated(keys().Mint(c), "not valid before");
}

TEST_F(AuthTest, UnknownKidIsUnauthenticated) {
  Up();
  ExpectUnauthenticated(keys().SignPayload(TestKeys::PayloadJson(TestClaims()), "nobody"),
                        "nobody");
}

TEST_F(AuthTest, MissingRequiredClaimIsUnauthenticated) {
  Up();
  ExpectUnauthenticated(
      keys().SignPayload("{\"sub\":\"a\",\"scope\":\"admin\",\"exp\":99999999999,\"jti\":\"x\"}",
                         keys().kid()),
      "tenant");
}

TEST_F(AuthTest, TokenWithoutTheMethodScopeIsPermissionDeniedNamingTheScope) {
  Up();
  TestClaims c;
  c.scope = "entries:read";
  Result r = Call(kAttenuate, Narrow({"entries:read"}).SerializeAsString(), keys().Mint(c));
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("access:attenuate"))
      << r.status.error_message();
}

TEST_F(AuthTest, HealthIsOpenByDefaultAndClosedOnRequest) {
  Up();
  EXPECT_TRUE(Unary(ch_, kCheck, "").status.ok());
  auto closed = Launch({"--open-health=false"});
  auto ch = testing_client::Connect(closed->port());
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, Unary(ch, kCheck, "").status.error_code());
  TestClaims c;
  c.scope = "entries:read";
  Result r =
      Unary(ch, kCheck, "", 5000, {{"authorization", TestKeys::Bearer(closed->keys()->Mint(c))}});
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
}

TEST_F(AuthTest, KeyAddedToTheJwksFileIsTrustedWithoutARestart) {
  Up();
  // The reload is keyed on the file's mtime, checked at most once a second.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  keys().AddKey("test-2");
  std::string token = keys().MintWithNewKey(TestClaims());
  EXPECT_TRUE(WhoAmI(token).status.ok()) << WhoAmI(token).status.error_message();
  EXPECT_TRUE(WhoAmI(keys().Mint(TestClaims())).status.ok());  // the old key still works
}

// Retiring a key: removed from the JWKS file, it stops verifying within
// the reload delay (--jwks-reload-ms), tokens it signed that sit in the
// token cache included, and an open Audit.Watch stream of such a token
// ends UNAUTHENTICATED; the new key's tokens go on working. A flood of
// unknown kids meanwhile costs no reload each and blocks nobody.
TEST_F(AuthTest, ARemovedKeyStopsVerifyingCachedTokensAndStreamsWithinTheReloadDelay) {
  Up({"--jwks-reload-ms=200"});
  TestClaims c;
  c.scope = "audit:read";
  std::string old_token = keys().Mint(c);
  ASSERT_TRUE(WhoAmI(old_token).status.ok());  // verified once: now cached
  testing_client::Stream watch(ch_, "/memory.v1.Audit/Watch", 30000,
                               {{"authorization", TestKeys::Bearer(old_token)}});
  memory::v1::AuditWatchRequest wreq;
  ASSERT_TRUE(watch.Write(wreq.SerializeAsString()));
  ASSERT_TRUE(watch.WritesDone());
  keys().AddKey("test-2");
  std::string new_token = keys().MintWithNewKey(c);
  // Unknown kids in a loop while the reload comes: the flood is under way
  // (10 refusals) before the key goes, however slow the machine.
  std::atomic<bool> stop{false};
  std::atomic<int> flood{0};
  std::string bad = keys().SignPayload(TestKeys::PayloadJson(c), "no-such-kid");
  std::thread flooder([&] {
    while (!stop) {
      if (WhoAmI(bad).status.error_code() == grpc::StatusCode::UNAUTHENTICATED) flood++;
    }
  });
  auto flooding = std::chrono::steady_clock::now();
  while (flood.load() < 10 &&
         std::chrono::steady_clock::now() - flooding < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  keys().RemoveFirstKey();
  int before = flood.load();
  auto start = std::chrono::steady_clock::now();
  bool dead = false;
  while (!dead && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    dead = WhoAmI(old_token).status.error_code() == grpc::StatusCode::UNAUTHENTICATED;
    if (!dead) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  stop = true;
  flooder.join();
  EXPECT_TRUE(dead) << "a token of the removed key still works";
  EXPECT_LT(took, 2000) << "the removal took " << took << " ms to take effect";
  EXPECT_GE(before, 10) << "the flood was not under way when the key went";
  ExpectUnauthenticated(old_token, "unknown kid");
  Result n = WhoAmI(new_token);
  EXPECT_TRUE(n.status.ok()) << n.status.error_message();
  // The stream's periodic check ends it.
  std::string msg;
  while (watch.Read(&msg, 15000)) {
  }
  grpc::Status st = watch.Finish();
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, st.error_code()) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("no longer in the key set"))
      << st.error_message();
  EXPECT_NE(std::string::npos, m_->Log().find("\"removed\":\"test-1\"")) << m_->Log();
}

// Revocations and issued tokens are kept only while a token could still
// present them: once the revoked token (which its descendants never
// outlive) has expired, past the skew, they are pruned; a revocation whose
// token's expiry is unknown (an admin revoking a token memoryd did not
// mint) is kept, and so is one of a live token.
TEST_F(AuthTest, ExpiredRevocationsAndIssuedTokensArePruned) {
  PgSession db(db_.url());
  ASSERT_TRUE(db.ok()) << db.error();
  Up({"--token-skew=0"});
  auto first = std::move(m_);  // owns the keys
  TestClaims brief;
  brief.scope = "entries:read access:attenuate admin";
  brief.jti = "brief-1";
  brief.exp_in_s = 3;
  std::string tok = first->keys()->Mint(brief);
  ch_ = testing_client::Connect(first->port());
  AccessAttenuateRequest narrow = Narrow({"entries:read"});
  narrow.mutable_ttl()->set_seconds(1);
  AccessAttenuateResponse child = Attenuate(tok, narrow);
  ASSERT_FALSE(child.token().empty());
  TestClaims lasting = brief;
  lasting.jti = "lasting-1";
  lasting.exp_in_s = 3600;
  for (const auto& [who, target] : std::vector<std::pair<std::string, std::string>>{
           {tok, "operator-minted-9"},
           {tok, "brief-1"},
           {first->keys()->Mint(lasting), "lasting-1"}}) {
    AccessRevokeRequest rev;
    rev.set_token_id(target);
    Result r = Call(kRevoke, rev.SerializeAsString(), who);
    ASSERT_TRUE(r.status.ok()) << target << ": " << r.status.error_message();
  }
  EXPECT_EQ("brief-1|true,lasting-1|true,operator-minted-9|false",
            db.Value("SELECT string_agg(jti || '|' || (expires_at IS NOT NULL), ',' ORDER BY jti)"
                     " FROM revoked_tokens"));
  EXPECT_EQ("1", db.Value("SELECT count(*) FROM issued_tokens"));
  EXPECT_EQ(0, first->Stop(SIGTERM, 10000));
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // brief-1 has expired
  auto again = Launch({"--token-skew=0", "--jwks=" + first->keys()->jwks_path()});
  std::string left;
  for (int i = 0; i < 100; i++) {
    left = db.Value("SELECT string_agg(jti, ',' ORDER BY jti) FROM revoked_tokens");
    if (left == "lasting-1,operator-minted-9") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ("lasting-1,operator-minted-9", left);
  EXPECT_EQ("0", db.Value("SELECT count(*) FROM issued_tokens"));
  EXPECT_NE(std::string::npos, again->Log().find("expired revocations and issued tokens pruned"))
      << again->Log();
}

TEST_F(AuthTest, AttenuateMintsANarrowerChildThatWorks) {
  Up();
  TestClaims c;
  c.scope = "entries:* access:attenuate";
  c.ns = {"planner:*:*"};
  c.clr = "SECRET";
  c.lvl = "INTERNAL";
  c.jti = "root-1";
  std::string root = keys().Mint(c);
  AccessAttenuateRequest req = Narrow({"entries:read", "entries:write:all"});
  req.add_namespaces("planner:build:*");
  req.set_read_ceiling(memory::v1::LABEL_CONFIDENTIAL);
  req.set_write_floor(memory::v1::LABEL_CONFIDENTIAL);
  req.mutable_ttl()->set_seconds(600);
  AccessAttenuateResponse child = Attenuate(root, req);
  ASSERT_FALSE(child.token().empty());
  EXPECT_EQ("root-1", child.claims().parent_token_id());
  Result r = WhoAmI(child.token());
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  AccessWhoAmIResponse who;
  ASSERT_TRUE(who.ParseFromString(r.body));
  EXPECT_EQ("alice", who.claims().principal());
  EXPECT_EQ("t1", who.claims().tenant());
  EXPECT_EQ("root-1", who.claims().parent_token_id());
  EXPECT_EQ(memory::v1::LABEL_CONFIDENTIAL, who.claims().read_ceiling());
  EXPECT_EQ(memory::v1::LABEL_CONFIDENTIAL, who.claims().write_floor());
  EXPECT_LE(who.claims().expire_time().seconds(), time(nullptr) + 601);
  // The child lacks access:attenuate, so it cannot mint further.
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED,
            Call(kAttenuate, Narrow({"entries:read"}).SerializeAsString(), child.token())
                .status.error_code());
}

TEST_F(AuthTest, AttenuateCannotWidenAnyClaim) {
  Up();
  TestClaims c;
  c.scope = "entries:read access:attenuate";
  c.ns = {"planner:*:*"};
  c.clr = "CONFIDENTIAL";
  c.lvl = "INTERNAL";
  c.exp_in_s = 600;
  std::string root = keys().Mint(c);
  using grpc::StatusCode;
  Attenuate(root, Narrow({"entries:read:all"}), StatusCode::PERMISSION_DENIED, "entries:read:all");
  Attenuate(root, Narrow({"entries:write"}), StatusCode::PERMISSION_DENIED, "entries:write");
  Attenuate(root, Narrow({"entries:*"}), StatusCode::PERMISSION_DENIED, "entries:*");
  Attenuate(root, Narrow({"admin"}), StatusCode::PERMISSION_DENIED, "admin");
  AccessAttenuateRequest ns = Narrow({"entries:read"});
  ns.add_namespaces("*:*:*");
  Attenuate(root, ns, StatusCode::PERMISSION_DENIED, "*:*:*");
  AccessAttenuateRequest ns2 = Narrow({"entries:read"});
  ns2.add_namespaces("plan*:x:y");  // also reaches "plant:x:y"
  Attenuate(root, ns2, StatusCode::PERMISSION_DENIED, "plan*:x:y");
  AccessAttenuateRequest clr = Narrow({"entries:read"});
  clr.set_read_ceiling(memory::v1::LABEL_SECRET);
  Attenuate(root, clr, StatusCode::PERMISSION_DENIED, "read_ceiling");
  AccessAttenuateRequest lvl = Narrow({"entries:read"});
  lvl.set_write_floor(memory::v1::LABEL_PUBLIC);
  Attenuate(root, lvl, StatusCode::PERMISSION_DENIED, "write_floor");
  AccessAttenuateRequest exp = Narrow({"entries:read"});
  exp.mutable_ttl()->set_seconds(7200);
  Attenuate(root, exp, StatusCode::PERMISSION_DENIED, "expiry");
  // Malformed requests are INVALID_ARGUMENT, not a denial.
  Attenuate(root, Narrow({}), StatusCode::INVALID_ARGUMENT, "scope");
  Attenuate(root, Narrow({"entries:read admin"}), StatusCode::INVALID_ARGUMENT, "scopes[0]");
  AccessAttenuateRequest badns = Narrow({"entries:read"});
  badns.add_namespaces("planner:x");
  Attenuate(root, badns, StatusCode::INVALID_ARGUMENT, "namespaces[0]");
  AccessAttenuateRequest inverted = Narrow({"entries:read"});
  inverted.set_write_floor(memory::v1::LABEL_CONFIDENTIAL);
  inverted.set_read_ceiling(memory::v1::LABEL_INTERNAL);
  Attenuate(root, inverted, StatusCode::INVALID_ARGUMENT, "write_floor");
  AccessAttenuateRequest negttl = Narrow({"entries:read"});
  negttl.mutable_ttl()->set_seconds(-5);
  Attenuate(root, negttl, StatusCode::INVALID_ARGUMENT, "ttl");
}

TEST_F(AuthTest, RevokedTokenAndItsDescendantsAreUnauthenticated) {
  Up();
  TestClaims c;
  c.scope = "entries:read access:attenuate";
  c.jti = "root-r";
  std::string root = keys().Mint(c);
  AccessAttenuateResponse child = Attenuate(root, Narrow({"entries:read", "access:attenuate"}));
  AccessAttenuateResponse grandchild = Attenuate(child.token(), Narrow({"entries:read"}));
  ASSERT_TRUE(WhoAmI(grandchild.token()).status.ok());

  AccessRevokeRequest rev;
  rev.set_token_id("root-r");
  rev.set_reason("test");
  Result r = Call(kRevoke, rev.SerializeAsString(), root);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ExpectUnauthenticated(root, "revoked");
  ExpectUnauthenticated(child.token(), "revoked");
  ExpectUnauthenticated(grandchild.token(), "revoked");
}

TEST_F(AuthTest, RevokingSomeoneElsesTokenNeedsAdmin) {
  Up();
  TestClaims a, b, admin;
  a.jti = "tok-a";
  b.sub = "bob";
  b.jti = "tok-b";
  admin.sub = "ops";
  admin.scope = "admin";
  AccessRevokeRequest rev;
  rev.set_token_id("tok-a");
  Result r = Call(kRevoke, rev.SerializeAsString(), keys().Mint(b));
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("admin"));
  std::string token_a = keys().Mint(a);
  EXPECT_TRUE(WhoAmI(token_a).status.ok());
  r = Call(kRevoke, rev.SerializeAsString(), keys().Mint(admin));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  ExpectUnauthenticated(token_a, "revoked");
  AccessRevokeRequest empty;
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT,
            Call(kRevoke, empty.SerializeAsString(), keys().Mint(admin)).status.error_code());

  // `admin` stops at its tenant: a token memoryd minted for another tenant
  // stays usable, and the refused revoke left no transaction behind (the
  // next one on the same pool works).
  TestClaims other;
  other.tenant = "t2";
  other.sub = "eve";
  AccessAttenuateResponse foreign = Attenuate(keys().Mint(other), Narrow({"entries:read"}));
  rev.set_token_id(foreign.claims().token_id());
  for (int i = 0; i < 3; i++) {
    r = Call(kRevoke, rev.SerializeAsString(), keys().Mint(admin));
    EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED, r.status.error_code())
        << r.status.error_message();
  }
  EXPECT_TRUE(WhoAmI(foreign.token()).status.ok());
}

// A revocation belongs to its tenant: an admin of t2 revoking jti "twin"
// revokes t2's token of that id, never t1's token that happens to share it
// (operator-minted tokens carry any jti), on this replica and after a
// restart reloads the set from PostgreSQL.
TEST_F(AuthTest, RevocationStaysInsideTheRevokersTenant) {
  Up();
  TestClaims a, b, admin_b;
  a.tenant = "t1";
  a.jti = "twin";
  b.tenant = "t2";
  b.sub = "bob";
  b.jti = "twin";
  admin_b.tenant = "t2";
  admin_b.sub = "ops";
  admin_b.scope = "admin";
  std::string token_a = keys().Mint(a), token_b = keys().Mint(b);
  ASSERT_TRUE(WhoAmI(token_a).status.ok());
  ASSERT_TRUE(WhoAmI(token_b).status.ok());
  AccessRevokeRequest rev;
  rev.set_token_id("twin");
  Result r = Call(kRevoke, rev.SerializeAsString(), keys().Mint(admin_b));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ExpectUnauthenticated(token_b, "revoked");
  EXPECT_TRUE(WhoAmI(token_a).status.ok()) << "t2's admin revoked t1's token";
  // A fresh replica loads the set from PostgreSQL: the same answer.
  auto other = Launch({"--jwks=" + keys().jwks_path()});
  auto ch = testing_client::Connect(other->port());
  EXPECT_TRUE(
      Unary(ch, kWhoAmI, "", 5000, {{"authorization", TestKeys::Bearer(token_a)}}).status.ok());
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED,
            Unary(ch, kWhoAmI, "", 5000, {{"authorization", TestKeys::Bearer(token_b)}})
                .status.error_code());
}

TEST_F(AuthTest, RevocationOnOneReplicaReachesAnother) {
  Up();
  // Replica B trusts the same keys and shares the database.
  auto b = Launch({"--jwks=" + keys().jwks_path(), "--signing-key=" + keys().signing_key_path()});
  auto chb = testing_client::Connect(b->port());
  TestClaims c;
  c.jti = "shared-1";
  std::string token = keys().Mint(c);
  std::map<std::string, std::string> md = {{"authorization", TestKeys::Bearer(token)}};
  ASSERT_TRUE(Unary(chb, kWhoAmI, "", 5000, md).status.ok());  // cached on B now
  AccessRevokeRequest rev;
  rev.set_token_id("shared-1");
  ASSERT_TRUE(Call(kRevoke, rev.SerializeAsString(), token).status.ok());
  auto start = std::chrono::steady_clock::now();
  grpc::StatusCode code = grpc::StatusCode::OK;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    code = Unary(chb, kWhoAmI, "", 5000, md).status.error_code();
    if (code == grpc::StatusCode::UNAUTHENTICATED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, code);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  RecordProperty("revocation_propagation_ms", static_cast<int>(ms));
}

}  // namespace
