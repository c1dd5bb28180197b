// The blackboard end to end: real memoryd processes, real Redis (the one
// `make test` starts, and private ones the fault tests kill). Post, Read and
// Subscribe as blackboard.proto documents them: revisions, compare-and-set
// races across replicas, leases, resume from the change log, slow readers,
// the read diode on every streamed event, board expiry, token revocation,
// Redis lost and back, bad input, the PII policy and the audit row.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "grpc/health/v1/health.pb.h"
#include "memory/v1/access.pb.h"
#include "memory/v1/blackboard.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Stream;
using testing_client::Unary;
using Clock = std::chrono::steady_clock;

// Tenants unique to this run: the shared Redis outlives test runs.
std::string Tenant(const std::string& name) {
  static const std::string run =
      std::to_string(getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count());
  return name + "-" + run;
}

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

struct Replica {
  std::unique_ptr<MemorydProcess> proc;
  std::shared_ptr<grpc::Channel> ch;
};

google::protobuf::Value Str(const std::string& s) {
  google::protobuf::Value v;
  v.set_string_value(s);
  return v;
}

google::protobuf::Value Num(double d) {
  google::protobuf::Value v;
  v.set_number_value(d);
  return v;
}

class BlackboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
  }

  // A memoryd on redis_url (the shared Redis by default). Every replica
  // trusts the first one's keys, so one token works on all.
  Replica Launch(std::vector<std::string> extra = {}, std::string redis_url = "") {
    std::vector<std::string> args = {
        "--pg-url=" + db_.url(), "--shutdown-grace=1", "--health-interval-ms=100",
        "--redis-url=" + (redis_url.empty() ? TestRedisUrl() : redis_url)};
    if (keys_) args.push_back("--jwks=" + keys_->jwks_path());
    args.insert(args.end(), extra.begin(), extra.end());
    Replica r;
    r.proc = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(r.proc->Start()) << r.proc->Log();
    if (!keys_) keys_ = r.proc->keys();
    r.ch = testing_client::Connect(r.proc->port());
    return r;
  }

  std::string Token(const std::string& tenant, const std::string& sub,
                    const std::string& scope = "blackboard:read blackboard:write",
                    const std::string& clr = "SECRET", int64_t exp_in_s = 3600,
                    const std::string& jti = "") {
    TestClaims c;
    c.tenant = tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = clr;
    c.exp_in_s = exp_in_s;
    c.jti = jti;
    return keys_->Mint(c);
  }

  static std::map<std::string, std::string> Auth(const std::string& tok) {
    return {{"authorization", TestKeys::Bearer(tok)}};
  }

  static Result Call(const Replica& r, const std::string& method,
                     const google::protobuf::Message& req, const std::string& tok,
                     int timeout_ms = 5000) {
    return Unary(r.ch, method, req.SerializeAsString(), timeout_ms, Auth(tok));
  }

  static BlackboardPostRequest PostReq(const std::string& task, const std::string& key,
                                       const google::protobuf::Value& v) {
    BlackboardPostRequest req;
    req.set_task_id(task);
    req.set_key(key);
    *req.mutable_value() = v;
    return req;
  }

  static Result Post(const Replica& r, const std::string& tok, const BlackboardPostRequest& req,
                     BlackboardPostResponse* out = nullptr) {
    Result res = Call(r, "/memory.v1.Blackboard/Post", req, tok);
    if (out && res.status.ok()) {
      EXPECT_TRUE(out->ParseFromString(res.body));
    }
    return res;
  }

  // Posts and expects OK; the new version.
  static int64_t MustPost(const Replica& r, const std::string& tok, const std::string& task,
                          const std::string& key, const google::protobuf::Value& v) {
    BlackboardPostResponse resp;
    Result res = Post(r, tok, PostReq(task, key, v), &resp);
    EXPECT_TRUE(res.status.ok()) << key << ": " << res.status.error_message();
    return resp.meta().version();
  }

  static BlackboardReadResponse Read(const Replica& r, const std::string& tok,
                                     const std::string& task) {
    BlackboardReadRequest req;
    req.set_task_id(task);
    Result res = Call(r, "/memory.v1.Blackboard/Read", req, tok);
    EXPECT_TRUE(res.status.ok()) << res.status.error_message();
    BlackboardReadResponse resp;
    EXPECT_TRUE(resp.ParseFromString(res.body));
    return resp;
  }

  static std::unique_ptr<Stream> Subscribe(const Replica& r, const std::string& tok,
                                           const std::string& task, int64_t after = -1,
                                           const std::string& board_id = "",
                                           int timeout_ms = 60000) {
    auto s =
        std::make_unique<Stream>(r.ch, "/memory.v1.Blackboard/Subscribe", timeout_ms, Auth(tok));
    BlackboardSubscribeRequest req;
    req.set_task_id(task);
    if (after >= 0) {
      req.set_after_version(after);
      req.set_board_id(board_id);
    }
    EXPECT_TRUE(s->Write(req.SerializeAsString()));
    EXPECT_TRUE(s->WritesDone());
    return s;
  }

  static bool Next(Stream* s, BlackboardSubscribeResponse* ev, int wait_ms = 10000) {
    std::string msg;
    if (!s->Read(&msg, wait_ms)) return false;
    return ev->ParseFromString(msg);
  }

  static int Health(const Replica& r, const std::string& service) {
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    Result res = Unary(r.ch, "/grpc.health.v1.Health/Check", req.SerializeAsString(), 2000);
    grpc::health::v1::HealthCheckResponse resp;
    return res.status.ok() && resp.ParseFromString(res.body) ? resp.status() : -1;
  }

  template <typename Pred>
  static bool Eventually(Pred pred, int timeout_ms) {
    auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return pred();
  }

  PgTestDb db_;
  TestKeys* keys_ = nullptr;  // owned by the first replica
};

TEST_F(BlackboardTest, PostsAdvanceTheBoardRevisionAndReadReturnsTheBoardByKey) {
  Replica r = Launch();
  std::string t = Tenant("rev"), tok = Token(t, "alice");
  BlackboardReadResponse empty = Read(r, tok, "task-1");
  EXPECT_EQ(0, empty.version());
  EXPECT_EQ(0, empty.items_size());
  EXPECT_EQ("", empty.board_id());
  EXPECT_FALSE(empty.has_expire_time());

  BlackboardPostResponse first;
  ASSERT_TRUE(Post(r, tok, PostReq("task-1", "zeta", Num(1)), &first).status.ok());
  EXPECT_TRUE(first.board_created());
  EXPECT_EQ(1, first.meta().version());
  EXPECT_EQ(16u, first.board_id().size());
  EXPECT_EQ("alice", first.meta().owner());
  EXPECT_EQ(t, first.meta().tenant());
  // A new board lives 24 h unless the post says otherwise.
  EXPECT_NEAR(86400, first.meta().expire_time().seconds() - first.meta().create_time().seconds(),
              2);
  EXPECT_EQ(2, MustPost(r, tok, "task-1", "alpha", Str("a")));
  BlackboardPostResponse third;
  ASSERT_TRUE(Post(r, tok, PostReq("task-1", "zeta", Num(2)), &third).status.ok());
  EXPECT_FALSE(third.board_created());
  EXPECT_EQ(first.board_id(), third.board_id());
  EXPECT_EQ(3, third.meta().version());
  // The key keeps its creation time; its update time moves.
  EXPECT_EQ(first.meta().create_time().seconds(), third.meta().create_time().seconds());

  BlackboardReadResponse board = Read(r, tok, "task-1");
  EXPECT_EQ(3, board.version());
  EXPECT_EQ(first.board_id(), board.board_id());
  ASSERT_EQ(2, board.items_size());
  EXPECT_EQ("alpha", board.items(0).key());
  EXPECT_EQ("a", board.items(0).value().string_value());
  EXPECT_EQ(2, board.items(0).meta().version());
  EXPECT_EQ("zeta", board.items(1).key());
  EXPECT_EQ(2, board.items(1).value().number_value());
  EXPECT_EQ(3, board.items(1).meta().version());

  // Another tenant's board of the same task id is another board.
  std::string other = Token(Tenant("rev-other"), "alice");
  EXPECT_EQ(0, Read(r, other, "task-1").items_size());

  // A delete is a change too; deleting what is not there is NOT_FOUND.
  BlackboardPostRequest del;
  del.set_task_id("task-1");
  del.set_key("alpha");
  del.set_delete_key(true);
  BlackboardPostResponse d;
  ASSERT_TRUE(Post(r, tok, del, &d).status.ok());
  EXPECT_EQ(4, d.meta().version());
  EXPECT_EQ(StatusCode::NOT_FOUND, Post(r, tok, del).status.error_code());
  EXPECT_EQ(4, Read(r, tok, "task-1").version());
}

TEST_F(BlackboardTest, CompareAndSetChecksTheKeysVersion) {
  Replica r = Launch();
  std::string tok = Token(Tenant("cas"), "alice");
  BlackboardPostRequest req = PostReq("t", "claim", Str("mine"));
  req.set_expected_version(0);  // only if absent
  ASSERT_TRUE(Post(r, tok, req).status.ok());
  Result again = Post(r, tok, req);
  EXPECT_EQ(StatusCode::ABORTED, again.status.error_code());
  EXPECT_NE(std::string::npos, again.status.error_message().find("version 1"))
      << again.status.error_message();
  EXPECT_EQ(2, MustPost(r, tok, "t", "other", Num(1)));
  req.set_expected_version(2);  // the board's revision, not the key's version
  EXPECT_EQ(StatusCode::ABORTED, Post(r, tok, req).status.error_code());
  req.set_expected_version(1);
  BlackboardPostResponse ok;
  ASSERT_TRUE(Post(r, tok, req, &ok).status.ok());
  EXPECT_EQ(3, ok.meta().version());
  // A conditional delete.
  BlackboardPostRequest del;
  del.set_task_id("t");
  del.set_key("claim");
  del.set_delete_key(true);
  del.set_expected_version(1);
  EXPECT_EQ(StatusCode::ABORTED, Post(r, tok, del).status.error_code());
  del.set_expected_version(3);
  EXPECT_TRUE(Post(r, tok, del).status.ok());
  EXPECT_EQ(1, Read(r, tok, "t").items_size());
}

// Many writers on two replicas increment one counter with compare-and-set:
// each round exactly one wins, and no increment is lost.
TEST_F(BlackboardTest, CompareAndSetRacesHaveExactlyOneWinnerAndLoseNoUpdate) {
  Replica a = Launch(), b = Launch();
  std::string tok = Token(Tenant("race"), "alice");
  MustPost(a, tok, "race", "counter", Num(0));
  const int kWriters = 8, kRounds = 25;
  int rounds_with_one_winner = 0;
  for (int round = 0; round < kRounds; round++) {
    BlackboardReadResponse now = Read(a, tok, "race");
    ASSERT_EQ(1, now.items_size());
    int64_t version = now.items(0).meta().version();
    double value = now.items(0).value().number_value();
    std::atomic<int> wins{0}, aborted{0}, other{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; w++) {
      writers.emplace_back([&, w] {
        BlackboardPostRequest req = PostReq("race", "counter", Num(value + 1));
        req.set_expected_version(version);
        Result res = Post(w % 2 ? b : a, tok, req);
        if (res.status.ok())
          wins++;
        else if (res.status.error_code() == StatusCode::ABORTED)
          aborted++;
        else
          other++;
      });
    }
    for (auto& t : writers) t.join();
    EXPECT_EQ(0, other.load());
    if (wins == 1 && aborted == kWriters - 1) rounds_with_one_winner++;
  }
  EXPECT_EQ(kRounds, rounds_with_one_winner);
  BlackboardReadResponse end = Read(b, tok, "race");
  ASSERT_EQ(1, end.items_size());
  EXPECT_EQ(kRounds, end.items(0).value().number_value());
  EXPECT_EQ(1 + kRounds, end.version());
}

TEST_F(BlackboardTest, SubscribeSnapshotsThenStreamsChangesFromAnyReplica) {
  Replica a = Launch(), b = Launch();
  std::string tok = Token(Tenant("stream"), "alice");
  MustPost(a, tok, "s", "before", Str("x"));
  auto s = Subscribe(b, tok, "s");
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
  EXPECT_EQ(1, ev.version());
  ASSERT_EQ(1, ev.items_size());
  EXPECT_EQ("before", ev.items(0).key());
  std::string board = ev.board_id();
  EXPECT_EQ(16u, board.size());
  // Posts on replica a reach the subscriber on replica b, in order.
  std::vector<int64_t> latencies;
  for (int i = 0; i < 20; i++) {
    auto t0 = Clock::now();
    MustPost(a, tok, "s", "k" + std::to_string(i % 3), Num(i));
    ASSERT_TRUE(Next(s.get(), &ev)) << i;
    latencies.push_back(MsSince(t0));
    EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());
    EXPECT_EQ(BLACKBOARD_CHANGE_CAUSE_POST, ev.cause());
    EXPECT_EQ(2 + i, ev.version());
    EXPECT_EQ(board, ev.board_id());
    ASSERT_EQ(1, ev.items_size());
    EXPECT_EQ("k" + std::to_string(i % 3), ev.items(0).key());
    EXPECT_EQ(i, ev.items(0).value().number_value());
  }
  std::sort(latencies.begin(), latencies.end());
  std::printf(
      "blackboard: post on A to event on B (round trip of the post included): p50 %lld "
      "ms, max %lld ms\n",
      (long long)latencies[latencies.size() / 2], (long long)latencies.back());
  BlackboardPostRequest del;
  del.set_task_id("s");
  del.set_key("before");
  del.set_delete_key(true);
  ASSERT_TRUE(Post(a, tok, del).status.ok());
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_DELETE, ev.kind());
  EXPECT_EQ("before", ev.items(0).key());
  EXPECT_FALSE(ev.items(0).has_value());
  EXPECT_EQ(22, ev.version());
}

TEST_F(BlackboardTest, SubscribeToABoardNotYetCreatedSeesItsCreation) {
  Replica r = Launch();
  std::string tok = Token(Tenant("later"), "alice");
  auto s = Subscribe(r, tok, "later");
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
  EXPECT_EQ(0, ev.version());
  EXPECT_EQ("", ev.board_id());
  MustPost(r, tok, "later", "first", Num(1));
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());
  EXPECT_EQ(1, ev.version());
  EXPECT_EQ(16u, ev.board_id().size());
}

// Without blackboard:read:all an agent sees its own keys only; nobody sees
// a key labelled above their clearance. Hidden changes are never streamed
// (the revision still advances: gaps are normal).
TEST_F(BlackboardTest, KeysHiddenFromTheCallerAreNeverReadOrStreamed) {
  Replica r = Launch();
  std::string t = Tenant("hidden");
  std::string alice = Token(t, "alice"), bob = Token(t, "bob");
  std::string boss = Token(t, "boss", "blackboard:read:all blackboard:write", "INTERNAL");
  auto sa = Subscribe(r, alice, "h"), sb = Subscribe(r, boss, "h");
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(sa.get(), &ev));
  ASSERT_TRUE(Next(sb.get(), &ev));
  MustPost(r, bob, "h", "bobs", Str("private to bob"));
  BlackboardPostRequest secret = PostReq("h", "secret", Str("classified"));
  secret.set_label(LABEL_SECRET);
  ASSERT_TRUE(Post(r, bob, secret).status.ok());
  MustPost(r, alice, "h", "alices", Str("hers"));
  // Alice: only her own post, with revision 3.
  ASSERT_TRUE(Next(sa.get(), &ev));
  EXPECT_EQ("alices", ev.items(0).key());
  EXPECT_EQ(3, ev.version());
  // The boss reads everyone's, but not above INTERNAL.
  ASSERT_TRUE(Next(sb.get(), &ev));
  EXPECT_EQ("bobs", ev.items(0).key());
  ASSERT_TRUE(Next(sb.get(), &ev));
  EXPECT_EQ("alices", ev.items(0).key());
  EXPECT_EQ(1, Read(r, alice, "h").items_size());
  EXPECT_EQ(2, Read(r, boss, "h").items_size());
  EXPECT_EQ(2, Read(r, bob, "h").items_size());  // his own two
  // Bob's key is not Alice's to change; the SECRET one is not the boss's.
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Post(r, alice, PostReq("h", "bobs", Str("mine now"))).status.error_code());
  std::string boss_all = Token(t, "boss", "blackboard:read:all blackboard:write:all", "INTERNAL");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Post(r, boss_all, PostReq("h", "secret", Str("x"))).status.error_code());
  EXPECT_TRUE(Post(r, boss_all, PostReq("h", "bobs", Str("overwritten"))).status.ok());
  // A resumed stream replays only what the caller may see.
  auto resumed = Subscribe(r, alice, "h", 0, Read(r, bob, "h").board_id());
  ASSERT_TRUE(Next(resumed.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());
  EXPECT_EQ("alices", ev.items(0).key());
}

// A post tells a caller nothing about a key it may not read: one status
// and message whether the key is above its clearance, another's, or (with
// a version named) missing, and never the key's version or label.
TEST_F(BlackboardTest, APostLearnsNothingAboutAKeyTheCallerMayNotRead) {
  Replica r = Launch();
  std::string t = Tenant("probe");
  std::string alice = Token(t, "alice", "blackboard:read blackboard:write", "INTERNAL");
  std::string bob = Token(t, "bob");
  MustPost(r, bob, "p", "bobs", Str("bob's plan"));
  BlackboardPostRequest secret = PostReq("p", "secret", Str("classified"));
  secret.set_label(LABEL_SECRET);
  ASSERT_TRUE(Post(r, alice, PostReq("p", "mine", Str("x"))).status.ok());
  ASSERT_TRUE(Post(r, bob, secret).status.ok());
  // Bob's own, at a version the probe may not learn.
  for (int i = 0; i < 3; i++) MustPost(r, bob, "p", "bobs", Str("v" + std::to_string(i)));
  auto answer = [&](const std::string& key, bool with_version, int64_t version) {
    BlackboardPostRequest req = PostReq("p", key, Str("probe"));
    if (with_version) req.set_expected_version(version);
    Result res = Post(r, alice, req);
    return std::to_string(res.status.error_code()) + " " + res.status.error_message();
  };
  const std::string missing = answer("nobody", true, 999999);
  EXPECT_EQ(std::to_string(StatusCode::ABORTED), missing.substr(0, missing.find(' '))) << missing;
  for (int64_t v : {int64_t{0}, int64_t{2}, int64_t{5}, int64_t{999999}}) {
    for (const char* key : {"bobs", "secret"}) {
      SCOPED_TRACE(std::string(key) + " at " + std::to_string(v));
      EXPECT_EQ(missing, answer(key, true, v));  // as if missing
    }
  }
  const std::string taken = answer("bobs", false, 0);
  EXPECT_EQ(std::to_string(StatusCode::PERMISSION_DENIED), taken.substr(0, taken.find(' ')));
  EXPECT_EQ(taken, answer("secret", false, 0));
  // One text for both reasons (checked above), never the key's version.
  for (const std::string& text : {missing, taken}) {
    EXPECT_EQ(std::string::npos, text.find("version 6")) << text;  // bobs's
    EXPECT_EQ(std::string::npos, text.find("version 3")) << text;  // secret's
    EXPECT_EQ(std::string::npos, text.find("exists")) << text;
  }
  // A key the caller may read still says its version.
  std::string own = answer("mine", true, 7);
  EXPECT_NE(std::string::npos, own.find("is at version")) << own;
  // Nothing changed.
  BlackboardReadResponse all = Read(r, bob, "p");
  ASSERT_EQ(2, all.items_size());  // bob's own two
  for (const auto& it : all.items()) EXPECT_NE("probe", it.value().string_value()) << it.key();
}

TEST_F(BlackboardTest, ResumeReplaysTheChangesMissedOrSnapshotsWhenTheLogIsShort) {
  Replica r = Launch({"--blackboard-log-entries=5"});
  std::string tok = Token(Tenant("resume"), "alice");
  MustPost(r, tok, "r", "a", Num(1));
  std::string board;
  int64_t seen;
  {
    auto s = Subscribe(r, tok, "r");
    BlackboardSubscribeResponse ev;
    ASSERT_TRUE(Next(s.get(), &ev));
    board = ev.board_id();
    seen = ev.version();
    s->Cancel();
  }
  // The client is away while three changes happen.
  MustPost(r, tok, "r", "b", Num(2));
  MustPost(r, tok, "r", "a", Num(3));
  BlackboardPostRequest del;
  del.set_task_id("r");
  del.set_key("b");
  del.set_delete_key(true);
  ASSERT_TRUE(Post(r, tok, del).status.ok());
  auto s = Subscribe(r, tok, "r", seen, board);
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());  // no SNAPSHOT: the changes
  EXPECT_EQ(2, ev.version());
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(3, ev.version());
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_DELETE, ev.kind());
  EXPECT_EQ(4, ev.version());
  // ... then it streams on.
  MustPost(r, tok, "r", "c", Num(4));
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(5, ev.version());
  s->Cancel();

  // Resuming at the current revision sends nothing but what comes next.
  auto current = Subscribe(r, tok, "r", 5, board);
  MustPost(r, tok, "r", "d", Num(5));
  ASSERT_TRUE(Next(current.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());
  EXPECT_EQ(6, ev.version());
  current->Cancel();

  // The log keeps 5 changes (revisions 2 to 6): from revision 0 it no
  // longer reaches back.
  auto old = Subscribe(r, tok, "r", 0, board);
  ASSERT_TRUE(Next(old.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
  EXPECT_EQ(6, ev.version());
  EXPECT_EQ(3, ev.items_size());  // a, c, d
  // Another board id (the board was created again since): a SNAPSHOT.
  auto other = Subscribe(r, tok, "r", 5, "0123456789abcdef");
  ASSERT_TRUE(Next(other.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
  // Ahead of the board: a SNAPSHOT.
  auto ahead = Subscribe(r, tok, "r", 99, board);
  ASSERT_TRUE(Next(ahead.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
}

// A subscriber that does not read while many changes happen is not sent
// them all (its buffer is bounded): once it reads again it gets a fresh
// SNAPSHOT with the board as it is.
TEST_F(BlackboardTest, ASlowSubscriberGetsAFreshSnapshotInsteadOfUnboundedMemory) {
  Replica r = Launch({"--stream-buffer-bytes=4096"});
  std::string tok = Token(Tenant("slow"), "alice");
  MustPost(r, tok, "slow", "k", Num(0));
  auto s = Subscribe(r, tok, "slow");
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(s.get(), &ev));
  const std::string big(100000, 'x');
  const int kPosts = 200;  // ~20 MB of events, far more than gRPC and the buffer hold
  for (int i = 1; i <= kPosts; i++)
    MustPost(r, tok, "slow", "k" + std::to_string(i % 10), Str(big));
  MustPost(r, tok, "slow", "last", Num(1));
  int events = 0, snapshots = 0;
  int64_t version = 0;
  while (version < kPosts + 2 && Next(s.get(), &ev, 10000)) {
    events++;
    if (ev.kind() == BLACKBOARD_EVENT_KIND_SNAPSHOT) {
      snapshots++;
      EXPECT_EQ(12, ev.items_size());  // k, k0..k9, last (when it is the last snapshot)
    }
    version = ev.version();
  }
  EXPECT_EQ(kPosts + 2, version) << "the stream did not reach the board's revision";
  EXPECT_GE(snapshots, 1);
  EXPECT_LT(events, kPosts) << "every change was delivered: nothing bounded the buffer";
}

TEST_F(BlackboardTest, LeasesFreeAClaimUnlessRenewed) {
  Replica r = Launch();
  std::string t = Tenant("lease");
  std::string a1 = Token(t, "agent-1"), a2 = Token(t, "agent-2");
  std::string watcher = Token(t, "watcher", "blackboard:read:all blackboard:write");
  auto s = Subscribe(r, watcher, "work");
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(s.get(), &ev));
  BlackboardPostRequest claim = PostReq("work", "subtask/7", Str("agent-1"));
  claim.set_expected_version(0);
  claim.mutable_lease_ttl()->set_seconds(2);
  BlackboardPostResponse got;
  ASSERT_TRUE(Post(r, a1, claim, &got).status.ok());
  EXPECT_TRUE(got.has_lease_expire_time());
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());
  EXPECT_TRUE(ev.items(0).has_lease_expire_time());
  // Held: agent-2's claim fails.
  BlackboardPostRequest claim2 = claim;
  *claim2.mutable_value() = Str("agent-2");
  EXPECT_EQ(StatusCode::ABORTED, Post(r, a2, claim2).status.error_code());
  // Renewed twice, each before it runs out: it outlives its first lease.
  auto start = Clock::now();
  for (int i = 0; i < 2; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    BlackboardPostRequest renew = PostReq("work", "subtask/7", Str("agent-1"));
    renew.mutable_lease_ttl()->set_seconds(2);
    ASSERT_TRUE(Post(r, a1, renew).status.ok());
    ASSERT_TRUE(Next(s.get(), &ev));
    EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());
  }
  EXPECT_GT(MsSince(start), 2000);
  EXPECT_EQ(1, Read(r, watcher, "work").items_size());
  // Not renewed: it goes, as a DELETE caused by the lease.
  auto renewed_at = Clock::now();
  ASSERT_TRUE(Next(s.get(), &ev, 10000));
  int64_t freed_after = MsSince(renewed_at);
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_DELETE, ev.kind());
  EXPECT_EQ(BLACKBOARD_CHANGE_CAUSE_LEASE_EXPIRED, ev.cause());
  EXPECT_EQ("subtask/7", ev.items(0).key());
  EXPECT_GE(freed_after, 1500);
  EXPECT_LT(freed_after, 2000 + 3000) << "the lease was freed late";
  std::printf("blackboard: a 2 s lease was freed %lld ms after its last renewal\n",
              (long long)freed_after);
  // Now agent-2 can claim it.
  EXPECT_TRUE(Post(r, a2, claim2).status.ok());
}

TEST_F(BlackboardTest, AnExpiredBoardEndsItsStreamsWithExpired) {
  Replica r = Launch();
  std::string tok = Token(Tenant("expiry"), "alice");
  BlackboardPostRequest req = PostReq("short", "k", Num(1));
  req.mutable_ttl()->set_seconds(1);
  BlackboardPostResponse made;
  ASSERT_TRUE(Post(r, tok, req, &made).status.ok());
  // A later post cannot shorten the board's life.
  BlackboardPostRequest later = PostReq("short", "k2", Num(2));
  ASSERT_TRUE(Post(r, tok, later).status.ok());
  auto s = Subscribe(r, tok, "short");
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
  EXPECT_EQ(made.meta().expire_time().seconds(), ev.expire_time().seconds());
  ASSERT_TRUE(Next(s.get(), &ev, 10000));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_EXPIRED, ev.kind());
  EXPECT_EQ(made.board_id(), ev.board_id());
  std::string msg;
  EXPECT_FALSE(s->Read(&msg, 5000));
  EXPECT_TRUE(s->Finish().ok());
  BlackboardReadResponse gone = Read(r, tok, "short");
  EXPECT_EQ(0, gone.version());
  EXPECT_EQ(0, gone.items_size());
  // Created again: a new board, from revision 1.
  BlackboardPostResponse again;
  ASSERT_TRUE(Post(r, tok, PostReq("short", "k", Num(3)), &again).status.ok());
  EXPECT_TRUE(again.board_created());
  EXPECT_EQ(1, again.meta().version());
  EXPECT_NE(made.board_id(), again.board_id());
  // A stream on the new board (this replica still watches the old one's
  // channel) gets the new board's changes, not an EXPIRED of the old one.
  auto fresh = Subscribe(r, tok, "short");
  ASSERT_TRUE(Next(fresh.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
  EXPECT_EQ(again.board_id(), ev.board_id());
  ASSERT_TRUE(Post(r, tok, PostReq("short", "k2", Num(5))).status.ok());
  ASSERT_TRUE(Next(fresh.get(), &ev));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());
  EXPECT_EQ(2, ev.version());
  // Board ids sort by creation.
  EXPECT_LT(made.board_id(), again.board_id());
  // A later post may extend the board.
  BlackboardPostRequest extend = PostReq("short", "k", Num(4));
  extend.mutable_ttl()->set_seconds(3 * 86400);
  BlackboardPostResponse ext;
  ASSERT_TRUE(Post(r, tok, extend, &ext).status.ok());
  EXPECT_NEAR(3 * 86400, ext.meta().expire_time().seconds() - ext.meta().update_time().seconds(),
              2);
}

TEST_F(BlackboardTest, RevokedTokenEndsItsStreamsUnauthenticated) {
  Replica r = Launch();
  std::string t = Tenant("revoke");
  std::string tok =
      Token(t, "alice", "blackboard:read blackboard:write", "SECRET", 3600, "jti-revoke-" + t);
  std::string admin = Token(t, "admin", "admin");
  auto s = Subscribe(r, tok, "rv");
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(s.get(), &ev));
  AccessRevokeRequest rv;
  rv.set_token_id("jti-revoke-" + t);
  Result res = Call(r, "/memory.v1.Access/Revoke", rv, admin);
  ASSERT_TRUE(res.status.ok()) << res.status.error_message();
  std::string msg;
  EXPECT_FALSE(s->Read(&msg, 10000));
  grpc::Status st = s->Finish();
  EXPECT_EQ(StatusCode::UNAUTHENTICATED, st.error_code()) << st.error_message();
}

TEST_F(BlackboardTest, ExpiredTokenEndsItsStreamsUnauthenticated) {
  Replica r = Launch({"--token-skew=0"});
  std::string tok = Token(Tenant("exp"), "alice", "blackboard:read blackboard:write", "SECRET", 2);
  auto s = Subscribe(r, tok, "ex");
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(s.get(), &ev));
  auto t0 = Clock::now();
  std::string msg;
  EXPECT_FALSE(s->Read(&msg, 10000));
  grpc::Status st = s->Finish();
  EXPECT_EQ(StatusCode::UNAUTHENTICATED, st.error_code()) << st.error_message();
  EXPECT_LT(MsSince(t0), 6000);
}

TEST_F(BlackboardTest, BadInputIsInvalidArgumentAndChangesNothing) {
  Replica r = Launch();
  std::string tok = Token(Tenant("bad"), "alice");
  MustPost(r, tok, "b", "k", Num(1));
  auto invalid = [&](const BlackboardPostRequest& req, const std::string& says) {
    Result res = Post(r, tok, req);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, res.status.error_code())
        << says << ": " << res.status.error_message();
    EXPECT_NE(std::string::npos, res.status.error_message().find(says))
        << res.status.error_message();
  };
  invalid(PostReq("", "k", Num(1)), "task_id");
  invalid(PostReq(std::string(300, 't'), "k", Num(1)), "task_id");
  invalid(PostReq("b\x01", "k", Num(1)), "task_id");
  invalid(PostReq("b", "", Num(1)), "key");
  invalid(PostReq("b", std::string(257, 'k'), Num(1)), "key");
  invalid(PostReq("b", "k\n", Num(1)), "key");
  invalid(PostReq("b", "k", Num(std::nan(""))), "NaN");
  invalid(PostReq("b", "k", Num(INFINITY)), "value");
  invalid(PostReq("b", "k", Str(std::string(300 * 1024, 'v'))), "at most 262144");
  BlackboardPostRequest none;
  none.set_task_id("b");
  none.set_key("k");
  invalid(none, "value: required");
  BlackboardPostRequest both = PostReq("b", "k", Num(2));
  both.set_delete_key(true);
  invalid(both, "delete_key");
  BlackboardPostRequest ttl = PostReq("b", "k", Num(2));
  ttl.mutable_ttl()->set_seconds(0);
  ttl.mutable_ttl()->set_nanos(500000000);
  invalid(ttl, "ttl");
  ttl.mutable_ttl()->set_seconds(31 * 86400);
  invalid(ttl, "30 days");
  BlackboardPostRequest lease = PostReq("b", "k", Num(2));
  lease.mutable_lease_ttl()->set_seconds(2 * 86400);
  invalid(lease, "lease_ttl");
  BlackboardPostRequest neg = PostReq("b", "k", Num(2));
  neg.set_expected_version(-1);
  invalid(neg, "expected_version");
  BlackboardPostRequest label = PostReq("b", "k", Num(2));
  label.set_label(static_cast<Label>(9));
  invalid(label, "label");
  // PII is refused under the default policy, naming where.
  invalid(PostReq("b", "k", Str("mail me at ada@example.com")), "email at value");
  invalid(PostReq("b", "ada@example.com", Num(1)), "email");

  BlackboardReadResponse board = Read(r, tok, "b");
  EXPECT_EQ(1, board.version());
  ASSERT_EQ(1, board.items_size());
  EXPECT_EQ(1, board.items(0).value().number_value());

  // Subscribe's own fields.
  for (auto [after, id] : std::vector<std::pair<int64_t, std::string>>{{-5, ""}, {3, "xyz"}}) {
    auto s = std::make_unique<Stream>(r.ch, "/memory.v1.Blackboard/Subscribe", 5000, Auth(tok));
    BlackboardSubscribeRequest req;
    req.set_task_id("b");
    req.set_after_version(after);
    req.set_board_id(id);
    ASSERT_TRUE(s->Write(req.SerializeAsString()));
    ASSERT_TRUE(s->WritesDone());
    std::string msg;
    EXPECT_FALSE(s->Read(&msg));
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, s->Finish().error_code()) << after;
  }
}

TEST_F(BlackboardTest, PiiIsKeptAndNamedWithThePiiWriteScope) {
  Replica r = Launch();
  std::string tok = Token(Tenant("pii"), "alice", "blackboard:read blackboard:write pii:write");
  BlackboardPostResponse resp;
  ASSERT_TRUE(Post(r, tok, PostReq("p", "contact", Str("ada@example.com")), &resp).status.ok());
  ASSERT_EQ(1, resp.meta().pii_kinds_size());
  EXPECT_EQ("email", resp.meta().pii_kinds(0));
  BlackboardReadResponse board = Read(r, tok, "p");
  ASSERT_EQ(1, board.items_size());
  EXPECT_EQ("ada@example.com", board.items(0).value().string_value());
  ASSERT_EQ(1, board.items(0).meta().pii_kinds_size());

  Replica redact = Launch({"--pii-policy=redact"});
  std::string plain = Token(Tenant("pii-redact"), "alice");
  ASSERT_TRUE(Post(redact, plain, PostReq("p", "contact", Str("ada@example.com"))).status.ok());
  EXPECT_EQ("[REDACTED:email]", Read(redact, plain, "p").items(0).value().string_value());
}

TEST_F(BlackboardTest, BoardLimitsAreFailedPrecondition) {
  Replica r = Launch();
  std::string tok = Token(Tenant("limits"), "alice");
  // Values of 256 KiB fill the board's ~3 MiB before its 1000 keys.
  const std::string quarter(256 * 1024 - 2, 'v');  // with its quotes: 256 KiB of JSON
  int posted = 0;
  Result res;
  for (; posted < 20; posted++) {
    res = Post(r, tok, PostReq("big", "k" + std::to_string(posted), Str(quarter)));
    if (!res.status.ok()) break;
  }
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, res.status.error_code());
  EXPECT_NE(std::string::npos, res.status.error_message().find("over its limit"))
      << res.status.error_message();
  EXPECT_GE(posted, 10);
  EXPECT_LE(posted, 12);
  // The whole board still fits one Read.
  EXPECT_EQ(posted, Read(r, tok, "big").items_size());

  for (int i = 0; i < 1000; i++) MustPost(r, tok, "many", "k" + std::to_string(i), Num(i));
  res = Post(r, tok, PostReq("many", "one-more", Num(1)));
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, res.status.error_code());
  EXPECT_NE(std::string::npos, res.status.error_message().find("1000 keys"))
      << res.status.error_message();
  // Changing an existing key is still fine.
  EXPECT_TRUE(Post(r, tok, PostReq("many", "k1", Num(-1))).status.ok());
}

// A post is answered once its audit row is stored in PostgreSQL (Redis
// keeps no history): memoryd killed the moment the answer arrives leaves
// the row behind.
TEST_F(BlackboardTest, PostsAreAuditedBeforeTheyAreAnswered) {
  PgSession db(db_.url());
  ASSERT_TRUE(db.ok()) << db.error();
  std::vector<Replica> killed;
  Replica r = Launch();
  std::string tok = Token(Tenant("audited"), "alice");
  Result res =
      Unary(r.ch, "/memory.v1.Blackboard/Post", PostReq("aud", "k1", Num(1)).SerializeAsString(),
            5000, {{"authorization", TestKeys::Bearer(tok)}, {"x-request-id", "bb-post"}});
  kill(r.proc->pid(), SIGKILL);
  r.proc->Wait(5000);
  ASSERT_TRUE(res.status.ok()) << res.status.error_message();
  EXPECT_EQ("1|{blackboard:aud/k1}",
            db.Value("SELECT count(*) || '|' || min(target_ids::text) FROM audit_log WHERE "
                     "status_code = 0 AND request_id = 'bb-post'"));
  killed.push_back(std::move(r));
}

// Redis killed under an open stream: posts and reads fail fast with
// UNAVAILABLE and health says NOT_SERVING; back within the grace, the
// stream goes on (Redis restarted empty: the board is gone, so a SNAPSHOT
// of nothing); down longer than the grace, streams end UNAVAILABLE.
TEST_F(BlackboardTest, RedisLostAndBackMidStream) {
  RedisServer redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  Replica r = Launch({"--blackboard-redis-grace-ms=4000"}, redis.url());
  std::string tok = Token(Tenant("fault"), "alice");
  ASSERT_TRUE(Eventually([&] { return Health(r, "memory.v1.Blackboard") == 1; }, 10000));
  MustPost(r, tok, "f", "k", Num(1));
  auto s = Subscribe(r, tok, "f");
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(Next(s.get(), &ev));
  EXPECT_EQ(1, ev.version());

  ASSERT_TRUE(redis.Stop()) << redis.error();
  auto t0 = Clock::now();
  Result down = Post(r, tok, PostReq("f", "k", Num(2)));
  EXPECT_EQ(StatusCode::UNAVAILABLE, down.status.error_code()) << down.status.error_message();
  EXPECT_LT(MsSince(t0), 2000);
  BlackboardReadRequest rq;
  rq.set_task_id("f");
  EXPECT_EQ(StatusCode::UNAVAILABLE,
            Call(r, "/memory.v1.Blackboard/Read", rq, tok).status.error_code());
  EXPECT_TRUE(Eventually([&] { return Health(r, "memory.v1.Blackboard") == 2; }, 5000));
  ASSERT_TRUE(redis.Start()) << redis.error();
  // Back within the grace: the stream resumes with what Redis now has.
  ASSERT_TRUE(Next(s.get(), &ev, 10000));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
  EXPECT_EQ(0, ev.version());
  MustPost(r, tok, "f", "k", Num(3));
  ASSERT_TRUE(Next(s.get(), &ev, 10000));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_PUT, ev.kind());
  EXPECT_EQ(1, ev.version());
  EXPECT_TRUE(Eventually([&] { return Health(r, "memory.v1.Blackboard") == 1; }, 5000));

  // Down longer than the grace: the stream ends UNAVAILABLE, and a new one
  // is refused until Redis is back.
  ASSERT_TRUE(redis.Stop()) << redis.error();
  auto lost = Clock::now();
  std::string msg;
  EXPECT_FALSE(s->Read(&msg, 15000));
  grpc::Status st = s->Finish();
  EXPECT_EQ(StatusCode::UNAVAILABLE, st.error_code()) << st.error_message();
  EXPECT_GE(MsSince(lost), 3500);
  auto refused = Subscribe(r, tok, "f");
  EXPECT_FALSE(refused->Read(&msg, 5000));
  EXPECT_EQ(StatusCode::UNAVAILABLE, refused->Finish().error_code());
  ASSERT_TRUE(redis.Start()) << redis.error();
  EXPECT_TRUE(
      Eventually([&] { return Post(r, tok, PostReq("f", "k", Num(4))).status.ok(); }, 10000));
}

}  // namespace
