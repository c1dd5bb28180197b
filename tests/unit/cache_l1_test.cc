// cache_l1, cache_codec and cache_aside: the in-process level's bounds,
// TTLs, LRU order and invalidation marks; the Redis value and key formats;
// get-or-load with single flight.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "service/cache/cache_aside.h"
#include "service/cache/cache_codec.h"
#include "service/cache/cache_l1.h"
#include "service/core/arena.h"
}

namespace {

// The clocks every L1 of these tests reads: time moves only when a test
// moves it, so TTLs are tested without sleeping.
struct TestClock {
  std::atomic<int64_t> mono_ms{1000000};
  std::atomic<int64_t> wall_ms{1700000000000};
  void Advance(int64_t ms) {
    mono_ms += ms;
    wall_ms += ms;
  }
};
TestClock test_clock;

int64_t TestMono(void*) { return test_clock.mono_ms; }
int64_t TestWall(void*) { return test_clock.wall_ms; }
const clock_src kTestClock = {TestMono, TestWall, nullptr};

int64_t WallMs() { return test_clock.wall_ms; }

cache_item* Item(const std::string& v, int64_t ttl_ms = 60000, int label = 1,
                 const char* owner = "alice") {
  return cache_item_create(owner, strlen(owner), v.data(), v.size(), label, WallMs(),
                           WallMs() + ttl_ms);
}

struct L1 {
  explicit L1(size_t entries, size_t bytes = 0, int ttl_ms = 60000) {
    cache_l1_options o = {entries, bytes, ttl_ms, &kTestClock};
    l1 = cache_l1_create(&o);
  }
  ~L1() { cache_l1_free(l1); }
  bool Put(const std::string& k, const std::string& v, int64_t ttl_ms = 60000) {
    cache_item* it = Item(v, ttl_ms);
    int stored = cache_l1_put(l1, k.data(), k.size(), it, CACHE_L1_UNCONDITIONAL);
    cache_item_unref(it);
    return stored == 1;
  }
  // The value under k, or "<miss>".
  std::string Get(const std::string& k) {
    cache_item* it = cache_l1_get(l1, k.data(), k.size());
    if (!it) return "<miss>";
    std::string v(reinterpret_cast<const char*>(it->value), it->value_len);
    cache_item_unref(it);
    return v;
  }
  cache_l1_stats Stats() {
    cache_l1_stats s;
    cache_l1_get_stats(l1, &s);
    return s;
  }
  cache_l1* l1;
};

TEST(CacheL1, PutGetReplaceDelete) {
  L1 c(1000);
  EXPECT_EQ("<miss>", c.Get("a"));
  ASSERT_TRUE(c.Put("a", "1"));
  EXPECT_EQ("1", c.Get("a"));
  ASSERT_TRUE(c.Put("a", "2"));
  EXPECT_EQ("2", c.Get("a"));
  EXPECT_EQ(1u, c.Stats().entries);
  EXPECT_EQ(1, cache_l1_delete(c.l1, "a", 1));
  EXPECT_EQ(0, cache_l1_delete(c.l1, "a", 1));
  EXPECT_EQ("<miss>", c.Get("a"));
  cache_l1_stats s = c.Stats();
  EXPECT_EQ(2u, s.hits);
  EXPECT_EQ(2u, s.misses);
  EXPECT_EQ(1u, s.invalidations);
  EXPECT_EQ(0u, s.entries);
  EXPECT_EQ(0u, s.bytes);
}

TEST(CacheL1, KeysAreBinarySafe) {
  L1 c(1000);
  std::string k1("a\0b", 3), k2("a\0c", 3);
  ASSERT_TRUE(c.Put(k1, "x"));
  ASSERT_TRUE(c.Put(k2, "y"));
  EXPECT_EQ("x", c.Get(k1));
  EXPECT_EQ("y", c.Get(k2));
}

TEST(CacheL1, EntryBoundEvictsTheLeastRecentlyUsed) {
  L1 c(3);  // fewer than 64 entries: one shard, exact LRU
  c.Put("a", "1");
  c.Put("b", "2");
  c.Put("c", "3");
  EXPECT_EQ("1", c.Get("a"));  // a is now the most recent; b the least
  c.Put("d", "4");
  EXPECT_EQ("<miss>", c.Get("b"));
  EXPECT_EQ("1", c.Get("a"));
  EXPECT_EQ("3", c.Get("c"));
  EXPECT_EQ("4", c.Get("d"));
  EXPECT_EQ(1u, c.Stats().evictions);
  EXPECT_EQ(3u, c.Stats().entries);
}

TEST(CacheL1, ByteBoundHoldsAndOversizeItemsAreNotKept) {
  L1 c(10, 8192);  // one shard of 8 KiB
  std::string v(1000, 'x');
  for (int i = 0; i < 10; i++) c.Put("k" + std::to_string(i), v);
  cache_l1_stats s = c.Stats();
  EXPECT_LE(s.bytes, 8192u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(v, c.Get("k9"));  // the newest survives
  EXPECT_EQ("<miss>", c.Get("k0"));
  EXPECT_FALSE(c.Put("big", std::string(9000, 'y')));
  EXPECT_EQ("<miss>", c.Get("big"));
  EXPECT_EQ(v, c.Get("k9"));  // refusing the big one evicted nothing
}

TEST(CacheL1, EntriesExpireWithTheirOwnTtlAndWithL1s) {
  L1 c(1000, 0, 150);  // L1 keeps nothing longer than 150 ms
  c.Put("short", "s", 60);
  c.Put("long", "l", 60000);
  EXPECT_EQ("s", c.Get("short"));
  test_clock.Advance(90);
  EXPECT_EQ("<miss>", c.Get("short"));  // its own TTL
  EXPECT_EQ("l", c.Get("long"));
  test_clock.Advance(100);
  EXPECT_EQ("<miss>", c.Get("long"));  // L1's TTL
  EXPECT_EQ(2u, c.Stats().expirations);
  EXPECT_FALSE(c.Put("past", "p", -5));  // already expired: not kept
}

TEST(CacheL1, StaleMarkDropsAPutAfterAnInvalidation) {
  L1 c(1000);
  uint64_t mark = cache_l1_mark(c.l1, "k", 1);
  cache_l1_delete(c.l1, "k", 1);  // an invalidation while "loading"
  cache_item* it = Item("old");
  EXPECT_EQ(0, cache_l1_put(c.l1, "k", 1, it, mark));
  EXPECT_EQ("<miss>", c.Get("k"));
  mark = cache_l1_mark(c.l1, "k", 1);
  EXPECT_EQ(1, cache_l1_put(c.l1, "k", 1, it, mark));
  cache_item_unref(it);
  EXPECT_EQ("old", c.Get("k"));
  mark = cache_l1_mark(c.l1, "k", 1);
  cache_l1_clear(c.l1);
  it = Item("new");
  EXPECT_EQ(0, cache_l1_put(c.l1, "k", 1, it, mark));
  cache_item_unref(it);
  EXPECT_EQ(0u, c.Stats().entries);
}

TEST(CacheL1, ZeroEntriesDisablesIt) {
  L1 c(0);
  EXPECT_FALSE(cache_l1_enabled(c.l1));
  EXPECT_FALSE(c.Put("a", "1"));
  EXPECT_EQ("<miss>", c.Get("a"));
}

TEST(CacheL1, ItemsOutliveTheirEviction) {
  L1 c(1);
  c.Put("a", "first");
  cache_item* held = cache_l1_get(c.l1, "a", 1);
  ASSERT_NE(nullptr, held);
  c.Put("b", "second");  // evicts a
  EXPECT_EQ("<miss>", c.Get("a"));
  EXPECT_EQ(0, memcmp(held->value, "first", 5));  // still valid: our reference
  cache_item_unref(held);
}

TEST(CacheL1, ConcurrentUseKeepsTheBounds) {
  L1 c(256, 64 * 1024);
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; t++)
    ts.emplace_back([&c, t] {
      for (int i = 0; i < 5000; i++) {
        std::string k = "k" + std::to_string((i * 7 + t) % 600);
        if (i % 3 == 0)
          c.Put(k, std::string(100 + i % 300, 'v'));
        else if (i % 11 == 0)
          cache_l1_delete(c.l1, k.data(), k.size());
        else
          c.Get(k);
      }
    });
  for (auto& t : ts) t.join();
  cache_l1_stats s = c.Stats();
  EXPECT_LE(s.entries, 256u + 16u);  // each shard rounds its share up
  EXPECT_LE(s.bytes, 64u * 1024u + 16u * 64u);
}

// ---- codec ----

TEST(CacheCodec, SlotKeysCannotCollideAcrossTenantsOwnersOrSlots) {
  arena* a = arena_create();
  size_t n1, n2, n3, n4;
  std::string k1 = cache_key_slot(a, "t1:o", "x", "k", 1, &n1);
  std::string k2 = cache_key_slot(a, "t1", "o:x", "k", 1, &n2);
  std::string k3 = cache_key_slot(a, "t1", nullptr, "k", 1, &n3);
  std::string k4 = cache_key_slot(a, "t1", "s", "k", 1, &n4);
  EXPECT_NE(k1, k2);
  EXPECT_NE(k2, k3);
  EXPECT_NE(k3, k4);
  EXPECT_EQ("memoryd:c:2:t1:s:k", k3);
  EXPECT_EQ("memoryd:c:2:t1:o1:s:k", k4);
  EXPECT_EQ(k3.size(), n3);
  size_t ne;
  EXPECT_EQ("memoryd:e:2:t1:id", std::string(cache_key_entity(a, "t1", "id", &ne)));
  arena_free(a);
}

TEST(CacheCodec, BlobRoundTripsAndLabelIsByteTwo) {
  arena* a = arena_create();
  std::string v("bin\0ary\xff", 8);
  cache_item* it = cache_item_create("bob", 3, v.data(), v.size(), 3, 1234567, 7654321);
  size_t len;
  uint8_t* b = cache_blob_encode(a, it, &len);
  ASSERT_NE(nullptr, b);
  EXPECT_EQ(3, b[2]);
  cache_item* back = cache_blob_decode(b, len);
  ASSERT_NE(nullptr, back);
  EXPECT_STREQ("bob", back->owner);
  EXPECT_EQ(3, back->label);
  EXPECT_EQ(1234567, back->created_ms);
  EXPECT_EQ(7654321, back->expire_ms);
  EXPECT_EQ(v, std::string(reinterpret_cast<const char*>(back->value), back->value_len));
  // Truncations and foreign bytes are refused, never read past the end.
  for (size_t n = 0; n < CACHE_HEADER_BYTES + 3; n++) EXPECT_EQ(nullptr, cache_blob_decode(b, n));
  b[0] = 'x';
  EXPECT_EQ(nullptr, cache_blob_decode(b, len));
  cache_item_unref(it);
  cache_item_unref(back);
  arena_free(a);
}

TEST(CacheCodec, InvalidationMessagesNameTheirReplica) {
  const char* me = "0123456789abcdef";
  char buf[64];
  size_t n = cache_inval_encode(me, "k:1", 3, buf);
  const char* key;
  size_t klen;
  EXPECT_EQ(1, cache_inval_decode(buf, n, me, &key, &klen));  // our own
  EXPECT_EQ(0, cache_inval_decode(buf, n, "fedcba9876543210", &key, &klen));
  EXPECT_EQ("k:1", std::string(key, klen));
  EXPECT_EQ(-1, cache_inval_decode("nonsense", 8, me, &key, &klen));
  EXPECT_EQ(-1, cache_inval_decode("0123456789abcdef ", 17, me, &key, &klen));  // no key
  EXPECT_EQ(-1, cache_inval_decode("0123456789ABCDEF k", 18, me, &key, &klen));
}

// ---- cache-aside ----

struct Loader {
  std::atomic<int> calls{0};
  int sleep_ms = 0;
  int rc = STATUS_OK;
  static int Load(void* arg, cache_item** out) {
    Loader* l = static_cast<Loader*>(arg);
    l->calls++;
    std::this_thread::sleep_for(std::chrono::milliseconds(l->sleep_ms));
    if (l->rc == STATUS_OK) *out = Item("loaded");
    return l->rc;
  }
};

int64_t MonoMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST(CacheAside, ConcurrentMissesLoadOnceThenL1Answers) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  Loader l;
  l.sleep_ms = 200;
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 16; i++)
    ts.emplace_back([&] {
      cache_item* it = nullptr;
      int from_l1;
      if (cache_aside_get(ca, "e1", 2, MonoMs() + 5000, Loader::Load, &l, &it, &from_l1) ==
              STATUS_OK &&
          it && memcmp(it->value, "loaded", 6) == 0)
        ok++;
      cache_item_unref(it);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(16, ok.load());
  EXPECT_EQ(1, l.calls.load());
  EXPECT_EQ(1u, cache_aside_loads(ca));
  cache_item* it = nullptr;
  int from_l1 = 0;
  EXPECT_EQ(STATUS_OK,
            cache_aside_get(ca, "e1", 2, MonoMs() + 1000, Loader::Load, &l, &it, &from_l1));
  EXPECT_EQ(1, from_l1);
  cache_item_unref(it);
  cache_aside_invalidate(ca, "e1", 2);
  EXPECT_EQ(STATUS_OK,
            cache_aside_get(ca, "e1", 2, MonoMs() + 1000, Loader::Load, &l, &it, &from_l1));
  EXPECT_EQ(0, from_l1);
  EXPECT_EQ(2, l.calls.load());
  cache_item_unref(it);
  cache_aside_free(ca);
}

TEST(CacheAside, NotFoundIsSharedAndNotCached) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  Loader l;
  l.rc = STATUS_ENOTFOUND;
  cache_item* it = nullptr;
  int from_l1;
  EXPECT_EQ(STATUS_ENOTFOUND,
            cache_aside_get(ca, "x", 1, MonoMs() + 1000, Loader::Load, &l, &it, &from_l1));
  EXPECT_EQ(nullptr, it);
  EXPECT_EQ(STATUS_ENOTFOUND,
            cache_aside_get(ca, "x", 1, MonoMs() + 1000, Loader::Load, &l, &it, &from_l1));
  EXPECT_EQ(2, l.calls.load());  // a later write must be seen: misses are not remembered
  cache_aside_free(ca);
}

TEST(CacheAside, ALoaderFailureIsItsOwnAndWaitersRetry) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  Loader failing;
  failing.sleep_ms = 150;
  failing.rc = -4;  // e.g. the leader's own timeout
  Loader good;
  std::thread leader([&] {
    cache_item* it = nullptr;
    int from_l1;
    EXPECT_EQ(-4,
              cache_aside_get(ca, "k", 1, MonoMs() + 5000, Loader::Load, &failing, &it, &from_l1));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  cache_item* it = nullptr;
  int from_l1;
  // Waits for the leader, sees it fail, loads itself.
  EXPECT_EQ(STATUS_OK,
            cache_aside_get(ca, "k", 1, MonoMs() + 5000, Loader::Load, &good, &it, &from_l1));
  leader.join();
  EXPECT_EQ(1, good.calls.load());
  cache_item_unref(it);
  cache_aside_free(ca);
}

TEST(CacheAside, AWaiterGivesUpAtItsDeadline) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  Loader slow;
  slow.sleep_ms = 500;
  std::thread leader([&] {
    cache_item* it = nullptr;
    int from_l1;
    cache_aside_get(ca, "k", 1, MonoMs() + 5000, Loader::Load, &slow, &it, &from_l1);
    cache_item_unref(it);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  cache_item* it = nullptr;
  int from_l1;
  int64_t t0 = MonoMs();
  EXPECT_EQ(STATUS_ETIMEOUT,
            cache_aside_get(ca, "k", 1, MonoMs() + 100, Loader::Load, &slow, &it, &from_l1));
  EXPECT_LT(MonoMs() - t0, 400);
  leader.join();
  cache_aside_free(ca);
}

}  // namespace
