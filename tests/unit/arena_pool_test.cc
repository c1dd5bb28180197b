// arena_pool: arenas come back reset, the pool stays bounded, and it is safe
// to use from many threads at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

extern "C" {
#include "service/core/arena_pool.h"
}

namespace {

TEST(ArenaPoolTest, ReturnedArenaIsReusedAndEmpty) {
  arena_pool* p = arena_pool_create(4);
  ASSERT_NE(nullptr, p);
  arena* a = arena_pool_get(p);
  ASSERT_NE(nullptr, a);
  ASSERT_NE(nullptr, arena_alloc(a, 100000));  // spills into an extra block
  EXPECT_GE(arena_used(a), 100000u);
  arena_pool_put(p, a);
  arena* again = arena_pool_get(p);
  EXPECT_EQ(a, again);
  EXPECT_EQ(0u, arena_used(again));
  char* s = arena_strdup(again, "still works");
  EXPECT_STREQ("still works", s);
  arena_pool_put(p, again);
  arena_pool_free(p);
}

TEST(ArenaPoolTest, KeepsAtMostMaxIdleArenas) {
  arena_pool* p = arena_pool_create(2);
  std::vector<arena*> out;
  for (int i = 0; i < 5; i++) out.push_back(arena_pool_get(p));
  for (arena* a : out) arena_pool_put(p, a);  // three of them are freed (ASan checks)
  arena* a1 = arena_pool_get(p);
  arena* a2 = arena_pool_get(p);
  arena* fresh = arena_pool_get(p);
  // The two kept are among the returned ones; the third is new.
  EXPECT_NE(out.end(), std::find(out.begin(), out.end(), a1));
  EXPECT_NE(out.end(), std::find(out.begin(), out.end(), a2));
  arena_pool_put(p, a1);
  arena_pool_put(p, a2);
  arena_pool_put(p, fresh);
  arena_pool_free(p);
}

TEST(ArenaPoolTest, ConcurrentGetAndPutKeepArenasPrivate) {
  arena_pool* p = arena_pool_create(8);
  std::vector<std::thread> threads;
  std::atomic<int> corrupt{0};
  for (int t = 0; t < 8; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; i++) {
        arena* a = arena_pool_get(p);
        char* buf = static_cast<char*>(arena_alloc(a, 64));
        memset(buf, 'a' + t, 64);
        for (int k = 0; k < 64; k++)
          if (buf[k] != 'a' + t) corrupt++;
        arena_pool_put(p, a);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(0, corrupt.load());
  arena_pool_free(p);
}

TEST(ArenaPoolTest, FreeAndPutAcceptNull) {
  arena_pool_free(nullptr);
  arena_pool* p = arena_pool_create(1);
  arena_pool_put(p, nullptr);
  arena_pool_free(p);
}

}  // namespace
