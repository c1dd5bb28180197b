// memoryd::Memory (see memoryd/memory.h).
#include "memoryd/memory.h"

#include <algorithm>
#include <utility>

#include "memoryd/call.h"

namespace memoryd {

Memory::Memory(std::shared_ptr<grpc::Channel> channel, std::string token, std::string ns,
               std::chrono::milliseconds timeout)
    : channel_(channel),
      stub_(memory::v1::Entries::NewStub(channel)),
      token_(std::move(token)),
      ns_(std::move(ns)),
      timeout_(timeout) {}

Memory Memory::InNamespace(std::string ns) const {
  Memory m = *this;
  m.ns_ = std::move(ns);
  return m;
}

grpc::Status Memory::GetEntry(const std::string& key, memory::v1::Entry* entry, bool* found) const {
  memory::v1::EntriesReadRequest req;
  req.set_namespace_(ns_);
  req.set_key(key);
  memory::v1::EntriesReadResponse resp;
  grpc::ClientContext ctx;
  PrepareCall(&ctx, token_, timeout_);
  grpc::Status st = stub_->Read(&ctx, req, &resp);
  *found = st.ok();
  if (st.error_code() == grpc::StatusCode::NOT_FOUND) return grpc::Status::OK;
  if (st.ok()) *entry = std::move(*resp.mutable_entry());
  return st;
}

grpc::Status Memory::Get(const std::string& key, std::string* value, bool* found) const {
  memory::v1::Entry entry;
  grpc::Status st = GetEntry(key, &entry, found);
  if (*found) *value = std::move(*entry.mutable_value());
  return st;
}

grpc::Status Memory::Write(const std::string& key, const std::string& value,
                           const WriteOptions& opts, memory::v1::EntriesWriteResponse* out) const {
  memory::v1::EntriesWriteRequest req;
  req.set_namespace_(ns_);
  req.set_key(key);
  req.set_value(value);
  req.set_content_type(opts.content_type);
  for (const auto& t : opts.tags) req.add_tags(t);
  if (opts.ttl.count() > 0) {
    req.mutable_ttl()->set_seconds(opts.ttl.count() / 1000);
    req.mutable_ttl()->set_nanos(static_cast<int32_t>(opts.ttl.count() % 1000) * 1000000);
  }
  if (opts.expected_version >= 0) req.set_expected_version(opts.expected_version);
  req.set_label(opts.label);
  if (opts.metadata) *req.mutable_metadata() = *opts.metadata;
  memory::v1::EntriesWriteResponse resp;
  grpc::ClientContext ctx;
  PrepareCall(&ctx, token_, timeout_);
  return stub_->Write(&ctx, req, out ? out : &resp);
}

grpc::Status Memory::Delete(const std::string& key, bool* deleted) const {
  memory::v1::EntriesDeleteEntryRequest req;
  req.set_namespace_(ns_);
  req.set_key(key);
  memory::v1::EntriesDeleteEntryResponse resp;
  grpc::ClientContext ctx;
  PrepareCall(&ctx, token_, timeout_);
  grpc::Status st = stub_->DeleteEntry(&ctx, req, &resp);
  if (deleted) *deleted = st.ok();
  return st.error_code() == grpc::StatusCode::NOT_FOUND ? grpc::Status::OK : st;
}

grpc::Status Memory::ListKeys(const std::string& key_pattern, std::vector<EntryKey>* out,
                              const std::string& namespace_pattern, size_t limit) const {
  out->clear();
  memory::v1::EntriesListRequest req;
  req.set_namespace_pattern(namespace_pattern.empty() ? ns_ : namespace_pattern);
  req.set_key_pattern(key_pattern);
  while (out->size() < limit) {
    req.set_page_size(static_cast<int32_t>(std::min<size_t>(1000, limit - out->size())));
    memory::v1::EntriesListResponse resp;
    grpc::ClientContext ctx;
    PrepareCall(&ctx, token_, timeout_);
    grpc::Status st = stub_->List(&ctx, req, &resp);
    if (!st.ok()) return st;
    for (const auto& e : resp.entries()) out->push_back({e.namespace_(), e.key()});
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  if (out->size() > limit) out->resize(limit);
  return grpc::Status::OK;
}

}  // namespace memoryd
