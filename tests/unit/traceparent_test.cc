// traceparent: the W3C header's rules (version, length, case, zero ids),
// a trace started when the client sent none or a bad one, and the value
// sent on to backends.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

extern "C" {
#include "service/core/traceparent.h"
}

namespace {

const char kValid[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

bool Parses(const std::string& v) {
  char tid[TRACE_ID_HEX + 1], pid[TRACE_SPAN_HEX + 1];
  uint8_t flags;
  return traceparent_parse(v.data(), v.size(), tid, pid, &flags) == 0;
}

TEST(Traceparent, AValidHeaderGivesItsIdsAndFlags) {
  char tid[TRACE_ID_HEX + 1], pid[TRACE_SPAN_HEX + 1];
  uint8_t flags = 0;
  ASSERT_EQ(0, traceparent_parse(kValid, strlen(kValid), tid, pid, &flags));
  EXPECT_STREQ("4bf92f3577b34da6a3ce929d0e0e4736", tid);
  EXPECT_STREQ("00f067aa0ba902b7", pid);
  EXPECT_EQ(1, flags);
}

TEST(Traceparent, RejectionTable) {
  std::string v = kValid;
  const char* const bad[] = {
      "",
      "00",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",    // short
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",  // 00 is exactly 55
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   // upper case
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // zero trace id
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // zero parent id
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // forbidden version
      "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version not hex
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // separator
      "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",   // not hex
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",   // flags not hex
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  // future, no dash after
  };
  for (const char* b : bad) EXPECT_FALSE(Parses(b)) << b;
  EXPECT_TRUE(Parses(v));
  // A later version may carry more after a dash.
  EXPECT_TRUE(Parses("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more"));
  EXPECT_TRUE(Parses("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
}

TEST(Traceparent, TheClientsTraceIsKeptWithASpanOfTheCallsOwn) {
  trace_ctx t;
  trace_ctx_start(&t, kValid, strlen(kValid));
  EXPECT_TRUE(t.from_client);
  EXPECT_STREQ("4bf92f3577b34da6a3ce929d0e0e4736", t.trace_id);
  EXPECT_STRNE("00f067aa0ba902b7", t.span_id);
  char out[TRACEPARENT_LEN + 1];
  trace_ctx_format(&t, out);
  EXPECT_EQ("00-4bf92f3577b34da6a3ce929d0e0e4736-" + std::string(t.span_id) + "-01",
            std::string(out));
}

TEST(Traceparent, WithoutAUsableHeaderATraceStartsHere) {
  std::set<std::string> ids;
  for (const char* v : {static_cast<const char*>(nullptr), "garbage",
                        "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}) {
    trace_ctx t;
    trace_ctx_start(&t, v, v ? strlen(v) : 0);
    EXPECT_FALSE(t.from_client);
    EXPECT_EQ(0, t.flags);
    EXPECT_EQ(32u, strlen(t.trace_id));
    EXPECT_TRUE(Parses("00-" + std::string(t.trace_id) + "-" + t.span_id + "-00")) << t.trace_id;
    ids.insert(t.trace_id);
  }
  EXPECT_EQ(3u, ids.size());  // every call its own
}

}  // namespace
