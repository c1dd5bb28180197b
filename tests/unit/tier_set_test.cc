// tier_set: the tier table turns what each tier's descriptor declares about
// its records (tier.records) into the environment's erasers, in their
// declared order whatever the table's order, each with its tier's state,
// complete for every tier opened after them (Privacy's place in the table).
// A stub tier here is what a new record-keeping tier adds: its folder's
// descriptor and one line in the table.
#include <gtest/gtest.h>

#include <string>
#include <vector>

extern "C" {
#include "memory/v1/common.pb-c.h"
#include "service/tier/tier.h"
}

namespace {

int stub_erase(void*, tier_ctx*, const tier_erase_sel*, int64_t* count) {
  *count = 0;
  return STATUS_OK;
}

int stub_export(void*, tier_ctx*, const tier_erase_sel*, tier_export_emit, void*) {
  return STATUS_OK;
}

// Each stub tier's state is one int: its number.
int stub_open(tier_env*, void** state, char* err, size_t errlen) {
  static int next = 0;
  int* n = static_cast<int*>(tier_state_new(sizeof(int), err, errlen));
  if (!n) return -1;
  *n = ++next;
  *state = n;
  return 0;
}

// The last tier, as Privacy: what it sees of the erasers when it opens.
std::vector<std::string> seen_at_last_open;
const tier_env* last_env = nullptr;
int last_open(tier_env* env, void** state, char* err, size_t errlen) {
  seen_at_last_open.clear();
  for (size_t i = 0; i < env->nerasers; i++) seen_at_last_open.push_back(env->erasers[i].name);
  last_env = env;
  return stub_open(env, state, err, errlen);
}

// Counts under L2 when the state says so (the cache's rule).
int counts_tier(const void* state) {
  return *static_cast<const int*>(state) > 0 ? MEMORY__V1__TIER__TIER_CACHE_L2
                                             : MEMORY__V1__TIER__TIER_CACHE_L1;
}

const tier_service no_services[] = {{"memory.v1.Stub", 0}};
const rpc_method* const no_methods = nullptr;

// What each stub declares (as a C tier does with TIER_RECORDS).
tier_records records(int tier_value, int order, const char* const* tables,
                     int (*tier_of)(const void*) = nullptr) {
  tier_records r = {};
  r.tier = tier_value;
  r.tier_of = tier_of;
  r.order = order;
  r.erase = stub_erase;
  r.exporter = tables ? stub_export : nullptr;
  r.tables = tables;
  return r;
}
const char* const a_tables[] = {"a_items", "a_links", nullptr};
const char* const b_tables[] = {"b_items", nullptr};
const char* const c_tables[] = {"c_items", nullptr};
const tier_records copies_records = records(0, TIER_ORDER_COPIES, nullptr, counts_tier);
const tier_records store_a = records(MEMORY__V1__TIER__TIER_GLOBAL, TIER_ORDER_RECORDS, a_tables);
const tier_records store_b =
    records(MEMORY__V1__TIER__TIER_ENTRIES, TIER_ORDER_RECORDS + 20, b_tables);
const tier_records store_c =
    records(MEMORY__V1__TIER__TIER_WORKING, TIER_ORDER_RECORDS + 20, c_tables);

tier make(const char* name, const tier_records* records,
          int (*open)(tier_env*, void**, char*, size_t) = stub_open) {
  tier t = {};
  t.name = name;
  t.services = no_services;
  t.nservices = 1;
  t.methods = no_methods;
  t.nmethods = 0;
  t.open = open;
  t.free = free;
  t.records = records;
  return t;
}

TEST(TierSetTest, ErasersFollowTheDeclaredOrderAndCarryTheirTiersState) {
  // The table's order: the cache first (others use what it offers), a tier
  // without records, then the stores in another order than their erasure's.
  tier cache = make("cache", &copies_records), plain = make("plain", nullptr),
       b = make("b", &store_b), c = make("c", &store_c), a = make("a", &store_a),
       last = make("last", nullptr, last_open);
  const tier* const table[] = {&cache, &plain, &b, &c, &a, &last};
  tier_env env = {};
  tier_set* set = nullptr;
  char err[256] = "";
  ASSERT_EQ(0, tier_set_open(table, 6, &env, nullptr, &set, err, sizeof err)) << err;

  // Every record-keeping tier before the last is there when it opens, in
  // order: a (10), then b and c (30, the table's order between them), then
  // the cache's copies (90).
  EXPECT_EQ((std::vector<std::string>{"a", "b", "c", "cache"}), seen_at_last_open);
  ASSERT_NE(nullptr, last_env);
  ASSERT_EQ(4u, last_env->nerasers);
  const tier_eraser* e = last_env->erasers;
  EXPECT_EQ(MEMORY__V1__TIER__TIER_GLOBAL, e[0].tier);
  EXPECT_EQ(MEMORY__V1__TIER__TIER_ENTRIES, e[1].tier);
  EXPECT_EQ(MEMORY__V1__TIER__TIER_WORKING, e[2].tier);
  // The cache's state was the first opened (1 > 0): its counts go under L2.
  EXPECT_EQ(MEMORY__V1__TIER__TIER_CACHE_L2, e[3].tier);
  EXPECT_EQ(1, *static_cast<const int*>(e[3].state));
  EXPECT_EQ(nullptr, e[3].r->exporter);
  EXPECT_EQ(nullptr, e[3].r->tables);
  EXPECT_STREQ("a_items", e[0].r->tables[0]);
  EXPECT_STREQ("a_links", e[0].r->tables[1]);
  EXPECT_EQ(nullptr, e[0].r->tables[2]);
  EXPECT_STREQ("b_items", e[1].r->tables[0]);
  EXPECT_EQ(nullptr, e[1].r->tables[1]);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(&stub_erase, e[i].r->erase) << i;
    EXPECT_EQ(&stub_export, e[i].r->exporter) << i;
    EXPECT_NE(nullptr, e[i].state) << i;
  }
  // Each eraser carries the state its own tier opened: a opened fifth.
  EXPECT_EQ(*static_cast<const int*>(e[3].state) + 4, *static_cast<const int*>(e[0].state));
  tier_set_free(set);
}

TEST(TierSetTest, ATierTableWithNoRecordKeepingTierHasNoErasers) {
  tier plain = make("plain", nullptr), last = make("last", nullptr, last_open);
  const tier* const table[] = {&plain, &last};
  tier_env env = {};
  tier_set* set = nullptr;
  char err[256] = "";
  ASSERT_EQ(0, tier_set_open(table, 2, &env, nullptr, &set, err, sizeof err)) << err;
  EXPECT_TRUE(seen_at_last_open.empty());
  EXPECT_EQ(0u, last_env->nerasers);
  tier_set_free(set);
}

}  // namespace
