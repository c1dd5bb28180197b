// A minimal C++ agent of memoryd: checks the server's health, then asks
// global memory for one entity through the generated stub.
//
//   bazel run //clients/cpp:example -- [ADDRESS]     (default localhost:50051)
//
// Exits 1 when memoryd cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED, or
// any failed health check), 0 when the calls went through, whatever
// GetEntity's status: until the global tier lands it answers UNIMPLEMENTED.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"
#include "memory/v1/global_memory.grpc.pb.h"

namespace {

const char* CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {
      "OK",                 "CANCELLED",          "UNKNOWN",          "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",  "NOT_FOUND",          "ALREADY_EXISTS",   "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",         "OUT_OF_RANGE",
      "UNIMPLEMENTED",      "INTERNAL",           "UNAVAILABLE",      "DATA_LOSS",
      "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(sizeof kNames / sizeof kNames[0]) ? kNames[i] : "?";
}

// Every call gets a deadline: without one, a call to a stalled server waits
// forever.
void SetDeadline(grpc::ClientContext* ctx, int ms) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string target = argc > 1 ? argv[1] : "localhost:50051";
  // Plaintext, as `make run` serves; with --tls-cert/--tls-key use
  // grpc::SslCredentials instead.
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());

  // 1. Is memoryd there and serving? ("" = the server as a whole.)
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest hreq;
  grpc::health::v1::HealthCheckResponse hresp;
  grpc::ClientContext hctx;
  SetDeadline(&hctx, 5000);
  grpc::Status st = health->Check(&hctx, hreq, &hresp);
  if (!st.ok()) {
    std::fprintf(stderr, "cannot reach memoryd at %s: %s: %s\n", target.c_str(),
                 CodeName(st.error_code()), st.error_message().c_str());
    return 1;
  }
  std::printf("health: %s\n",
              grpc::health::v1::HealthCheckResponse::ServingStatus_Name(hresp.status()).c_str());

  // 2. Read one entity of the knowledge graph.
  //
  // A real agent would attach its capability token to every call
  // (ctx.AddMetadata("authorization", "Bearer " + token)), look up what it
  // knows before acting (GetEntity / QueryEntities / Traverse, or
  // Router.Query across all tiers), record what it learned with PutEntity
  // and PutRelationship, and log the task with RecordTask — handling
  // NOT_FOUND as "not known yet" and retrying UNAVAILABLE with backoff.
  auto global = memory::v1::GlobalMemory::NewStub(channel);
  memory::v1::GetEntityRequest req;
  req.set_id("example-entity");
  memory::v1::GetEntityResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 5000);
  st = global->GetEntity(&ctx, req, &resp);
  if (st.ok()) {
    std::printf("GetEntity: OK: %s\n", resp.entity().ShortDebugString().c_str());
  } else {
    std::printf("GetEntity: %s: %s\n", CodeName(st.error_code()), st.error_message().c_str());
  }
  bool lost = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
              st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  return lost ? 1 : 0;
}
