// aredis against a private redis-server: replies on the loop thread in
// order, pipelined; a deadline and a cancel answer at once even when Redis
// hangs (SIGSTOP), and the connection is replaced; a killed Redis fails
// commands fast and is reconnected to; what may be in flight is bounded.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/redis_server.h"

extern "C" {
#include "service/core/clock.h"
#include "service/core/status.h"
#include "service/store/aredis.h"
#include "service/store/evloop.h"
}

namespace {

int64_t NowMs() { return clock_mono_ms(nullptr); }

// One command and the wait for its answer.
struct Cmd {
  aredis_cmd q{};
  std::vector<std::string> words;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  std::mutex mu;
  std::condition_variable cv;
  bool answered = false;
  bool on_loop = false;
  int status = 1;
  std::string reply, err;  // a string or status reply's text
  int64_t answered_ms = 0;
  evloop* loop = nullptr;

  Cmd(std::vector<std::string> w, int64_t deadline_ms = INT64_MAX) : words(std::move(w)) {
    for (const auto& s : words) {
      argv.push_back(s.c_str());
      lens.push_back(s.size());
    }
    q.argc = static_cast<int>(argv.size());
    q.argv = argv.data();
    q.lens = lens.data();
    q.what = "test command";
    q.deadline_ms = deadline_ms;
    q.arg = this;
    q.done = [](aredis_cmd* q, int status, redisReply* r) {
      Cmd* c = static_cast<Cmd*>(q->arg);
      std::lock_guard<std::mutex> g(c->mu);
      c->on_loop = c->loop && evloop_on_loop(c->loop);
      c->status = status;
      if (r && r->str) c->reply.assign(r->str, r->len);
      if (r && r->type == REDIS_REPLY_INTEGER) c->reply = std::to_string(r->integer);
      c->err = q->err;
      c->answered_ms = NowMs();
      c->answered = true;
      c->cv.notify_all();
    };
  }
  bool Wait(int ms = 10000) {
    std::unique_lock<std::mutex> g(mu);
    return cv.wait_for(g, std::chrono::milliseconds(ms), [&] { return answered; });
  }
};

class AredisTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(redis_.ok()) << redis_.error(); }
  void TearDown() override {
    aredis_free(client_);
    evloop_free(loop_);
  }
  void Open(int max_in_flight = 1024) {
    char err[256];
    ASSERT_EQ(0, evloop_create("test", &loop_, err, sizeof err)) << err;
    aredis_options o = {};
    o.connect_timeout_ms = 1000;
    o.default_timeout_ms = 5000;
    o.max_in_flight = max_in_flight;
    std::string url = redis_.url();
    o.url = url.c_str();
    ASSERT_EQ(0, aredis_create(loop_, &o, &client_, err, sizeof err)) << err;
  }
  void Submit(Cmd* c) {
    c->loop = loop_;
    aredis_submit(client_, &c->q);
  }
  // Sends PING until one is answered OK (the client reconnects on its own).
  bool AnswersWithin(int ms) {
    int64_t until = NowMs() + ms;
    while (NowMs() < until) {
      Cmd ping({"PING"}, NowMs() + 500);
      Submit(&ping);
      if (ping.Wait() && ping.status == STATUS_OK) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  RedisServer redis_;
  evloop* loop_ = nullptr;
  aredis* client_ = nullptr;
};

TEST_F(AredisTest, AnswersInOrderOnTheLoopThread) {
  Open();
  ASSERT_TRUE(AnswersWithin(5000));
  EXPECT_EQ(1, aredis_connected(client_));
  std::vector<std::unique_ptr<Cmd>> cmds;
  for (int i = 0; i < 500; i++) {
    cmds.emplace_back(new Cmd({"SET", "k" + std::to_string(i), "v" + std::to_string(i)}));
    cmds.emplace_back(new Cmd({"GET", "k" + std::to_string(i)}));
  }
  for (auto& c : cmds) Submit(c.get());
  for (size_t i = 0; i < cmds.size(); i++) {
    ASSERT_TRUE(cmds[i]->Wait()) << i;
    ASSERT_EQ(STATUS_OK, cmds[i]->status) << i << ": " << cmds[i]->err;
    EXPECT_TRUE(cmds[i]->on_loop);
    if (i % 2) {
      EXPECT_EQ("v" + std::to_string(i / 2), cmds[i]->reply);
    }
  }
  Cmd bad({"NO_SUCH_COMMAND"});
  Submit(&bad);
  ASSERT_TRUE(bad.Wait());
  EXPECT_EQ(STATUS_EUNAVAILABLE, bad.status);
  EXPECT_NE(std::string::npos, bad.err.find("refused")) << bad.err;
}

// A hung Redis: the command ends at its deadline, a cancelled one at the
// cancel, and a bounded number may wait; after SIGCONT the client answers
// again (on a new connection).
TEST_F(AredisTest, HungRedisEndsCommandsByDeadlineAndCancelThenRecovers) {
  Open(2);
  ASSERT_TRUE(AnswersWithin(5000));
  ASSERT_TRUE(redis_.Freeze()) << redis_.error();
  int64_t start = NowMs();
  Cmd late({"GET", "x"}, start + 300);
  Cmd cancelled({"GET", "y"}, start + 20000);
  Submit(&late);
  Submit(&cancelled);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Cmd over({"GET", "z"}, start + 20000);  // a third while two await replies
  Submit(&over);
  ASSERT_TRUE(over.Wait());
  EXPECT_EQ(STATUS_EBUSY, over.status) << over.err;
  int64_t cancel_at = NowMs();
  aredis_cancel(client_, &cancelled.q);
  ASSERT_TRUE(cancelled.Wait());
  EXPECT_EQ(STATUS_ECANCELLED, cancelled.status) << cancelled.err;
  EXPECT_LT(cancelled.answered_ms - cancel_at, 250);
  ASSERT_TRUE(late.Wait());
  EXPECT_EQ(STATUS_ETIMEOUT, late.status) << late.err;
  EXPECT_GE(late.answered_ms - start, 290);
  EXPECT_LT(late.answered_ms - start, 300 + 250) << "answered well after the deadline";
  ASSERT_TRUE(redis_.Thaw()) << redis_.error();
  EXPECT_TRUE(AnswersWithin(10000)) << "no answer after the thaw";
}

// A hung Redis again: a write (wait_reply) outlives its deadline and a
// cancel once sent, since Redis may still apply it, and is answered with
// what Redis did after the thaw; the connection is dropped only when the
// oldest reply has been owed for stall_ms, not at any command's deadline.
TEST_F(AredisTest, ASentWriteWaitsForItsReplyPastItsDeadlineAndCancel) {
  Open();
  ASSERT_TRUE(AnswersWithin(5000));
  ASSERT_TRUE(redis_.Freeze()) << redis_.error();
  int64_t start = NowMs();
  Cmd write({"INCR", "applied"}, start + 100);
  write.q.wait_reply = 1;
  Cmd read({"GET", "x"}, start + 100);
  Submit(&write);
  Submit(&read);
  ASSERT_TRUE(read.Wait());
  EXPECT_EQ(STATUS_ETIMEOUT, read.status) << read.err;  // a read ends at its deadline
  aredis_cancel(client_, &write.q);
  EXPECT_FALSE(write.Wait(500)) << "the sent write was answered before Redis answered";
  EXPECT_EQ(1, aredis_connected(client_)) << "a deadline dropped the connection";
  ASSERT_TRUE(redis_.Thaw()) << redis_.error();
  ASSERT_TRUE(write.Wait());
  EXPECT_EQ(STATUS_OK, write.status) << write.err;
  EXPECT_EQ("1", write.reply);
  EXPECT_EQ(1, aredis_connected(client_));
}

// Commands whose deadlines are shorter than Redis's answer end ETIMEOUT one
// by one; the connection stays up and everything behind them is answered.
TEST_F(AredisTest, ShortDeadlinesEndTheirCommandsOnlyNotTheConnection) {
  Open();
  ASSERT_TRUE(AnswersWithin(5000));
  std::vector<std::unique_ptr<Cmd>> cmds;
  for (int i = 0; i < 300; i++) {
    // A slow script now and then, each with a deadline it cannot meet.
    if (i % 30 == 0)
      cmds.emplace_back(new Cmd(
          {"EVAL", "local n = 0 for i = 1, 3000000 do n = n + i end return n", "0"}, NowMs() + 1));
    cmds.emplace_back(new Cmd({"SET", "k" + std::to_string(i), "v"}, NowMs() + 10000));
  }
  for (auto& c : cmds) Submit(c.get());
  int timed_out = 0;
  for (auto& c : cmds) {
    ASSERT_TRUE(c->Wait());
    if (c->words[0] == "EVAL") {
      if (c->status == STATUS_ETIMEOUT) timed_out++;
      continue;
    }
    EXPECT_EQ(STATUS_OK, c->status) << c->words[1] << ": " << c->err;
  }
  EXPECT_GT(timed_out, 0);
  EXPECT_EQ(1, aredis_connected(client_));
}

TEST_F(AredisTest, KilledRedisFailsFastAndIsReconnectedTo) {
  Open();
  ASSERT_TRUE(AnswersWithin(5000));
  ASSERT_TRUE(redis_.Stop()) << redis_.error();
  // The loss is noticed (the socket closes); then commands fail at once.
  bool fast = false;
  for (int i = 0; i < 100 && !fast; i++) {
    Cmd c({"PING"}, NowMs() + 5000);
    int64_t t0 = NowMs();
    Submit(&c);
    ASSERT_TRUE(c.Wait());
    fast = c.status == STATUS_EUNAVAILABLE && c.answered_ms - t0 < 100;
    if (!fast) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(fast) << "commands did not fail fast while Redis was down";
  EXPECT_EQ(0, aredis_connected(client_));
  ASSERT_TRUE(redis_.Start()) << redis_.error();
  EXPECT_TRUE(AnswersWithin(10000)) << "not reconnected";
}

TEST_F(AredisTest, FreeAnswersWhatIsInFlight) {
  Open();
  ASSERT_TRUE(AnswersWithin(5000));
  ASSERT_TRUE(redis_.Freeze()) << redis_.error();
  Cmd c({"GET", "x"}, NowMs() + 20000);
  Submit(&c);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  aredis_free(client_);
  client_ = nullptr;
  ASSERT_TRUE(c.Wait(1000));
  EXPECT_EQ(STATUS_EUNAVAILABLE, c.status) << c.err;
  ASSERT_TRUE(redis_.Thaw()) << redis_.error();
}

}  // namespace
