// episodic_index: exact search checked against a plain brute-force
// reference on random data for every distance, the id hash kept right
// through many puts and removes (backward-shift deletion), thresholds and
// the accept callback; point ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "service/episodic/episodic_index.h"
#include "service/lexical/lex_text.h"
}

namespace {

vs_id Num(uint64_t n) {
  vs_id id{};
  id.num = n;
  return id;
}

tier_meta Meta(const char* owner = "o") {
  tier_meta m{};
  m.owner = owner;
  m.label = 1;
  m.version = 1;
  return m;
}

struct Ref {
  uint64_t id;
  float score;
};

// Best first, ties by id: the reference ordering.
std::vector<Ref> Reference(int distance, const std::map<uint64_t, std::vector<float>>& pts,
                           const std::vector<float>& q, size_t k) {
  std::vector<Ref> all;
  for (const auto& [id, v] : pts) {
    double s = 0;
    for (size_t i = 0; i < q.size(); i++)
      s += distance == VS_EUCLID ? (v[i] - q[i]) * (v[i] - q[i]) : double(v[i]) * q[i];
    all.push_back({id, float(distance == VS_EUCLID ? -std::sqrt(s) : s)});
  }
  std::sort(all.begin(), all.end(), [](const Ref& a, const Ref& b) {
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  });
  if (all.size() > k) all.resize(k);
  for (auto& r : all)
    if (distance == VS_EUCLID) r.score = -r.score;
  return all;
}

class IndexTest : public ::testing::TestWithParam<int> {};

TEST_P(IndexTest, SearchAgreesWithBruteForceThroughPutsAndRemoves) {
  const int distance = GetParam(), dims = 37;  // not a multiple of the 16 lanes
  std::mt19937 rng(7);
  std::normal_distribution<float> g;
  episodic_index* x = episodic_index_create(dims, distance);
  ASSERT_NE(nullptr, x);
  std::map<uint64_t, std::vector<float>> ref;
  tier_meta m = Meta();
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 3000; i++) {
      uint64_t id = rng() % 5000;
      std::vector<float> v(dims);
      for (auto& f : v) f = g(rng);
      vs_id vid = Num(id);
      ASSERT_EQ(0, episodic_index_put(x, &vid, v.data(), nullptr, nullptr, nullptr, &m));
      if (distance == VS_COSINE) episodic_index_normalize(v.data(), dims);
      ref[id] = v;
    }
    for (int i = 0; i < 1500; i++) {
      uint64_t id = rng() % 5000;
      vs_id vid = Num(id);
      EXPECT_EQ(ref.erase(id) ? 0 : -1, episodic_index_remove(x, &vid));
    }
    ASSERT_EQ(ref.size(), episodic_index_count(x));
    for (const auto& [id, v] : ref) {
      vs_id vid = Num(id);
      long slot = episodic_index_find(x, &vid);
      ASSERT_GE(slot, 0) << id;
      EXPECT_EQ(id, episodic_index_id(x, size_t(slot))->num);
      EXPECT_EQ(0, memcmp(v.data(), episodic_index_vector(x, size_t(slot)), dims * sizeof(float)));
    }
    for (int t = 0; t < 5; t++) {
      std::vector<float> q(dims);
      for (auto& f : q) f = g(rng);
      if (distance == VS_COSINE) episodic_index_normalize(q.data(), dims);
      auto want = Reference(distance, ref, q, 10);
      episodic_index_hit hits[10];
      long n = episodic_index_search(x, q.data(), 10, 0, 0, nullptr, nullptr, hits);
      ASSERT_EQ(long(want.size()), n);
      for (long i = 0; i < n; i++) {
        EXPECT_EQ(want[i].id, episodic_index_id(x, hits[i].slot)->num) << "rank " << i;
        EXPECT_NEAR(want[i].score, hits[i].score, 1e-3 * (1 + std::fabs(want[i].score)));
      }
    }
  }
  episodic_index_free(x);
}

INSTANTIATE_TEST_SUITE_P(Distances, IndexTest, ::testing::Values(VS_COSINE, VS_DOT, VS_EUCLID));

int OnlyEven(const episodic_index* x, size_t slot, void*) {
  return episodic_index_id(x, slot)->num % 2 == 0;
}

TEST(Index, AcceptAndThresholdLimitTheCandidates) {
  episodic_index* x = episodic_index_create(1, VS_EUCLID);
  tier_meta m = Meta();
  for (uint64_t i = 0; i < 100; i++) {
    vs_id id = Num(i);
    float v = float(i);
    ASSERT_EQ(0, episodic_index_put(x, &id, &v, nullptr, nullptr, nullptr, &m));
  }
  float q = 0;
  episodic_index_hit hits[100];
  long n = episodic_index_search(x, &q, 100, 1, 10.5f, OnlyEven, nullptr, hits);
  ASSERT_EQ(6, n);  // 0 2 4 6 8 10
  for (long i = 0; i < n; i++) {
    EXPECT_EQ(uint64_t(2 * i), episodic_index_id(x, hits[i].slot)->num);
    EXPECT_FLOAT_EQ(float(2 * i), hits[i].score);
  }
  EXPECT_EQ(0, episodic_index_search(x, &q, 5, 1, -1.0f, nullptr, nullptr, hits));
  episodic_index_free(x);
}

TEST(Index, PayloadsAndMetadataAreOwnedByTheIndex) {
  episodic_index* x = episodic_index_create(2, VS_DOT);
  json_t* p = json_pack("{s:i}", "a", 1);
  const char* kinds[] = {"email"};
  char owner[] = "alice";
  tier_meta m = Meta(owner);
  m.pii_kinds = kinds;
  m.npii = 1;
  vs_id id = Num(1);
  float v[2] = {1, 2};
  ASSERT_EQ(0, episodic_index_put(x, &id, v, nullptr, nullptr, p, &m));
  json_decref(p);
  owner[0] = 'X';  // the index copied the strings
  const tier_meta* got = episodic_index_meta(x, 0);
  EXPECT_STREQ("alice", got->owner);
  ASSERT_EQ(1u, got->npii);
  EXPECT_STREQ("email", got->pii_kinds[0]);
  EXPECT_EQ(1, json_integer_value(json_object_get(episodic_index_payload(x, 0), "a")));
  // Replacing drops the old payload reference; removing the last point too.
  ASSERT_EQ(0, episodic_index_put(x, &id, v, nullptr, nullptr, nullptr, &m));
  EXPECT_EQ(nullptr, episodic_index_payload(x, 0));
  EXPECT_EQ(0, episodic_index_remove(x, &id));
  EXPECT_EQ(-1, episodic_index_remove(x, &id));
  EXPECT_EQ(0u, episodic_index_count(x));
  episodic_index_free(x);
}

TEST(PointId, ParsesPrintsAndOrders) {
  vs_id a, b;
  char buf[37];
  ASSERT_EQ(0, vs_id_parse("18446744073709551615", &a));
  EXPECT_EQ(UINT64_MAX, a.num);
  EXPECT_STREQ("18446744073709551615", vs_id_text(&a, buf));
  EXPECT_EQ(-1, vs_id_parse("18446744073709551616", &a));
  EXPECT_EQ(-1, vs_id_parse("007", &a));
  EXPECT_EQ(-1, vs_id_parse("", &a));
  ASSERT_EQ(0, vs_id_parse("5C56C793-69F3-4FBF-87E6-C4BF54C28C26", &b));
  EXPECT_STREQ("5c56c793-69f3-4fbf-87e6-c4bf54c28c26", b.uuid);
  EXPECT_EQ(-1, vs_uuid_parse("5c56c79369f34fbf87e6c4bf54c28c26", &b));
  EXPECT_EQ(-1, vs_uuid_parse("5c56c793-69f3-4fbf-87e6-c4bf54c28c2g", &b));
  ASSERT_EQ(0, vs_id_parse("12", &a));
  EXPECT_LT(vs_id_cmp(&a, &b), 0);  // numbers before UUIDs
  vs_id c = Num(3);
  EXPECT_GT(vs_id_cmp(&a, &c), 0);
}

// Texts beside vectors: a collection that starts text only (dims 0) and
// gets its length later, points with a text, a vector or both, replaced
// and removed in every order (the last slot moving into each hole): text
// search and vector search each find exactly the points they should,
// checked against what was put, after every step.
TEST(IndexTextTest, TextsAndVectorsStayRightThroughPutsRemovesAndALateLength) {
  lex_analyzer* an = lex_analyzer_create("english");
  ASSERT_NE(nullptr, an);
  lex_terms t{};
  episodic_index* x = episodic_index_create(0, VS_DOT);
  ASSERT_NE(nullptr, x);
  tier_meta m = Meta();
  std::map<uint64_t, std::string> texts;  // id -> text, for the points that have one
  std::map<uint64_t, bool> vectors;       // id -> has a vector
  auto put = [&](uint64_t id, const char* text, bool vec) {
    vs_id v = Num(id);
    float f[4] = {1.f, static_cast<float>(id), 0.f, 0.f};
    if (text) {
      ASSERT_EQ(0, lex_analyze(an, text, strlen(text), &t));
    }
    ASSERT_EQ(0, episodic_index_put(x, &v, vec && episodic_index_dims(x) ? f : nullptr, text,
                                    text ? &t : nullptr, nullptr, &m));
    if (text)
      texts[id] = text;
    else
      texts.erase(id);
    vectors[id] = vec && episodic_index_dims(x);
  };
  auto remove = [&](uint64_t id) {
    vs_id v = Num(id);
    ASSERT_EQ(0, episodic_index_remove(x, &v));
    texts.erase(id);
    vectors.erase(id);
  };
  auto check = [&](const char* when) {
    // Every point with "apple" in its text, and no other, by text search.
    ASSERT_EQ(0, lex_analyze(an, "apple", 5, &t));
    std::vector<episodic_index_hit> hits(64);
    long n = episodic_index_search_text(x, &t, hits.size(), 0, 0, nullptr, nullptr, nullptr,
                                        hits.data());
    std::vector<uint64_t> got, want;
    for (long i = 0; i < n; i++) {
      got.push_back(episodic_index_id(x, hits[i].slot)->num);
      EXPECT_STREQ(texts[got.back()].c_str(), episodic_index_text(x, hits[i].slot)) << when;
    }
    for (const auto& [id, text] : texts)
      if (text.find("apple") != std::string::npos) want.push_back(id);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(want, got) << when;
    // Every point with a vector, and no other, by vector search.
    if (episodic_index_dims(x)) {
      float q[4] = {1.f, 0.f, 0.f, 0.f};
      n = episodic_index_search(x, q, hits.size(), 0, 0, nullptr, nullptr, hits.data());
      got.clear(), want.clear();
      for (long i = 0; i < n; i++) {
        got.push_back(episodic_index_id(x, hits[i].slot)->num);
        EXPECT_NE(nullptr, episodic_index_vector(x, hits[i].slot)) << when;
      }
      for (const auto& [id, has] : vectors)
        if (has) want.push_back(id);
      std::sort(got.begin(), got.end());
      EXPECT_EQ(want, got) << when;
    }
    EXPECT_EQ(texts.size(), episodic_index_texts(x)) << when;
  };
  for (uint64_t id = 1; id <= 40; id++) put(id, id % 3 ? "an apple a day" : "pears only", false);
  check("text only");
  ASSERT_EQ(0, episodic_index_set_dims(x, 4));  // the first vector's length, after 40 texts
  EXPECT_EQ(-1, episodic_index_set_dims(x, 8)) << "a length is set once";
  check("after the length");
  for (uint64_t id = 41; id <= 50; id++) put(id, nullptr, true);            // vector only
  for (uint64_t id = 1; id <= 10; id++) put(id, "apple and vector", true);  // both, replacing
  put(11, nullptr, true);                                                   // text dropped
  check("mixed");
  for (uint64_t id : {1, 50, 11, 20, 41, 3}) remove(id);  // holes filled by the last slots
  check("after removes");
  put(1, "apple again", false);  // a removed id comes back, its number reused
  put(60, "apple new", true);
  check("after re-puts");
  EXPECT_GT(episodic_index_bytes(x), 0u);
  episodic_index_free(x);
  lex_terms_free(&t);
  lex_analyzer_free(an);
}

}  // namespace

// A reader's visible points weigh in the scores, and no other: the same
// word scores alike for two readers who see the same points, and its
// rarity changes for a reader who sees fewer points holding it.
TEST(IndexTextTest, AReaderScoresOverTheOwnersAndLabelsItSees) {
  episodic_index* x = episodic_index_create(0, VS_COSINE);
  ASSERT_NE(nullptr, x);
  lex_analyzer* an = lex_analyzer_create("english");
  ASSERT_NE(nullptr, an);
  lex_terms t = {};
  auto put = [&](uint64_t id, const char* owner, int label, const char* text) {
    tier_meta m = {};
    m.owner = owner;
    m.label = label;
    m.version = 1;
    vs_id v = Num(id);
    ASSERT_EQ(0, lex_analyze(an, text, strlen(text), &t));
    ASSERT_EQ(0, episodic_index_put(x, &v, nullptr, text, &t, nullptr, &m));
  };
  put(1, "alice", 1, "apple pie");
  put(2, "alice", 1, "banana bread");
  put(3, "bob", 1, "apple tart");
  put(5, "alice", 4, "apple secret");
  put(4, "bob", 1, "apple juice");  // the last slot
  std::vector<episodic_index_hit> hits(8);
  auto score_of_1 = [&](const episodic_index_reader* r) {
    EXPECT_EQ(0, lex_analyze(an, "apple", 5, &t));
    long n = episodic_index_search_text(x, &t, hits.size(), 0, 0, nullptr, r, nullptr, hits.data());
    for (long i = 0; i < n; i++)
      if (episodic_index_id(x, hits[i].slot)->num == 1) return hits[i].score;
    ADD_FAILURE() << "point 1 not found";
    return 0.f;
  };
  float all = score_of_1(nullptr);                     // apple in 4 of 5
  episodic_index_reader alice_public = {"alice", 1};   // sees 1, 2: apple in 1 of 2
  episodic_index_reader alice_secret = {"alice", 4};   // sees 1, 2, 5: apple in 2 of 3
  episodic_index_reader anyone_public = {nullptr, 1};  // sees 1-4: apple in 3 of 4
  float a1 = score_of_1(&alice_public), a4 = score_of_1(&alice_secret),
        p1 = score_of_1(&anyone_public);
  EXPECT_GT(a1, a4);  // rarer among what alice sees at PUBLIC
  EXPECT_GT(a4, all);
  EXPECT_GT(p1, all);
  EXPECT_NE(a4, p1);
  episodic_index_reader carol = {"carol", 4};  // owns nothing: nothing weighs
  EXPECT_EQ(0, lex_analyze(an, "apple", 5, &t));
  EXPECT_GE(
      episodic_index_search_text(x, &t, hits.size(), 0, 0, nullptr, &carol, nullptr, hits.data()),
      0);
  // A removal moves the last slot (bob's 4) into the hole (alice's 1):
  // bob's key must move with it (else bob would see apple in 1 point). bob sees 3, 4: apple in 2 of
  // 2, as in an index built without point 1.
  vs_id one = Num(1);
  ASSERT_EQ(0, episodic_index_remove(x, &one));
  episodic_index_reader bob = {"bob", 4};
  auto score_of_3 = [&](episodic_index* in) {
    EXPECT_EQ(0, lex_analyze(an, "apple", 5, &t));
    long n =
        episodic_index_search_text(in, &t, hits.size(), 0, 0, nullptr, &bob, nullptr, hits.data());
    for (long i = 0; i < n; i++)
      if (episodic_index_id(in, hits[i].slot)->num == 3) return hits[i].score;
    ADD_FAILURE() << "point 3 not found";
    return 0.f;
  };
  float moved = score_of_3(x);
  episodic_index_free(x);
  x = episodic_index_create(0, VS_COSINE);
  put(2, "alice", 1, "banana bread");
  put(3, "bob", 1, "apple tart");
  put(4, "bob", 1, "apple juice");
  put(5, "alice", 4, "apple secret");
  EXPECT_EQ(score_of_3(x), moved);
  lex_terms_free(&t);
  lex_analyzer_free(an);
  episodic_index_free(x);
}
