// The runtime (service/rpc) with test-only methods registered into its
// method table: deadlines, streams, bidi, cancellation, interceptors and
// shutdown, through a real gRPC client over loopback.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.pb.h"
#include "tests/testing/grpc_client.h"

extern "C" {
#include "grpc/health/v1/health.pb-c.h"
#include "memory/v1/blackboard.pb-c.h"
#include "service/rpc/rpc.h"
}

namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using testing_client::Stream;
using testing_client::Unary;

// Test methods reuse the health messages: the request's `service` string
// carries the test's parameter.
const ProtobufCMessageDescriptor* kReq = &grpc__health__v1__health_check_request__descriptor;
const ProtobufCMessageDescriptor* kResp = &grpc__health__v1__health_check_response__descriptor;

std::atomic<int> g_slow_saw_deadline{0};
std::atomic<int64_t> g_slow_remaining_ms{-1};
std::atomic<int> g_cancelled{0};

grpc_status_code Slow(rpc_call* call, const ProtobufCMessage* req, ProtobufCMessage* resp, void*) {
  auto* r = reinterpret_cast<const Grpc__Health__V1__HealthCheckRequest*>(req);
  if (rpc_call_deadline_ms(call) != INT64_MAX) g_slow_saw_deadline = 1;
  g_slow_remaining_ms = rpc_call_remaining_ms(call);
  usleep(static_cast<useconds_t>(atoi(r->service)) * 1000);
  reinterpret_cast<Grpc__Health__V1__HealthCheckResponse*>(resp)->status =
      GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
  return GRPC_STATUS_OK;
}

// Slow on the task pool (a blocking method), counting its runs.
std::atomic<int> g_blocking_runs{0};
grpc_status_code BlockingSlow(rpc_call* call, const ProtobufCMessage* req, ProtobufCMessage* resp,
                              void* arg) {
  g_blocking_runs++;
  return Slow(call, req, resp, arg);
}

grpc_status_code Fail(rpc_call* call, const ProtobufCMessage*, ProtobufCMessage*, void*) {
  rpc_call_set_error(call, "entity %s not found", "e-1");
  return GRPC_STATUS_NOT_FOUND;
}

grpc_status_code Count(rpc_call* call, const ProtobufCMessage* req, void*) {
  int n = atoi(reinterpret_cast<const Grpc__Health__V1__HealthCheckRequest*>(req)->service);
  for (int i = 1; i <= n; i++) {
    Grpc__Health__V1__HealthCheckResponse m = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    m.status = static_cast<Grpc__Health__V1__HealthCheckResponse__ServingStatus>(i);
    if (rpc_call_send(call, &m.base) != 0) return GRPC_STATUS_CANCELLED;
  }
  return GRPC_STATUS_OK;
}

void ForeverCancelled(rpc_call* call, void*) {
  g_cancelled++;
  rpc_call_finish(call, GRPC_STATUS_CANCELLED, "cancelled");
}

// Sends one message, then keeps the stream open until cancelled. The cancel
// callback goes in before the message: once the client has the message it
// may cancel at once, and a callback registered after that would be refused
// (the call is already cancelled) and never counted.
grpc_status_code Forever(rpc_call* call, const ProtobufCMessage*, void*) {
  if (rpc_call_on_cancel(call, ForeverCancelled, nullptr) != 0) return GRPC_STATUS_CANCELLED;
  Grpc__Health__V1__HealthCheckResponse m = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
  m.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
  rpc_call_send(call, &m.base);
  return RPC_PENDING;
}

// Asynchronous unary handlers: they return RPC_PENDING at once and the call
// is completed later from another thread, as the event loop does.
std::atomic<int> g_unary_cancelled{0};

void CompleteLater(rpc_call* call, ProtobufCMessage* resp, int ms, grpc_status_code st) {
  std::thread([=] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    if (st == GRPC_STATUS_OK)
      reinterpret_cast<Grpc__Health__V1__HealthCheckResponse*>(resp)->status =
          GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    else
      rpc_call_set_error(call, "failed later, as asked");
    rpc_call_complete(call, st);
  }).detach();
}

// "<ms>" answers SERVING after ms; "fail:<ms>" fails (ABORTED) after ms;
// "now" completes before the handler even returns.
grpc_status_code Later(rpc_call* call, const ProtobufCMessage* req, ProtobufCMessage* resp, void*) {
  const char* s = reinterpret_cast<const Grpc__Health__V1__HealthCheckRequest*>(req)->service;
  if (strcmp(s, "now") == 0) {
    reinterpret_cast<Grpc__Health__V1__HealthCheckResponse*>(resp)->status =
        GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    rpc_call_complete(call, GRPC_STATUS_OK);
    return RPC_PENDING;
  }
  if (strncmp(s, "fail:", 5) == 0)
    CompleteLater(call, resp, atoi(s + 5), GRPC_STATUS_ABORTED);
  else
    CompleteLater(call, resp, atoi(s), GRPC_STATUS_OK);
  return RPC_PENDING;
}

void HangCancelled(rpc_call* call, void*) {
  g_unary_cancelled++;
  rpc_call_set_error(call, "cancelled while pending");
  rpc_call_complete(call, GRPC_STATUS_CANCELLED);
}

// Pending until the client cancels or its deadline passes.
grpc_status_code Hang(rpc_call* call, const ProtobufCMessage*, ProtobufCMessage*, void*) {
  if (rpc_call_on_cancel(call, HangCancelled, nullptr) != 0) return GRPC_STATUS_CANCELLED;
  return RPC_PENDING;
}

// Echoes the length of each request's service string as the status.
grpc_status_code Echo(rpc_call* call, const ProtobufCMessage* req, ProtobufCMessage* resp,
                      int* send, void*) {
  auto* r = reinterpret_cast<const Grpc__Health__V1__HealthCheckRequest*>(req);
  if (strcmp(r->service, "boom") == 0) {
    rpc_call_set_error(call, "boom requested");
    return GRPC_STATUS_FAILED_PRECONDITION;
  }
  if (strcmp(r->service, "skip") == 0) {
    *send = 0;
    return GRPC_STATUS_OK;
  }
  reinterpret_cast<Grpc__Health__V1__HealthCheckResponse*>(resp)->status =
      static_cast<Grpc__Health__V1__HealthCheckResponse__ServingStatus>(strlen(r->service));
  return GRPC_STATUS_OK;
}

// Answers a HealthCheckRequest whose service is the request's service
// repeated `times` times, where the request says "<times>:<text>": a small
// request can ask for an answer over the message limit.
std::string g_mirror_text;
grpc_status_code Mirror(rpc_call*, const ProtobufCMessage* req, ProtobufCMessage* resp, void*) {
  auto* r = reinterpret_cast<const Grpc__Health__V1__HealthCheckRequest*>(req);
  const char* colon = strchr(r->service, ':');
  long times = colon ? strtol(r->service, nullptr, 10) : 1;
  std::string one = colon ? colon + 1 : r->service;
  g_mirror_text.clear();
  for (long i = 0; i < times; i++) g_mirror_text += one;
  reinterpret_cast<Grpc__Health__V1__HealthCheckRequest*>(resp)->service = &g_mirror_text[0];
  return GRPC_STATUS_OK;
}

// Denies calls carrying x-deny metadata: the interceptor chain runs before
// handlers and its status ends the call.
grpc_status_code DenyInterceptor(rpc_call* call, void*) {
  if (rpc_call_metadata(call, "x-deny")) {
    rpc_call_set_error(call, "denied by the test interceptor");
    return GRPC_STATUS_PERMISSION_DENIED;
  }
  return GRPC_STATUS_OK;
}

std::atomic<int> g_observed{0};
void CountObserver(rpc_call*, grpc_status_code, const char*, void*) { g_observed++; }

const char* Describe(const char* path, void*) {
  return strcmp(path, "/test.Known/Later") == 0 ? "test.Known/Later is planned" : nullptr;
}

std::string Req(const std::string& service) {
  HealthCheckRequest r;
  r.set_service(service);
  return r.SerializeAsString();
}

int StatusOf(const std::string& body) {
  HealthCheckResponse r;
  EXPECT_TRUE(r.ParseFromString(body));
  return r.status();
}

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc_init();
    rpc_server_options o = {};
    o.listen = "127.0.0.1:0";
    o.workers = 2;
    o.task_threads = 2;
    o.task_queue_max = 2;
    o.max_message_bytes = 1024 * 1024;
    char err[256];
    ASSERT_EQ(0, rpc_server_create(&o, &srv_, err, sizeof err)) << err;
    Add("/test.T/Slow", RPC_UNARY, Slow, nullptr, nullptr);
    Add("/test.T/Fail", RPC_UNARY, Fail, nullptr, nullptr);
    // A request type with a google.protobuf.Value in it (nests without end).
    rpc_method nested = {};
    nested.path = "/test.T/Nested";
    nested.kind = RPC_UNARY;
    nested.request = &memory__v1__blackboard_post_request__descriptor;
    nested.response = kResp;
    nested.unary = Fail;
    ASSERT_EQ(0, rpc_server_add_method(srv_, &nested));
    rpc_method mirror = {};
    mirror.path = "/test.T/Mirror";
    mirror.kind = RPC_UNARY;
    mirror.request = kReq;
    mirror.response = kReq;
    mirror.unary = Mirror;
    ASSERT_EQ(0, rpc_server_add_method(srv_, &mirror));
    Add("/test.T/Later", RPC_UNARY, Later, nullptr, nullptr);
    rpc_method blocking = {};
    blocking.path = "/test.T/Blocking";
    blocking.kind = RPC_UNARY;
    blocking.request = kReq;
    blocking.response = kResp;
    blocking.unary = BlockingSlow;
    blocking.blocking = 1;
    ASSERT_EQ(0, rpc_server_add_method(srv_, &blocking));
    Add("/test.T/Hang", RPC_UNARY, Hang, nullptr, nullptr);
    Add("/test.T/Count", RPC_SERVER_STREAM, nullptr, Count, nullptr);
    Add("/test.T/Forever", RPC_SERVER_STREAM, nullptr, Forever, nullptr);
    Add("/test.T/Echo", RPC_BIDI_STREAM, nullptr, nullptr, Echo);
    rpc_method exempt = {};  // answered while the server drains, as health checks are
    exempt.path = "/test.T/Exempt";
    exempt.kind = RPC_UNARY;
    exempt.request = kReq;
    exempt.response = kResp;
    exempt.unary = Slow;
    exempt.serves_while_draining = 1;
    ASSERT_EQ(0, rpc_server_add_method(srv_, &exempt));
    ASSERT_EQ(0, rpc_server_add_interceptor(srv_, DenyInterceptor, nullptr));
    ASSERT_EQ(0, rpc_server_add_observer(srv_, CountObserver, nullptr));
    rpc_server_set_unknown_describer(srv_, Describe, nullptr);
    ASSERT_EQ(0, rpc_server_start(srv_, err, sizeof err)) << err;
    ch_ = testing_client::Connect(rpc_server_port(srv_));
  }
  void TearDown() override {
    ch_.reset();
    rpc_server_shutdown(srv_, 1000);
    rpc_server_free(srv_);
    grpc_shutdown();
  }
  void Add(const char* path, rpc_kind kind, rpc_unary_fn u, rpc_stream_fn s, rpc_bidi_fn b) {
    rpc_method m = {};
    m.path = path;
    m.kind = kind;
    m.request = kReq;
    m.response = kResp;
    m.unary = u;
    m.stream = s;
    m.bidi = b;
    ASSERT_EQ(0, rpc_server_add_method(srv_, &m)) << path;
  }
  rpc_server* srv_ = nullptr;
  std::shared_ptr<grpc::Channel> ch_;
};

TEST_F(RuntimeTest, UnaryHandlerAnswers) {
  auto r = Unary(ch_, "/test.T/Slow", Req("0"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(1, StatusOf(r.body));
}

TEST_F(RuntimeTest, HandlerSeesTheDeadline) {
  g_slow_saw_deadline = 0;
  ASSERT_TRUE(Unary(ch_, "/test.T/Slow", Req("0"), 3000).status.ok());
  EXPECT_EQ(1, g_slow_saw_deadline.load());
  // The client's 3 s budget arrives nearly whole, on our monotonic clock
  // (grpc-timeout rounds up and clocks are read in whole ms: allow slack).
  EXPECT_GT(g_slow_remaining_ms.load(), 2000);
  EXPECT_LE(g_slow_remaining_ms.load(), 3050);
}

TEST_F(RuntimeTest, DeadlineShorterThanSlowHandlerGivesDeadlineExceeded) {
  auto r = Unary(ch_, "/test.T/Slow", Req("800"), 100);
  EXPECT_EQ(grpc::StatusCode::DEADLINE_EXCEEDED, r.status.error_code());
  EXPECT_LT(r.elapsed.count(), 600);
}

TEST_F(RuntimeTest, HandlerErrorCarriesStatusMessageAndRequestId) {
  auto r = Unary(ch_, "/test.T/Fail", Req(""), 5000, {{"x-request-id", "req-42"}});
  EXPECT_EQ(grpc::StatusCode::NOT_FOUND, r.status.error_code());
  EXPECT_EQ("entity e-1 not found", r.status.error_message());
  ASSERT_EQ(1u, r.trailers.count("x-request-id"));
  EXPECT_EQ("req-42", r.trailers.find("x-request-id")->second);
}

TEST_F(RuntimeTest, FailedCallGetsAGeneratedRequestId) {
  auto r = Unary(ch_, "/test.T/Fail", Req(""));
  ASSERT_EQ(1u, r.trailers.count("x-request-id"));
  EXPECT_EQ(16u, r.trailers.find("x-request-id")->second.size());
}

TEST_F(RuntimeTest, SuccessfulCallEchoesOnlyAClientRequestId) {
  auto plain = Unary(ch_, "/test.T/Slow", Req("0"));
  ASSERT_TRUE(plain.status.ok());
  EXPECT_EQ(0u, plain.trailers.count("x-request-id"));
  auto tagged = Unary(ch_, "/test.T/Slow", Req("0"), 5000, {{"x-request-id", "abc-1"}});
  ASSERT_EQ(1u, tagged.trailers.count("x-request-id"));
  EXPECT_EQ("abc-1", tagged.trailers.find("x-request-id")->second);
}

TEST_F(RuntimeTest, InsaneClientRequestIdIsReplaced) {
  auto r = Unary(ch_, "/test.T/Fail", Req(""), 5000, {{"x-request-id", std::string(100, 'a')}});
  ASSERT_EQ(1u, r.trailers.count("x-request-id"));
  EXPECT_EQ(16u, r.trailers.find("x-request-id")->second.size());
}

TEST_F(RuntimeTest, GarbageRequestIsInvalidArgument) {
  auto r = Unary(ch_, "/test.T/Slow", std::string("\xff\xff\xff\xff", 4));
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("grpc.health.v1.HealthCheckRequest"));
}

TEST_F(RuntimeTest, DeeplyNestedRequestIsRefusedAndServerSurvives) {
  // 20000 nested google.protobuf.Value lists: ~140 KiB, well under the
  // size limit, but deep enough to overflow a worker's stack inside
  // protobuf-c if it ever reached the decoder.
  // Built back to front (reversed, then flipped) so it costs O(n).
  std::string rev;
  auto wrap = [&rev](char tag) {
    std::string len;
    uint64_t n = rev.size();
    do {
      uint8_t b = n & 0x7f;
      n >>= 7;
      if (n) b |= 0x80;
      len.push_back(static_cast<char>(b));
    } while (n);
    rev.append(len.rbegin(), len.rend());
    rev.push_back(tag);
  };
  for (int i = 0; i < 20000; i++) {
    wrap(0x0a);  // ListValue.values
    wrap(0x32);  // Value.list_value
  }
  wrap(0x1a);  // BlackboardPostRequest.value
  std::string request(rev.rbegin(), rev.rend());
  auto r = Unary(ch_, "/test.T/Nested", request, 10000);
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("nest too deep"))
      << r.status.error_message();
  EXPECT_TRUE(Unary(ch_, "/test.T/Slow", Req("0")).status.ok());
}

TEST_F(RuntimeTest, OversizeRequestIsResourceExhausted) {
  auto r = Unary(ch_, "/test.T/Slow", Req(std::string(2 * 1024 * 1024, 'x')));
  EXPECT_EQ(grpc::StatusCode::RESOURCE_EXHAUSTED, r.status.error_code());
}

TEST_F(RuntimeTest, OversizeResponseIsResourceExhaustedNamingTheLimit) {
  // Just under the 1 MiB limit passes whole; just over is refused, saying so.
  auto ok = Unary(ch_, "/test.T/Mirror", Req("1000:" + std::string(1000, 'a')));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  HealthCheckRequest got;
  ASSERT_TRUE(got.ParseFromString(ok.body));
  EXPECT_EQ(1000000u, got.service().size());
  auto big = Unary(ch_, "/test.T/Mirror", Req("1100:" + std::string(1000, 'a')));
  EXPECT_EQ(grpc::StatusCode::RESOURCE_EXHAUSTED, big.status.error_code());
  EXPECT_EQ(
      "/test.T/Mirror: the response would be 1100004 bytes, over the 1048576-byte message "
      "limit (--max-message-bytes); ask for fewer results or leave vectors and payloads out",
      big.status.error_message());
  // The server is fine afterwards.
  auto again = Unary(ch_, "/test.T/Mirror", Req("2:ab"));
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
}

TEST_F(RuntimeTest, UnknownMethodIsUnimplementedPromptly) {
  auto r = Unary(ch_, "/no.Such/Method", "", 10000);
  EXPECT_EQ(grpc::StatusCode::UNIMPLEMENTED, r.status.error_code());
  EXPECT_EQ("unknown method /no.Such/Method", r.status.error_message());
  EXPECT_LT(r.elapsed.count(), 1000);
}

TEST_F(RuntimeTest, DescribedUnknownMethodSaysSo) {
  auto r = Unary(ch_, "/test.Known/Later", "", 10000);
  EXPECT_EQ(grpc::StatusCode::UNIMPLEMENTED, r.status.error_code());
  EXPECT_EQ("test.Known/Later is planned", r.status.error_message());
}

TEST_F(RuntimeTest, InterceptorRejectsBeforeHandler) {
  auto r = Unary(ch_, "/test.T/Fail", Req(""), 5000, {{"x-deny", "1"}});
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED, r.status.error_code());
  EXPECT_EQ("denied by the test interceptor", r.status.error_message());
}

TEST_F(RuntimeTest, ObserverSeesEveryCall) {
  int before = g_observed.load();
  Unary(ch_, "/test.T/Slow", Req("0"));
  Unary(ch_, "/test.T/Fail", Req(""));
  Unary(ch_, "/no.Such/Method", "");
  EXPECT_EQ(before + 3, g_observed.load());
}

TEST_F(RuntimeTest, ServerStreamDeliversAllMessagesInOrder) {
  Stream s(ch_, "/test.T/Count", 5000);
  ASSERT_TRUE(s.Write(Req("5")));
  ASSERT_TRUE(s.WritesDone());
  std::string msg;
  for (int i = 1; i <= 5; i++) {
    ASSERT_TRUE(s.Read(&msg)) << i;
    EXPECT_EQ(i, StatusOf(msg));
  }
  EXPECT_FALSE(s.Read(&msg));
  EXPECT_TRUE(s.Finish().ok());
}

TEST_F(RuntimeTest, ClientCancelReachesStreamingHandler) {
  int before = g_cancelled.load();
  {
    Stream s(ch_, "/test.T/Forever", 10000);
    ASSERT_TRUE(s.Write(Req("")));
    std::string msg;
    ASSERT_TRUE(s.Read(&msg));
    s.Cancel();
    EXPECT_EQ(grpc::StatusCode::CANCELLED, s.Finish().error_code());
  }
  for (int i = 0; i < 200 && g_cancelled.load() == before; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(before + 1, g_cancelled.load());
}

TEST_F(RuntimeTest, PendingUnaryIsCompletedFromAnotherThread) {
  auto r = Unary(ch_, "/test.T/Later", Req("20"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(1, StatusOf(r.body));
  auto f = Unary(ch_, "/test.T/Later", Req("fail:20"));
  EXPECT_EQ(grpc::StatusCode::ABORTED, f.status.error_code());
  EXPECT_EQ("failed later, as asked", f.status.error_message());
}

TEST_F(RuntimeTest, UnaryCompletedBeforeItsHandlerReturnsIsAnsweredOnce) {
  for (int i = 0; i < 50; i++) {
    auto r = Unary(ch_, "/test.T/Later", Req("now"));
    ASSERT_TRUE(r.status.ok()) << i << ": " << r.status.error_message();
    EXPECT_EQ(1, StatusOf(r.body));
  }
}

// With 2 workers, 40 calls that each wait 400 ms elsewhere end together:
// a pending call holds no worker (blocking ones would take 8 s).
TEST_F(RuntimeTest, PendingUnaryCallsHoldNoWorker) {
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 40; i++)
    ts.emplace_back([&] {
      if (Unary(ch_, "/test.T/Later", Req("400"), 10000).status.ok()) ok++;
    });
  // Meanwhile a quick call is answered at once.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto q0 = std::chrono::steady_clock::now();
  auto quick = Unary(ch_, "/test.T/Slow", Req("0"), 5000);
  auto quick_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - q0)
          .count();
  for (auto& t : ts) t.join();
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  EXPECT_TRUE(quick.status.ok());
  EXPECT_LT(quick_ms, 250) << "a quick call waited behind pending ones";
  EXPECT_EQ(40, ok.load());
  EXPECT_LT(took, 3000) << "pending calls were served one worker at a time";
}

// Blocking methods run on the task pool: with both workers' worth of
// blocking calls sleeping, a quick call is still answered at once (on the
// workers it would wait for one of them).
TEST_F(RuntimeTest, BlockingHandlersHoldNoWorker) {
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 2; i++)
    ts.emplace_back([&] {
      if (Unary(ch_, "/test.T/Blocking", Req("800"), 10000).status.ok()) ok++;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  auto quick = Unary(ch_, "/test.T/Slow", Req("0"), 5000);
  for (auto& t : ts) t.join();
  EXPECT_TRUE(quick.status.ok()) << quick.status.error_message();
  EXPECT_LT(quick.elapsed.count(), 250) << "a quick call waited behind blocking ones";
  EXPECT_EQ(2, ok.load());
}

// Two task threads, two queue slots: the fifth blocking call is refused at
// once, naming the flags; a queued call whose deadline passes before a
// thread is free ends DEADLINE_EXCEEDED and its handler never runs.
TEST_F(RuntimeTest, SaturatedTaskPoolRefusesAtOnceAndSkipsExpiredCalls) {
  int runs_before = g_blocking_runs.load();
  std::vector<testing_client::Result> rs(4);
  std::vector<std::thread> ts;
  // Two run for 800 ms; two wait, one of them with a 300 ms deadline.
  const char* sleeps[] = {"800", "800", "0", "0"};
  int deadlines[] = {10000, 10000, 300, 10000};
  for (int i = 0; i < 4; i++) {
    ts.emplace_back(
        [&, i] { rs[i] = Unary(ch_, "/test.T/Blocking", Req(sleeps[i]), deadlines[i]); });
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  auto refused = Unary(ch_, "/test.T/Blocking", Req("0"), 5000);
  for (auto& t : ts) t.join();
  EXPECT_EQ(grpc::StatusCode::RESOURCE_EXHAUSTED, refused.status.error_code());
  EXPECT_NE(std::string::npos, refused.status.error_message().find("--task-threads"))
      << refused.status.error_message();
  EXPECT_LT(refused.elapsed.count(), 250) << "the refusal waited";
  EXPECT_TRUE(rs[0].status.ok() && rs[1].status.ok() && rs[3].status.ok());
  EXPECT_EQ(grpc::StatusCode::DEADLINE_EXCEEDED, rs[2].status.error_code());
  // The expired call's handler did not run: 3 runs, not 4 (nor 5).
  EXPECT_EQ(runs_before + 3, g_blocking_runs.load());
}

TEST_F(RuntimeTest, ClientCancelAndDeadlineReachAPendingUnaryCall) {
  int before = g_unary_cancelled.load();
  auto r = Unary(ch_, "/test.T/Hang", Req(""), 200);
  EXPECT_EQ(grpc::StatusCode::DEADLINE_EXCEEDED, r.status.error_code());
  for (int i = 0; i < 200 && g_unary_cancelled.load() == before; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(before + 1, g_unary_cancelled.load());
}

TEST_F(RuntimeTest, ShutdownCancelsPendingUnaryCallsAfterGrace) {
  int before = g_unary_cancelled.load();
  testing_client::Result r;
  std::thread t([&] { r = Unary(ch_, "/test.T/Hang", Req(""), 20000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  rpc_server_shutdown(srv_, 300);
  t.join();
  EXPECT_EQ(before + 1, g_unary_cancelled.load());
  EXPECT_FALSE(r.status.ok());
}

TEST_F(RuntimeTest, BidiAnswersEachMessageAndEndsOkOnHalfClose) {
  Stream s(ch_, "/test.T/Echo", 5000);
  std::string msg;
  ASSERT_TRUE(s.Write(Req("abc")));
  ASSERT_TRUE(s.Read(&msg));
  EXPECT_EQ(3, StatusOf(msg));
  ASSERT_TRUE(s.Write(Req("skip")));  // no answer for this one
  ASSERT_TRUE(s.Write(Req("abcdefg")));
  ASSERT_TRUE(s.Read(&msg));
  EXPECT_EQ(7, StatusOf(msg));
  ASSERT_TRUE(s.WritesDone());
  EXPECT_FALSE(s.Read(&msg));
  EXPECT_TRUE(s.Finish().ok());
}

TEST_F(RuntimeTest, BidiHandlerErrorEndsStreamWithThatStatus) {
  Stream s(ch_, "/test.T/Echo", 5000);
  std::string msg;
  ASSERT_TRUE(s.Write(Req("boom")));
  EXPECT_FALSE(s.Read(&msg));
  grpc::Status st = s.Finish();
  EXPECT_EQ(grpc::StatusCode::FAILED_PRECONDITION, st.error_code());
  EXPECT_EQ("boom requested", st.error_message());
}

TEST_F(RuntimeTest, ShutdownLetsInflightUnaryFinish) {
  testing_client::Result r;
  std::thread t([&] { r = Unary(ch_, "/test.T/Slow", Req("300"), 5000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  rpc_server_shutdown(srv_, 3000);
  t.join();
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
}

// Streams never end by themselves: the drain ends them at once with
// UNAVAILABLE (a client reconnects elsewhere) and their handlers hear it,
// instead of holding shutdown for the whole grace period.
TEST_F(RuntimeTest, ShutdownEndsOpenStreamsUnavailableAtOnce) {
  int before = g_cancelled.load();
  Stream s(ch_, "/test.T/Forever", 20000);
  ASSERT_TRUE(s.Write(Req("")));
  std::string msg;
  ASSERT_TRUE(s.Read(&msg));
  auto start = std::chrono::steady_clock::now();
  rpc_server_shutdown(srv_, 5000);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  EXPECT_LT(took.count(), 2500) << "shutdown waited for the stream's grace";
  EXPECT_EQ(before + 1, g_cancelled.load());
  EXPECT_FALSE(s.Read(&msg));
  grpc::Status st = s.Finish();
  EXPECT_EQ(grpc::StatusCode::UNAVAILABLE, st.error_code()) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("shutting down")) << st.error_message();
}

// Both workers are busy in slow handlers and six more calls wait behind
// them when shutdown begins. The running two succeed; each waiting one
// either runs and succeeds (the completion queue held it: it was accepted)
// or, when gRPC had not read it yet (the workers are its pollers, and they
// were asleep), is refused UNAVAILABLE without running; never CANCELLED (a
// client cannot tell whether a cancelled call ran). A call arriving once
// that backlog is served is refused, except on a method that serves while
// draining; shutdown then returns well within its grace.
TEST_F(RuntimeTest, ShutdownServesAcceptedCallsAndRefusesLaterOnesUnavailable) {
  std::vector<testing_client::Result> rs(8);
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; i++)
    ts.emplace_back([&, i] { rs[i] = Unary(ch_, "/test.T/Slow", Req("3000"), 20000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // both workers asleep
  for (int i = 2; i < 8; i++)
    ts.emplace_back([&, i] { rs[i] = Unary(ch_, "/test.T/Slow", Req("0"), 20000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // queued behind them
  auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] { rpc_server_shutdown(srv_, 10000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Queued behind the slow calls too, and still served when they end. Sent
  // now, beside the refused ones: sent after them, it could find the
  // server gone on a slow machine (the slow calls end 2.7 s from here).
  testing_client::Result exempt;
  ts.emplace_back([&] { exempt = Unary(ch_, "/test.T/Exempt", Req("0"), 5000); });
  auto late = Unary(ch_, "/test.T/Later", Req("0"), 5000);
  auto fresh =
      Unary(testing_client::Connect(rpc_server_port(srv_)), "/test.T/Slow", Req("0"), 5000);
  for (auto& t : ts) t.join();
  stopper.join();
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  int served = 0;
  for (int i = 0; i < 8; i++) {
    if (rs[i].status.ok()) {
      served++;
      continue;
    }
    EXPECT_TRUE(i >= 2 && rs[i].status.error_code() == grpc::StatusCode::UNAVAILABLE &&
                rs[i].status.error_message().find("did not run") != std::string::npos)
        << i << ": " << rs[i].status.error_code() << " " << rs[i].status.error_message();
  }
  std::printf("shutdown: %d of the 6 waiting calls were served, the rest refused\n", served - 2);
  for (auto* r : {&late, &fresh}) {
    EXPECT_EQ(grpc::StatusCode::UNAVAILABLE, r->status.error_code()) << r->status.error_message();
    EXPECT_NE(std::string::npos, r->status.error_message().find("shutting down"))
        << r->status.error_message();
  }
  EXPECT_TRUE(exempt.status.ok()) << exempt.status.error_message();
  EXPECT_LT(took.count(), 5000) << "shutdown waited out its grace with nothing running";
}

// A pending call accepted before shutdown completes normally, however long
// it takes within the grace.
TEST_F(RuntimeTest, ShutdownWaitsForPendingCallsWithinGrace) {
  testing_client::Result r;
  std::thread t([&] { r = Unary(ch_, "/test.T/Later", Req("1200"), 20000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  auto start = std::chrono::steady_clock::now();
  rpc_server_shutdown(srv_, 10000);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  t.join();
  EXPECT_TRUE(r.status.ok()) << r.status.error_code() << " " << r.status.error_message();
  EXPECT_GE(took.count(), 900);
  EXPECT_LT(took.count(), 6000);
}

TEST_F(RuntimeTest, DuplicateOrLateRegistrationIsRefused) {
  rpc_method m = {};
  m.path = "/test.T/Slow";
  m.kind = RPC_UNARY;
  m.request = kReq;
  m.response = kResp;
  m.unary = Slow;
  EXPECT_EQ(-1, rpc_server_add_method(srv_, &m));  // started already, and a duplicate
}

}  // namespace
