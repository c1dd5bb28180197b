// Quotas on what boards and sessions keep in the shared Redis, end to end
// through the gRPC API on the real binary and the Redis `make test` starts:
// the count and the bytes of each tenant and each principal, refused
// RESOURCE_EXHAUSTED naming the flag, and freed again by what frees the
// memory (a board or session that expires, a delete whose change log rolls
// over, a Forget); other tenants never feel one tenant's use; the metrics
// show limits, refusals and use against the quota.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "memory/v1/blackboard.pb.h"
#include "memory/v1/privacy.pb.h"
#include "memory/v1/session.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Unary;
using Clock = std::chrono::steady_clock;

constexpr int kMiB = 1 << 20;
// A value of this many characters costs a board about twice its size (the
// item and its change-log event): two fit in 1 MiB, three do not.
constexpr size_t kBig = 250000;

class QuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
    // The shared Redis outlives test runs: tenants of this run only.
    tenant_ = "qt-" + std::to_string(getpid()) + "-" +
              std::to_string(Clock::now().time_since_epoch().count());
  }

  void Up(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--redis-url=" + TestRedisUrl(),
                                     "--shutdown-grace=1", "--metrics-listen=127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    m_ = std::make_unique<MemorydProcess>(args);
    ASSERT_TRUE(m_->Start()) << m_->Log();
    ch_ = testing_client::Connect(m_->port());
  }

  std::string Token(const std::string& sub, const std::string& scope,
                    const std::string& tenant = "") {
    TestClaims c;
    c.tenant = tenant.empty() ? tenant_ : tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = "SECRET";
    return m_->keys()->Mint(c);
  }

  Result Call(const std::string& method, const google::protobuf::Message& req,
              const std::string& tok) {
    return Unary(ch_, method, req.SerializeAsString(), 10000,
                 {{"authorization", TestKeys::Bearer(tok)}});
  }

  // Boards live a minute unless a test says otherwise: the shared Redis
  // keeps nothing of a run for long.
  Result Post(const std::string& tok, const std::string& task, const std::string& key, size_t chars,
              int ttl_s = 60) {
    BlackboardPostRequest req;
    req.set_task_id(task);
    req.set_key(key);
    req.mutable_value()->set_string_value(std::string(chars, 'x'));
    req.mutable_ttl()->set_seconds(ttl_s);
    return Call("/memory.v1.Blackboard/Post", req, tok);
  }

  Result Delete(const std::string& tok, const std::string& task, const std::string& key) {
    BlackboardPostRequest req;
    req.set_task_id(task);
    req.set_key(key);
    req.set_delete_key(true);
    return Call("/memory.v1.Blackboard/Post", req, tok);
  }

  Result Start(const std::string& tok, int duration_s = 60, std::string* id = nullptr) {
    SessionStartRequest req;
    req.mutable_duration()->set_seconds(duration_s);
    Result r = Call("/memory.v1.Session/Start", req, tok);
    SessionStartResponse resp;
    if (id && r.status.ok() && resp.ParseFromString(r.body)) *id = resp.session().session_id();
    return r;
  }

  Result Set(const std::string& tok, const std::string& id, const std::string& key, size_t bytes) {
    SessionSetRequest req;
    req.set_session_id(id);
    req.set_key(key);
    req.set_value(std::string(bytes, 'v'));
    return Call("/memory.v1.Session/Set", req, tok);
  }

  Result Forget(const std::string& principal) {
    PrivacyForgetRequest req;
    req.set_principal(principal);
    req.set_reason("quota test");
    return Call("/memory.v1.Privacy/Forget", req, Token("dpo", "privacy:forget:all"));
  }

  // The call is refused RESOURCE_EXHAUSTED naming flag.
  static void ExpectQuota(const Result& r, const std::string& flag) {
    EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, r.status.error_code()) << r.status.error_message();
    EXPECT_NE(std::string::npos, r.status.error_message().find(flag)) << r.status.error_message();
  }

  // Retries call until it succeeds or 20 s pass (what expiry frees is
  // released by the next script after Redis dropped the object).
  template <typename F>
  static Result Eventually(F call) {
    auto until = Clock::now() + std::chrono::seconds(20);
    Result r = call();
    while (!r.status.ok() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      r = call();
    }
    return r;
  }

  // What redis-cli answers to args, one string per element (--no-raw
  // quotes them; the escapes it writes are undone).
  static std::vector<std::string> RedisWords(const std::vector<std::string>& args) {
    std::string cmd = "redis-cli -u '" + TestRedisUrl() + "' --no-raw";
    for (const auto& a : args) cmd += " '" + a + "'";
    std::vector<std::string> out;
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) return out;
    std::string all;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) all.append(buf, n);
    pclose(f);
    for (size_t p = all.find('"'); p != std::string::npos; p = all.find('"', p)) {
      std::string w;
      for (p++; p < all.size() && all[p] != '"'; p++) {
        if (all[p] != '\\' || p + 1 >= all.size()) {
          w += all[p];
          continue;
        }
        char e = all[++p];
        if (e == 'x' && p + 2 < all.size()) {
          w += static_cast<char>(std::stoi(all.substr(p + 1, 2), nullptr, 16));
          p += 2;
        } else {
          w += e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
        }
      }
      out.push_back(w);
      p++;
    }
    return out;
  }

  // The owner in a change-log event's item header (bb_codec.h's format):
  // "<kind> <rev> <time> <expiry> <id len>:<id><key len>:<key><header>...".
  static std::string EventOwner(const std::string& ev) {
    size_t p = 0;
    for (int i = 0; i < 4; i++) p = ev.find(' ', p) + 1;
    size_t c = ev.find(':', p);
    p = c + 1 + std::stoul(ev.substr(p, c - p));  // past the id
    c = ev.find(':', p);
    p = c + 1 + std::stoul(ev.substr(p, c - p));  // past the key
    for (int i = 0; i < 7; i++) p = ev.find(' ', p) + 1;
    c = ev.find(':', p);
    return ev.substr(c + 1, std::stoul(ev.substr(p, c - p)));
  }

  // The board accounting of tenant (field -> value).
  static std::map<std::string, std::string> BoardAccounting(const std::string& tenant) {
    std::vector<std::string> w = RedisWords(
        {"HGETALL", "memoryd:quota:bb:" + std::to_string(tenant.size()) + ":" + tenant + ":h"});
    std::map<std::string, std::string> out;
    for (size_t i = 0; i + 1 < w.size(); i += 2) out[w[i]] = w[i + 1];
    return out;
  }

  double Metric(const std::string& series) {
    int port = MetricsPortFromLog(m_->Log());
    EXPECT_GT(port, 0) << m_->Log();
    return MetricSample(ScrapeMetrics(port), series);
  }

  PgTestDb db_;
  std::string tenant_;
  std::unique_ptr<MemorydProcess> m_;
  std::shared_ptr<grpc::Channel> ch_;
};

const char kBoards[] = "blackboard:read blackboard:write";
const char kSessions[] = "session:read session:write";

TEST_F(QuotaTest, BoardsAreCountedPerPrincipalAndPerTenantUntilTheyExpire) {
  Up({"--quota-boards-per-principal=2", "--quota-boards-per-tenant=3"});
  std::string alice = Token("alice", kBoards), bob = Token("bob", kBoards);
  // alice's two boards live 6 s: long enough for the refusals, short
  // enough to wait for.
  ASSERT_TRUE(Post(alice, "a1", "k", 10, 6).status.ok());
  ASSERT_TRUE(Post(alice, "a2", "k", 10, 6).status.ok());
  Result third = Post(alice, "a3", "k", 10);
  ExpectQuota(third, "--quota-boards-per-principal");
  EXPECT_NE(std::string::npos, third.status.error_message().find("2 boards"))
      << third.status.error_message();
  // A board that exists takes more keys; others create boards of theirs.
  EXPECT_TRUE(Post(alice, "a1", "k2", 10, 1).status.ok());
  ASSERT_TRUE(Post(bob, "b1", "k", 10).status.ok());
  ExpectQuota(Post(bob, "b2", "k", 10), "--quota-boards-per-tenant");
  // Another tenant is not held to this one's count.
  EXPECT_TRUE(Post(Token("carol", kBoards, tenant_ + "-other"), "c1", "k", 10).status.ok());
  // The refusals changed nothing: a3 and b2 do not exist.
  BlackboardReadRequest read;
  read.set_task_id("a3");
  BlackboardReadResponse rr;
  Result got = Call("/memory.v1.Blackboard/Read", read, alice);
  ASSERT_TRUE(got.status.ok() && rr.ParseFromString(got.body));
  EXPECT_EQ(0, rr.version());

  EXPECT_EQ(2, Metric("memoryd_quota_limit{tier=\"blackboard\",quota=\"count_per_principal\"}"));
  EXPECT_EQ(1, Metric("memoryd_quota_refusals_total{tier=\"blackboard\",quota=\"count_per_"
                      "principal\"}"));
  EXPECT_EQ(1, Metric("memoryd_quota_refusals_total{tier=\"blackboard\",quota=\"count_per_"
                      "tenant\"}"));
  EXPECT_EQ(1, Metric("memoryd_quota_use_peak_ratio{tier=\"blackboard\",quota=\"count_per_"
                      "tenant\"}"));

  // alice's boards expire (the post of k2 kept a1's 6 s): her count and
  // the tenant's go down by two.
  EXPECT_TRUE(Eventually([&] { return Post(alice, "a3", "k", 10); }).status.ok());
  // a1 and a2 expire a moment apart: bob's post may have to wait for a2.
  EXPECT_TRUE(Eventually([&] { return Post(bob, "b2", "k", 10); }).status.ok());
  ExpectQuota(Post(alice, "a4", "k", 10), "--quota-boards-per-tenant");
}

TEST_F(QuotaTest, BoardBytesCountItemsAndTheirChangeLogUntilTheyGo) {
  // A change log of two entries: deleted values leave it two changes later.
  Up({"--quota-board-mib-per-principal=1", "--quota-board-mib-per-tenant=1",
      "--blackboard-log-entries=2"});
  std::string alice = Token("alice", kBoards), bob = Token("bob", kBoards);
  ASSERT_TRUE(Post(alice, "t", "a0", kBig).status.ok());
  ASSERT_TRUE(Post(alice, "t", "a1", kBig).status.ok());
  Result over = Post(alice, "t", "a2", kBig);
  ExpectQuota(over, "--quota-board-mib-per-principal");
  EXPECT_NE(std::string::npos, over.status.error_message().find("1048576 allowed"))
      << over.status.error_message();
  // Small writes still fit; bob's big one passes the tenant's MiB.
  EXPECT_TRUE(Post(alice, "t", "small", 100).status.ok());
  ExpectQuota(Post(bob, "t2", "b0", kBig), "--quota-board-mib-per-tenant");
  EXPECT_TRUE(Post(bob, "t2", "b0", 100).status.ok());

  // Deleting a0 and a1 frees their items; their values leave the change
  // log as two later changes push them out: the MiB is alice's again.
  ASSERT_TRUE(Delete(alice, "t", "a0").status.ok());
  ASSERT_TRUE(Delete(alice, "t", "a1").status.ok());
  EXPECT_TRUE(Post(alice, "t", "a2", kBig).status.ok());
  EXPECT_TRUE(Post(alice, "t", "a3", kBig / 2).status.ok());
  ExpectQuota(Post(alice, "t", "a4", kBig), "--quota-board-mib-per-principal");

  // Forget erases alice's items and the log's puts of them: bob may use
  // the tenant's MiB.
  Result f = Forget("alice");
  ASSERT_TRUE(f.status.ok()) << f.status.error_message();
  EXPECT_TRUE(Post(bob, "t2", "b1", kBig).status.ok());
  EXPECT_EQ(kMiB, Metric("memoryd_quota_limit{tier=\"blackboard\",quota=\"bytes_per_principal\"}"));
  EXPECT_EQ(3, Metric("memoryd_quota_refusals_total{tier=\"blackboard\",quota=\"bytes_per_"
                      "principal\"}") +
                   Metric("memoryd_quota_refusals_total{tier=\"blackboard\",quota=\"bytes_per_"
                          "tenant\"}"));
  double peak =
      Metric("memoryd_quota_use_peak_ratio{tier=\"blackboard\",quota=\"bytes_per_principal\"}");
  EXPECT_GT(peak, 0.9);
  EXPECT_LE(peak, 1.0);
}

TEST_F(QuotaTest, SessionsAreCountedPerPrincipalAndPerTenantUntilTheirPurge) {
  Up({"--quota-sessions-per-principal=2", "--quota-sessions-per-tenant=3", "--session-grace-ms=0"});
  std::string alice = Token("alice", kSessions), bob = Token("bob", kSessions);
  std::string s1;
  ASSERT_TRUE(Start(alice, 6, &s1).status.ok());
  ASSERT_TRUE(Start(alice, 6).status.ok());
  Result third = Start(alice);
  ExpectQuota(third, "--quota-sessions-per-principal");
  EXPECT_NE(std::string::npos, third.status.error_message().find("2 sessions"))
      << third.status.error_message();
  ASSERT_TRUE(Start(bob).status.ok());
  ExpectQuota(Start(bob), "--quota-sessions-per-tenant");
  EXPECT_TRUE(Start(Token("carol", kSessions, tenant_ + "-other")).status.ok());
  EXPECT_EQ(1, Metric("memoryd_quota_refusals_total{tier=\"session\",quota=\"count_per_"
                      "tenant\"}"));
  // Ending a session (no grace) frees its place; alice's other one,
  // unused, expires within 6 s.
  SessionEndRequest end;
  end.set_session_id(s1);
  ASSERT_TRUE(Call("/memory.v1.Session/End", end, alice).status.ok());
  EXPECT_TRUE(Eventually([&] { return Start(bob); }).status.ok());
  EXPECT_TRUE(Eventually([&] { return Start(alice); }).status.ok());
}

TEST_F(QuotaTest, SessionBytesArePerPrincipalAndPerTenantAndForgetFreesThem) {
  Up({"--quota-session-mib-per-principal=1", "--quota-session-mib-per-tenant=1"});
  std::string alice = Token("alice", kSessions), bob = Token("bob", kSessions);
  std::string sa, sb;
  ASSERT_TRUE(Start(alice, 60, &sa).status.ok());
  ASSERT_TRUE(Start(bob, 60, &sb).status.ok());
  for (int i = 0; i < 4; i++)
    ASSERT_TRUE(Set(alice, sa, "k" + std::to_string(i), kBig).status.ok()) << i;
  ExpectQuota(Set(alice, sa, "k4", kBig), "--quota-session-mib-per-principal");
  // bob's first value passes the tenant's MiB, a smaller one fits;
  // replacing a value with a smaller one always goes.
  ExpectQuota(Set(bob, sb, "b0", kBig), "--quota-session-mib-per-tenant");
  EXPECT_TRUE(Set(bob, sb, "b0", kBig / 10).status.ok());
  EXPECT_TRUE(Set(alice, sa, "k0", 10).status.ok());
  // A Forget of alice ends her session and frees its bytes.
  Result f = Forget("alice");
  ASSERT_TRUE(f.status.ok()) << f.status.error_message();
  EXPECT_TRUE(Set(bob, sb, "b1", kBig).status.ok());
  EXPECT_TRUE(Set(bob, sb, "b2", kBig).status.ok());
  EXPECT_EQ(1, Metric("memoryd_quota_refusals_total{tier=\"session\",quota=\"bytes_per_"
                      "tenant\"}"));
  EXPECT_EQ(1, Metric("memoryd_quota_refusals_total{tier=\"session\",quota=\"bytes_per_"
                      "principal\"}"));
}

// Every way bytes come and go (posts, replaced and deleted values, leases,
// the change log's roll-over, Forget's cut of the log, expiry) keeps each
// principal's use equal to what its items and the log's events about them
// take in Redis, and it all comes back to nothing as the boards expire.
TEST_F(QuotaTest, BoardAccountingMatchesWhatRedisHoldsAndEndsWithTheBoards) {
  Up({"--blackboard-log-entries=5"});
  std::string alice = Token("alice", kBoards), bob = Token("bob", kBoards);
  const int kTtl = 8;  // the boards outlive the checks, then expire
  for (int i = 0; i < 20; i++) {
    std::string task = "b" + std::to_string(i % 4), key = "k" + std::to_string(i % 7);
    ASSERT_TRUE(
        Post(i % 3 ? alice : bob, task, key + (i % 3 ? "" : "-bob"), 50 + 37 * i, kTtl).status.ok())
        << i;
    if (i % 5 == 4) {
      Result d = Delete(alice, task, key);
      ASSERT_TRUE(d.status.ok() || d.status.error_code() == StatusCode::NOT_FOUND) << i;
    }
  }
  BlackboardPostRequest lease;
  lease.set_task_id("b0");
  lease.set_key("claim");
  lease.mutable_value()->set_string_value("mine");
  lease.mutable_lease_ttl()->set_seconds(1);
  ASSERT_TRUE(Call("/memory.v1.Blackboard/Post", lease, alice).status.ok());
  // bob's last puts are still in the logs when Forget cuts them.
  for (int i = 0; i < 4; i++)
    ASSERT_TRUE(Post(bob, "b" + std::to_string(i), "last", 300, kTtl).status.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the lease runs out
  ASSERT_TRUE(Post(alice, "b0", "after-lease", 20, kTtl).status.ok());
  ASSERT_TRUE(Forget("bob").status.ok());

  std::map<std::string, int64_t> held;  // owner -> bytes of items and events
  for (int i = 0; i < 4; i++) {
    std::string base = "memoryd:bb:{" + std::to_string(tenant_.size()) + ":" + tenant_ + ":b" +
                       std::to_string(i) + "}";
    std::vector<std::string> hk = RedisWords({"HGETALL", base + ":k"});
    for (size_t j = 1; j < hk.size(); j += 2) {
      // "<version> <label> <create> <update> <lease> <pii> <size> <len>:<owner>"
      std::istringstream in(hk[j]);
      std::string f[7], owner;
      for (auto& x : f) in >> x;
      in >> owner;
      held[owner.substr(owner.find(':') + 1)] += std::stoll(f[6]);
    }
    for (const std::string& ev : RedisWords({"LRANGE", base + ":l", "0", "-1"}))
      held[EventOwner(ev)] += static_cast<int64_t>(ev.size());
  }
  auto h = BoardAccounting(tenant_);
  ASSERT_EQ(2u, held.size());
  for (const auto& [owner, bytes] : held)
    EXPECT_EQ(std::to_string(bytes), h["b:" + owner]) << owner;
  EXPECT_EQ(std::to_string(held["alice"] + held["bob"]), h["b"]);
  EXPECT_EQ("4", h["n"]);

  // Once the four boards expired, a post elsewhere releases them: what is
  // left is that board alone.
  auto until = Clock::now() + std::chrono::seconds(kTtl + 20);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ASSERT_TRUE(Post(alice, "z", "k", 10).status.ok());
    h = BoardAccounting(tenant_);
  } while (h["n"] != "1" && Clock::now() < until);
  EXPECT_EQ("1", h["n"]);
  EXPECT_EQ(h["b"], h["b:alice"]);
  EXPECT_EQ(0u, h.count("b:bob"));
  EXPECT_LT(std::stoll(h["b"]), 2000);
}

}  // namespace
