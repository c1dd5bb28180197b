// memoryd::Memory: the key-value memory of one namespace (memory.v1.Entries)
// for C++ agents, shaped the way agents use key-value memory: reads never
// write, writes are explicit.
//
//   memoryd::Memory memory(channel, token, "planner:trip:prefs");
//   memory.Write("user_style", "terse");                  // text/plain
//   std::string style;
//   bool found = false;
//   memory.Get("user_style", &style, &found);             // absent: found false
//   std::vector<memoryd::EntryKey> keys;
//   memory.ListKeys("user_*", &keys);                     // this namespace
//   memory.ListKeys("user_*", &keys, "planner:*:*");      // a namespace pattern
//   memory.InNamespace("planner:trip:plan").Write(...);   // another namespace
//
// Errors are grpc::Status with memoryd's code and message as they came; an
// absent key is not an error for Get and Delete. Cheap to copy; thread-safe
// as the stub is.
#ifndef MEMORYD_CLIENTS_CPP_MEMORY_H
#define MEMORYD_CLIENTS_CPP_MEMORY_H

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "memory/v1/entries.grpc.pb.h"

namespace memoryd {

struct EntryKey {
  std::string ns, key;
  bool operator==(const EntryKey& o) const { return ns == o.ns && key == o.key; }
};

// Options of one Memory::Write. (At namespace scope: GCC cannot default a
// nested struct's initialized members in its enclosing class's
// declarations.)
struct MemoryWriteOptions {
  std::string content_type = "text/plain";
  std::vector<std::string> tags;
  std::chrono::milliseconds ttl{0};  // 0: never expires
  int64_t expected_version = -1;     // -1: unconditional; 0: only if absent
  memory::v1::Label label = memory::v1::LABEL_UNSPECIFIED;
  const google::protobuf::Struct* metadata = nullptr;  // not owned
};

class Memory {
 public:
  Memory(std::shared_ptr<grpc::Channel> channel, std::string token, std::string ns,
         std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // The same memory under another namespace.
  Memory InNamespace(std::string ns) const;
  const std::string& ns() const { return ns_; }

  // key's value bytes (*found false, OK, when absent, expired or hidden).
  grpc::Status Get(const std::string& key, std::string* value, bool* found) const;
  // The whole entry (content type, metadata, tags, meta).
  grpc::Status GetEntry(const std::string& key, memory::v1::Entry* entry, bool* found) const;

  using WriteOptions = MemoryWriteOptions;
  // Creates or replaces key.
  grpc::Status Write(const std::string& key, const std::string& value,
                     const WriteOptions& opts = WriteOptions(),
                     memory::v1::EntriesWriteResponse* out = nullptr) const;
  // Deletes key; *deleted false (OK) when there was nothing to delete.
  grpc::Status Delete(const std::string& key, bool* deleted = nullptr) const;

  // Keys matching key_pattern (`*` matches any run of characters; nothing
  // else is special) in this namespace, or in every namespace matching
  // namespace_pattern when given, ordered by namespace then key; at most
  // limit. *out is replaced.
  grpc::Status ListKeys(const std::string& key_pattern, std::vector<EntryKey>* out,
                        const std::string& namespace_pattern = "", size_t limit = 10000) const;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<memory::v1::Entries::Stub> stub_;
  std::string token_, ns_;
  std::chrono::milliseconds timeout_;
};

}  // namespace memoryd

#endif
