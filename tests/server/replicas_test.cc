// Three memoryd replicas on loopback sharing one PostgreSQL and Redis,
// behind a real load balancer (Debian's nginx, grpc_pass, round-robin):
// the replicas behave as one service. What one replica writes any other
// reads back; entry and entity copies cached on one replica are dropped
// when another changes them (the delay is measured); a revocation holds
// on every replica within --revocation-poll-ms; blackboard subscribers on
// one replica hear posts made through the others; every replica's
// embedded vector index answers with points written through any other; a
// replica killed under load loses no acknowledged write while the others
// answer; a rolling restart (SIGTERM one replica at a time) fails no call.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "memory/v1/access.pb.h"
#include "memory/v1/blackboard.pb.h"
#include "memory/v1/cache.pb.h"
#include "memory/v1/entries.pb.h"
#include "memory/v1/episodic_memory.pb.h"
#include "memory/v1/global_memory.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/nginx_balancer.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/ports.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Unary;
using Clock = std::chrono::steady_clock;

constexpr int kReplicas = 3;
constexpr int kRevocationPollMs = 200;

long long MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
    std::vector<int> ports;
    for (int i = 0; i < kReplicas; i++) {
      ports_.push_back(FreePort());
      replicas_.push_back(Start(i));
      ASSERT_TRUE(replicas_.back() && replicas_.back()->port() == ports_[i])
          << (replicas_.back() ? replicas_.back()->Log() : "");
      direct_.push_back(testing_client::Connect(ports_[i]));
    }
    lb_ = std::make_unique<NginxBalancer>(ports_);
    ASSERT_TRUE(lb_->ok()) << lb_->error();
    ch_ = testing_client::Connect(lb_->port());
    token_ = Mint("alice");
  }

  // Replica i on its own port, sharing the database, Redis and keys.
  std::unique_ptr<MemorydProcess> Start(int i) {
    std::vector<std::string> args = {
        "--pg-url=" + db_.url(),
        "--redis-url=" + TestRedisUrl(),
        "--listen=127.0.0.1:" + std::to_string(ports_[i]),
        "--revocation-poll-ms=" + std::to_string(kRevocationPollMs),
        "--cache-entities",
        "--shutdown-grace=10",
        "--health-interval-ms=100",
        "--retention-sweep-ms=0",
    };
    if (keys_) args.push_back("--jwks=" + keys_->jwks_path());
    auto p = std::make_unique<MemorydProcess>(args);
    if (!p->Start()) {
      ADD_FAILURE() << "replica " << i << " did not start: " << p->Log();
      return nullptr;
    }
    if (!keys_) keys_ = p->keys();
    return p;
  }

  std::string Mint(const std::string& sub, const std::string& jti = "") {
    TestClaims c;
    c.sub = sub;
    c.jti = jti;
    c.scope = "entries:* global:* episodic:* blackboard:* cache:* access:attenuate";
    return keys_->Mint(c);
  }

  std::map<std::string, std::string> Auth(const std::string& token) const {
    return {{"authorization", TestKeys::Bearer(token)}};
  }

  Result Call(const std::shared_ptr<grpc::Channel>& ch, const std::string& method,
              const google::protobuf::Message& req, const std::string& token = "",
              int timeout_ms = 5000) {
    return Unary(ch, method, req.SerializeAsString(), timeout_ms,
                 Auth(token.empty() ? token_ : token));
  }

  Result Write(const std::shared_ptr<grpc::Channel>& ch, const std::string& key,
               const std::string& value) {
    EntriesWriteRequest w;
    w.set_namespace_("app:replicas:t");
    w.set_key(key);
    w.set_value(value);
    return Call(ch, "/memory.v1.Entries/Write", w);
  }

  // The value read, or "<CODE: message>" when the read failed.
  std::string Read(const std::shared_ptr<grpc::Channel>& ch, const std::string& key) {
    EntriesReadRequest r;
    r.set_namespace_("app:replicas:t");
    r.set_key(key);
    Result res = Call(ch, "/memory.v1.Entries/Read", r);
    if (!res.status.ok())
      return "<" + std::to_string(res.status.error_code()) + ": " + res.status.error_message() +
             ">";
    EntriesReadResponse resp;
    resp.ParseFromString(res.body);
    return resp.entry().value();
  }

  PgTestDb db_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<MemorydProcess>> replicas_;
  std::vector<std::unique_ptr<MemorydProcess>> retired_;  // stopped, kept for keys_
  std::vector<std::shared_ptr<grpc::Channel>> direct_;
  TestKeys* keys_ = nullptr;
  std::unique_ptr<NginxBalancer> lb_;
  std::shared_ptr<grpc::Channel> ch_;
  std::string token_;
};

TEST_F(ReplicasTest, WhatAnyReplicaWritesEveryOtherReadsBack) {
  for (int w = 0; w < kReplicas; w++) {
    std::string key = "from-" + std::to_string(w);
    ASSERT_TRUE(Write(direct_[w], key, "v" + std::to_string(w)).status.ok());
    for (int r = 0; r < kReplicas; r++) EXPECT_EQ("v" + std::to_string(w), Read(direct_[r], key));
  }
  // Through the balancer, call after call lands on a different replica.
  for (int i = 0; i < 30; i++) {
    std::string key = "lb-" + std::to_string(i);
    ASSERT_TRUE(Write(ch_, key, key).status.ok());
    EXPECT_EQ(key, Read(ch_, key));
  }
}

TEST_F(ReplicasTest, ACopyCachedOnOneReplicaGoesWhenAnotherChangesIt) {
  // Entries: replica 1 reads (and caches) the entry; replica 0 changes it.
  ASSERT_TRUE(Write(direct_[0], "cached", "old").status.ok());
  ASSERT_EQ("old", Read(direct_[1], "cached"));
  ASSERT_EQ("old", Read(direct_[1], "cached"));
  ASSERT_TRUE(Write(direct_[0], "cached", "new").status.ok());
  auto t0 = Clock::now();
  std::string seen;
  while ((seen = Read(direct_[1], "cached")) != "new" && MsSince(t0) < 5000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  long long entry_ms = MsSince(t0);
  EXPECT_EQ("new", seen);
  EXPECT_LT(entry_ms, 1000);

  // Entities (--cache-entities): the same through GlobalMemory.
  PutEntityRequest put;
  put.set_id("e-cached");
  put.set_type("thing");
  put.set_name("old");
  ASSERT_TRUE(Call(direct_[0], "/memory.v1.GlobalMemory/PutEntity", put).status.ok());
  GetEntityRequest get;
  get.set_id("e-cached");
  auto name_on = [&](int r) {
    Result res = Call(direct_[r], "/memory.v1.GlobalMemory/GetEntity", get);
    GetEntityResponse resp;
    resp.ParseFromString(res.body);
    return res.status.ok() ? resp.entity().name() : "<" + res.status.error_message() + ">";
  };
  ASSERT_EQ("old", name_on(2));
  ASSERT_EQ("old", name_on(2));
  put.set_name("new");
  ASSERT_TRUE(Call(direct_[0], "/memory.v1.GlobalMemory/PutEntity", put).status.ok());
  t0 = Clock::now();
  while ((seen = name_on(2)) != "new" && MsSince(t0) < 5000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  long long entity_ms = MsSince(t0);
  EXPECT_EQ("new", seen);
  EXPECT_LT(entity_ms, 1000);
  printf("invalidation across replicas: entry %lld ms, entity %lld ms (bound 1000 ms)\n", entry_ms,
         entity_ms);
}

TEST_F(ReplicasTest, ARevocationHoldsOnEveryReplicaWithinThePollInterval) {
  std::string token = Mint("carol", "jti-revoked-across");
  EntriesReadRequest read;
  read.set_namespace_("app:replicas:t");
  read.set_key("none");
  for (int r = 0; r < kReplicas; r++)  // every replica has it verified and cached
    EXPECT_EQ(StatusCode::NOT_FOUND,
              Call(direct_[r], "/memory.v1.Entries/Read", read, token).status.error_code());
  AccessRevokeRequest rev;
  rev.set_token_id("jti-revoked-across");
  Result res = Call(direct_[0], "/memory.v1.Access/Revoke", rev, token);
  ASSERT_TRUE(res.status.ok()) << res.status.error_message();
  auto t0 = Clock::now();
  for (int r = 1; r < kReplicas; r++) {
    StatusCode code;
    while ((code = Call(direct_[r], "/memory.v1.Entries/Read", read, token).status.error_code()) !=
               StatusCode::UNAUTHENTICATED &&
           MsSince(t0) < 5000)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(StatusCode::UNAUTHENTICATED, code) << "replica " << r;
  }
  long long ms = MsSince(t0);
  // The poll interval, plus a wide margin for a loaded machine.
  EXPECT_LT(ms, kRevocationPollMs + 1500);
  printf("revocation effective on every replica after %lld ms (--revocation-poll-ms=%d)\n", ms,
         kRevocationPollMs);
}

TEST_F(ReplicasTest, ABlackboardSubscriberHearsPostsMadeThroughTheOtherReplicas) {
  std::string task = "task-" + std::to_string(getpid()) + "-" + std::to_string(ports_[0]);
  BlackboardPostRequest first;
  first.set_task_id(task);
  first.set_key("k0");
  first.mutable_value()->set_string_value("v0");
  ASSERT_TRUE(Call(direct_[0], "/memory.v1.Blackboard/Post", first).status.ok());
  BlackboardSubscribeRequest sub;
  sub.set_task_id(task);
  testing_client::Stream s(direct_[0], "/memory.v1.Blackboard/Subscribe", 20000, Auth(token_));
  ASSERT_TRUE(s.Write(sub.SerializeAsString()));
  ASSERT_TRUE(s.WritesDone());
  std::string msg;
  ASSERT_TRUE(s.Read(&msg));
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(ev.ParseFromString(msg));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
  for (int r = 1; r < kReplicas; r++) {
    BlackboardPostRequest p = first;
    p.set_key("k" + std::to_string(r));
    p.mutable_value()->set_string_value("through replica " + std::to_string(r));
    ASSERT_TRUE(Call(direct_[r], "/memory.v1.Blackboard/Post", p).status.ok());
    ASSERT_TRUE(s.Read(&msg)) << "replica " << r;
    ASSERT_TRUE(ev.ParseFromString(msg));
    EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());
    ASSERT_EQ(1, ev.items_size());
    EXPECT_EQ("k" + std::to_string(r), ev.items(0).key());
    EXPECT_EQ("through replica " + std::to_string(r), ev.items(0).value().string_value());
  }
  s.Cancel();
}

TEST_F(ReplicasTest, EveryReplicasVectorIndexAnswersWithPointsWrittenThroughAnother) {
  CreateCollectionRequest create;
  create.set_name("shared");
  create.set_dims(2);
  create.set_distance(DISTANCE_DOT);
  ASSERT_TRUE(Call(direct_[0], "/memory.v1.EpisodicMemory/CreateCollection", create).status.ok());
  EpisodicMemorySearchRequest search;
  search.set_collection("shared");
  search.add_vector(1);
  search.add_vector(0);
  search.set_limit(10);
  auto hits_on = [&](int r) {
    Result res = Call(direct_[r], "/memory.v1.EpisodicMemory/Search", search);
    EXPECT_TRUE(res.status.ok()) << res.status.error_message();
    EpisodicMemorySearchResponse resp;
    resp.ParseFromString(res.body);
    return resp.points_size();
  };
  for (int r = 0; r < kReplicas; r++) EXPECT_EQ(0, hits_on(r));  // each index loaded, empty
  for (int w = 0; w < kReplicas; w++) {
    EpisodicMemoryUpsertRequest up;
    up.set_collection("shared");
    PointInput* p = up.add_points();
    p->mutable_id()->set_num(static_cast<uint64_t>(w + 1));
    p->add_vector(1);
    p->add_vector(static_cast<float>(w));
    ASSERT_TRUE(Call(direct_[w], "/memory.v1.EpisodicMemory/Upsert", up).status.ok());
    for (int r = 0; r < kReplicas; r++) EXPECT_EQ(w + 1, hits_on(r)) << "replica " << r;
  }
}

// The token of the write in trailing metadata `memoryd-consistency`, "" when absent.
std::string ConsistencyToken(const Result& r) {
  auto it = r.trailers.find("memoryd-consistency");
  return it == r.trailers.end() ? "" : it->second;
}

TEST_F(ReplicasTest, AReadWithAWritesTokenReflectsItOnEveryReplica) {
  // Every replica holds the old value in its in-process cache.
  CacheSetRequest set;
  set.set_key("ryw");
  set.set_value("old");
  set.mutable_ttl()->set_seconds(600);
  ASSERT_TRUE(Call(direct_[0], "/memory.v1.Cache/Set", set).status.ok());
  CacheGetRequest get;
  get.set_key("ryw");
  auto get_on = [&](int r, const std::string& token) {
    std::map<std::string, std::string> md = Auth(token_);
    if (!token.empty()) md["memoryd-consistency"] = token;
    Result res = Unary(direct_[r], "/memory.v1.Cache/Get", get.SerializeAsString(), 5000, md);
    EXPECT_TRUE(res.status.ok()) << res.status.error_message();
    CacheGetResponse resp;
    resp.ParseFromString(res.body);
    return resp.item();
  };
  for (int r = 0; r < kReplicas; r++) {
    get_on(r, "");
    EXPECT_EQ(CACHE_LOOKUP_HIT_L1, get_on(r, "").lookup()) << "replica " << r;
  }
  // A write answers with its token; a read passing it goes past every
  // replica's copy to Redis and sees the write.
  set.set_value("new");
  Result w = Call(direct_[0], "/memory.v1.Cache/Set", set);
  ASSERT_TRUE(w.status.ok());
  std::string token = ConsistencyToken(w);
  ASSERT_EQ(18u, token.size()) << token;
  for (int r = 0; r < kReplicas; r++) {
    CacheItem it = get_on(r, token);
    EXPECT_EQ("new", it.value()) << "replica " << r;
    EXPECT_EQ(CACHE_LOOKUP_HIT_L2, it.lookup()) << "replica " << r;
  }
  // A token older than the window (the L1 TTL and the clock allowance):
  // every copy that could predate it has expired, L1 answers again.
  char old_token[32];
  auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  snprintf(old_token, sizeof old_token, "1-%016llx",
           static_cast<unsigned long long>(now_us - 3600LL * 1000000));
  get_on(1, "");  // L1 has the new value again
  EXPECT_EQ(CACHE_LOOKUP_HIT_L1, get_on(1, old_token).lookup());

  // Entries and entities: writes carry a token too, and reads honour it.
  Result ew = Write(direct_[0], "ryw", "v1");
  EXPECT_EQ(18u, ConsistencyToken(ew).size());
  PutEntityRequest put;
  put.set_id("e-ryw");
  put.set_type("thing");
  put.set_name("v1");
  ASSERT_TRUE(Call(direct_[0], "/memory.v1.GlobalMemory/PutEntity", put).status.ok());
  GetEntityRequest ge;
  ge.set_id("e-ryw");
  ASSERT_TRUE(Call(direct_[2], "/memory.v1.GlobalMemory/GetEntity", ge).status.ok());  // cached
  put.set_name("v2");
  Result pw = Call(direct_[1], "/memory.v1.GlobalMemory/PutEntity", put);
  ASSERT_TRUE(pw.status.ok());
  std::map<std::string, std::string> md = Auth(token_);
  md["memoryd-consistency"] = ConsistencyToken(pw);
  Result gr =
      Unary(direct_[2], "/memory.v1.GlobalMemory/GetEntity", ge.SerializeAsString(), 5000, md);
  ASSERT_TRUE(gr.status.ok()) << gr.status.error_message();
  GetEntityResponse ger;
  ger.ParseFromString(gr.body);
  EXPECT_EQ("v2", ger.entity().name());
  // Reads answer without a token of their own.
  EXPECT_EQ("", ConsistencyToken(gr));

  // A malformed token is refused before anything runs.
  for (const char* bad :
       {"1-xyz", "2-0000000000000001", "1-00000000000000000", "1-0000000000000000"}) {
    md["memoryd-consistency"] = bad;
    Result r = Unary(direct_[0], "/memory.v1.Cache/Get", get.SerializeAsString(), 5000, md);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << bad;
    EXPECT_NE(std::string::npos, r.status.error_message().find("memoryd-consistency"))
        << r.status.error_message();
  }
}

// A load of writes (write(key) until stopped), each acknowledged key
// recorded and each failure counted by code.
class WriteLoad {
 public:
  WriteLoad(std::function<Result(const std::string&)> write, const std::string& prefix)
      : write_(std::move(write)), prefix_(prefix), thread_([this] { Run(); }) {}
  ~WriteLoad() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<std::string> acked() {
    std::lock_guard<std::mutex> l(mu_);
    return acked_;
  }
  std::map<int, int> failures() {  // gRPC code -> count
    std::lock_guard<std::mutex> l(mu_);
    return failures_;
  }
  std::string first_failure() {
    std::lock_guard<std::mutex> l(mu_);
    return first_failure_;
  }
  int calls() const { return calls_; }

 private:
  void Run() {
    for (int i = 0; !stop_; i++) {
      std::string key = prefix_ + std::to_string(i);
      Result r = write_(key);
      calls_++;
      std::lock_guard<std::mutex> l(mu_);
      if (r.status.ok()) {
        acked_.push_back(key);
      } else {
        if (!failures_[r.status.error_code()]++)
          messages_ +=
              std::to_string(r.status.error_code()) + ": " + r.status.error_message() + "\n";
        if (first_failure_.empty())
          first_failure_ = std::to_string(r.status.error_code()) + ": " + r.status.error_message();
      }
    }
  }
  std::function<Result(const std::string&)> write_;
  std::string prefix_;
  std::atomic<bool> stop_{false};
  std::atomic<int> calls_{0};
  std::mutex mu_;
  std::vector<std::string> acked_;
  std::map<int, int> failures_;
  std::string first_failure_;
  std::string messages_;  // the first of each code
  std::thread thread_;

 public:
  std::string messages() {
    std::lock_guard<std::mutex> l(mu_);
    return messages_;
  }
};

TEST_F(ReplicasTest, AReplicaKilledUnderLoadLosesNoAcknowledgedWrite) {
  WriteLoad load([this](const std::string& k) { return Write(ch_, k, k); }, "kill-");
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  ASSERT_EQ(0, kill(replicas_[1]->pid(), SIGKILL));
  int at_kill = load.calls();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  load.Stop();
  auto acked = load.acked();
  int failed = 0;
  for (auto& f : load.failures()) failed += f.second;
  printf("kill under load: %d calls, %zu acknowledged, %d failed (first: %s)\n", load.calls(),
         acked.size(), failed, load.first_failure().c_str());
  EXPECT_GT(load.calls() - at_kill, 20);  // the other replicas went on answering
  // Only calls in flight at the kill may fail, and only as UNAVAILABLE.
  for (auto& f : load.failures()) EXPECT_EQ(StatusCode::UNAVAILABLE, f.first) << f.second;
  EXPECT_LE(failed, 8);
  // Every acknowledged write is there, through whichever replica answers.
  for (const auto& key : acked) ASSERT_EQ(key, Read(ch_, key));
  // After the kill, calls go on without failures.
  WriteLoad after([this](const std::string& k) { return Write(ch_, k, k); }, "after-kill-");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  after.Stop();
  EXPECT_TRUE(after.failures().empty()) << after.first_failure();
  EXPECT_GT(after.calls(), 10);
}

// What a rolling restart costs callers. A draining replica serves what it
// accepted, then refuses calls UNAVAILABLE "did not run; retry it" until
// it has sent GOAWAY (nginx cannot retry them elsewhere: the status is in
// the trailers of an HTTP 200), and gRPC's core cancels a call that
// reaches it in the moment after GOAWAY (CANCELLED; its handler never
// runs). A client with gRPC's retry policy for UNAVAILABLE sees at most
// such a cancellation; no acknowledged write is lost.
std::shared_ptr<grpc::Channel> RetryingChannel(int port) {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(R"({"methodConfig": [{
      "name": [{"service": "memory.v1.Entries"}],
      "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.02s", "maxBackoff": "0.5s",
                      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})");
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

TEST_F(ReplicasTest, ARollingRestartLosesNoWriteAndRetriesHideTheRefusals) {
  auto retrying = RetryingChannel(lb_->port());
  WriteLoad load([&](const std::string& k) { return Write(retrying, k, k); }, "roll-");
  WriteLoad plain([this](const std::string& k) { return Write(ch_, k, k); }, "roll-plain-");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int i = 0; i < kReplicas; i++) {
    ASSERT_EQ(0, replicas_[i]->Stop(SIGTERM, 20000)) << replicas_[i]->Log();
    retired_.push_back(std::move(replicas_[i]));  // the first one's keys are everyone's
    replicas_[i] = Start(i);
    ASSERT_TRUE(replicas_[i]);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  load.Stop();
  plain.Stop();
  int refused = 0;
  for (auto& f : plain.failures()) refused += f.second;
  printf(
      "rolling restart: %d calls with gRPC's retry policy, %zu acknowledged, failed: %s; "
      "%d calls without it, %d refused (first: %s)\n",
      load.calls(), load.acked().size(),
      load.failures().empty() ? "none" : load.first_failure().c_str(), plain.calls(), refused,
      plain.first_failure().c_str());
  EXPECT_GT(load.calls(), 50);
  // With retries: nothing but the rare cancellation at GOAWAY.
  int cancelled = 0;
  for (auto& f : load.failures()) {
    EXPECT_EQ(StatusCode::CANCELLED, f.first) << f.second << "\n" << load.messages();
    cancelled += f.second;
  }
  EXPECT_LE(cancelled, kReplicas);
  // Without: refusals that did not run, a few per restart.
  for (auto& f : plain.failures())
    EXPECT_TRUE(f.first == StatusCode::UNAVAILABLE || f.first == StatusCode::CANCELLED)
        << f.first << " x" << f.second << "\n"
        << plain.messages();
  EXPECT_LE(refused, 10 * kReplicas) << plain.messages();
  // A refusal says the write did not run: memoryd's own, or the balancer's
  // 502 when it found no replica to take the call (under load, during a
  // restart).
  if (plain.failures().count(StatusCode::UNAVAILABLE)) {
    EXPECT_TRUE(plain.messages().find("did not run") != std::string::npos ||
                plain.messages().find("status: 502") != std::string::npos)
        << plain.messages();
  }
  for (const auto& key : load.acked()) ASSERT_EQ(key, Read(ch_, key));
  for (const auto& key : plain.acked()) ASSERT_EQ(key, Read(ch_, key));
}

}  // namespace
