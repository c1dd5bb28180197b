// The fault suite: memoryd under load while its world breaks, each scenario
// with its own PostgreSQL (PgServer) and Redis (RedisServer) so it may kill,
// stop or freeze them. Run alone with `make faults`; `make test` runs it too.
// Every scenario prints its figures on lines starting "fault-suite:".
//
//   - SIGKILL under write load loses no acknowledged write;
//   - PostgreSQL stopped, and frozen (SIGSTOP), under load: calls end by
//     their deadline with UNAVAILABLE or DEADLINE_EXCEEDED, health answers
//     promptly throughout and says NOT_SERVING, writes work again soon
//     after PostgreSQL is back, without restarting memoryd;
//   - Redis killed under load: no call that does not need Redis fails;
//   - SIGTERM with calls queued behind a lock: none of them fails, later
//     calls are refused UNAVAILABLE, exit 0 within the grace.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.pb.h"
#include "memory/v1/blackboard.pb.h"
#include "memory/v1/cache.pb.h"
#include "memory/v1/entries.pb.h"
#include "memory/v1/session.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_server.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/test_keys.h"

namespace {

using grpc::StatusCode;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using memory::v1::CacheGetRequest;
using memory::v1::CacheSetRequest;
using memory::v1::EntriesReadRequest;
using memory::v1::EntriesWriteRequest;
using testing_client::Result;
using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

void Figure(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void Figure(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::printf("fault-suite: ");
  std::vprintf(fmt, ap);
  std::printf("\n");
  std::fflush(stdout);
  va_end(ap);
}

// Samples Health.Check("") every 20 ms on its own channel while it lives:
// how long each answer took and what it said.
class HealthSampler {
 public:
  explicit HealthSampler(int port) : ch_(testing_client::Connect(port)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~HealthSampler() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // The first time since `since` it said NOT_SERVING, in ms after since; -1 never.
  int64_t NotServingAfter(Clock::time_point since) {
    std::lock_guard<std::mutex> g(mu_);
    for (const auto& s : samples_)
      if (s.at >= since && s.status == HealthCheckResponse::NOT_SERVING)
        return std::chrono::duration_cast<std::chrono::milliseconds>(s.at - since).count();
    return -1;
  }
  // Latencies (ms) of every sample, sorted; failed checks count as 10^6.
  std::vector<int64_t> Latencies() {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<int64_t> v;
    for (const auto& s : samples_) v.push_back(s.status < 0 ? 1000000 : s.ms);
    std::sort(v.begin(), v.end());
    return v;
  }

 private:
  struct Sample {
    Clock::time_point at;
    int64_t ms;
    int status;  // a HealthCheckResponse status, or -gRPC code
  };
  void Loop() {
    HealthCheckRequest req;
    std::string body = req.SerializeAsString();
    while (!stop_) {
      auto t0 = Clock::now();
      Result r = testing_client::Unary(ch_, "/grpc.health.v1.Health/Check", body, 2000);
      HealthCheckResponse resp;
      int status =
          r.status.ok() && resp.ParseFromString(r.body) ? resp.status() : -r.status.error_code();
      {
        std::lock_guard<std::mutex> g(mu_);
        samples_.push_back({t0, MsSince(t0), status});
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::shared_ptr<grpc::Channel> ch_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Sample> samples_;
  std::thread thread_;
};

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return -1;
  size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1));
  return sorted[i];
}

class FaultSuite : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(pg_.ok()) << pg_.error(); }

  // A memoryd on this scenario's PostgreSQL; a second one (after SIGKILL)
  // trusts the first one's keys so the same tokens work.
  std::unique_ptr<MemorydProcess> Launch(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--pg-url=" + pg_.url(), "--health-interval-ms=100",
                                     "--pg-connect-timeout=1"};
    if (first_) args.push_back("--jwks=" + first_->keys()->jwks_path());
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(p->Start()) << p->Log();
    if (!first_) first_ = p.get();
    return p;
  }

  std::string Token(const std::string& scope = "entries:* cache:read cache:write") {
    TestClaims c;
    c.tenant = "faults";
    c.scope = scope;
    return first_->keys()->Mint(c);
  }

  static Result Write(const std::shared_ptr<grpc::Channel>& ch, const std::string& tok,
                      const std::string& key, int deadline_ms) {
    EntriesWriteRequest req;
    req.set_namespace_("fault:suite:n");
    req.set_key(key);
    req.set_value("value of " + key);
    return testing_client::Unary(ch, "/memory.v1.Entries/Write", req.SerializeAsString(),
                                 deadline_ms, {{"authorization", TestKeys::Bearer(tok)}});
  }

  static Result Read(const std::shared_ptr<grpc::Channel>& ch, const std::string& tok,
                     const std::string& key, int deadline_ms = 5000) {
    EntriesReadRequest req;
    req.set_namespace_("fault:suite:n");
    req.set_key(key);
    return testing_client::Unary(ch, "/memory.v1.Entries/Read", req.SerializeAsString(),
                                 deadline_ms, {{"authorization", TestKeys::Bearer(tok)}});
  }

  // How long after `from` a write first succeeds, trying every 50 ms for
  // up to limit_ms; -1 if none did.
  static int64_t FirstWriteAfter(const std::shared_ptr<grpc::Channel>& ch, const std::string& tok,
                                 Clock::time_point from, int64_t limit_ms) {
    for (int i = 0; MsSince(from) < limit_ms; i++) {
      if (Write(ch, tok, "back-" + std::to_string(i), 1000).status.ok()) return MsSince(from);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  // A PostgreSQL outage (stop, or freeze) under write load: four writers
  // with 1 s deadlines, health sampled throughout.
  void PostgresOutage(const char* name, bool freeze) {
    auto m = Launch({"--shutdown-grace=2"});
    auto ch = testing_client::Connect(m->port());
    std::string tok = Token();
    ASSERT_TRUE(Write(ch, tok, "before", 5000).status.ok());
    HealthSampler health(m->port());
    std::atomic<bool> stop{false};
    std::atomic<int> ok{0}, expected_failures{0}, wrong{0}, late{0};
    std::atomic<bool> outage{false};
    const int kDeadlineMs = 1000;
    std::vector<std::thread> writers;
    for (int w = 0; w < 4; w++)
      writers.emplace_back([&, w] {
        for (int i = 0; !stop; i++) {
          bool during = outage;
          Result r = Write(ch, tok, "w" + std::to_string(w) + "-" + std::to_string(i), kDeadlineMs);
          if (r.status.ok()) {
            ok++;
            continue;
          }
          if (r.elapsed.count() > kDeadlineMs + 500) late++;
          if (r.status.error_code() == StatusCode::UNAVAILABLE ||
              r.status.error_code() == StatusCode::DEADLINE_EXCEEDED)
            expected_failures++;
          else if (during)
            wrong++;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    int ok_before = ok;
    auto down_at = Clock::now();
    outage = true;
    ASSERT_TRUE(freeze ? pg_.Freeze() : pg_.Stop()) << pg_.error();
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    int64_t not_serving_ms = health.NotServingAfter(down_at);
    auto up_at = Clock::now();
    ASSERT_TRUE(freeze ? pg_.Thaw() : pg_.Start()) << pg_.error();
    int64_t back_ms = FirstWriteAfter(ch, tok, up_at, 10000);
    stop = true;
    for (auto& t : writers) t.join();
    health.Stop();
    auto lat = health.Latencies();
    Figure(
        "postgres %s: %d writes before, %d ended UNAVAILABLE/DEADLINE_EXCEEDED, %d another "
        "way, %d past deadline+500ms; health NOT_SERVING after %lld ms; health latency p50 "
        "%lld ms, p95 %lld ms, max %lld ms over %zu checks; writes back %lld ms after "
        "PostgreSQL returned",
        name, ok_before, expected_failures.load(), wrong.load(), late.load(),
        static_cast<long long>(not_serving_ms), static_cast<long long>(Percentile(lat, 0.5)),
        static_cast<long long>(Percentile(lat, 0.95)), static_cast<long long>(lat.back()),
        lat.size(), static_cast<long long>(back_ms));
    EXPECT_GT(ok_before, 0);
    EXPECT_GT(expected_failures.load(), 0) << "no write noticed the outage";
    EXPECT_EQ(0, wrong.load()) << m->Log();
    EXPECT_EQ(0, late.load()) << "calls ended well past their deadline";
    EXPECT_GE(not_serving_ms, 0) << "health never said NOT_SERVING";
    EXPECT_LT(not_serving_ms, 2500);
    // The requirement is 100 ms; the bound has room for a loaded CI machine.
    EXPECT_LE(Percentile(lat, 0.95), 100) << "health answered slowly during the outage";
    EXPECT_LT(lat.back(), 1000) << "a health check stalled";
    EXPECT_GE(back_ms, 0) << "writes never worked again\n" << m->Log();
    EXPECT_LT(back_ms, 3000) << "writes took long to work again (the requirement is 2 s)";
    EXPECT_TRUE(Read(ch, tok, "before").status.ok());
    EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
  }

  PgServer pg_;
  MemorydProcess* first_ = nullptr;  // owned by the scenario
};

TEST_F(FaultSuite, SigkillUnderWriteLoadLosesNoAcknowledgedWrite) {
  auto m = Launch();
  auto ch = testing_client::Connect(m->port());
  std::string tok = Token();
  std::mutex mu;
  std::vector<std::string> acked;
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; w++)
    writers.emplace_back([&, w] {
      for (int i = 0; !stop; i++) {
        std::string key = "k" + std::to_string(w) + "-" + std::to_string(i);
        if (Write(ch, tok, key, 2000).status.ok()) {
          std::lock_guard<std::mutex> g(mu);
          acked.push_back(key);
        } else {
          failed++;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_EQ(0, kill(m->pid(), SIGKILL));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& t : writers) t.join();
  EXPECT_EQ(-1, m->Wait(5000));  // killed by a signal

  auto again = Launch();
  auto ch2 = testing_client::Connect(again->port());
  size_t lost = 0;
  for (const auto& key : acked) {
    Result r = Read(ch2, tok, key);
    if (!r.status.ok()) {
      lost++;
      ADD_FAILURE() << key << ": " << r.status.error_code() << " " << r.status.error_message();
      if (lost > 5) break;
    }
  }
  Figure(
      "sigkill: %zu writes acknowledged in 1.5 s by 8 writers, %zu lost after restart; %d "
      "failed (the kill)",
      acked.size(), lost, failed.load());
  EXPECT_GT(acked.size(), 50u);
  EXPECT_EQ(0u, lost);
  EXPECT_EQ(0, again->Stop(SIGTERM, 10000)) << again->Log();
}

TEST_F(FaultSuite, PostgresStoppedUnderLoad) { PostgresOutage("stopped", false); }

TEST_F(FaultSuite, PostgresFrozenUnderLoad) { PostgresOutage("frozen", true); }

// Redis killed: Entries (PostgreSQL only) never notices; Cache calls say
// UNAVAILABLE or are answered from L1, and never hang.
TEST_F(FaultSuite, RedisKilledFailsNoNonCacheCall) {
  RedisServer redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  auto m = Launch({"--redis-url=" + redis.url(), "--shutdown-grace=2"});
  auto ch = testing_client::Connect(m->port());
  std::string tok = Token();
  std::atomic<bool> stop{false};
  std::atomic<int> entries_ok{0}, entries_failed{0}, cache_ok{0}, cache_failed{0}, cache_slow{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < 3; w++)
    ts.emplace_back([&, w] {
      for (int i = 0; !stop; i++) {
        std::string key = "r" + std::to_string(w) + "-" + std::to_string(i);
        Result wr = Write(ch, tok, key, 5000);
        Result rd = wr.status.ok() ? Read(ch, tok, key) : wr;
        if (wr.status.ok() && rd.status.ok()) {
          entries_ok++;
        } else {
          entries_failed++;
          ADD_FAILURE() << key << ": " << rd.status.error_code() << " "
                        << rd.status.error_message();
        }
      }
    });
  // Cache calls, each timed: during the outage none may wait on Redis (a
  // reconnect, a reply that will not come); L1 and the refusal are at hand.
  std::atomic<bool> outage{false};
  std::mutex mu;
  std::vector<int64_t> outage_us;  // Cache.Set and Cache.Get during the outage
  ts.emplace_back([&] {
    for (int i = 0; !stop; i++) {
      CacheSetRequest set;
      set.set_key("c" + std::to_string(i % 20));
      set.set_value("v");
      set.mutable_ttl()->set_seconds(60);
      CacheGetRequest get;
      get.set_key(set.key());
      bool during = outage;
      auto t0 = Clock::now();
      Result r = testing_client::Unary(ch, "/memory.v1.Cache/Set", set.SerializeAsString(), 2000,
                                       {{"authorization", TestKeys::Bearer(tok)}});
      auto t1 = Clock::now();
      Result g = testing_client::Unary(ch, "/memory.v1.Cache/Get", get.SerializeAsString(), 2000,
                                       {{"authorization", TestKeys::Bearer(tok)}});
      auto t2 = Clock::now();
      (r.status.ok() ? cache_ok : cache_failed)++;
      if (r.elapsed.count() > 2500 || g.elapsed.count() > 2500) cache_slow++;
      if (during && outage) {
        std::lock_guard<std::mutex> l(mu);
        for (auto d : {t1 - t0, t2 - t1})
          outage_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  int cache_ok_before = cache_ok;
  outage = true;
  ASSERT_TRUE(redis.Stop()) << redis.error();
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  stop = true;
  for (auto& t : ts) t.join();
  std::sort(outage_us.begin(), outage_us.end());
  Figure(
      "redis killed: %d Entries write+read pairs ok, %d failed; Cache.Set %d ok (%d before "
      "the kill), %d failed, %d slower than 2.5 s; cache calls during the outage: %zu, p50 "
      "%lld us, p99 %lld us, max %lld us",
      entries_ok.load(), entries_failed.load(), cache_ok.load(), cache_ok_before,
      cache_failed.load(), cache_slow.load(), outage_us.size(),
      static_cast<long long>(Percentile(outage_us, 0.5)),
      static_cast<long long>(Percentile(outage_us, 0.99)),
      static_cast<long long>(outage_us.empty() ? -1 : outage_us.back()));
  EXPECT_GT(entries_ok.load(), 10);
  EXPECT_EQ(0, entries_failed.load());
  EXPECT_GT(cache_ok_before, 0);
  EXPECT_EQ(0, cache_slow.load());
  ASSERT_GT(outage_us.size(), 100u);
  // The requirement is 10 ms; the bound leaves room for a loaded CI machine
  // under ASan, and still fails a call that waited on Redis (the 1 s cap
  // of a cache command, or a reconnect's backoff).
  EXPECT_LE(Percentile(outage_us, 0.99), 100 * 1000) << "cache calls waited on Redis";
  // A wait on Redis takes a cache command's 1 s cap; noise under ASan on a
  // loaded machine reached 0.32 s.
  EXPECT_LT(outage_us.back(), 900 * 1000) << "a cache call waited on Redis";
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

// One caller's short deadlines are its own business: an attacker sending
// Blackboard.Post and Session.Set with 1 ms deadlines in a loop never makes
// Redis "unreachable" for a victim's reads with 2 s deadlines.
TEST_F(FaultSuite, ShortDeadlinesOfOneCallerNeverFailAnother) {
  RedisServer redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  auto m = Launch({"--redis-url=" + redis.url(), "--shutdown-grace=2"});
  std::string tok = Token("blackboard:read blackboard:write session:read session:write");
  auto attacker_ch = testing_client::Connect(m->port());
  auto victim_ch = testing_client::Connect(m->port());
  std::map<std::string, std::string> auth = {{"authorization", TestKeys::Bearer(tok)}};
  memory::v1::SessionStartRequest start;
  Result started = testing_client::Unary(victim_ch, "/memory.v1.Session/Start",
                                         start.SerializeAsString(), 5000, auth);
  ASSERT_TRUE(started.status.ok()) << started.status.error_message();
  memory::v1::SessionStartResponse sr;
  ASSERT_TRUE(sr.ParseFromString(started.body));
  const std::string sid = sr.session().session_id();
  memory::v1::SessionSetRequest set;
  set.set_session_id(sid);
  set.set_key("k");
  set.set_value(std::string(4096, 'v'));
  memory::v1::BlackboardPostRequest post;
  post.set_task_id("victim-board");
  post.set_key("k");
  post.mutable_value()->set_string_value(std::string(4096, 'v'));
  ASSERT_TRUE(testing_client::Unary(victim_ch, "/memory.v1.Blackboard/Post",
                                    post.SerializeAsString(), 5000, auth)
                  .status.ok());
  ASSERT_TRUE(testing_client::Unary(victim_ch, "/memory.v1.Session/Set", set.SerializeAsString(),
                                    5000, auth)
                  .status.ok());

  std::atomic<bool> stop{false};
  std::atomic<int> attacks{0}, attacks_cut{0};
  std::vector<std::thread> attackers;
  for (int a = 0; a < 2; a++)
    attackers.emplace_back([&, a] {
      for (int i = 0; !stop; i++) {
        bool board = (i + a) % 2 == 0;
        Result r = board ? testing_client::Unary(attacker_ch, "/memory.v1.Blackboard/Post",
                                                 post.SerializeAsString(), 1, auth)
                         : testing_client::Unary(attacker_ch, "/memory.v1.Session/Set",
                                                 set.SerializeAsString(), 1, auth);
        attacks++;
        if (r.status.error_code() == StatusCode::DEADLINE_EXCEEDED) attacks_cut++;
      }
    });
  memory::v1::BlackboardReadRequest read;
  read.set_task_id("victim-board");
  memory::v1::SessionGetRequest get;
  get.set_session_id(sid);
  get.set_key("k");
  int reads = 0, failed = 0;
  std::vector<std::string> failures;  // the first few
  for (auto t0 = Clock::now(); MsSince(t0) < 5000; reads++) {
    bool board = reads % 2 == 0;
    Result r = board ? testing_client::Unary(victim_ch, "/memory.v1.Blackboard/Read",
                                             read.SerializeAsString(), 2000, auth)
                     : testing_client::Unary(victim_ch, "/memory.v1.Session/Get",
                                             get.SerializeAsString(), 2000, auth);
    if (r.status.ok()) continue;
    if (failed++ < 5)
      failures.push_back((board ? "Blackboard.Read: " : "Session.Get: ") +
                         std::to_string(r.status.error_code()) + " " + r.status.error_message());
  }
  stop = true;
  for (auto& t : attackers) t.join();
  Figure(
      "short deadlines of another caller: %d attacker calls with 1 ms deadlines (%d cut by "
      "their deadline); %d victim reads with 2 s deadlines, %d failed",
      attacks.load(), attacks_cut.load(), reads, failed);
  EXPECT_GT(attacks_cut.load(), 10) << "the attack never ran out of deadline";
  EXPECT_GT(reads, 10);  // the victim ran throughout (49 in 5 s under ASan, 2000+ without)
  EXPECT_EQ(0, failed) << (failures.empty() ? "" : failures[0]) << "\n" << m->Log();
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

// A write Redis applied keeps its audit row and, in a durable session, its
// PostgreSQL copy, whatever its client does: posts and sets with 1-6 ms
// deadlines, and cancelled 0-4 ms after they were sent. Afterwards every
// key Redis holds has its OK audit row, and every session record its copy.
TEST_F(FaultSuite, AWriteRedisAppliedKeepsItsAuditRowAndDurableCopy) {
  RedisServer redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  auto m = Launch({"--redis-url=" + redis.url(), "--shutdown-grace=2"});
  auto ch = testing_client::Connect(m->port());
  std::string tok = Token("blackboard:read blackboard:write session:read session:write");
  std::map<std::string, std::string> auth = {{"authorization", TestKeys::Bearer(tok)}};
  memory::v1::SessionStartRequest start;
  start.set_durable(true);
  Result started =
      testing_client::Unary(ch, "/memory.v1.Session/Start", start.SerializeAsString(), 5000, auth);
  ASSERT_TRUE(started.status.ok()) << started.status.error_message();
  memory::v1::SessionStartResponse sr;
  ASSERT_TRUE(sr.ParseFromString(started.body));
  const std::string sid = sr.session().session_id();

  const int kWrites = 160;
  int cut = 0;
  for (int i = 0; i < kWrites; i++) {
    std::string key = "k" + std::to_string(i), method, body;
    if (i % 2 == 0) {
      memory::v1::BlackboardPostRequest p;
      p.set_task_id("durable-board");
      p.set_key(key);
      p.mutable_value()->set_string_value("v" + std::to_string(i));
      method = "/memory.v1.Blackboard/Post", body = p.SerializeAsString();
    } else {
      memory::v1::SessionSetRequest set;
      set.set_session_id(sid);
      set.set_key(key);
      set.set_value("v" + std::to_string(i));
      method = "/memory.v1.Session/Set", body = set.SerializeAsString();
    }
    int step = (i / 2) % 6;
    if ((i / 2) % 2 == 0) {  // a short deadline
      if (!testing_client::Unary(ch, method, body, 1 + step, auth).status.ok()) cut++;
    } else {  // a cancel, at one step or another of the call
      testing_client::Stream st(ch, method, 5000, auth);
      st.Write(body);
      st.WritesDone();
      std::this_thread::sleep_for(std::chrono::microseconds(step * 800));
      st.Cancel();
      if (!st.Finish().ok()) cut++;
    }
  }
  // What Redis holds now (nothing writes any more).
  memory::v1::BlackboardReadRequest read;
  read.set_task_id("durable-board");
  memory::v1::BlackboardReadResponse board;
  ASSERT_TRUE(board.ParseFromString(
      testing_client::Unary(ch, "/memory.v1.Blackboard/Read", read.SerializeAsString(), 5000, auth)
          .body));
  memory::v1::SessionListRequest list;
  list.set_session_id(sid);
  list.set_with_values(true);
  memory::v1::SessionListResponse session;
  ASSERT_TRUE(session.ParseFromString(
      testing_client::Unary(ch, "/memory.v1.Session/List", list.SerializeAsString(), 5000, auth)
          .body));
  std::set<std::string> in_session;
  for (const auto& r : session.records()) in_session.insert(r.key() + "=" + r.value());
  // Their audit rows and copies are written after the clients left: wait.
  PgSession pg(pg_.url());
  ASSERT_TRUE(pg.ok()) << pg.error();
  auto ok_rows = [&](const char* method) {
    return std::stoi(pg.Value(std::string("SELECT count(*) FROM audit_log WHERE method = '") +
                              method + "' AND status_code = 0"));
  };
  auto copies = [&] {
    std::set<std::string> v;
    PGresult* r =
        PQexec(pg.conn(), "SELECT key || '=' || convert_from(value, 'UTF8') FROM session_records");
    for (int i = 0; i < PQntuples(r); i++) v.insert(PQgetvalue(r, i, 0));
    PQclear(r);
    return v;
  };
  for (auto t0 = Clock::now(); MsSince(t0) < 15000;) {
    if (ok_rows("/memory.v1.Blackboard/Post") == board.items_size() &&
        ok_rows("/memory.v1.Session/Set") == session.records_size() && copies() == in_session)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Figure(
      "cancelled writes: %d posts and sets with 1-6 ms deadlines or a cancel, %d cut short; "
      "Redis holds %d board keys and %d session records",
      kWrites, cut, board.items_size(), session.records_size());
  EXPECT_GT(cut, 0) << "no call was cut short: nothing was tried";
  EXPECT_GT(board.items_size() + session.records_size(), 0);
  EXPECT_EQ(board.items_size(), ok_rows("/memory.v1.Blackboard/Post"));
  EXPECT_EQ(session.records_size(), ok_rows("/memory.v1.Session/Set"));
  EXPECT_EQ(in_session, copies());
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

// SIGTERM with 16 writes waiting on a lock: they are accepted, so they all
// succeed once the lock goes (within the 10 s grace); a call that comes
// after SIGTERM is refused UNAVAILABLE without running (safe to retry);
// health checks are still answered (NOT_SERVING); memoryd exits 0.
TEST_F(FaultSuite, SigtermWithCallsQueuedFailsNone) {
  auto m = Launch({"--shutdown-grace=10"});
  auto ch = testing_client::Connect(m->port());
  std::string tok = Token();
  ASSERT_TRUE(Write(ch, tok, "seed", 5000).status.ok());
  PgSession locker(pg_.url());
  ASSERT_TRUE(locker.ok()) << locker.error();
  locker.Value("BEGIN");
  locker.Value("LOCK TABLE entries IN EXCLUSIVE MODE");
  const int kCalls = 16;
  std::vector<Result> rs(kCalls);
  std::vector<std::thread> ts;
  for (int i = 0; i < kCalls; i++)
    ts.emplace_back([&, i] { rs[i] = Write(ch, tok, "queued-" + std::to_string(i), 20000); });
  // Wait until the writes wait on the lock (as many as memoryd's pool has
  // connections; the rest queue for one).
  for (int i = 0; i < 100 && locker.LockWaiters() < 1; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(locker.LockWaiters(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto term_at = Clock::now();
  ASSERT_EQ(0, kill(m->pid(), SIGTERM));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Result late = Write(ch, tok, "after-sigterm", 5000);
  HealthCheckRequest hreq;
  Result health =
      testing_client::Unary(ch, "/grpc.health.v1.Health/Check", hreq.SerializeAsString(), 2000);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  locker.Value("COMMIT");
  for (auto& t : ts) t.join();
  int code = m->Wait(15000);
  int64_t exit_ms = MsSince(term_at);
  int failed = 0;
  for (int i = 0; i < kCalls; i++)
    if (!rs[i].status.ok()) {
      failed++;
      ADD_FAILURE() << i << ": " << rs[i].status.error_code() << " "
                    << rs[i].status.error_message();
    }
  Figure(
      "sigterm: %d of %d queued writes failed; a call after SIGTERM got %s; exit %d after "
      "%lld ms (grace 10 s, lock held 1 s past SIGTERM)",
      failed, kCalls, late.status.ok() ? "OK" : "an error", code, static_cast<long long>(exit_ms));
  EXPECT_EQ(0, failed);
  EXPECT_EQ(StatusCode::UNAVAILABLE, late.status.error_code()) << late.status.error_message();
  EXPECT_NE(std::string::npos, late.status.error_message().find("shutting down"))
      << late.status.error_message();
  HealthCheckResponse hr;
  ASSERT_TRUE(health.status.ok()) << health.status.error_message();
  ASSERT_TRUE(hr.ParseFromString(health.body));
  EXPECT_EQ(HealthCheckResponse::NOT_SERVING, hr.status());
  EXPECT_EQ(0, code) << m->Log();
  EXPECT_LT(exit_ms, 10000);
  EXPECT_EQ(std::string::npos, m->Log().find("grace period over")) << m->Log();
  // Every queued write is there: none was cancelled half-way.
  auto again = Launch();
  auto ch2 = testing_client::Connect(again->port());
  for (int i = 0; i < kCalls; i++)
    EXPECT_TRUE(Read(ch2, tok, "queued-" + std::to_string(i)).status.ok()) << i;
  EXPECT_EQ(StatusCode::NOT_FOUND, Read(ch2, tok, "after-sigterm").status.error_code());
  EXPECT_EQ(0, again->Stop(SIGTERM, 10000)) << again->Log();
}

}  // namespace
