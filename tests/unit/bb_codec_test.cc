// The blackboard's byte formats (bb_codec.h): board key names, item
// headers and events as the Lua scripts write them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

extern "C" {
#include "service/blackboard/bb_codec.h"
}

namespace {

TEST(BbCodec, BoardNamesCarryTheTenantsLengthSoNoTwoBoardsShareKeys) {
  arena* a = arena_create();
  bb_names x, y;
  ASSERT_EQ(0, bb_names_make(a, "ab", "c:d", &x));
  ASSERT_EQ(0, bb_names_make(a, "ab:c", "d", &y));
  EXPECT_STREQ("memoryd:bb:{2:ab:c:d}", x.base);
  EXPECT_STREQ("memoryd:bb:{4:ab:c:d}", y.base);
  EXPECT_STRNE(x.key[BB_KEY_HEADERS], y.key[BB_KEY_HEADERS]);
  EXPECT_STREQ("memoryd:bb:{2:ab:c:d}:k", x.key[BB_KEY_HEADERS]);
  EXPECT_STREQ("memoryd:bb:{2:ab:c:d}:e", x.key[BB_KEY_LEASES]);
  EXPECT_STREQ("memoryd:bb:{2:ab:c:d}:c", x.channel);
  EXPECT_EQ(x.base_len + 2, x.channel_len);
  bb_names z;
  ASSERT_EQ(0, bb_names_from_base(a, x.base, x.base_len, &z));
  EXPECT_STREQ(x.key[BB_KEY_META], z.key[BB_KEY_META]);
  arena_free(a);
}

TEST(BbCodec, HeaderParsesEveryField) {
  const std::string h = "7 3 1000 2000 3000 5 118 5:alice";
  bb_header out;
  size_t used = 0;
  ASSERT_EQ(0, bb_header_parse(h.data(), h.size(), &out, &used));
  EXPECT_EQ(h.size(), used);
  EXPECT_EQ(7, out.version);
  EXPECT_EQ(3, out.label);
  EXPECT_EQ(1000, out.create_ms);
  EXPECT_EQ(2000, out.update_ms);
  EXPECT_EQ(3000, out.lease_ms);
  EXPECT_EQ(5u, out.pii);
  EXPECT_EQ(118, out.size);
  EXPECT_EQ("alice", std::string(out.owner, out.owner_len));
  // The owner is counted, so it may hold anything, spaces included.
  const std::string spaced = "1 1 1 1 0 0 1 7:a b:c d{\"v\":1}";
  ASSERT_EQ(0, bb_header_parse(spaced.data(), spaced.size(), &out, &used));
  EXPECT_EQ("a b:c d", std::string(out.owner, out.owner_len));
  EXPECT_EQ(spaced.size() - 7, used);
}

TEST(BbCodec, MalformedHeadersAreRefused) {
  for (const std::string h :
       {"", "1 1 1 1 0 0 1", "1 5 1 1 0 0 1 1:a", "1 0 1 1 0 0 1 1:a", "1 1 1 1 0 0 1 9:short",
        "x 1 1 1 0 0 1 1:a", "1 1 1 1 0 0 1 1234567890123456789:a", "-1 1 1 1 0 0 1 1:a"}) {
    bb_header out;
    size_t used;
    EXPECT_EQ(-1, bb_header_parse(h.data(), h.size(), &out, &used)) << h;
  }
}

TEST(BbCodec, EventsParseAsTheScriptsWriteThem) {
  const std::string put =
      "P 12 1795660496634 1795746896634 16:d8d30aa8bba9ab349:subtask/712 1 1795660496634 "
      "1795660496634 1795660499000 0 118 3:dev{\"x\":1}";
  bb_event ev;
  ASSERT_EQ(0, bb_event_parse(put.data(), put.size(), &ev));
  EXPECT_EQ(BB_PUT, ev.kind);
  EXPECT_EQ(12, ev.rev);
  EXPECT_EQ(1795660496634, ev.time_ms);
  EXPECT_EQ(1795746896634, ev.expire_ms);
  EXPECT_EQ("d8d30aa8bba9ab34", std::string(ev.id, ev.id_len));
  EXPECT_EQ("subtask/7", std::string(ev.key, ev.key_len));
  EXPECT_EQ(12, ev.h.version);
  EXPECT_EQ(1795660499000, ev.h.lease_ms);
  EXPECT_EQ("dev", std::string(ev.h.owner, ev.h.owner_len));
  EXPECT_EQ("{\"x\":1}", std::string(ev.json, ev.json_len));

  const std::string lease =
      "L 3 1795660498972 1795746896634 16:d8d30aa8bba9ab341:b3 1 1795660496940 1795660496940 "
      "1795660498940 0 107 3:dev";
  ASSERT_EQ(0, bb_event_parse(lease.data(), lease.size(), &ev));
  EXPECT_EQ(BB_LEASE_EXPIRED, ev.kind);
  EXPECT_EQ(0u, ev.json_len);
}

TEST(BbCodec, MalformedEventsAreRefused) {
  const std::string tail = "16:d8d30aa8bba9ab341:a1 1 1 1 0 0 1 3:dev";
  const std::vector<std::string> bad = {
      "",
      "P",
      "X 1 1 1 " + tail + "1",
      "P 1 1 1 " + tail,         // a PUT without its value
      "D 1 1 1 " + tail + "{}",  // a delete with one
      "P 0 1 1 " + tail + "1",   // revision 0
      "P 1 1 1 16:short1:a1 1 1 1 0 0 1 3:dev1",
      "P 1 1 1 16:d8d30aa8bba9ab340:1 1 1 1 0 0 1 3:dev1",  // an empty key
  };
  for (const std::string& e : bad) {
    bb_event ev;
    EXPECT_EQ(-1, bb_event_parse(e.data(), e.size(), &ev)) << e;
  }
}

}  // namespace
