// The C++ client against a real memoryd: the stubs generated into
// //clients/cpp:memory_cc (and //protos:health_cc) reach every service,
// statuses and messages come through, a capability token gets an entity
// written and read back, and the example behaves as its README says.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"
#include "memory/v1/access.grpc.pb.h"
#include "memory/v1/audit.grpc.pb.h"
#include "memory/v1/blackboard.grpc.pb.h"
#include "memory/v1/cache.grpc.pb.h"
#include "memory/v1/entries.grpc.pb.h"
#include "memory/v1/episodic_memory.grpc.pb.h"
#include "memory/v1/global_memory.grpc.pb.h"
#include "memory/v1/privacy.grpc.pb.h"
#include "memory/v1/router.grpc.pb.h"
#include "tests/clients/client_test_support.h"
#include "tests/clients/suite_memoryd.h"
#include "tests/testing/grpc_client.h"

namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

const int kDeadlineMs = 5000;

void SetDeadline(grpc::ClientContext* ctx, int ms = kDeadlineMs) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

class CppClientTest : public client_test::SuiteMemoryd {
 protected:
  void SetUp() override {
    SuiteMemoryd::SetUp();
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  }

  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(CppClientTest, HealthCheckThroughGeneratedStubIsServing) {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  HealthCheckRequest req;
  HealthCheckResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status st = stub->Check(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message();
  EXPECT_EQ(HealthCheckResponse::SERVING, resp.status());
}

TEST_F(CppClientTest, HealthCheckPerServiceUsesGeneratedServiceName) {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  HealthCheckRequest req;
  req.set_service(memory::v1::GlobalMemory::service_full_name());
  HealthCheckResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status st = stub->Check(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(HealthCheckResponse::SERVING, resp.status());
}

TEST_F(CppClientTest, GetEntityWithoutATokenIsUnauthenticated) {
  auto stub = memory::v1::GlobalMemory::NewStub(channel_);
  memory::v1::GetEntityRequest req;
  req.set_id("e1");
  memory::v1::GetEntityResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status st = stub->GetEntity(&ctx, req, &resp);
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("authorization: Bearer"))
      << st.error_message();
}

TEST_F(CppClientTest, WithATokenAnEntityIsWrittenAndReadBack) {
  auto stub = memory::v1::GlobalMemory::NewStub(channel_);
  const std::string bearer = "Bearer " + server_->Token("global:read global:write");
  memory::v1::PutEntityRequest put;
  put.set_id("cpp-entity");
  put.set_type("test");
  put.set_name("from C++");
  (*put.mutable_properties()->mutable_fields())["n"].set_number_value(2.5);
  memory::v1::PutEntityResponse put_resp;
  grpc::ClientContext pctx;
  SetDeadline(&pctx);
  pctx.AddMetadata("authorization", bearer);
  grpc::Status st = stub->PutEntity(&pctx, put, &put_resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(put_resp.created());
  memory::v1::GetEntityRequest req;
  req.set_id("cpp-entity");
  memory::v1::GetEntityResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  ctx.AddMetadata("authorization", bearer);
  st = stub->GetEntity(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ("from C++", resp.entity().name());
  EXPECT_EQ(2.5, resp.entity().properties().fields().at("n").number_value());
  EXPECT_EQ("client-test", resp.entity().meta().owner());  // from the token
  EXPECT_EQ(1, resp.entity().meta().version());
}

TEST_F(CppClientTest, UnknownServiceThroughGenericCallIsUnimplemented) {
  auto r = testing_client::Unary(channel_, "/no.such.v1.Service/Method", "", kDeadlineMs);
  EXPECT_EQ(grpc::StatusCode::UNIMPLEMENTED, r.status.error_code()) << r.status.error_message();
  EXPECT_LT(r.elapsed.count(), kDeadlineMs);  // answered, not timed out
}

// A unary method of service S called with a default request through S's
// generated stub; Req and Resp come from the member pointer.
template <typename S, typename Req, typename Resp>
std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&)> Unary(
    grpc::Status (S::Stub::*method)(grpc::ClientContext*, const Req&, Resp*)) {
  return [method](const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = S::NewStub(ch);
    Req req;
    Resp resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    return ((*stub).*method)(&ctx, req, &resp);
  };
}

TEST_F(CppClientTest, EveryServiceStubReachesItsService) {
  // One unary method per memory.v1 service, called without a token. Built
  // services answer UNAUTHENTICATED, the rest UNIMPLEMENTED; as each tier
  // lands, its row here changes. The point is that each generated stub compiles,
  // links and reaches memoryd under its full method path.
  struct Case {
    const char* path;
    std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&)> call;
    grpc::StatusCode want;
  };
  using namespace memory::v1;  // NOLINT: nine stub types below
  const Case cases[] = {
      {"memory.v1.GlobalMemory/GetEntity", Unary<GlobalMemory>(&GlobalMemory::Stub::GetEntity),
       grpc::StatusCode::UNAUTHENTICATED},
      {"memory.v1.EpisodicMemory/GetCollection",
       Unary<EpisodicMemory>(&EpisodicMemory::Stub::GetCollection),
       grpc::StatusCode::UNAUTHENTICATED},
      {"memory.v1.Cache/Get", Unary<Cache>(&Cache::Stub::Get), grpc::StatusCode::UNAUTHENTICATED},
      {"memory.v1.Entries/Read", Unary<Entries>(&Entries::Stub::Read),
       grpc::StatusCode::UNAUTHENTICATED},
      {"memory.v1.Blackboard/Read", Unary<Blackboard>(&Blackboard::Stub::Read),
       grpc::StatusCode::UNAUTHENTICATED},
      {"memory.v1.Router/Query", Unary<Router>(&Router::Stub::Query),
       grpc::StatusCode::UNAUTHENTICATED},
      {"memory.v1.Audit/List", Unary<Audit>(&Audit::Stub::List), grpc::StatusCode::UNAUTHENTICATED},
      {"memory.v1.Access/WhoAmI", Unary<Access>(&Access::Stub::WhoAmI),
       grpc::StatusCode::UNAUTHENTICATED},
      {"memory.v1.Privacy/Forget", Unary<Privacy>(&Privacy::Stub::Forget),
       grpc::StatusCode::UNAUTHENTICATED},
  };
  EXPECT_EQ(9u, sizeof cases / sizeof cases[0]);
  for (const Case& c : cases) {
    grpc::Status st = c.call(channel_);
    EXPECT_EQ(c.want, st.error_code()) << c.path << ": " << st.error_message();
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      EXPECT_NE(std::string::npos, st.error_message().find(c.path)) << st.error_message();
    } else {
      EXPECT_NE(std::string::npos, st.error_message().find("authorization: Bearer"))
          << st.error_message();
    }
  }
}

TEST_F(CppClientTest, ServerStreamingStubEndsWithTheStatus) {
  // Blackboard.Subscribe through the generated ClientReader without a
  // token: no message, then the status.
  auto stub = memory::v1::Blackboard::NewStub(channel_);
  memory::v1::BlackboardSubscribeRequest req;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto reader = stub->Subscribe(&ctx, req);
  memory::v1::BlackboardSubscribeResponse msg;
  EXPECT_FALSE(reader->Read(&msg));
  grpc::Status st = reader->Finish();
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, st.error_code()) << st.error_message();
}

TEST_F(CppClientTest, ExampleWithoutATokenShowsGetEntityUnauthenticatedAndExitsZero) {
  auto r = client_test::Run({client_test::Runfile("clients/cpp/example"), server_->address()},
                            {"MEMORYD_TOKEN="});
  EXPECT_EQ(0, r.exit_code) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("health: SERVING")) << r.output;
  EXPECT_EQ(std::string::npos, r.output.find("PutEntity")) << r.output;
  EXPECT_NE(std::string::npos,
            r.output.find("GetEntity: UNAUTHENTICATED: missing capability token"))
      << r.output;
}

TEST_F(CppClientTest, ExampleWithATokenWritesAndReadsItsEntity) {
  auto r = client_test::Run({client_test::Runfile("clients/cpp/example"), server_->address()},
                            {"MEMORYD_TOKEN=" + server_->Token("global:read global:write")});
  EXPECT_EQ(0, r.exit_code) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("health: SERVING")) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("PutEntity: OK: ")) << r.output;
  EXPECT_NE(std::string::npos,
            r.output.find("GetEntity: OK: id=example-entity name=\"written by the C++ example\""))
      << r.output;
}

TEST(CppClientExample, ExitsNonZeroAndSaysWhyWhenMemorydIsUnreachable) {
  std::string target = "127.0.0.1:" + std::to_string(ClosedPort());
  auto r = client_test::Run({client_test::Runfile("clients/cpp/example"), target});
  EXPECT_EQ(1, r.exit_code) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("cannot reach memoryd at " + target)) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("UNAVAILABLE")) << r.output;
}

}  // namespace
