// The C client (clients/c/memoryd_client, mdc_*) against a real memoryd:
// protobuf-c messages in and out, capability tokens, statuses and
// messages, an unreachable server, responses that do not decode, bad
// arguments, a handle shared by threads, and the example. Runs under ASan
// with leak checks: everything mdc hands back is freed here as its header
// says.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "clients/c/memoryd_client.h"
#include "grpc/health/v1/health.pb-c.h"
#include "memory/v1/global_memory.pb-c.h"
#include "tests/clients/client_test_support.h"
#include "tests/clients/suite_memoryd.h"

namespace {

const char kCheck[] = "/grpc.health.v1.Health/Check";
const char kGetEntity[] = "/memory.v1.GlobalMemory/GetEntity";
const char kPutEntity[] = "/memory.v1.GlobalMemory/PutEntity";
const int kDeadlineMs = 5000;

// The out-parameters of one mdc_call_unary, freed as the header says.
struct Reply {
  int rc = 1;  // not an mdc return code: "not called"
  grpc_status_code code = GRPC_STATUS_UNKNOWN;
  char* message = nullptr;
  ProtobufCMessage* response = nullptr;
  ~Reply() {
    free(message);
    if (response) protobuf_c_message_free_unpacked(response, nullptr);
  }
  std::string text() const { return message ? message : "(null)"; }
};

void Call(mdc_client* c, const char* method, const ProtobufCMessage* req,
          const ProtobufCMessageDescriptor* resp_desc, Reply* r, int deadline_ms = kDeadlineMs) {
  r->rc =
      mdc_call_unary(c, method, req, resp_desc, deadline_ms, &r->code, &r->message, &r->response);
}

// Health.Check(service) through mdc: the serving status, or minus the gRPC
// code, or -100 - rc for an mdc failure.
int HealthStatus(mdc_client* c, const char* service) {
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  req.service = const_cast<char*>(service);
  Reply r;
  Call(c, kCheck, &req.base, &grpc__health__v1__health_check_response__descriptor, &r);
  if (r.rc != 0) return -100 + r.rc;
  if (r.code != GRPC_STATUS_OK) return -static_cast<int>(r.code);
  return reinterpret_cast<Grpc__Health__V1__HealthCheckResponse*>(r.response)->status;
}

class CClientTest : public client_test::SuiteMemoryd {
 protected:
  void SetUp() override {
    SuiteMemoryd::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(0, mdc_client_create(server_->address().c_str(), &client_));
  }
  void TearDown() override { mdc_client_free(client_); }

  mdc_client* client_ = nullptr;
};

TEST_F(CClientTest, HealthCheckWithProtobufCMessagesIsServing) {
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  Reply r;
  Call(client_, kCheck, &req.base, &grpc__health__v1__health_check_response__descriptor, &r);
  ASSERT_EQ(0, r.rc) << mdc_strerror(r.rc) << ": " << r.text();
  ASSERT_EQ(GRPC_STATUS_OK, r.code) << r.text();
  ASSERT_NE(nullptr, r.response);
  EXPECT_EQ(&grpc__health__v1__health_check_response__descriptor, r.response->descriptor);
  EXPECT_EQ(GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING,
            reinterpret_cast<Grpc__Health__V1__HealthCheckResponse*>(r.response)->status);
  EXPECT_STREQ("", r.message);  // an OK status still hands back a message
}

TEST_F(CClientTest, HealthOfAServiceAndOfAnUnknownService) {
  EXPECT_EQ(GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING,
            HealthStatus(client_, "memory.v1.GlobalMemory"));
  EXPECT_EQ(-GRPC_STATUS_NOT_FOUND, HealthStatus(client_, "no.such.Service"));
}

TEST_F(CClientTest, GetEntityWithoutATokenIsUnauthenticated) {
  Memory__V1__GetEntityRequest req = MEMORY__V1__GET_ENTITY_REQUEST__INIT;
  req.id = const_cast<char*>("e1");
  Reply r;
  Call(client_, kGetEntity, &req.base, &memory__v1__get_entity_response__descriptor, &r);
  ASSERT_EQ(0, r.rc) << mdc_strerror(r.rc) << ": " << r.text();
  EXPECT_EQ(GRPC_STATUS_UNAUTHENTICATED, r.code);
  EXPECT_NE(std::string::npos, r.text().find("authorization: Bearer")) << r.text();
  EXPECT_EQ(nullptr, r.response);
}

TEST_F(CClientTest, WithATokenAnEntityIsWrittenAndReadBack) {
  ASSERT_EQ(0, mdc_client_set_token(client_, server_->Token("global:read global:write").c_str()));
  // Its _INIT macro puts an int into an enum, which C++ refuses.
  Google__Protobuf__Value lang;
  google__protobuf__value__init(&lang);
  lang.kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
  lang.string_value = const_cast<char*>("C");
  Google__Protobuf__Struct__FieldsEntry field = GOOGLE__PROTOBUF__STRUCT__FIELDS_ENTRY__INIT;
  field.key = const_cast<char*>("written_in");
  field.value = &lang;
  Google__Protobuf__Struct__FieldsEntry* fields[] = {&field};
  Google__Protobuf__Struct props = GOOGLE__PROTOBUF__STRUCT__INIT;
  props.n_fields = 1;
  props.fields = fields;
  Memory__V1__PutEntityRequest put = MEMORY__V1__PUT_ENTITY_REQUEST__INIT;
  put.id = const_cast<char*>("c-entity");
  put.type = const_cast<char*>("test");
  put.name = const_cast<char*>("from the C client");
  put.properties = &props;
  Reply p;
  Call(client_, kPutEntity, &put.base, &memory__v1__put_entity_response__descriptor, &p);
  ASSERT_EQ(0, p.rc) << mdc_strerror(p.rc) << ": " << p.text();
  ASSERT_EQ(GRPC_STATUS_OK, p.code) << mdc_status_name(p.code) << ": " << p.text();

  Memory__V1__GetEntityRequest get = MEMORY__V1__GET_ENTITY_REQUEST__INIT;
  get.id = const_cast<char*>("c-entity");
  Reply g;
  Call(client_, kGetEntity, &get.base, &memory__v1__get_entity_response__descriptor, &g);
  ASSERT_EQ(0, g.rc) << mdc_strerror(g.rc) << ": " << g.text();
  ASSERT_EQ(GRPC_STATUS_OK, g.code) << mdc_status_name(g.code) << ": " << g.text();
  auto* e = reinterpret_cast<const Memory__V1__GetEntityResponse*>(g.response)->entity;
  ASSERT_NE(nullptr, e);
  EXPECT_STREQ("c-entity", e->id);
  EXPECT_STREQ("test", e->type);
  EXPECT_STREQ("from the C client", e->name);
  ASSERT_NE(nullptr, e->properties);
  ASSERT_EQ(1u, e->properties->n_fields);
  EXPECT_STREQ("written_in", e->properties->fields[0]->key);
  EXPECT_STREQ("C", e->properties->fields[0]->value->string_value);
  ASSERT_NE(nullptr, e->meta);
  EXPECT_EQ(1, e->meta->version);
  EXPECT_STREQ("clients", e->meta->tenant);  // from the token, not the request

  // Without the token again, the same call is refused.
  ASSERT_EQ(0, mdc_client_set_token(client_, nullptr));
  Reply u;
  Call(client_, kGetEntity, &get.base, &memory__v1__get_entity_response__descriptor, &u);
  ASSERT_EQ(0, u.rc) << u.text();
  EXPECT_EQ(GRPC_STATUS_UNAUTHENTICATED, u.code) << u.text();
}

TEST_F(CClientTest, SetTokenRejectsLineBreaksAndKeepsTheOldToken) {
  ASSERT_EQ(0, mdc_client_set_token(client_, server_->Token("global:read").c_str()));
  // A line break would smuggle a second header line into the metadata.
  EXPECT_EQ(MDC_ERR_ARG, mdc_client_set_token(client_, "a.b.c\r\nx-other: 1"));
  EXPECT_EQ(MDC_ERR_ARG, mdc_client_set_token(nullptr, "a.b.c"));
  Memory__V1__GetEntityRequest get = MEMORY__V1__GET_ENTITY_REQUEST__INIT;
  get.id = const_cast<char*>("no-such-entity");
  Reply r;
  Call(client_, kGetEntity, &get.base, &memory__v1__get_entity_response__descriptor, &r);
  ASSERT_EQ(0, r.rc) << r.text();
  EXPECT_EQ(GRPC_STATUS_NOT_FOUND, r.code) << mdc_status_name(r.code) << ": " << r.text();
  // "" removes the token, as NULL does.
  ASSERT_EQ(0, mdc_client_set_token(client_, ""));
  Reply u;
  Call(client_, kGetEntity, &get.base, &memory__v1__get_entity_response__descriptor, &u);
  EXPECT_EQ(GRPC_STATUS_UNAUTHENTICATED, u.code) << u.text();
}

TEST_F(CClientTest, UnknownMethodIsUnimplemented) {
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  Reply r;
  Call(client_, "/no.such.v1.Service/Method", &req.base,
       &grpc__health__v1__health_check_response__descriptor, &r);
  ASSERT_EQ(0, r.rc) << r.text();
  EXPECT_EQ(GRPC_STATUS_UNIMPLEMENTED, r.code) << r.text();
  EXPECT_EQ(nullptr, r.response);
}

TEST_F(CClientTest, ResponseOfAnotherTypeIsADecodeErrorNotACrash) {
  // Health.Check answers {status: SERVING} = field 1 as a varint; decoded
  // as GetEntityResponse, field 1 must be a length-delimited Entity.
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  Reply r;
  Call(client_, kCheck, &req.base, &memory__v1__get_entity_response__descriptor, &r);
  EXPECT_EQ(MDC_ERR_DECODE, r.rc) << r.text();
  EXPECT_EQ(GRPC_STATUS_OK, r.code);  // the server did its part
  EXPECT_EQ(nullptr, r.response);
  EXPECT_NE(std::string::npos, r.text().find("memory.v1.GetEntityResponse")) << r.text();
  EXPECT_NE(std::string::npos, r.text().find(kCheck)) << r.text();
  // The handle stays usable.
  EXPECT_EQ(GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING,
            HealthStatus(client_, ""));
}

TEST_F(CClientTest, GarbageDescriptorIsRejectedBeforeAnythingIsSent) {
  ProtobufCMessageDescriptor garbage;
  memset(&garbage, 0xa5, sizeof garbage);
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  Reply r;
  Call(client_, kCheck, &req.base, &garbage, &r);
  EXPECT_EQ(MDC_ERR_ARG, r.rc);
  EXPECT_EQ(GRPC_STATUS_UNKNOWN, r.code);
  EXPECT_EQ(nullptr, r.message);
  EXPECT_EQ(nullptr, r.response);
}

TEST_F(CClientTest, BadArgumentsAreRejected) {
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  const ProtobufCMessageDescriptor* d = &grpc__health__v1__health_check_response__descriptor;
  grpc_status_code code;
  char* msg;
  ProtobufCMessage* resp;
  EXPECT_EQ(MDC_ERR_ARG, mdc_call_unary(nullptr, kCheck, &req.base, d, 100, &code, &msg, &resp));
  EXPECT_EQ(MDC_ERR_ARG, mdc_call_unary(client_, nullptr, &req.base, d, 100, &code, &msg, &resp));
  EXPECT_EQ(MDC_ERR_ARG, mdc_call_unary(client_, "grpc.health.v1.Health/Check", &req.base, d, 100,
                                        &code, &msg, &resp));  // no leading '/'
  EXPECT_EQ(MDC_ERR_ARG, mdc_call_unary(client_, kCheck, nullptr, d, 100, &code, &msg, &resp));
  EXPECT_EQ(MDC_ERR_ARG,
            mdc_call_unary(client_, kCheck, &req.base, nullptr, 100, &code, &msg, &resp));
  EXPECT_EQ(MDC_ERR_ARG, mdc_call_unary(client_, kCheck, &req.base, d, 100, nullptr, &msg, &resp));
  EXPECT_EQ(MDC_ERR_ARG, mdc_call_unary(client_, kCheck, &req.base, d, 100, &code, nullptr, &resp));
  EXPECT_EQ(MDC_ERR_ARG, mdc_call_unary(client_, kCheck, &req.base, d, 100, &code, &msg, nullptr));
  EXPECT_EQ(nullptr, msg);
  EXPECT_EQ(nullptr, resp);
}

TEST_F(CClientTest, OneHandleServesSeveralThreadsAtOnce) {
  const int kThreads = 4, kCalls = 25;
  std::vector<int> serving(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([this, t, &serving] {
      for (int i = 0; i < kCalls; i++)
        if (HealthStatus(client_, "") ==
            GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING)
          serving[t]++;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; t++) EXPECT_EQ(kCalls, serving[t]) << "thread " << t;
}

TEST_F(CClientTest, ExampleWithoutATokenShowsGetEntityUnauthenticatedAndExitsZero) {
  auto r = client_test::Run({client_test::Runfile("clients/c/example"), server_->address()},
                            {"MEMORYD_TOKEN="});
  EXPECT_EQ(0, r.exit_code) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("health: SERVING")) << r.output;
  EXPECT_EQ(std::string::npos, r.output.find("PutEntity")) << r.output;
  EXPECT_NE(std::string::npos,
            r.output.find("GetEntity: UNAUTHENTICATED: missing capability token"))
      << r.output;
}

TEST_F(CClientTest, ExampleWithATokenWritesAndReadsItsEntity) {
  auto r = client_test::Run({client_test::Runfile("clients/c/example"), server_->address()},
                            {"MEMORYD_TOKEN=" + server_->Token("global:read global:write")});
  EXPECT_EQ(0, r.exit_code) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("health: SERVING")) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("PutEntity: OK: ")) << r.output;
  EXPECT_NE(std::string::npos,
            r.output.find("GetEntity: OK: id=example-entity name=\"written by the C example\""))
      << r.output;
}

// No memoryd needed below.

TEST(CClient, ClosedPortIsUnavailableWithinTheDeadline) {
  std::string target = "127.0.0.1:" + std::to_string(ClosedPort());
  mdc_client* c;
  ASSERT_EQ(0, mdc_client_create(target.c_str(), &c));
  EXPECT_EQ(target, mdc_client_target(c));
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  Reply r;
  auto start = std::chrono::steady_clock::now();
  Call(c, kCheck, &req.base, &grpc__health__v1__health_check_response__descriptor, &r, 3000);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  EXPECT_EQ(0, r.rc) << r.text();
  EXPECT_EQ(GRPC_STATUS_UNAVAILABLE, r.code) << mdc_status_name(r.code) << ": " << r.text();
  EXPECT_LT(ms, 3000);  // refused at once, not waited out
  EXPECT_FALSE(r.text().empty());
  EXPECT_EQ(nullptr, r.response);
  mdc_client_free(c);
}

TEST(CClient, CreateRejectsMissingTargetAndFreeAcceptsNull) {
  mdc_client* c = reinterpret_cast<mdc_client*>(0x1);
  EXPECT_EQ(MDC_ERR_ARG, mdc_client_create(nullptr, &c));
  EXPECT_EQ(nullptr, c);
  EXPECT_EQ(MDC_ERR_ARG, mdc_client_create("", &c));
  EXPECT_EQ(MDC_ERR_ARG, mdc_client_create("localhost:1", nullptr));
  mdc_client_free(nullptr);
}

TEST(CClient, NamesOfCodesAndStatuses) {
  EXPECT_STREQ("ok", mdc_strerror(MDC_OK));
  EXPECT_STREQ("response did not decode", mdc_strerror(MDC_ERR_DECODE));
  EXPECT_STREQ("UNIMPLEMENTED", mdc_status_name(GRPC_STATUS_UNIMPLEMENTED));
  EXPECT_STREQ("UNAUTHENTICATED", mdc_status_name(GRPC_STATUS_UNAUTHENTICATED));
  EXPECT_STREQ("UNKNOWN_CODE", mdc_status_name(static_cast<grpc_status_code>(99)));
}

TEST(CClientExample, ExitsNonZeroAndSaysWhyWhenMemorydIsUnreachable) {
  std::string target = "127.0.0.1:" + std::to_string(ClosedPort());
  auto r = client_test::Run({client_test::Runfile("clients/c/example"), target});
  EXPECT_EQ(1, r.exit_code) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("cannot reach memoryd at " + target)) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("UNAVAILABLE")) << r.output;
}

}  // namespace
