// memoryd::Board: see memoryd/board.h.
#include "memoryd/board.h"

#include <random>
#include <thread>

#include "memoryd/call.h"

namespace memoryd {

namespace {

google::protobuf::Duration ToDuration(std::chrono::milliseconds ms) {
  google::protobuf::Duration d;
  d.set_seconds(ms.count() / 1000);
  d.set_nanos(static_cast<int32_t>(ms.count() % 1000) * 1000000);
  return d;
}

bool Retryable(grpc::StatusCode c) {
  return c == grpc::StatusCode::UNAVAILABLE || c == grpc::StatusCode::DEADLINE_EXCEEDED ||
         c == grpc::StatusCode::RESOURCE_EXHAUSTED || c == grpc::StatusCode::INTERNAL;
}

}  // namespace

Board::Board(std::shared_ptr<grpc::Channel> channel, std::string token, std::string task_id,
             std::chrono::milliseconds timeout)
    : stub_(memory::v1::Blackboard::NewStub(channel)),
      token_(std::move(token)),
      task_(std::move(task_id)),
      timeout_(timeout) {}

void Board::Prepare(grpc::ClientContext* ctx, bool deadline) const {
  PrepareCall(ctx, token_, deadline ? timeout_ : std::chrono::milliseconds(0));
}

grpc::Status Board::Post(const std::string& key, const google::protobuf::Value& value,
                         const PostOptions& opts, memory::v1::BlackboardPostResponse* out) {
  memory::v1::BlackboardPostRequest req;
  req.set_task_id(task_);
  req.set_key(key);
  *req.mutable_value() = value;
  if (opts.expected_version >= 0) req.set_expected_version(opts.expected_version);
  if (opts.ttl.count() > 0) *req.mutable_ttl() = ToDuration(opts.ttl);
  if (opts.lease.count() > 0) *req.mutable_lease_ttl() = ToDuration(opts.lease);
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  memory::v1::BlackboardPostResponse resp;
  return stub_->Post(&ctx, req, out ? out : &resp);
}

grpc::Status Board::Delete(const std::string& key, int64_t expected_version) {
  memory::v1::BlackboardPostRequest req;
  req.set_task_id(task_);
  req.set_key(key);
  req.set_delete_key(true);
  if (expected_version >= 0) req.set_expected_version(expected_version);
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  memory::v1::BlackboardPostResponse resp;
  return stub_->Post(&ctx, req, &resp);
}

grpc::Status Board::Read(memory::v1::BlackboardReadResponse* out) const {
  memory::v1::BlackboardReadRequest req;
  req.set_task_id(task_);
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  return stub_->Read(&ctx, req, out);
}

grpc::Status Board::Update(
    const std::string& key,
    const std::function<google::protobuf::Value(const google::protobuf::Value*)>& fn, int attempts,
    google::protobuf::Value* written) {
  thread_local std::mt19937 rng(std::random_device{}());
  grpc::Status st;
  for (int attempt = 0; attempt < attempts; attempt++) {
    memory::v1::BlackboardReadResponse board;
    if (!(st = Read(&board)).ok()) return st;
    const memory::v1::BlackboardItem* item = nullptr;
    for (const auto& it : board.items())
      if (it.key() == key) item = &it;
    google::protobuf::Value next = fn(item ? &item->value() : nullptr);
    PostOptions opts;
    opts.expected_version = item ? item->meta().version() : 0;
    st = Post(key, next, opts);
    if (st.ok()) {
      if (written) *written = next;
      return st;
    }
    if (st.error_code() != grpc::StatusCode::ABORTED) return st;
    std::uniform_int_distribution<int> jitter(0, 2000 * (attempt + 1));
    std::this_thread::sleep_for(std::chrono::microseconds(jitter(rng)));
  }
  return st;
}

grpc::Status Board::Claim(const std::string& key, const google::protobuf::Value& value,
                          std::chrono::milliseconds lease, bool* claimed, bool renew) {
  PostOptions opts;
  opts.lease = lease;
  if (!renew) opts.expected_version = 0;
  grpc::Status st = Post(key, value, opts);
  *claimed = st.ok();
  if (st.error_code() == grpc::StatusCode::ABORTED ||
      st.error_code() == grpc::StatusCode::PERMISSION_DENIED)
    return grpc::Status::OK;  // held by another
  return st;
}

std::unique_ptr<Subscription> Board::Subscribe(int64_t after_version,
                                               const std::string& board_id) const {
  return std::unique_ptr<Subscription>(new Subscription(this, after_version, board_id));
}

Subscription::Subscription(const Board* board, int64_t after_version, std::string board_id)
    : board_(board), version_(after_version), board_id_(std::move(board_id)) {}

bool Subscription::Open() {
  memory::v1::BlackboardSubscribeRequest req;
  req.set_task_id(board_->task_);
  if (version_ >= 0) {
    req.set_after_version(version_);
    req.set_board_id(board_id_);
  }
  std::lock_guard<std::mutex> g(mu_);
  if (cancelled_) return false;
  ctx_ = std::make_unique<grpc::ClientContext>();
  board_->Prepare(ctx_.get(), false);
  reader_ = board_->stub_->Subscribe(ctx_.get(), req);
  return true;
}

bool Subscription::Next(memory::v1::BlackboardSubscribeResponse* ev) {
  std::chrono::milliseconds delay = backoff_;
  while (!done_) {
    if (!reader_ && !Open()) break;
    if (reader_->Read(ev)) {
      delay = backoff_;
      if (ev->kind() == memory::v1::BLACKBOARD_EVENT_KIND_EXPIRED) {
        done_ = true;
      } else {
        version_ = ev->version();
        board_id_ = ev->board_id();
      }
      return true;
    }
    status_ = reader_->Finish();
    reader_.reset();
    if (cancelled_ || status_.ok() || !Retryable(status_.error_code())) break;
    reconnects_++;
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(2000));
  }
  done_ = true;
  if (reader_) {  // after EXPIRED: the server ends the stream OK
    status_ = reader_->Finish();
    reader_.reset();
  }
  return false;
}

void Subscription::Cancel() {
  cancelled_ = true;
  std::lock_guard<std::mutex> g(mu_);
  if (ctx_) ctx_->TryCancel();
}

}  // namespace memoryd
