// memoryd::Board: a task's blackboard (memory.v1.Blackboard) for C++ agents,
// on the generated stubs of //clients/cpp:memory_cc.
//
//   memoryd::Board board(channel, token, "task-42");
//   board.Post("plan", value);                               // unconditional
//   bool mine = false;
//   board.Claim("subtask/7", value, std::chrono::seconds(30), &mine);
//   board.Update("done", [](const google::protobuf::Value* cur) {   // CAS,
//     google::protobuf::Value v;                                      // retried
//     v.set_number_value(cur ? cur->number_value() + 1 : 1);
//     return v;
//   });
//   auto sub = board.Subscribe();
//   memory::v1::BlackboardSubscribeResponse ev;
//   while (sub->Next(&ev)) { ... }      // reconnects and resumes by itself
//
// Errors are grpc::Status with memoryd's code and message as they came.
// A Board is cheap; it holds a stub on the channel. Thread-safe as the stub
// is; a Subscription belongs to one thread (Cancel from any).
#ifndef MEMORYD_CLIENTS_CPP_BOARD_H
#define MEMORYD_CLIENTS_CPP_BOARD_H

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "memory/v1/blackboard.grpc.pb.h"

namespace memoryd {

class Board;

// A change stream that reconnects when it breaks (UNAVAILABLE: a replica
// shut down, Redis away too long, the network) and resumes after the last
// event it returned, so nothing is missed and, while the server's change
// log reaches back, no full board is downloaded again.
class Subscription {
 public:
  // The next event: true with *ev, false when the stream is over (after an
  // EXPIRED event, on Cancel, or on an error not worth retrying: status()).
  bool Next(memory::v1::BlackboardSubscribeResponse* ev);
  void Cancel();
  grpc::Status status() const { return status_; }
  int64_t version() const { return version_; }
  const std::string& board_id() const { return board_id_; }
  int reconnects() const { return reconnects_; }

 private:
  friend class Board;
  Subscription(const Board* board, int64_t after_version, std::string board_id);
  bool Open();

  const Board* board_;
  int64_t version_;  // -1: never had an event (SNAPSHOT first)
  std::string board_id_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReader<memory::v1::BlackboardSubscribeResponse>> reader_;
  std::mutex mu_;  // ctx_ against Cancel
  std::atomic<bool> cancelled_{false};
  bool done_ = false;
  grpc::Status status_;
  int reconnects_ = 0;
  std::chrono::milliseconds backoff_{50};
};

class Board {
 public:
  Board(std::shared_ptr<grpc::Channel> channel, std::string token, std::string task_id,
        std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Options of one post.
  struct PostOptions {
    int64_t expected_version = -1;       // -1: unconditional; 0: only if absent
    std::chrono::milliseconds ttl{0};    // 0: unchanged (24 h for a new board)
    std::chrono::milliseconds lease{0};  // 0: no lease
  };
  grpc::Status Post(const std::string& key, const google::protobuf::Value& value,
                    const PostOptions& opts, memory::v1::BlackboardPostResponse* out = nullptr);
  grpc::Status Post(const std::string& key, const google::protobuf::Value& value) {
    return Post(key, value, PostOptions{});
  }
  grpc::Status Delete(const std::string& key, int64_t expected_version = -1);
  grpc::Status Read(memory::v1::BlackboardReadResponse* out) const;

  // Read-modify-write with compare-and-set: sets key to fn(current value,
  // or nullptr when absent), retrying with jittered backoff while another
  // writer gets there first (at most attempts; then the last ABORTED).
  grpc::Status Update(
      const std::string& key,
      const std::function<google::protobuf::Value(const google::protobuf::Value*)>& fn,
      int attempts = 32, google::protobuf::Value* written = nullptr);

  // Claims key for lease: *claimed true when it was free (or, with renew,
  // still ours: the lease starts again), false when another holds it.
  grpc::Status Claim(const std::string& key, const google::protobuf::Value& value,
                     std::chrono::milliseconds lease, bool* claimed, bool renew = false);

  // A change stream: a SNAPSHOT first, or (after_version >= 0 with the
  // board_id of the last event applied) the changes after it.
  std::unique_ptr<Subscription> Subscribe(int64_t after_version = -1,
                                          const std::string& board_id = "") const;

  const std::string& task_id() const { return task_; }

 private:
  friend class Subscription;
  void Prepare(grpc::ClientContext* ctx, bool deadline) const;

  std::unique_ptr<memory::v1::Blackboard::Stub> stub_;
  std::string token_, task_;
  std::chrono::milliseconds timeout_;
};

}  // namespace memoryd

#endif
