// arena: 16-byte aligned bump allocation across blocks, big allocations in
// blocks of their own, string helpers, reset, and the protobuf-c allocator.
#include <gtest/gtest.h>
#include <stdint.h>
#include <string.h>

#include <string>
#include <vector>

extern "C" {
#include "grpc/health/v1/health.pb-c.h"
#include "service/core/arena.h"
}

namespace {

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

class ArenaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = arena_create();
    ASSERT_NE(nullptr, a_);
  }
  void TearDown() override { arena_free(a_); }
  arena* a_ = nullptr;
};

TEST_F(ArenaTest, EveryAllocationIsSixteenByteAligned) {
  for (size_t size = 0; size < 300; size++) {
    void* p = arena_alloc(a_, size);
    ASSERT_NE(nullptr, p) << size;
    EXPECT_TRUE(Aligned16(p)) << "size " << size << " -> " << p;
  }
  for (size_t size : {2047u, 2048u, 2049u, 5000u, 8192u, 9000u, 100000u}) {
    void* p = arena_alloc(a_, size);
    ASSERT_NE(nullptr, p) << size;
    EXPECT_TRUE(Aligned16(p)) << "size " << size;
  }
  EXPECT_TRUE(Aligned16(arena_zalloc(a_, 3)));
  EXPECT_TRUE(Aligned16(arena_strdup(a_, "abc")));
  EXPECT_TRUE(Aligned16(arena_strndup(a_, "abcdef", 2)));
  EXPECT_TRUE(Aligned16(arena_printf(a_, "%d", 7)));
}

TEST_F(ArenaTest, ManySmallAllocationsAcrossBlocksKeepTheirContents) {
  struct Chunk {
    unsigned char* p;
    size_t n;
  };
  std::vector<Chunk> chunks;
  size_t requested = 0;
  // Well over a dozen 8 KiB blocks' worth.
  for (size_t i = 0; i < 5000; i++) {
    size_t n = 1 + (i * 37) % 120;
    auto* p = static_cast<unsigned char*>(arena_alloc(a_, n));
    ASSERT_NE(nullptr, p);
    memset(p, static_cast<int>(i & 0xff), n);
    chunks.push_back({p, n});
    requested += n;
  }
  for (size_t i = 0; i < chunks.size(); i++) {
    for (size_t k = 0; k < chunks[i].n; k++) {
      ASSERT_EQ(static_cast<unsigned char>(i & 0xff), chunks[i].p[k])
          << "chunk " << i << " byte " << k << " was overwritten";
    }
  }
  EXPECT_GE(arena_used(a_), requested);
}

TEST_F(ArenaTest, LargeAllocationWorksAndSmallOnesStillWorkAfterIt) {
  auto* small1 = static_cast<char*>(arena_alloc(a_, 100));
  ASSERT_NE(nullptr, small1);
  memset(small1, 'a', 100);

  const size_t big_n = 1 << 20;  // far beyond one block
  auto* big = static_cast<unsigned char*>(arena_alloc(a_, big_n));
  ASSERT_NE(nullptr, big);
  for (size_t i = 0; i < big_n; i++) big[i] = static_cast<unsigned char>(i * 7);

  std::vector<char*> after;
  for (int i = 0; i < 500; i++) {
    auto* p = static_cast<char*>(arena_alloc(a_, 64));
    ASSERT_NE(nullptr, p);
    memset(p, 'A' + i % 26, 64);
    after.push_back(p);
  }
  for (size_t i = 0; i < 100; i++) ASSERT_EQ('a', small1[i]);
  for (size_t i = 0; i < big_n; i++)
    ASSERT_EQ(static_cast<unsigned char>(i * 7), big[i]) << "big byte " << i;
  for (int i = 0; i < 500; i++)
    for (int k = 0; k < 64; k++) ASSERT_EQ('A' + i % 26, after[i][k]);
  EXPECT_GE(arena_used(a_), big_n + 100 + 500 * 64);
}

TEST_F(ArenaTest, MediumAllocationsBetweenQuarterAndFullBlockKeepContents) {
  // Requests just above a quarter block and up to a full block take the
  // "own block" path while small ones keep bumping the current block.
  std::vector<std::pair<unsigned char*, size_t>> chunks;
  for (size_t i = 0; i < 200; i++) {
    size_t n = (i % 2) ? 2049 + i * 31 : 24;
    auto* p = static_cast<unsigned char*>(arena_alloc(a_, n));
    ASSERT_NE(nullptr, p);
    memset(p, static_cast<int>(i), n);
    chunks.emplace_back(p, n);
  }
  for (size_t i = 0; i < chunks.size(); i++)
    for (size_t k = 0; k < chunks[i].second; k++)
      ASSERT_EQ(static_cast<unsigned char>(i), chunks[i].first[k]) << i << "/" << k;
}

TEST_F(ArenaTest, ZeroSizeAllocationReturnsDistinctPointers) {
  void* p = arena_alloc(a_, 0);
  void* q = arena_alloc(a_, 0);
  ASSERT_NE(nullptr, p);
  ASSERT_NE(nullptr, q);
  EXPECT_NE(p, q);
}

TEST_F(ArenaTest, ImpossibleSizeReturnsNull) {
  EXPECT_EQ(nullptr, arena_alloc(a_, SIZE_MAX));
  EXPECT_EQ(nullptr, arena_alloc(a_, SIZE_MAX / 2 + 1));
  // The arena stays usable.
  EXPECT_STREQ("ok", arena_strdup(a_, "ok"));
}

TEST_F(ArenaTest, ZallocZeroFillsEvenReusedMemory) {
  auto* p = static_cast<unsigned char*>(arena_alloc(a_, 512));
  ASSERT_NE(nullptr, p);
  memset(p, 0xab, 512);
  arena_reset(a_);
  auto* z = static_cast<unsigned char*>(arena_zalloc(a_, 512));
  ASSERT_NE(nullptr, z);
  for (size_t i = 0; i < 512; i++) ASSERT_EQ(0, z[i]) << i;
}

TEST_F(ArenaTest, StrdupCopiesTheString) {
  char src[] = "hello, arena";
  char* s = arena_strdup(a_, src);
  ASSERT_NE(nullptr, s);
  EXPECT_NE(src, s);
  src[0] = 'J';
  EXPECT_STREQ("hello, arena", s);
  EXPECT_STREQ("", arena_strdup(a_, ""));
}

TEST_F(ArenaTest, StrndupCopiesNBytesAndTerminates) {
  char* s = arena_strndup(a_, "hello world", 5);
  ASSERT_NE(nullptr, s);
  EXPECT_STREQ("hello", s);
  EXPECT_EQ('\0', s[5]);
  // Bytes, not a C string: an embedded NUL is copied through.
  const char bin[] = {'a', '\0', 'b'};
  char* b = arena_strndup(a_, bin, 3);
  ASSERT_NE(nullptr, b);
  EXPECT_EQ(0, memcmp(bin, b, 3));
  EXPECT_EQ('\0', b[3]);
  EXPECT_STREQ("", arena_strndup(a_, "xyz", 0));
}

TEST_F(ArenaTest, PrintfFormatsIntoTheArena) {
  char* s = arena_printf(a_, "%s-%d-%05.1f-%llu", "x", 42, 3.14159, 18446744073709551615ull);
  ASSERT_NE(nullptr, s);
  EXPECT_STREQ("x-42-003.1-18446744073709551615", s);
  EXPECT_STREQ("", arena_printf(a_, "%s", ""));
}

TEST_F(ArenaTest, PrintfLongerThanABlockIsComplete) {
  std::string big(20000, 'q');
  char* s = arena_printf(a_, "<%s>", big.c_str());
  ASSERT_NE(nullptr, s);
  EXPECT_EQ("<" + big + ">", std::string(s));
}

TEST_F(ArenaTest, ResetDropsAllocationsAndArenaKeepsWorking) {
  for (int i = 0; i < 2000; i++) ASSERT_NE(nullptr, arena_alloc(a_, 100));
  ASSERT_NE(nullptr, arena_alloc(a_, 50000));
  ASSERT_GT(arena_used(a_), 0u);
  arena_reset(a_);
  EXPECT_EQ(0u, arena_used(a_));
  for (int round = 0; round < 3; round++) {
    std::vector<char*> strs;
    for (int i = 0; i < 1000; i++) {
      strs.push_back(arena_printf(a_, "round %d item %d", round, i));
      ASSERT_NE(nullptr, strs.back());
    }
    void* big = arena_alloc(a_, 40000);
    ASSERT_NE(nullptr, big);
    memset(big, 0x5a, 40000);
    for (int i = 0; i < 1000; i++) {
      char want[64];
      snprintf(want, sizeof want, "round %d item %d", round, i);
      ASSERT_STREQ(want, strs[i]);
    }
    arena_reset(a_);
    EXPECT_EQ(0u, arena_used(a_));
  }
}

TEST_F(ArenaTest, ProtobufAllocatorUnpacksAMessage) {
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  char service[] = "memory.v1.GlobalMemory";
  req.service = service;
  size_t len = grpc__health__v1__health_check_request__get_packed_size(&req);
  std::vector<uint8_t> buf(len);
  ASSERT_EQ(len, grpc__health__v1__health_check_request__pack(&req, buf.data()));

  size_t before = arena_used(a_);
  ProtobufCAllocator* alloc = arena_protobuf_allocator(a_);
  ASSERT_NE(nullptr, alloc);
  Grpc__Health__V1__HealthCheckRequest* got =
      grpc__health__v1__health_check_request__unpack(alloc, len, buf.data());
  ASSERT_NE(nullptr, got);
  ASSERT_NE(nullptr, got->service);
  EXPECT_STREQ("memory.v1.GlobalMemory", got->service);
  EXPECT_NE(service, got->service);
  // The decoded message lives in the arena.
  EXPECT_GT(arena_used(a_), before);
  // Freeing through the arena allocator is a no-op; the arena owns it all
  // (ASan reports a leak or double free otherwise).
  grpc__health__v1__health_check_request__free_unpacked(got, alloc);
}

TEST_F(ArenaTest, ProtobufAllocatorSurvivesMalformedInput) {
  // Field 1 (string) claims 100 bytes but 3 follow.
  const uint8_t bad[] = {0x0a, 0x64, 'a', 'b', 'c'};
  ProtobufCAllocator* alloc = arena_protobuf_allocator(a_);
  EXPECT_EQ(nullptr, grpc__health__v1__health_check_request__unpack(alloc, sizeof bad, bad));
  // Still usable afterwards.
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  char service[] = "x";
  req.service = service;
  uint8_t buf[16];
  size_t len = grpc__health__v1__health_check_request__pack(&req, buf);
  auto* got = grpc__health__v1__health_check_request__unpack(alloc, len, buf);
  ASSERT_NE(nullptr, got);
  EXPECT_STREQ("x", got->service);
}

// A limited arena refuses what would take it past the limit, big blocks
// and small ones alike, says so, and forgets it (not the limit) on reset.
TEST_F(ArenaTest, LimitRefusesAllocationsPastItUntilReset) {
  arena_set_limit(a_, 64 * 1024);
  EXPECT_FALSE(arena_over_limit(a_));
  EXPECT_NE(nullptr, arena_alloc(a_, 40 * 1024));
  EXPECT_EQ(nullptr, arena_alloc(a_, 40 * 1024));
  EXPECT_TRUE(arena_over_limit(a_));
  arena_reset(a_);
  EXPECT_FALSE(arena_over_limit(a_));
  int small = 0;
  while (arena_alloc(a_, 100) != nullptr && small < 100000) small++;
  EXPECT_TRUE(arena_over_limit(a_));
  EXPECT_GT(small * 100, 48 * 1024);  // most of the limit was usable
  EXPECT_LE(small * 100, 64 * 1024);
  arena_set_limit(a_, 0);  // no limit again
  EXPECT_NE(nullptr, arena_alloc(a_, 1 << 20));
}

TEST(ArenaFreeTest, AcceptsNull) {
  arena_free(nullptr);
  SUCCEED();
}

TEST(ArenaFreeTest, FreesArenaWithManyBlocks) {
  // Leak-checked under ASan: every extra block must be released.
  arena* a = arena_create();
  ASSERT_NE(nullptr, a);
  for (int i = 0; i < 100; i++) ASSERT_NE(nullptr, arena_alloc(a, 3000));
  for (int i = 0; i < 5000; i++) ASSERT_NE(nullptr, arena_alloc(a, 40));
  arena_free(a);
}

}  // namespace
