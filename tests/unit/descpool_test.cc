// descpool: the index reflection serves from. Checked against the real
// embedded FileDescriptorSet of the API, against small sets built here with
// protobuf-c, and against malformed and random bytes.
#include <gtest/gtest.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

extern "C" {
#include "google/protobuf/descriptor.pb-c.h"
#include "protos/descriptor_set.h"
#include "service/reflection/descpool.h"
}

namespace {

const uint8_t* SetData() { return memoryd_descriptor_set; }
size_t SetLen() { return static_cast<size_t>(memoryd_descriptor_set_len); }

// Offsets where each top-level file record of the embedded set starts, plus
// the set's length at the end (an independent little walk of the wire format).
std::vector<size_t> RecordBoundaries() {
  std::vector<size_t> b;
  const uint8_t* d = SetData();
  size_t len = SetLen(), off = 0;
  while (off < len) {
    b.push_back(off);
    EXPECT_EQ(0x0a, d[off]);
    off++;
    uint64_t n = 0;
    for (int shift = 0; off < len; shift += 7) {
      uint8_t byte = d[off++];
      n |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) break;
    }
    off += n;
  }
  EXPECT_EQ(len, off);
  b.push_back(len);
  return b;
}

class DescpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(SetLen(), 0u);
    ASSERT_EQ(0, descpool_create(SetData(), SetLen(), &p_));
    ASSERT_NE(nullptr, p_);
  }
  void TearDown() override { descpool_free(p_); }

  int File(const char* name) { return descpool_find_file(p_, name); }

  descpool* p_ = nullptr;
};

const char* const kFiles[] = {
    "google/protobuf/struct.proto",
    "google/protobuf/timestamp.proto",
    "google/protobuf/duration.proto",
    "memory/v1/common.proto",
    "memory/v1/global_memory.proto",
    "memory/v1/episodic_memory.proto",
    "memory/v1/cache.proto",
    "memory/v1/entries.proto",
    "memory/v1/blackboard.proto",
    "memory/v1/router.proto",
    "memory/v1/audit.proto",
    "memory/v1/access.proto",
    "memory/v1/privacy.proto",
    "grpc/health/v1/health.proto",
    "grpc/reflection/v1/reflection.proto",
    "grpc/reflection/v1alpha/reflection.proto",
};

const char* const kServices[] = {
    "memory.v1.GlobalMemory",
    "memory.v1.EpisodicMemory",
    "memory.v1.Cache",
    "memory.v1.Entries",
    "memory.v1.Blackboard",
    "memory.v1.Router",
    "memory.v1.Audit",
    "memory.v1.Access",
    "memory.v1.Privacy",
    "memory.v1.WorkingMemory",
    "memory.v1.Session",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
};

TEST_F(DescpoolTest, EmbeddedSetIndexesEveryFile) {
  EXPECT_EQ(RecordBoundaries().size() - 1, descpool_file_count(p_));
  std::set<std::string> names;
  for (size_t i = 0; i < descpool_file_count(p_); i++) {
    const char* n = descpool_file_name(p_, static_cast<int>(i));
    ASSERT_NE(nullptr, n);
    EXPECT_TRUE(names.insert(n).second) << "duplicate file " << n;
    EXPECT_EQ(static_cast<int>(i), File(n)) << n;
  }
  for (const char* f : kFiles) EXPECT_GE(File(f), 0) << f;
}

TEST_F(DescpoolTest, ListsEveryServiceOnce) {
  std::map<std::string, int> seen;
  for (size_t i = 0; i < descpool_service_count(p_); i++) {
    const char* s = descpool_service_name(p_, i);
    ASSERT_NE(nullptr, s);
    seen[s]++;
  }
  for (const char* s : kServices) EXPECT_EQ(1, seen[s]) << s;
  EXPECT_EQ(sizeof kServices / sizeof kServices[0], descpool_service_count(p_));
}

TEST_F(DescpoolTest, ServicesAreListedInFileOrder) {
  int prev = -1;
  for (size_t i = 0; i < descpool_service_count(p_); i++) {
    int f = descpool_find_symbol(p_, descpool_service_name(p_, i));
    ASSERT_GE(f, 0) << descpool_service_name(p_, i);
    EXPECT_GE(f, prev) << descpool_service_name(p_, i);
    prev = f;
  }
}

TEST_F(DescpoolTest, FindsServiceSymbol) {
  int gm = File("memory/v1/global_memory.proto");
  ASSERT_GE(gm, 0);
  EXPECT_EQ(gm, descpool_find_symbol(p_, "memory.v1.GlobalMemory"));
  EXPECT_FALSE(descpool_is_message(p_, "memory.v1.GlobalMemory"));
  EXPECT_EQ(File("grpc/health/v1/health.proto"), descpool_find_symbol(p_, "grpc.health.v1.Health"));
  EXPECT_EQ(File("grpc/reflection/v1alpha/reflection.proto"),
            descpool_find_symbol(p_, "grpc.reflection.v1alpha.ServerReflection"));
  EXPECT_EQ(File("grpc/reflection/v1/reflection.proto"),
            descpool_find_symbol(p_, "grpc.reflection.v1.ServerReflection"));
}

TEST_F(DescpoolTest, FindsMethodSymbol) {
  EXPECT_EQ(File("memory/v1/global_memory.proto"),
            descpool_find_symbol(p_, "memory.v1.GlobalMemory.GetEntity"));
  EXPECT_EQ(File("grpc/health/v1/health.proto"),
            descpool_find_symbol(p_, "grpc.health.v1.Health.Watch"));
  EXPECT_FALSE(descpool_is_message(p_, "memory.v1.GlobalMemory.GetEntity"));
}

TEST_F(DescpoolTest, FindsMessageSymbolAndKnowsItIsAMessage) {
  EXPECT_EQ(File("memory/v1/global_memory.proto"),
            descpool_find_symbol(p_, "memory.v1.GetEntityRequest"));
  EXPECT_EQ(File("memory/v1/common.proto"), descpool_find_symbol(p_, "memory.v1.Entity"));
  EXPECT_EQ(File("google/protobuf/struct.proto"),
            descpool_find_symbol(p_, "google.protobuf.Struct"));
  EXPECT_TRUE(descpool_is_message(p_, "memory.v1.GetEntityRequest"));
  EXPECT_TRUE(descpool_is_message(p_, "google.protobuf.Timestamp"));
}

TEST_F(DescpoolTest, FindsNestedMessageAndNestedEnum) {
  EXPECT_EQ(File("google/protobuf/struct.proto"),
            descpool_find_symbol(p_, "google.protobuf.Struct.FieldsEntry"));
  EXPECT_TRUE(descpool_is_message(p_, "google.protobuf.Struct.FieldsEntry"));
  EXPECT_EQ(File("grpc/health/v1/health.proto"),
            descpool_find_symbol(p_, "grpc.health.v1.HealthCheckResponse.ServingStatus"));
  EXPECT_FALSE(descpool_is_message(p_, "grpc.health.v1.HealthCheckResponse.ServingStatus"));
}

TEST_F(DescpoolTest, FindsFieldAndOneofSymbols) {
  int gm = File("memory/v1/global_memory.proto");
  EXPECT_EQ(gm, descpool_find_symbol(p_, "memory.v1.GetEntityRequest.id"));
  EXPECT_EQ(gm, descpool_find_symbol(p_, "memory.v1.PutEntityRequest.precondition"));
  EXPECT_EQ(File("google/protobuf/struct.proto"),
            descpool_find_symbol(p_, "google.protobuf.Struct.FieldsEntry.key"));
  EXPECT_FALSE(descpool_is_message(p_, "memory.v1.GetEntityRequest.id"));
}

TEST_F(DescpoolTest, FindsEnumAndEnumValuesInTheEnclosingScope) {
  int gm = File("memory/v1/global_memory.proto");
  EXPECT_EQ(gm, descpool_find_symbol(p_, "memory.v1.TaskStatus"));
  EXPECT_EQ(gm, descpool_find_symbol(p_, "memory.v1.TASK_STATUS_RUNNING"));
  // Values are siblings of their enum, not children (C++ scoping).
  EXPECT_EQ(-1, descpool_find_symbol(p_, "memory.v1.TaskStatus.TASK_STATUS_RUNNING"));
  EXPECT_EQ(File("grpc/health/v1/health.proto"),
            descpool_find_symbol(p_, "grpc.health.v1.HealthCheckResponse.SERVING"));
  EXPECT_EQ(File("google/protobuf/struct.proto"),
            descpool_find_symbol(p_, "google.protobuf.NULL_VALUE"));
}

TEST_F(DescpoolTest, LeadingDotIsAccepted) {
  EXPECT_EQ(File("memory/v1/global_memory.proto"),
            descpool_find_symbol(p_, ".memory.v1.GlobalMemory"));
  EXPECT_EQ(File("memory/v1/global_memory.proto"),
            descpool_find_symbol(p_, ".memory.v1.GlobalMemory.GetEntity"));
  EXPECT_TRUE(descpool_is_message(p_, ".google.protobuf.Struct"));
}

TEST_F(DescpoolTest, UnknownSymbolsAreNotFound) {
  EXPECT_EQ(-1, descpool_find_symbol(p_, "memory.v1.Nope"));
  EXPECT_EQ(-1, descpool_find_symbol(p_, "memory.v1.GlobalMemory.Nope"));
  EXPECT_EQ(-1, descpool_find_symbol(p_, "memory.v1.globalmemory"));
  EXPECT_EQ(-1, descpool_find_symbol(p_, "memory.v1.GlobalMemory/GetEntity"));
  EXPECT_EQ(-1, descpool_find_symbol(p_, "GlobalMemory"));
  EXPECT_EQ(-1, descpool_find_symbol(p_, ""));
  EXPECT_EQ(-1, descpool_find_symbol(p_, "."));
  EXPECT_FALSE(descpool_is_message(p_, "memory.v1.Nope"));
}

TEST_F(DescpoolTest, FindsFileByName) {
  int gm = File("memory/v1/global_memory.proto");
  ASSERT_GE(gm, 0);
  EXPECT_STREQ("memory/v1/global_memory.proto", descpool_file_name(p_, gm));
  EXPECT_EQ(-1, File("memory/v1/nope.proto"));
  EXPECT_EQ(-1, File("global_memory.proto"));
  EXPECT_EQ(-1, File(""));
}

TEST_F(DescpoolTest, ClosureHasRequestedFileFirstAndEveryDependencyOnce) {
  int gm = File("memory/v1/global_memory.proto");
  ASSERT_GE(gm, 0);
  std::vector<int> out(descpool_file_count(p_), -1);
  size_t n = descpool_file_closure(p_, gm, out.data());
  ASSERT_GE(n, 1u);
  ASSERT_LE(n, out.size());
  EXPECT_EQ(gm, out[0]);
  std::map<std::string, int> count;
  for (size_t i = 0; i < n; i++) {
    ASSERT_GE(out[i], 0);
    ASSERT_LT(static_cast<size_t>(out[i]), descpool_file_count(p_));
    count[descpool_file_name(p_, out[i])]++;
  }
  EXPECT_EQ(1, count["memory/v1/global_memory.proto"]);
  EXPECT_EQ(1, count["memory/v1/common.proto"]);
  EXPECT_EQ(1, count["google/protobuf/struct.proto"]);
  EXPECT_EQ(1, count["google/protobuf/timestamp.proto"]);
  EXPECT_EQ(1, count["google/protobuf/duration.proto"]);
  // global_memory -> {struct, timestamp, common}; common -> {duration,
  // struct, timestamp}.
  EXPECT_EQ(5u, n);
  EXPECT_EQ(0, count.count("memory/v1/cache.proto"));
}

TEST_F(DescpoolTest, ClosureOfFileWithoutImportsIsItself) {
  int h = File("grpc/health/v1/health.proto");
  ASSERT_GE(h, 0);
  std::vector<int> out(descpool_file_count(p_), -1);
  ASSERT_EQ(1u, descpool_file_closure(p_, h, out.data()));
  EXPECT_EQ(h, out[0]);
}

TEST_F(DescpoolTest, EveryClosureIsDuplicateFreeAndBounded) {
  for (size_t f = 0; f < descpool_file_count(p_); f++) {
    std::vector<int> out(descpool_file_count(p_), -1);
    size_t n = descpool_file_closure(p_, static_cast<int>(f), out.data());
    ASSERT_LE(n, out.size());
    std::set<int> uniq(out.begin(), out.begin() + n);
    EXPECT_EQ(n, uniq.size()) << descpool_file_name(p_, static_cast<int>(f));
    EXPECT_EQ(static_cast<int>(f), out[0]);
  }
}

TEST_F(DescpoolTest, MethodPathOfRealMethodIsKnown) {
  EXPECT_TRUE(descpool_has_method_path(p_, "/memory.v1.GlobalMemory/GetEntity"));
  EXPECT_TRUE(descpool_has_method_path(p_, "/grpc.health.v1.Health/Check"));
  EXPECT_TRUE(descpool_has_method_path(
      p_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"));
}

TEST_F(DescpoolTest, MalformedOrUnknownMethodPathsAreRejected) {
  EXPECT_FALSE(descpool_has_method_path(p_, "/memory.v1.GlobalMemory/Nope"));
  EXPECT_FALSE(descpool_has_method_path(p_, "/memory.v1.GlobalMemory.GetEntity"));
  EXPECT_FALSE(descpool_has_method_path(p_, ""));
  EXPECT_FALSE(descpool_has_method_path(p_, "/memory.v1/GetEntity"));
  EXPECT_FALSE(descpool_has_method_path(p_, "memory.v1.GlobalMemory/GetEntity"));
  EXPECT_FALSE(descpool_has_method_path(p_, "/memory.v1.GlobalMemory/"));
  EXPECT_FALSE(descpool_has_method_path(p_, "/"));
  EXPECT_FALSE(descpool_has_method_path(p_, "//GetEntity"));
  EXPECT_FALSE(descpool_has_method_path(p_, "/memory.v1.GlobalMemory/GetEntity/x"));
  EXPECT_FALSE(descpool_has_method_path(p_, "/memory.v1.globalmemory/GetEntity"));
  // A message's field is not a method.
  EXPECT_FALSE(descpool_has_method_path(p_, "/memory.v1.GetEntityRequest/id"));
  // A symbol nested in a service's package but not the service.
  EXPECT_FALSE(descpool_has_method_path(p_, "/memory.v1.GlobalMemory/TASK_STATUS_RUNNING"));
}

TEST_F(DescpoolTest, OverlongMethodPathIsRejectedWithoutOverflow) {
  std::string path = "/memory.v1.GlobalMemory/" + std::string(5000, 'A');
  EXPECT_FALSE(descpool_has_method_path(p_, path.c_str()));
  std::string svc = "/" + std::string(600, 's') + "/GetEntity";
  EXPECT_FALSE(descpool_has_method_path(p_, svc.c_str()));
}

TEST_F(DescpoolTest, FileBytesReparseToTheSameFile) {
  const uint8_t* lo = SetData();
  const uint8_t* hi = SetData() + SetLen();
  for (size_t f = 0; f < descpool_file_count(p_); f++) {
    const uint8_t* data = nullptr;
    size_t len = 0;
    descpool_file_bytes(p_, static_cast<int>(f), &data, &len);
    ASSERT_NE(nullptr, data);
    ASSERT_GT(len, 0u);
    // Served exactly as in the set: a view into it, not a copy.
    EXPECT_TRUE(data >= lo && data + len <= hi);
    Google__Protobuf__FileDescriptorProto* fd =
        google__protobuf__file_descriptor_proto__unpack(nullptr, len, data);
    ASSERT_NE(nullptr, fd) << descpool_file_name(p_, static_cast<int>(f));
    ASSERT_NE(nullptr, fd->name);
    EXPECT_STREQ(descpool_file_name(p_, static_cast<int>(f)), fd->name);
    google__protobuf__file_descriptor_proto__free_unpacked(fd, nullptr);
  }
}

TEST_F(DescpoolTest, FileBytesOfGlobalMemoryDescribeItsService) {
  int gm = File("memory/v1/global_memory.proto");
  ASSERT_GE(gm, 0);
  const uint8_t* data = nullptr;
  size_t len = 0;
  descpool_file_bytes(p_, gm, &data, &len);
  Google__Protobuf__FileDescriptorProto* fd =
      google__protobuf__file_descriptor_proto__unpack(nullptr, len, data);
  ASSERT_NE(nullptr, fd);
  EXPECT_STREQ("memory.v1", fd->package);
  ASSERT_GE(fd->n_service, 1u);
  EXPECT_STREQ("GlobalMemory", fd->service[0]->name);
  google__protobuf__file_descriptor_proto__free_unpacked(fd, nullptr);
}

// ---- Sets built here -------------------------------------------------------

// A FileDescriptorProto under construction; strings live in the struct.
struct FileSpec {
  std::string name, package;
  std::vector<std::string> deps;
  std::vector<std::string> messages;
  std::string service;  // empty: none
  std::vector<std::string> methods;
};

std::vector<uint8_t> PackFile(const FileSpec& s) {
  Google__Protobuf__FileDescriptorProto fd = GOOGLE__PROTOBUF__FILE_DESCRIPTOR_PROTO__INIT;
  fd.name = const_cast<char*>(s.name.c_str());
  if (!s.package.empty()) fd.package = const_cast<char*>(s.package.c_str());
  std::vector<char*> deps;
  for (const auto& d : s.deps) deps.push_back(const_cast<char*>(d.c_str()));
  fd.n_dependency = deps.size();
  fd.dependency = deps.data();
  std::vector<Google__Protobuf__DescriptorProto> msgs(s.messages.size());
  std::vector<Google__Protobuf__DescriptorProto*> msg_ptrs;
  for (size_t i = 0; i < s.messages.size(); i++) {
    google__protobuf__descriptor_proto__init(&msgs[i]);
    msgs[i].name = const_cast<char*>(s.messages[i].c_str());
    msg_ptrs.push_back(&msgs[i]);
  }
  fd.n_message_type = msg_ptrs.size();
  fd.message_type = msg_ptrs.data();
  Google__Protobuf__ServiceDescriptorProto svc = GOOGLE__PROTOBUF__SERVICE_DESCRIPTOR_PROTO__INIT;
  std::vector<Google__Protobuf__MethodDescriptorProto> methods(s.methods.size());
  std::vector<Google__Protobuf__MethodDescriptorProto*> method_ptrs;
  Google__Protobuf__ServiceDescriptorProto* svc_ptr = &svc;
  if (!s.service.empty()) {
    svc.name = const_cast<char*>(s.service.c_str());
    for (size_t i = 0; i < s.methods.size(); i++) {
      google__protobuf__method_descriptor_proto__init(&methods[i]);
      methods[i].name = const_cast<char*>(s.methods[i].c_str());
      method_ptrs.push_back(&methods[i]);
    }
    svc.n_method = method_ptrs.size();
    svc.method = method_ptrs.data();
    fd.n_service = 1;
    fd.service = &svc_ptr;
  }
  std::vector<uint8_t> out(google__protobuf__file_descriptor_proto__get_packed_size(&fd));
  google__protobuf__file_descriptor_proto__pack(&fd, out.data());
  return out;
}

// Top-level record: field 1, length-delimited.
void AppendRecord(std::vector<uint8_t>* set, const std::vector<uint8_t>& body) {
  set->push_back(0x0a);
  uint64_t n = body.size();
  do {
    uint8_t b = n & 0x7f;
    n >>= 7;
    set->push_back(n ? (b | 0x80) : b);
  } while (n);
  set->insert(set->end(), body.begin(), body.end());
}

std::vector<uint8_t> BuildSet(const std::vector<FileSpec>& files) {
  std::vector<uint8_t> set;
  for (const auto& f : files) AppendRecord(&set, PackFile(f));
  return set;
}

TEST(DescpoolBuiltSetTest, MissingDependencyIsSkipped) {
  auto set = BuildSet({
      {"a.proto", "pkg", {}, {"A"}, "S", {"M"}},
      {"b.proto", "pkg", {"a.proto", "missing.proto"}, {"B"}, "", {}},
  });
  descpool* p = nullptr;
  ASSERT_EQ(0, descpool_create(set.data(), set.size(), &p));
  EXPECT_EQ(2u, descpool_file_count(p));
  std::vector<int> out(descpool_file_count(p), -1);
  ASSERT_EQ(2u, descpool_file_closure(p, 1, out.data()));
  EXPECT_EQ(1, out[0]);
  EXPECT_EQ(0, out[1]);
  EXPECT_TRUE(descpool_has_method_path(p, "/pkg.S/M"));
  EXPECT_FALSE(descpool_has_method_path(p, "/pkg.S/A"));
  EXPECT_EQ(1, descpool_find_symbol(p, "pkg.B"));
  descpool_free(p);
}

TEST(DescpoolBuiltSetTest, DependencyCycleClosureTerminates) {
  auto set = BuildSet({
      {"a.proto", "pkg", {"b.proto"}, {"A"}, "", {}},
      {"b.proto", "pkg", {"a.proto", "b.proto"}, {"B"}, "", {}},
  });
  descpool* p = nullptr;
  ASSERT_EQ(0, descpool_create(set.data(), set.size(), &p));
  std::vector<int> out(descpool_file_count(p), -1);
  ASSERT_EQ(2u, descpool_file_closure(p, 0, out.data()));
  EXPECT_EQ(0, out[0]);
  EXPECT_EQ(1, out[1]);
  descpool_free(p);
}

TEST(DescpoolBuiltSetTest, ServiceWithoutPackageHasUnqualifiedPath) {
  auto set = BuildSet({{"bare.proto", "", {}, {"Req"}, "Svc", {"Call"}}});
  descpool* p = nullptr;
  ASSERT_EQ(0, descpool_create(set.data(), set.size(), &p));
  ASSERT_EQ(1u, descpool_service_count(p));
  EXPECT_STREQ("Svc", descpool_service_name(p, 0));
  EXPECT_TRUE(descpool_has_method_path(p, "/Svc/Call"));
  EXPECT_FALSE(descpool_has_method_path(p, "/Svc/Req"));
  EXPECT_TRUE(descpool_is_message(p, "Req"));
  descpool_free(p);
}

TEST(DescpoolBuiltSetTest, FileWithoutPackageOrSymbolsIsIndexed) {
  // A valid set whose only file defines no symbol at all.
  auto set = BuildSet({{"empty.proto", "", {}, {}, "", {}}});
  descpool* p = nullptr;
  ASSERT_EQ(0, descpool_create(set.data(), set.size(), &p));
  EXPECT_EQ(1u, descpool_file_count(p));
  EXPECT_EQ(0, descpool_find_file(p, "empty.proto"));
  EXPECT_EQ(-1, descpool_find_symbol(p, "anything"));
  EXPECT_FALSE(descpool_is_message(p, "anything"));
  EXPECT_EQ(0u, descpool_service_count(p));
  EXPECT_FALSE(descpool_has_method_path(p, "/a.B/C"));
  descpool_free(p);
}

TEST(DescpoolBuiltSetTest, FileWithoutNameIsRejected) {
  std::vector<uint8_t> set;
  // FileDescriptorProto with only package = "p" (field 2).
  AppendRecord(&set, {0x12, 0x01, 'p'});
  descpool* p = nullptr;
  EXPECT_EQ(-1, descpool_create(set.data(), set.size(), &p));
}

// ---- Malformed input -------------------------------------------------------

TEST(DescpoolMalformedTest, EmptyInputIsAValidEmptyPool) {
  // Zero bytes is an empty FileDescriptorSet: accepted, with no files.
  const uint8_t none[1] = {0};
  descpool* p = nullptr;
  ASSERT_EQ(0, descpool_create(none, 0, &p));
  ASSERT_NE(nullptr, p);
  EXPECT_EQ(0u, descpool_file_count(p));
  EXPECT_EQ(0u, descpool_service_count(p));
  EXPECT_EQ(-1, descpool_find_file(p, "memory/v1/common.proto"));
  EXPECT_EQ(-1, descpool_find_symbol(p, "memory.v1.GlobalMemory"));
  EXPECT_FALSE(descpool_is_message(p, "memory.v1.Entity"));
  EXPECT_FALSE(descpool_has_method_path(p, "/memory.v1.GlobalMemory/GetEntity"));
  descpool_free(p);
}

TEST(DescpoolMalformedTest, TruncatedSetIsRejectedUnlessCutAtARecordBoundary) {
  std::vector<size_t> bounds = RecordBoundaries();
  ASSERT_GE(bounds.size(), 3u);
  std::set<size_t> at_boundary(bounds.begin(), bounds.end());
  std::vector<size_t> cuts = {1, 2, 3, 10, SetLen() / 2, SetLen() - 1};
  for (size_t i = 1; i + 1 < bounds.size(); i++) {
    cuts.push_back(bounds[i] - 1);  // last byte of a record missing
    cuts.push_back(bounds[i] + 1);  // only the next record's tag
    cuts.push_back(bounds[i] + 2);
    cuts.push_back(bounds[i]);  // exactly i whole records
  }
  for (size_t n : cuts) {
    // Copy so ASan catches any read past the cut.
    std::vector<uint8_t> buf(SetData(), SetData() + n);
    descpool* p = nullptr;
    int rc = descpool_create(buf.data(), buf.size(), &p);
    auto it = std::find(bounds.begin(), bounds.end(), n);
    if (at_boundary.count(n)) {
      ASSERT_EQ(0, rc) << "cut at record boundary " << n;
      EXPECT_EQ(static_cast<size_t>(it - bounds.begin()), descpool_file_count(p)) << n;
      descpool_free(p);
    } else {
      EXPECT_EQ(-1, rc) << "cut at " << n << " of " << SetLen();
      if (rc == 0) descpool_free(p);
    }
  }
}

TEST(DescpoolMalformedTest, WrongTopLevelTagIsRejected) {
  for (uint8_t tag : {0x12 /* field 2, LEN */, 0x08 /* field 1, VARINT */, 0x0d /* field 1, I32 */,
                      0x0b /* field 1, SGROUP */, 0x00}) {
    std::vector<uint8_t> buf(SetData(), SetData() + SetLen());
    buf[0] = tag;
    descpool* p = nullptr;
    EXPECT_EQ(-1, descpool_create(buf.data(), buf.size(), &p)) << "tag " << int(tag);
  }
  // A wrong tag after a good first record.
  std::vector<size_t> bounds = RecordBoundaries();
  std::vector<uint8_t> buf(SetData(), SetData() + SetLen());
  buf[bounds[1]] = 0x1a;
  descpool* p = nullptr;
  EXPECT_EQ(-1, descpool_create(buf.data(), buf.size(), &p));
}

TEST(DescpoolMalformedTest, LengthRunningPastTheEndIsRejected) {
  descpool* p = nullptr;
  const uint8_t past[] = {0x0a, 0x20, 'a', 'b', 'c'};
  EXPECT_EQ(-1, descpool_create(past, sizeof past, &p));
  // A 64-bit length that would wrap an offset.
  const uint8_t huge[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00};
  EXPECT_EQ(-1, descpool_create(huge, sizeof huge, &p));
  // A varint length that never terminates.
  const uint8_t endless[] = {0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                             0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
  EXPECT_EQ(-1, descpool_create(endless, sizeof endless, &p));
  // The length itself cut off.
  const uint8_t cut[] = {0x0a, 0x80};
  EXPECT_EQ(-1, descpool_create(cut, sizeof cut, &p));
}

TEST(DescpoolMalformedTest, RecordWithMalformedFileBodyIsRejected) {
  std::vector<uint8_t> set;
  // name (field 1) claims 80 bytes inside a 5-byte body.
  AppendRecord(&set, {0x0a, 0x50, 'a', 'b', 'c'});
  descpool* p = nullptr;
  EXPECT_EQ(-1, descpool_create(set.data(), set.size(), &p));
  // A good record followed by a bad one: nothing leaks (ASan).
  std::vector<uint8_t> two = BuildSet({{"ok.proto", "pkg", {}, {"M"}, "S", {"X"}}});
  AppendRecord(&two, {0x0a, 0x50, 'a'});
  EXPECT_EQ(-1, descpool_create(two.data(), two.size(), &p));
}

TEST(DescpoolMalformedTest, RandomBytesNeverCrashAndAreMostlyRejected) {
  std::mt19937 rng(20240601);
  const int kRounds = 4000;
  int accepted = 0;
  for (int round = 0; round < kRounds; round++) {
    size_t len = 1 + rng() % 400;
    std::vector<uint8_t> buf(len);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    if (round % 2) buf[0] = 0x0a;  // half of them get past the first tag check
    descpool* p = nullptr;
    if (descpool_create(buf.data(), buf.size(), &p) == 0) {
      accepted++;
      descpool_free(p);
    }
  }
  EXPECT_LT(accepted, kRounds / 20) << accepted << " of " << kRounds << " random buffers accepted";
}

TEST(DescpoolMalformedTest, RandomFileBodiesNeverCrash) {
  // Well-framed records with random bodies reach the protobuf-c decoder
  // and the indexer.
  std::mt19937 rng(7);
  for (int round = 0; round < 3000; round++) {
    std::vector<uint8_t> body(rng() % 200);
    for (auto& b : body) b = static_cast<uint8_t>(rng());
    if (!body.empty() && round % 3 == 0) body[0] = 0x0a;  // start like a name
    std::vector<uint8_t> set;
    AppendRecord(&set, body);
    descpool* p = nullptr;
    if (descpool_create(set.data(), set.size(), &p) == 0) {
      ASSERT_EQ(1u, descpool_file_count(p));
      ASSERT_NE(nullptr, descpool_file_name(p, 0));
      descpool_free(p);
    }
  }
}

TEST(DescpoolMalformedTest, MutatedRealSetNeverCrashes) {
  std::mt19937 rng(42);
  int accepted = 0;
  for (int round = 0; round < 600; round++) {
    std::vector<uint8_t> buf(SetData(), SetData() + SetLen());
    int flips = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < flips; k++) buf[rng() % buf.size()] = static_cast<uint8_t>(rng());
    descpool* p = nullptr;
    if (descpool_create(buf.data(), buf.size(), &p) != 0) continue;
    accepted++;
    // Whatever was accepted must be safe to query.
    size_t nf = descpool_file_count(p);
    std::vector<int> out(nf);
    for (size_t f = 0; f < nf; f++) {
      ASSERT_NE(nullptr, descpool_file_name(p, static_cast<int>(f)));
      size_t n = descpool_file_closure(p, static_cast<int>(f), out.data());
      ASSERT_LE(n, nf);
    }
    for (size_t s = 0; s < descpool_service_count(p); s++) {
      std::string path = std::string("/") + descpool_service_name(p, s) + "/GetEntity";
      (void)descpool_has_method_path(p, path.c_str());
      (void)descpool_find_symbol(p, descpool_service_name(p, s));
    }
    descpool_free(p);
  }
  // Flips inside names and other strings keep the set valid, so the query
  // paths above did run.
  EXPECT_GT(accepted, 0);
}

TEST(DescpoolFreeTest, AcceptsNull) { descpool_free(nullptr); }

}  // namespace
