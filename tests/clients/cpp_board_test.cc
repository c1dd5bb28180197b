// memoryd::Board (//clients/cpp:board) against two real memoryd replicas on
// one Redis: compare-and-set updates from racing threads lose nothing,
// claims are exclusive until their lease runs out, and a subscription whose
// replica shuts down reconnects to the other and resumes after its last
// event (the changes it missed, not a second SNAPSHOT).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "memoryd/board.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using memory::v1::BlackboardSubscribeResponse;

google::protobuf::Value Num(double d) {
  google::protobuf::Value v;
  v.set_number_value(d);
  return v;
}

std::string Task(const std::string& name) {
  return name + "-" + std::to_string(getpid()) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

class CppBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
  }
  std::unique_ptr<MemorydProcess> Launch() {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--redis-url=" + TestRedisUrl(),
                                     "--shutdown-grace=1"};
    if (keys_) args.push_back("--jwks=" + keys_->jwks_path());
    auto p = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(p->Start()) << p->Log();
    if (!keys_) keys_ = p->keys();
    return p;
  }
  std::string Token() {
    TestClaims c;
    c.tenant = "cpp-board";
    c.sub = "agent";
    c.scope = "blackboard:read blackboard:write";
    return keys_->Mint(c);
  }
  PgTestDb db_;
  TestKeys* keys_ = nullptr;
};

TEST_F(CppBoardTest, UpdatesClaimsAndASubscriptionThatMovesToAnotherReplica) {
  auto a = Launch(), b = Launch();
  std::string tok = Token(), task = Task("cpp");
  auto both = grpc::CreateChannel(
      "ipv4:127.0.0.1:" + std::to_string(a->port()) + ",127.0.0.1:" + std::to_string(b->port()),
      grpc::InsecureChannelCredentials());
  auto direct_b = grpc::CreateChannel("127.0.0.1:" + std::to_string(b->port()),
                                      grpc::InsecureChannelCredentials());
  memoryd::Board board(direct_b, tok, task);

  // Racing compare-and-set increments: none lost.
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&] {
      memoryd::Board mine(direct_b, tok, task);
      for (int i = 0; i < 10; i++) {
        grpc::Status st = mine.Update("count", [](const google::protobuf::Value* cur) {
          return Num(cur ? cur->number_value() + 1 : 1);
        });
        if (!st.ok()) failures++;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(0, failures.load());
  memory::v1::BlackboardReadResponse read;
  ASSERT_TRUE(board.Read(&read).ok());
  ASSERT_EQ(1, read.items_size());
  EXPECT_EQ(40, read.items(0).value().number_value());

  // A claim is exclusive until its lease runs out.
  bool mine = false;
  ASSERT_TRUE(board.Claim("subtask/1", Num(1), std::chrono::seconds(1), &mine).ok());
  EXPECT_TRUE(mine);
  ASSERT_TRUE(board.Claim("subtask/1", Num(2), std::chrono::seconds(1), &mine).ok());
  EXPECT_FALSE(mine);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ASSERT_TRUE(board.Claim("subtask/1", Num(2), std::chrono::seconds(1), &mine).ok());
  EXPECT_TRUE(mine);

  // A subscription through the two-address channel lands on a (the first).
  memoryd::Board watched(both, tok, task);
  auto sub = watched.Subscribe();
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(sub->Next(&ev));
  EXPECT_EQ(memory::v1::BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());
  int64_t at = ev.version();
  ASSERT_TRUE(board.Post("x", Num(1)).ok());
  ASSERT_TRUE(sub->Next(&ev));
  EXPECT_EQ(at + 1, ev.version());
  // Replica a goes (SIGTERM: its streams end UNAVAILABLE); two changes
  // happen on b meanwhile; the subscription resumes on b with them.
  EXPECT_EQ(0, a->Stop(SIGTERM, 10000)) << a->Log();
  ASSERT_TRUE(board.Post("y", Num(2)).ok());
  ASSERT_TRUE(board.Delete("x").ok());
  ASSERT_TRUE(sub->Next(&ev)) << sub->status().error_message();
  EXPECT_EQ(memory::v1::BLACKBOARD_EVENT_KIND_PUT, ev.kind());
  EXPECT_EQ(at + 2, ev.version());
  ASSERT_TRUE(sub->Next(&ev));
  EXPECT_EQ(memory::v1::BLACKBOARD_EVENT_KIND_DELETE, ev.kind());
  EXPECT_EQ(at + 3, ev.version());
  EXPECT_GE(sub->reconnects(), 1);
  sub->Cancel();
  EXPECT_FALSE(sub->Next(&ev));
}

}  // namespace
