// pb_check: the wire scan that bounds nesting and refuses field number 0
// before protobuf-c sees a request.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

extern "C" {
#include "memory/v1/blackboard.pb-c.h"
#include "service/rpc/pb_check.h"
}

namespace {

std::string Varint(uint64_t v) {
  std::string s;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    if (v) b |= 0x80;
    s.push_back(static_cast<char>(b));
  } while (v);
  return s;
}

std::string Len(uint8_t tag, const std::string& body) {
  return std::string(1, static_cast<char>(tag)) + Varint(body.size()) + body;
}

// A BlackboardPostRequest whose value nests `levels` list_value messages:
// Value(3) -> ListValue(6) -> Value(1) -> ... Each level is two messages.
// Built back to front (reversed, then flipped) so deep inputs cost O(n).
std::string NestedPost(int levels) {
  std::string rev;  // the innermost empty Value has no bytes
  auto wrap = [&rev](uint8_t tag) {
    std::string len = Varint(rev.size());
    rev.append(len.rbegin(), len.rend());
    rev.push_back(static_cast<char>(tag));
  };
  for (int i = 0; i < levels; i++) {
    wrap(0x0a);  // ListValue.values
    wrap(0x32);  // Value.list_value
  }
  wrap(0x1a);  // BlackboardPostRequest.value
  return Len(0x0a, "task") + std::string(rev.rbegin(), rev.rend());
}

const ProtobufCMessageDescriptor* kPost = &memory__v1__blackboard_post_request__descriptor;

int Check(const std::string& bytes, int max_depth, const char** why) {
  return pb_check(kPost, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), max_depth,
                  why);
}

TEST(PbCheckTest, OrdinaryRequestPasses) {
  Memory__V1__BlackboardPostRequest req = MEMORY__V1__BLACKBOARD_POST_REQUEST__INIT;
  req.task_id = const_cast<char*>("t1");
  req.key = const_cast<char*>("k");
  std::string buf(protobuf_c_message_get_packed_size(&req.base), '\0');
  protobuf_c_message_pack(&req.base, reinterpret_cast<uint8_t*>(&buf[0]));
  const char* why;
  EXPECT_EQ(0, Check(buf, PB_CHECK_MAX_DEPTH, &why)) << why;
  EXPECT_EQ(0, Check("", PB_CHECK_MAX_DEPTH, &why));
}

TEST(PbCheckTest, DepthUpToTheLimitPassesOneMoreFails) {
  const char* why;
  // value(1) + 2 per level: 10 levels = 21 messages deep below the request.
  EXPECT_EQ(0, Check(NestedPost(10), 21, &why)) << why;
  EXPECT_EQ(-1, Check(NestedPost(10), 20, &why));
  EXPECT_STREQ("messages nest too deep", why);
}

TEST(PbCheckTest, HostileNestingIsRefusedWithoutDeepRecursion) {
  const char* why;
  EXPECT_EQ(-1, Check(NestedPost(20000), PB_CHECK_MAX_DEPTH, &why));
  EXPECT_STREQ("messages nest too deep", why);
}

TEST(PbCheckTest, FieldNumberZeroIsRefusedHoweverSpelled) {
  const char* why;
  EXPECT_EQ(-1, Check(std::string("\x00\x01", 2), PB_CHECK_MAX_DEPTH, &why));
  EXPECT_STREQ("invalid field number", why);
  EXPECT_EQ(-1, Check(std::string("\x80\x00\x2a", 3), PB_CHECK_MAX_DEPTH, &why));
  EXPECT_STREQ("invalid field number", why);
}

TEST(PbCheckTest, GroupsAndReservedWireTypesAreRefused) {
  const char* why;
  EXPECT_EQ(-1, Check("\x0b\x0c", PB_CHECK_MAX_DEPTH, &why));  // start/end group, field 1
  EXPECT_STREQ("unsupported wire type", why);
  EXPECT_EQ(-1, Check("\x0e", PB_CHECK_MAX_DEPTH, &why));  // wire type 6
}

TEST(PbCheckTest, TruncatedInputIsRefused) {
  const char* why;
  EXPECT_EQ(-1, Check("\x0a\x05"
                      "ab",
                      PB_CHECK_MAX_DEPTH, &why));
  EXPECT_STREQ("length runs past the end", why);
  EXPECT_EQ(-1, Check("\x08\xff", PB_CHECK_MAX_DEPTH, &why));
  EXPECT_EQ(-1, Check("\x09\x01\x02", PB_CHECK_MAX_DEPTH, &why));
  EXPECT_STREQ("truncated fixed64", why);
}

TEST(PbCheckTest, UnknownLengthDelimitedFieldsAreSkippedNotParsed) {
  // Field 99 is unknown to the descriptor: its bytes are opaque, even if
  // they look like garbage protobuf.
  const char* why;
  std::string bytes = Len(0x0a, "t") + Varint((99 << 3) | 2) + Varint(3) + "\xff\xff\xff";
  EXPECT_EQ(0, Check(bytes, PB_CHECK_MAX_DEPTH, &why)) << why;
}

}  // namespace

namespace {

TEST(PbCheckTest, NulInAStringFieldIsRefusedAtAnyDepth) {
  const char* why = "";
  // task_id = "a\0b": protobuf-c would hand the handler "a".
  EXPECT_EQ(-1, Check(Len(0x0a, std::string("a\0b", 3)), PB_CHECK_MAX_DEPTH, &why));
  EXPECT_NE(nullptr, strstr(why, "NUL")) << why;
  // value = Value{string_value: "x\0"} one message down.
  EXPECT_EQ(-1, Check(Len(0x0a, "t") + Len(0x1a, Len(0x1a, std::string("x\0", 2))),
                      PB_CHECK_MAX_DEPTH, &why));
  // The same bytes without the NUL pass.
  EXPECT_EQ(0, Check(Len(0x0a, "t") + Len(0x1a, Len(0x1a, "xy")), PB_CHECK_MAX_DEPTH, &why)) << why;
}

}  // namespace
