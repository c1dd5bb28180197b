// memoryd::Memory (//clients/cpp:memory) against a real memoryd: dict-like
// reads that never write, explicit writes, namespace override, wildcard
// key listing, and errors with memoryd's code and message.
#include <gtest/gtest.h>

#include <chrono>

#include "memoryd/memory.h"
#include "tests/clients/suite_memoryd.h"
#include "tests/testing/ports.h"

namespace {

using grpc::StatusCode;
using memoryd::EntryKey;
using memoryd::Memory;

class CppMemoryTest : public client_test::SuiteMemoryd {
 protected:
  void SetUp() override {
    SuiteMemoryd::SetUp();
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  }
  Memory Mem(const std::string& ns, const std::string& scope = "entries:*") {
    return Memory(channel_, server_->Token(scope), ns);
  }
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(CppMemoryTest, ReadsWritesAndListsByPattern) {
  Memory memory = Mem("planner:trip:prefs");
  std::string v;
  bool found = true;
  ASSERT_TRUE(memory.Get("user_style", &v, &found).ok());
  EXPECT_FALSE(found);
  Memory::WriteOptions tagged;
  tagged.tags = {"pref"};
  ASSERT_TRUE(memory.Write("user_style", "terse", tagged).ok());
  Memory::WriteOptions json;
  json.content_type = "application/json";
  ASSERT_TRUE(memory.Write("user_langs", "[\"C\",\"Go\"]", json).ok());
  ASSERT_TRUE(memory.Write("user%x", "literal percent").ok());
  ASSERT_TRUE(memory.InNamespace("planner:trip:plan").Write("user_goal", "Lyon").ok());
  ASSERT_TRUE(memory.InNamespace("coder:trip:prefs").Write("user_other", "x").ok());
  ASSERT_TRUE(memory.Get("user_style", &v, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ("terse", v);
  memory::v1::Entry e;
  ASSERT_TRUE(memory.GetEntry("user_langs", &e, &found).ok());
  EXPECT_EQ("application/json", e.content_type());
  ASSERT_TRUE(memory.GetEntry("user_style", &e, &found).ok());
  EXPECT_EQ("pref", e.tags(0));
  EXPECT_EQ("client-test", e.meta().owner());

  std::vector<EntryKey> keys;
  ASSERT_TRUE(memory.ListKeys("user_*", &keys).ok());  // `_` and `%` are literal
  EXPECT_EQ((std::vector<EntryKey>{{"planner:trip:prefs", "user_langs"},
                                   {"planner:trip:prefs", "user_style"}}),
            keys);
  ASSERT_TRUE(memory.ListKeys("user_*", &keys, "planner:*:*").ok());
  EXPECT_EQ((std::vector<EntryKey>{{"planner:trip:plan", "user_goal"},
                                   {"planner:trip:prefs", "user_langs"},
                                   {"planner:trip:prefs", "user_style"}}),
            keys);
  ASSERT_TRUE(memory.ListKeys("*", &keys, "*:trip:*").ok());
  EXPECT_EQ(5u, keys.size());
  ASSERT_TRUE(memory.ListKeys("*", &keys, "*:*:*", 2).ok());
  EXPECT_EQ(2u, keys.size());

  // Reads never write: a read of a missing key leaves nothing to list.
  ASSERT_TRUE(memory.Get("never_written", &v, &found).ok());
  ASSERT_TRUE(memory.ListKeys("never*", &keys).ok());
  EXPECT_TRUE(keys.empty());

  bool deleted = false;
  ASSERT_TRUE(memory.Delete("user_style", &deleted).ok());
  EXPECT_TRUE(deleted);
  ASSERT_TRUE(memory.Delete("user_style", &deleted).ok());
  EXPECT_FALSE(deleted);
  Memory::WriteOptions cas;
  cas.expected_version = 0;
  EXPECT_EQ(StatusCode::ABORTED, memory.Write("user_langs", "x", cas).error_code());
}

TEST_F(CppMemoryTest, ErrorsCarryMemorydsCodeAndMessage) {
  grpc::Status st = Memory(channel_, "", "a:b:c").Write("k", "v");
  EXPECT_EQ(StatusCode::UNAUTHENTICATED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("token")) << st.error_message();
  st = Mem("a:b:c", "entries:read").Write("k", "v");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("entries:write")) << st.error_message();
  st = Mem("not-a-namespace").Write("k", "v");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("namespace")) << st.error_message();
  // A 1 ms deadline against a port nothing answers on: DEADLINE_EXCEEDED
  // or UNAVAILABLE, in well under a second, never a hang.
  auto dead = grpc::CreateChannel("127.0.0.1:" + std::to_string(ClosedPort()),
                                  grpc::InsecureChannelCredentials());
  auto start = std::chrono::steady_clock::now();
  std::string v;
  bool found = false;
  st = Memory(dead, "t", "a:b:c", std::chrono::milliseconds(1)).Get("k", &v, &found);
  EXPECT_TRUE(st.error_code() == StatusCode::DEADLINE_EXCEEDED ||
              st.error_code() == StatusCode::UNAVAILABLE)
      << st.error_code();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
