// cache_l1, cache_codec and cache_aside: the in-process level's bounds,
// TTLs, LRU order and invalidation marks; the Redis value and key formats;
// get-or-load with single flight.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
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

// An erasure's flush: every value under a prefix (and, with an owner,
// only that owner's), absent markers with them; a dry run counts and
// removes nothing; a put whose mark predates the flush is dropped.
TEST(CacheL1, EraseRemovesAPrefixsValuesOrAnOwnersAmongThem) {
  L1 c(1000);
  ASSERT_TRUE(c.Put("t1:a", "1"));
  ASSERT_TRUE(c.Put("t1:b", "2"));
  ASSERT_TRUE(c.Put("t2:a", "3"));
  cache_item* bobs = Item("4", 60000, 1, "bob");
  ASSERT_EQ(1, cache_l1_put(c.l1, "t1:c", 4, bobs, CACHE_L1_UNCONDITIONAL));
  cache_item_unref(bobs);
  cache_item* absent = cache_item_absent(WallMs() + 60000);
  ASSERT_EQ(1, cache_l1_put(c.l1, "t1:d", 4, absent, CACHE_L1_UNCONDITIONAL));
  cache_item_unref(absent);
  uint64_t mark = cache_l1_mark(c.l1, "t1:e", 4);

  EXPECT_EQ(1u, cache_l1_erase(c.l1, "t1:", 3, "bob", 1));  // dry run: counted only
  EXPECT_EQ("4", c.Get("t1:c"));
  EXPECT_EQ(1u, cache_l1_erase(c.l1, "t1:", 3, "bob", 0));
  EXPECT_EQ("<miss>", c.Get("t1:c"));
  EXPECT_EQ("1", c.Get("t1:a"));  // alice's stay
  EXPECT_EQ(2u, cache_l1_erase(c.l1, "t1:", 3, nullptr, 0));
  EXPECT_EQ("<miss>", c.Get("t1:a"));
  EXPECT_EQ("<miss>", c.Get("t1:b"));
  EXPECT_EQ("<miss>", c.Get("t1:d"));  // the marker went too, uncounted
  EXPECT_EQ("3", c.Get("t2:a"));       // another prefix stays
  cache_item* late = Item("5");
  EXPECT_EQ(0, cache_l1_put(c.l1, "t1:e", 4, late, mark));  // loaded before the flush
  cache_item_unref(late);
}

TEST(CacheCodec, PrefixInvalidationsSayTheyAreOne) {
  const char* me = "0123456789abcdef";
  char buf[64];
  size_t n = cache_inval_encode_prefix(me, "memoryd:c:2:t1:", 15, buf);
  const char* key;
  size_t klen;
  EXPECT_EQ(1, cache_inval_decode(buf, n, me, &key, &klen));  // our own
  EXPECT_EQ(2, cache_inval_decode(buf, n, "fedcba9876543210", &key, &klen));
  EXPECT_EQ("memoryd:c:2:t1:", std::string(key, klen));
  EXPECT_EQ(-1, cache_inval_decode("0123456789abcdef+k", 18, me, &key, &klen));
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

// One caller of cache_aside_fetch: what it was answered, and the loads it
// was asked to start (the test ends them with cache_aside_loaded).
struct Caller {
  cache_aside_wait w{};
  int starts = 0;
  cache_aside_flight* flight = nullptr;
  std::atomic<int> answers{0};
  int rc = 1;
  std::string value;
  explicit Caller(const char* key) {
    w.key = key;
    w.klen = strlen(key);
    w.start = Start;
    w.start_arg = this;
    w.done = Done;
    w.done_arg = this;
  }
  static void Start(void* arg, cache_aside_flight* fl) {
    auto* c = static_cast<Caller*>(arg);
    c->starts++;
    c->flight = fl;
  }
  static void Done(void* arg, int rc, cache_item* it) {
    auto* c = static_cast<Caller*>(arg);
    c->answers++;
    c->rc = rc;
    if (it) c->value.assign(reinterpret_cast<const char*>(it->value), it->value_len);
    cache_item_unref(it);
  }
};

TEST(CacheAside, ConcurrentMissesLoadOnceThenL1Answers) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  std::vector<std::unique_ptr<Caller>> callers;
  for (int i = 0; i < 16; i++) {
    callers.push_back(std::make_unique<Caller>("e1"));
    cache_item* it = nullptr;
    EXPECT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &callers.back()->w, &it));
    EXPECT_EQ(nullptr, it);
  }
  // The first caller loads; nobody is answered before the load ends.
  EXPECT_EQ(1, callers[0]->starts);
  for (int i = 1; i < 16; i++) EXPECT_EQ(0, callers[i]->starts);
  for (auto& k : callers) EXPECT_EQ(0, k->answers);
  EXPECT_EQ(1u, cache_aside_loads(ca));
  cache_aside_loaded(ca, callers[0]->flight, STATUS_OK, Item("loaded"));
  for (auto& k : callers) {
    EXPECT_EQ(1, k->answers);
    EXPECT_EQ(STATUS_OK, k->rc);
    EXPECT_EQ("loaded", k->value);
  }
  // Now in L1: answered at once, no load.
  Caller hit("e1");
  cache_item* it = nullptr;
  EXPECT_EQ(STATUS_OK, cache_aside_fetch(ca, &hit.w, &it));
  ASSERT_NE(nullptr, it);
  EXPECT_EQ(0, memcmp(it->value, "loaded", 6));
  cache_item_unref(it);
  EXPECT_EQ(0, hit.starts + hit.answers);
  // After an invalidation the next caller loads again.
  cache_aside_invalidate(ca, "e1", 2);
  Caller again("e1");
  EXPECT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &again.w, &it));
  EXPECT_EQ(1, again.starts);
  EXPECT_EQ(2u, cache_aside_loads(ca));
  cache_aside_loaded(ca, again.flight, STATUS_OK, Item("reloaded"));
  EXPECT_EQ("reloaded", again.value);
  cache_aside_free(ca);
}

TEST(CacheAside, AnInvalidationDuringTheLoadKeepsTheLoadedCopyOutOfL1) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  Caller a("k");
  cache_item* it = nullptr;
  ASSERT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &a.w, &it));
  cache_aside_invalidate(ca, "k", 1);  // a write committed while it loaded
  cache_aside_loaded(ca, a.flight, STATUS_OK, Item("stale?"));
  EXPECT_EQ(STATUS_OK, a.rc);  // the loader's own answer stands
  EXPECT_EQ("<miss>", c.Get("k"));
  cache_aside_free(ca);
}

TEST(CacheAside, NotFoundIsSharedAndNotCached) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  Caller a("x"), b("x");
  cache_item* it = nullptr;
  EXPECT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &a.w, &it));
  EXPECT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &b.w, &it));
  cache_aside_loaded(ca, a.flight, STATUS_ENOTFOUND, nullptr);
  EXPECT_EQ(STATUS_ENOTFOUND, a.rc);
  EXPECT_EQ(STATUS_ENOTFOUND, b.rc);
  // A later write must be seen: misses are not remembered.
  Caller later("x");
  EXPECT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &later.w, &it));
  EXPECT_EQ(1, later.starts);
  cache_aside_loaded(ca, later.flight, STATUS_ENOTFOUND, nullptr);
  cache_aside_free(ca);
}

TEST(CacheAside, ALoaderFailureIsItsOwnAndWaitersRetry) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  Caller leader("k"), w1("k"), w2("k");
  cache_item* it = nullptr;
  ASSERT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &leader.w, &it));
  ASSERT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &w1.w, &it));
  ASSERT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &w2.w, &it));
  cache_aside_loaded(ca, leader.flight, STATUS_ETIMEOUT, nullptr);  // e.g. its deadline
  EXPECT_EQ(1, leader.answers);
  EXPECT_EQ(STATUS_ETIMEOUT, leader.rc);
  // Exactly one waiter loads anew; the other waits on it.
  EXPECT_EQ(0, w1.answers + w2.answers);
  EXPECT_EQ(1, w1.starts + w2.starts);
  EXPECT_EQ(2u, cache_aside_loads(ca));
  Caller* next = w1.starts ? &w1 : &w2;
  cache_aside_loaded(ca, next->flight, STATUS_OK, Item("second try"));
  EXPECT_EQ("second try", w1.value);
  EXPECT_EQ("second try", w2.value);
  EXPECT_EQ(1, w1.answers);
  EXPECT_EQ(1, w2.answers);
  cache_aside_free(ca);
}

TEST(CacheAside, AWaiterThatLeavesIsNeverAnsweredAndTheLoaderIsToldToCancel) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  Caller leader("k"), waiter("k"), early("k");
  cache_item* it = nullptr;
  ASSERT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &leader.w, &it));
  ASSERT_EQ(CACHE_ASIDE_PENDING, cache_aside_fetch(ca, &waiter.w, &it));
  EXPECT_EQ(CACHE_ASIDE_LEFT, cache_aside_cancel(ca, &waiter.w));
  EXPECT_EQ(CACHE_ASIDE_LOADING, cache_aside_cancel(ca, &leader.w));
  // A cancel before the fetch: the fetch reports it and joins nothing.
  EXPECT_EQ(0, cache_aside_cancel(ca, &early.w));
  EXPECT_EQ(STATUS_ECANCELLED, cache_aside_fetch(ca, &early.w, &it));
  cache_aside_loaded(ca, leader.flight, STATUS_ECANCELLED, nullptr);
  EXPECT_EQ(STATUS_ECANCELLED, leader.rc);
  EXPECT_EQ(0, waiter.answers);
  EXPECT_EQ(0, waiter.starts);  // it left: not asked to load anew either
  EXPECT_EQ(0, early.answers + early.starts);
  EXPECT_EQ(0, cache_aside_cancel(ca, &leader.w));  // answered: nothing to do
  cache_aside_free(ca);
}

// Loads ending on other threads while callers keep arriving: every caller
// is answered exactly once, and with the loaded value.
TEST(CacheAside, LoadsEndingOnAnotherThreadAnswerEveryCallerOnce) {
  L1 c(1000);
  cache_aside* ca = cache_aside_create(c.l1, nullptr);
  std::mutex mu;
  std::vector<cache_aside_flight*> flights;
  struct Threaded : Caller {
    std::mutex* mu;
    std::vector<cache_aside_flight*>* flights;
    Threaded(std::mutex* m, std::vector<cache_aside_flight*>* f) : Caller("t"), mu(m), flights(f) {
      w.start = StartT;
    }
    static void StartT(void* arg, cache_aside_flight* fl) {
      auto* t = static_cast<Threaded*>(arg);
      std::lock_guard<std::mutex> g(*t->mu);
      t->flights->push_back(fl);
    }
  };
  std::vector<std::unique_ptr<Threaded>> callers;
  for (int i = 0; i < 200; i++) callers.push_back(std::make_unique<Threaded>(&mu, &flights));
  std::atomic<bool> stop{false};
  std::thread loader([&] {
    while (!stop.load()) {
      cache_aside_flight* fl = nullptr;
      {
        std::lock_guard<std::mutex> g(mu);
        if (!flights.empty()) {
          fl = flights.back();
          flights.pop_back();
        }
      }
      if (fl) {
        cache_aside_loaded(ca, fl, STATUS_OK, Item("v"));
        cache_aside_invalidate(ca, "t", 1);
      } else {
        std::this_thread::yield();
      }
    }
  });
  for (auto& k : callers) {
    cache_item* it = nullptr;
    int rc = cache_aside_fetch(ca, &k->w, &it);
    if (rc == STATUS_OK) {  // an L1 hit: counts as its answer
      k->answers++;
      k->value = "v";
      cache_item_unref(it);
    } else {
      ASSERT_EQ(CACHE_ASIDE_PENDING, rc);
    }
  }
  for (int i = 0; i < 500; i++) {
    bool all = true;
    for (auto& k : callers) all = all && k->answers == 1;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  loader.join();
  for (auto& k : callers) {
    EXPECT_EQ(1, k->answers);
    EXPECT_EQ("v", k->value);
  }
  cache_aside_free(ca);
}

}  // namespace
