// episodic_rerank: the recency boost's arithmetic and order, and maximal
// marginal relevance over vectors and texts, against figures worked out by
// hand.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

extern "C" {
#include "service/episodic/episodic_rerank.h"
#include "service/lexical/lex_text.h"
}

namespace {

constexpr int64_t kSecond = 1000000;

// Points that own their vectors and texts.
struct Pool {
  std::vector<vs_point> points;
  std::vector<std::vector<float>> vectors;
  std::vector<std::string> texts;

  void Add(int64_t update_us, std::vector<float> v = {}, std::string text = "") {
    vectors.push_back(std::move(v));
    texts.push_back(std::move(text));
    points.push_back(vs_point{});
    points.back().meta.update_us = update_us;
  }
  // Items in the order added, with these scores.
  std::vector<episodic_rerank_item> Items(const std::vector<double>& scores) {
    for (size_t i = 0; i < points.size(); i++) {
      points[i].vector = vectors[i].empty() ? nullptr : vectors[i].data();
      points[i].text = texts[i].empty() ? nullptr : texts[i].c_str();
    }
    std::vector<episodic_rerank_item> v;
    for (size_t i = 0; i < points.size(); i++) v.push_back({&points[i], scores[i], i});
    return v;
  }
};

std::vector<size_t> Order(const std::vector<episodic_rerank_item>& v) {
  std::vector<size_t> o;
  for (const auto& it : v) o.push_back(it.index);
  return o;
}

TEST(RerankRecency, ScoresBecomeWorseByTheirAgeInHalfLives) {
  Pool p;
  int64_t now = 1000 * kSecond;
  p.Add(now);                  // 0: new
  p.Add(now - 2 * kSecond);    // 1: two half-lives old
  p.Add(now + 5 * kSecond);    // 2: in the future (another replica's clock): new
  p.Add(now - 100 * kSecond);  // 3: 100 half-lives: the factor stops at 2^-20
  std::vector<episodic_rerank_item> v = p.Items({1.0, 8.0, 2.0, 4.0});
  episodic_rerank_recency(v.data(), v.size(), EPISODIC_RERANK_HIGHER_BETTER, now, kSecond);
  EXPECT_EQ((std::vector<size_t>{1, 2, 0, 3}), Order(v));
  EXPECT_DOUBLE_EQ(2.0, v[0].score);  // 8 / 4
  EXPECT_DOUBLE_EQ(2.0, v[1].score);  // tie with 1: kept in arrival order
  EXPECT_DOUBLE_EQ(1.0, v[2].score);
  EXPECT_DOUBLE_EQ(4.0 * std::exp2(-EPISODIC_RERANK_MAX_HALF_LIVES), v[3].score);
}

TEST(RerankRecency, NegativeScoresAndDistancesMoveAwayFromTheBest) {
  Pool p;
  int64_t now = 50 * kSecond;
  p.Add(now - kSecond);  // one half-life
  p.Add(now);
  std::vector<episodic_rerank_item> v = p.Items({-0.5, -0.8});
  episodic_rerank_recency(v.data(), v.size(), EPISODIC_RERANK_HIGHER_BETTER, now, kSecond);
  EXPECT_EQ((std::vector<size_t>{1, 0}), Order(v));  // -0.5 became -1.0
  EXPECT_DOUBLE_EQ(-1.0, v[1].score);

  v = p.Items({3.0, 5.0});  // EUCLID: lower is better
  episodic_rerank_recency(v.data(), v.size(), EPISODIC_RERANK_LOWER_BETTER, now, kSecond);
  EXPECT_EQ((std::vector<size_t>{1, 0}), Order(v));  // 3 became 6
  EXPECT_DOUBLE_EQ(6.0, v[1].score);
}

TEST(RerankMmr, NearCopiesGiveWayToAnotherDirection) {
  Pool p;
  p.Add(0, {1, 0});           // 0
  p.Add(0, {0.999f, 0.04f});  // 1: almost 0
  p.Add(0, {0, 1});           // 2: orthogonal to both
  p.Add(0, {0.7f, 0.7f});     // 3
  std::vector<episodic_rerank_item> v = p.Items({1.0, 0.95, 0.6, 0.5});
  ASSERT_EQ(0, episodic_rerank_mmr(v.data(), v.size(), 2, EPISODIC_RERANK_HIGHER_BETTER, 0.5, 2,
                                   nullptr, nullptr, nullptr));
  // Second pick: 1 scores 0.5 * 0.95 - 0.5 * 0.9992 < 0; 2 scores
  // 0.5 * 0.6 - 0 = 0.3; 3 scores 0.5 * 0.5 - 0.5 * 0.707 < 0.
  EXPECT_EQ((std::vector<size_t>{0, 2, 1, 3}), Order(v));  // the rest keep their order
  EXPECT_DOUBLE_EQ(0.6, v[1].score);                       // scores are not changed

  v = p.Items({1.0, 0.95, 0.6, 0.5});
  ASSERT_EQ(0, episodic_rerank_mmr(v.data(), v.size(), 4, EPISODIC_RERANK_HIGHER_BETTER, 0.01, 2,
                                   nullptr, nullptr, nullptr));
  EXPECT_EQ((std::vector<size_t>{0, 1, 2, 3}), Order(v)) << "little diversity: by relevance";
}

TEST(RerankMmr, TextsAreComparedByTheirWords) {
  lex_analyzer* an = lex_analyzer_create("english");
  ASSERT_NE(nullptr, an);
  Pool p;
  p.Add(0, {}, "I parked the car in the airport garage");
  p.Add(0, {}, "I parked my car in the airport garage");  // same words, stop words aside
  p.Add(0, {}, "the car keys are in the kitchen drawer");
  std::vector<episodic_rerank_item> v = p.Items({2.0, 2.0, 1.2});
  ASSERT_EQ(0, episodic_rerank_mmr(v.data(), v.size(), 2, EPISODIC_RERANK_HIGHER_BETTER, 0.5, 0, an,
                                   nullptr, nullptr));
  // 1 overlaps 0 wholly (park, car, airport, garag): 0.5 - 0.5 = 0; 2
  // shares car of {park car airport garag key kitchen drawer}: 0.5 * 0.6
  // - 0.5 / 7 > 0.
  EXPECT_EQ((std::vector<size_t>{0, 2, 1}), Order(v));
  lex_analyzer_free(an);
}

TEST(RerankMmr, DistancesAndSmallPools) {
  Pool p;
  p.Add(0, {1, 0});
  p.Add(0, {1, 0});
  p.Add(0, {0, 1});
  // EUCLID distances 1, 1, 2: relevance 1, 1, 0.5.
  std::vector<episodic_rerank_item> v = p.Items({1.0, 1.0, 2.0});
  ASSERT_EQ(0, episodic_rerank_mmr(v.data(), v.size(), 3, EPISODIC_RERANK_LOWER_BETTER, 0.5, 2,
                                   nullptr, nullptr, nullptr));
  EXPECT_EQ((std::vector<size_t>{0, 2, 1}), Order(v));
  v = p.Items({1.0, 1.0, 2.0});
  ASSERT_EQ(0, episodic_rerank_mmr(v.data(), 1, 1, EPISODIC_RERANK_LOWER_BETTER, 0.5, 2, nullptr,
                                   nullptr, nullptr));
  EXPECT_EQ(0u, v[0].index);
  ASSERT_EQ(0, episodic_rerank_mmr(v.data(), v.size(), 0, EPISODIC_RERANK_LOWER_BETTER, 0.5, 2,
                                   nullptr, nullptr, nullptr));
  EXPECT_EQ((std::vector<size_t>{0, 1, 2}), Order(v));
}

TEST(RerankMmr, APointWithAVectorAndOneWithoutCompareByWords) {
  lex_analyzer* an = lex_analyzer_create("english");
  ASSERT_NE(nullptr, an);
  Pool p;
  p.Add(0, {1, 0}, "the car is in the airport garage");  // a vector and a text
  p.Add(0, {}, "the car is in the airport garage");      // the same text, no vector
  p.Add(0, {}, "keys in the kitchen drawer");
  std::vector<episodic_rerank_item> v = p.Items({2.0, 2.0, 1.2});
  ASSERT_EQ(0, episodic_rerank_mmr(v.data(), v.size(), 2, EPISODIC_RERANK_HIGHER_BETTER, 0.5, 2, an,
                                   nullptr, nullptr));
  EXPECT_EQ((std::vector<size_t>{0, 2, 1}), Order(v)) << "the copy is a copy, vector or not";
  lex_analyzer_free(an);
}

TEST(RerankMmr, ScoresAtOrBelowZeroAreScaledBetweenWorstAndBest) {
  Pool p;
  p.Add(0, {1, 0});
  p.Add(0, {0.6f, 0.8f});
  p.Add(0, {0, 1});
  // Cosines -0.1, -0.5, -0.9: relevance 1, 0.5, 0. The second pick at 0.3:
  // 1 scores 0.7 * 0.5 - 0.3 * 0.6 = 0.17, 2 scores 0.7 * 0 - 0 = 0. Were
  // every relevance 1 (nothing to measure against), 2 would win (0.7).
  std::vector<episodic_rerank_item> v = p.Items({-0.1, -0.5, -0.9});
  ASSERT_EQ(0, episodic_rerank_mmr(v.data(), v.size(), 2, EPISODIC_RERANK_HIGHER_BETTER, 0.3, 2,
                                   nullptr, nullptr, nullptr));
  EXPECT_EQ((std::vector<size_t>{0, 1, 2}), Order(v));
}

TEST(RerankMmr, AnExpiredClockStopsItAndLeavesTheOrder) {
  Pool p;
  for (int i = 0; i < 5; i++) p.Add(0, {1, static_cast<float>(i)});
  std::vector<episodic_rerank_item> v = p.Items({5, 4, 3, 2, 1});
  int calls = 0;
  auto expired = [](void* arg) { return ++*static_cast<int*>(arg) > 2 ? 1 : 0; };
  EXPECT_EQ(STATUS_ETIMEOUT,
            episodic_rerank_mmr(v.data(), v.size(), 5, EPISODIC_RERANK_HIGHER_BETTER, 0.5, 2,
                                nullptr, expired, &calls));
  EXPECT_EQ((std::vector<size_t>{0, 1, 2, 3, 4}), Order(v));
  EXPECT_EQ(3, calls);
}

}  // namespace
