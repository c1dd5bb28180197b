// A minimal C++ agent of memoryd: checks the server's health, records one
// entity in global memory and reads it back through the generated stub.
//
//   MEMORYD_TOKEN=$(cat .local/dev-token) bazel run //clients/cpp:example -- [ADDRESS]
//
// (ADDRESS defaults to localhost:50051.) MEMORYD_TOKEN is a capability token
// with global:read and global:write; without one the example only shows
// GetEntity answering UNAUTHENTICATED. Exits 1 when memoryd cannot be
// reached (UNAVAILABLE, DEADLINE_EXCEEDED, or any failed health check), 0
// when the calls went through, whatever their status.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"
#include "memory/v1/global_memory.grpc.pb.h"

namespace {

const char* CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(sizeof kNames / sizeof kNames[0]) ? kNames[i] : "?";
}

// The statuses that mean memoryd is not there (exit 1), not an answer.
bool Unreachable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
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

  // 2. Record one entity of the knowledge graph, then read it back.
  //
  // A real agent attaches its capability token to every call, looks up what
  // it knows before acting (GetEntity / QueryEntities / Traverse, or
  // Router.Query across all tiers), records what it learned with PutEntity
  // and PutRelationship, and logs the task with RecordTask — handling
  // NOT_FOUND as "not known yet" and retrying UNAVAILABLE with backoff.
  const char* token = std::getenv("MEMORYD_TOKEN");
  auto authorize = [token](grpc::ClientContext* ctx) {
    if (token && *token) ctx->AddMetadata("authorization", std::string("Bearer ") + token);
  };
  auto global = memory::v1::GlobalMemory::NewStub(channel);
  bool lost = false;
  if (token && *token) {
    memory::v1::PutEntityRequest put;
    put.set_id("example-entity");
    put.set_type("example");
    put.set_name("written by the C++ example");
    (*put.mutable_properties()->mutable_fields())["written_in"].set_string_value("C++");
    memory::v1::PutEntityResponse put_resp;
    grpc::ClientContext pctx;
    SetDeadline(&pctx, 5000);
    authorize(&pctx);
    grpc::Status pst = global->PutEntity(&pctx, put, &put_resp);
    if (pst.ok()) {
      std::printf("PutEntity: OK: %s version=%lld\n", put_resp.created() ? "created" : "replaced",
                  static_cast<long long>(put_resp.entity().meta().version()));
    } else {
      // GetEntity below still runs: it shows what the token may read.
      std::printf("PutEntity: %s: %s\n", CodeName(pst.error_code()), pst.error_message().c_str());
      lost = Unreachable(pst.error_code());
    }
  }
  memory::v1::GetEntityRequest req;
  req.set_id("example-entity");
  memory::v1::GetEntityResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 5000);
  authorize(&ctx);
  st = global->GetEntity(&ctx, req, &resp);
  if (st.ok()) {
    std::printf("GetEntity: OK: id=%s name=\"%s\" version=%lld\n", resp.entity().id().c_str(),
                resp.entity().name().c_str(),
                static_cast<long long>(resp.entity().meta().version()));
  } else {
    std::printf("GetEntity: %s: %s\n", CodeName(st.error_code()), st.error_message().c_str());
  }
  lost = lost || Unreachable(st.error_code());
  return lost ? 1 : 0;
}
