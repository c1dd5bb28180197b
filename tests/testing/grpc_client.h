// grpc_client: small synchronous helpers over grpc++'s generic stub, so
// tests can call any method path with raw bytes and read server streams.
#ifndef MEMORYD_TESTS_TESTING_GRPC_CLIENT_H
#define MEMORYD_TESTS_TESTING_GRPC_CLIENT_H

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace testing_client {

std::shared_ptr<grpc::Channel> Connect(int port);

struct Result {
  grpc::Status status;
  std::string body;                                  // response bytes when OK
  std::multimap<std::string, std::string> trailers;  // trailing metadata
  std::chrono::milliseconds elapsed{0};
};

// One unary call with a deadline; extra metadata as key/value pairs.
Result Unary(const std::shared_ptr<grpc::Channel>& ch, const std::string& method,
             const std::string& request, int timeout_ms = 5000,
             const std::map<std::string, std::string>& metadata = {});

// A streaming call (server-streaming or bidi) driven step by step.
class Stream {
 public:
  Stream(const std::shared_ptr<grpc::Channel>& ch, const std::string& method, int timeout_ms,
         const std::map<std::string, std::string>& metadata = {});
  ~Stream();
  bool Write(const std::string& msg);
  bool WritesDone();
  // Next message; false when the stream ended (then call Finish).
  bool Read(std::string* msg, int wait_ms = 5000);
  grpc::Status Finish();
  void Cancel() { ctx_.TryCancel(); }
  // A trailing-metadata value the server sent (after Finish), or "".
  std::string Trailer(const std::string& key) const;

 private:
  bool Wait(void* tag, int wait_ms);
  grpc::ClientContext ctx_;
  grpc::CompletionQueue cq_;
  grpc::GenericStub stub_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool finished_ = false;
};

}  // namespace testing_client

#endif
