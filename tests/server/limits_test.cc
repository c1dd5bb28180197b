// Per-caller bounds of the real binary: an unauthenticated call decodes
// nothing, an authenticated one is held to --max-call-memory, Health/Watch
// names and watchers are bounded, streams are capped per principal, per
// tenant and server-wide, and a stream whose client stops reading ends
// instead of queueing without end (issue 14, items 3 and 4).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.pb.h"
#include "memory/v1/audit.pb.h"
#include "memory/v1/entries.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using grpc::StatusCode;
using grpc::health::v1::HealthCheckRequest;
using testing_client::Result;
using testing_client::Stream;

// Peak resident memory of pid in KiB (VmHWM), -1 if unreadable.
long PeakRssKiB(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// An EpisodicMemory.Upsert request of about `bytes` bytes that is nothing but
// empty points: 2 bytes each on the wire, a whole struct each decoded.
std::string EmptyPointsUpsert(size_t bytes) {
  std::string s = std::string("\x0a\x01", 2) + "c";
  while (s.size() + 2 <= bytes) s.append("\x12\x00", 2);
  return s;
}

std::string CheckReq(const std::string& service) {
  HealthCheckRequest r;
  r.set_service(service);
  return r.SerializeAsString();
}

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(db_.ok()) << db_.error(); }
  void Launch(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=2",
                                     "--max-message-bytes=4194304"};
    args.insert(args.end(), extra.begin(), extra.end());
    m_ = std::make_unique<MemorydProcess>(args);
    ASSERT_TRUE(m_->Start()) << m_->Log();
    ch_ = testing_client::Connect(m_->port());
  }
  std::string Token(const std::string& tenant, const std::string& sub) {
    TestClaims c;
    c.tenant = tenant;
    c.sub = sub;
    c.scope = "entries:* audit:read:all episodic:write";
    return m_->keys()->Mint(c);
  }
  std::map<std::string, std::string> Auth(const std::string& tok) {
    return {{"authorization", TestKeys::Bearer(tok)}};
  }
  // An Audit.Watch stream; the first Read tells whether it was refused.
  std::unique_ptr<Stream> Watch(const std::string& tok, int timeout_ms = 30000,
                                std::shared_ptr<grpc::Channel> ch = nullptr) {
    auto s =
        std::make_unique<Stream>(ch ? ch : ch_, "/memory.v1.Audit/Watch", timeout_ms, Auth(tok));
    memory::v1::AuditWatchRequest req;
    EXPECT_TRUE(s->Write(req.SerializeAsString()));
    EXPECT_TRUE(s->WritesDone());
    return s;
  }
  // Waits until memoryd's log has a line with every one of parts.
  bool LogShows(const std::vector<std::string>& parts, int timeout_ms) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < until) {
      std::string log = m_->Log();
      size_t pos = 0, nl;
      while ((nl = log.find('\n', pos)) != std::string::npos) {
        std::string line = log.substr(pos, nl - pos);
        pos = nl + 1;
        bool all = true;
        for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
        if (all) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  void TearDown() override {
    if (m_) {
      EXPECT_EQ(0, m_->Stop(SIGTERM, 10000)) << m_->Log();
    }
  }
  PgTestDb db_;
  std::unique_ptr<MemorydProcess> m_;
  std::shared_ptr<grpc::Channel> ch_;
};

// 4 MiB of empty points decode to hundreds of MiB. Without a token memoryd
// must refuse from the metadata alone: four such calls at once leave its
// peak memory about where it was (gRPC's own copies of the bytes aside).
TEST_F(LimitsTest, UnauthenticatedCallsDecodeNothing) {
  Launch();
  long before = PeakRssKiB(m_->pid());
  ASSERT_GT(before, 0);
  std::string body = EmptyPointsUpsert(4000000);
  std::vector<Result> rs(4);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++)
    ts.emplace_back([&, i] {
      rs[i] =
          testing_client::Unary(ch_, "/memory.v1.EpisodicMemory/Upsert", body, 20000,
                                i % 2 ? Auth("not-a-token") : std::map<std::string, std::string>{});
    });
  for (auto& t : ts) t.join();
  for (const auto& r : rs)
    EXPECT_EQ(StatusCode::UNAUTHENTICATED, r.status.error_code()) << r.status.error_message();
  long grew_mib = (PeakRssKiB(m_->pid()) - before) / 1024;
  std::printf("limits: peak memory grew %ld MiB over 4 unauthenticated 4 MB calls\n", grew_mib);
  EXPECT_LT(grew_mib, 64) << "the requests were decoded before the token was checked";
}

// An authenticated caller is held to --max-call-memory: the same request
// fails RESOURCE_EXHAUSTED naming the flag, and memoryd goes on serving.
TEST_F(LimitsTest, CallMemoryCapRefusesARequestThatDecodesTooBig) {
  Launch({"--max-call-memory=16"});
  std::string tok = Token("t1", "alice");
  Result r = testing_client::Unary(ch_, "/memory.v1.EpisodicMemory/Upsert",
                                   EmptyPointsUpsert(4000000), 20000, Auth(tok));
  EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, r.status.error_code()) << r.status.error_message();
  EXPECT_NE(std::string::npos, r.status.error_message().find("--max-call-memory"))
      << r.status.error_message();
  // A small request of the same kind is decoded and judged on its merits
  // (its collection does not exist).
  Result small = testing_client::Unary(ch_, "/memory.v1.EpisodicMemory/Upsert",
                                       EmptyPointsUpsert(64), 5000, Auth(tok));
  EXPECT_EQ(StatusCode::NOT_FOUND, small.status.error_code()) << small.status.error_message();
  EXPECT_EQ(StatusCode::OK,
            testing_client::Unary(ch_, "/grpc.health.v1.Health/Check", CheckReq(""), 5000)
                .status.error_code());
}

// Health/Watch needs no token: names are bounded and so are watchers.
TEST_F(LimitsTest, HealthWatchNamesAndWatchersAreBounded) {
  Launch({"--max-health-watchers=2"});
  {
    Stream s(ch_, "/grpc.health.v1.Health/Watch", 5000);
    ASSERT_TRUE(s.Write(CheckReq(std::string(100000, 'x'))));
    ASSERT_TRUE(s.WritesDone());
    std::string msg;
    EXPECT_FALSE(s.Read(&msg));
    grpc::Status st = s.Finish();
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, st.error_code()) << st.error_message();
  }
  std::vector<std::unique_ptr<Stream>> open;
  std::string msg;
  for (int i = 0; i < 2; i++) {
    open.push_back(std::make_unique<Stream>(ch_, "/grpc.health.v1.Health/Watch", 30000));
    ASSERT_TRUE(open.back()->Write(CheckReq("")));
    ASSERT_TRUE(open.back()->WritesDone());
    ASSERT_TRUE(open.back()->Read(&msg)) << i;
  }
  Stream third(ch_, "/grpc.health.v1.Health/Watch", 5000);
  ASSERT_TRUE(third.Write(CheckReq("")));
  ASSERT_TRUE(third.WritesDone());
  EXPECT_FALSE(third.Read(&msg));
  grpc::Status st = third.Finish();
  EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, st.error_code()) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("--max-health-watchers"));
  // A watcher that leaves makes room.
  open[0]->Cancel();
  open[0]->Finish();
  bool room = false;
  for (int i = 0; i < 50 && !room; i++) {
    Stream again(ch_, "/grpc.health.v1.Health/Watch", 5000);
    again.Write(CheckReq(""));
    again.WritesDone();
    room = again.Read(&msg);
    again.Cancel();
    again.Finish();
    if (!room) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(room);
}

grpc::Status Refusal(Stream* s) {
  std::string msg;
  EXPECT_FALSE(s->Read(&msg, 5000));
  return s->Finish();
}

// One principal, one tenant and the server each have a stream limit; a
// closed stream hands its places back.
TEST_F(LimitsTest, StreamsAreCappedPerPrincipalPerTenantAndServerWide) {
  Launch({"--max-streams-per-principal=2", "--max-streams-per-tenant=3", "--max-streams=5"});
  std::string alice = Token("t1", "alice"), bob = Token("t1", "bob"), carol = Token("t2", "carol");
  std::vector<std::unique_ptr<Stream>> open;
  // Each stream meant to open is given time to register before the next
  // call (the server may take calls of one channel in any order).
  auto open_one = [&](const std::string& tok) {
    open.push_back(Watch(tok));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  open_one(alice);
  open_one(alice);
  auto a3 = Watch(alice);
  grpc::Status st = Refusal(a3.get());
  EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, st.error_code()) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("--max-streams-per-principal"))
      << st.error_message();
  open_one(bob);  // t1's third
  auto b2 = Watch(bob);
  st = Refusal(b2.get());
  EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, st.error_code()) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("--max-streams-per-tenant"))
      << st.error_message();
  open_one(carol);  // another tenant is not held back by t1
  // The fifth stream (a health watcher) fills the server; a sixth is refused.
  // (The refused streams count until memoryd has destroyed them, a moment
  // after their clients saw the refusal.)
  std::unique_ptr<Stream> h;
  std::string msg;
  bool opened = false;
  for (int i = 0; i < 40 && !opened; i++) {
    h = std::make_unique<Stream>(ch_, "/grpc.health.v1.Health/Watch", 30000);
    ASSERT_TRUE(h->Write(CheckReq("")));
    ASSERT_TRUE(h->WritesDone());
    opened = h->Read(&msg);
    if (!opened) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(opened);
  auto c2 = Watch(carol);
  st = Refusal(c2.get());
  EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, st.error_code()) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("--max-streams)")) << st.error_message();
  // Alice closes one: she (and the server) have room again.
  open[0]->Cancel();
  open[0]->Finish();
  bool room = false;
  for (int i = 0; i < 50 && !room; i++) {
    // Open if nothing refused it within 300 ms: our cancel then ends it.
    auto again = Watch(alice);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    again->Cancel();
    room = again->Finish().error_code() == StatusCode::CANCELLED;
  }
  EXPECT_TRUE(room);
  for (auto& s : open) s->Cancel();
  h->Cancel();
}

// An Audit.Watch client that never reads: the records for it pile up to
// --stream-buffer-bytes, then its stream ends RESOURCE_EXHAUSTED (records
// are never silently skipped) while memoryd goes on serving.
TEST_F(LimitsTest, AStreamWhoseClientStopsReadingEnds) {
  Launch({"--stream-buffer-bytes=16384"});
  std::string tok = Token("t1", "alice");
  // The watcher has its own connection whose HTTP/2 window stays at 64 KiB:
  // with gRPC's BDP probing the window grows to megabytes, and how many
  // records fill it then depends on how fast this machine is (CI's ASan run
  // once wrote too few within the stream's deadline).
  grpc::ChannelArguments fixed_window;
  fixed_window.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  fixed_window.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 65536);
  auto watch_ch = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(m_->port()),
                                            grpc::InsecureChannelCredentials(), fixed_window);
  auto watch = Watch(tok, 120000, watch_ch);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // registered
  // Reads of a missing entry with a long key: each leaves an audit record
  // of about 600 bytes naming it.
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int w = 0; w < 4; w++)
    ts.emplace_back([&, w] {
      memory::v1::EntriesReadRequest req;
      req.set_namespace_("a:b:c");
      for (int i = 0; !stop; i++) {
        req.set_key(std::string(500, 'k') + std::to_string(w) + "-" + std::to_string(i));
        testing_client::Unary(ch_, "/memory.v1.Entries/Read", req.SerializeAsString(), 5000,
                              Auth(tok));
      }
    });
  bool ended = LogShows({"/memory.v1.Audit/Watch", "RESOURCE_EXHAUSTED"}, 60000);
  stop = true;
  for (auto& t : ts) t.join();
  EXPECT_TRUE(ended) << "the stream kept queueing for a client that does not read";
  std::string msg;
  int read = 0;
  while (watch->Read(&msg, 10000)) read++;
  grpc::Status st = watch->Finish();
  std::printf("limits: the slow Audit.Watch reader got %d records before its stream ended\n", read);
  EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, st.error_code()) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("--stream-buffer-bytes"))
      << st.error_message();
  EXPECT_GT(read, 0);
}

}  // namespace
