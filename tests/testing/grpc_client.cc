// grpc_client: generic-stub helpers for tests.
#include "tests/testing/grpc_client.h"

#include <grpcpp/generic/generic_stub.h>

namespace testing_client {
namespace {

grpc::ByteBuffer ToBuffer(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& bb) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!bb.Dump(&slices).ok()) return out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

gpr_timespec After(int ms) {
  return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

}  // namespace

std::shared_ptr<grpc::Channel> Connect(int port) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                             grpc::InsecureChannelCredentials());
}

Result Unary(const std::shared_ptr<grpc::Channel>& ch, const std::string& method,
             const std::string& request, int timeout_ms,
             const std::map<std::string, std::string>& metadata) {
  Result r;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  for (const auto& kv : metadata) ctx.AddMetadata(kv.first, kv.second);
  grpc::GenericStub stub(ch);
  grpc::CompletionQueue cq;
  grpc::ByteBuffer req = ToBuffer(request), resp;
  auto start = std::chrono::steady_clock::now();
  auto call = stub.PrepareUnaryCall(&ctx, method, req, &cq);
  call->StartCall();
  call->Finish(&resp, &r.status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  if (r.status.ok()) r.body = FromBuffer(resp);
  for (const auto& kv : ctx.GetServerTrailingMetadata())
    r.trailers.emplace(std::string(kv.first.data(), kv.first.size()),
                       std::string(kv.second.data(), kv.second.size()));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return r;
}

Stream::Stream(const std::shared_ptr<grpc::Channel>& ch, const std::string& method, int timeout_ms,
               const std::map<std::string, std::string>& metadata)
    : stub_(ch) {
  ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  for (const auto& [k, v] : metadata) ctx_.AddMetadata(k, v);
  call_ = stub_.PrepareCall(&ctx_, method, &cq_);
  call_->StartCall(reinterpret_cast<void*>(1));
  Wait(reinterpret_cast<void*>(1), timeout_ms);
}

Stream::~Stream() {
  if (!finished_) {
    ctx_.TryCancel();
    Finish();
  }
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
  }
}

bool Stream::Wait(void* want, int wait_ms) {
  void* tag;
  bool ok;
  for (;;) {
    auto st = cq_.AsyncNext(&tag, &ok, After(wait_ms));
    if (st != grpc::CompletionQueue::GOT_EVENT) return false;
    if (tag == want) return ok;
  }
}

bool Stream::Write(const std::string& msg) {
  grpc::ByteBuffer bb = ToBuffer(msg);
  call_->Write(bb, reinterpret_cast<void*>(2));
  return Wait(reinterpret_cast<void*>(2), 5000);
}

bool Stream::WritesDone() {
  call_->WritesDone(reinterpret_cast<void*>(3));
  return Wait(reinterpret_cast<void*>(3), 5000);
}

bool Stream::Read(std::string* msg, int wait_ms) {
  grpc::ByteBuffer bb;
  call_->Read(&bb, reinterpret_cast<void*>(4));
  if (!Wait(reinterpret_cast<void*>(4), wait_ms)) return false;
  *msg = FromBuffer(bb);
  return true;
}

grpc::Status Stream::Finish() {
  grpc::Status status;
  call_->Finish(&status, reinterpret_cast<void*>(5));
  Wait(reinterpret_cast<void*>(5), 10000);
  finished_ = true;
  return status;
}

std::string Stream::Trailer(const std::string& key) const {
  const auto& md = ctx_.GetServerTrailingMetadata();
  auto it = md.find(key);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

}  // namespace testing_client
