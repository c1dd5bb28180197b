// lex_text and lex_index: terms as the Snowball stemmer makes them, and
// BM25 ranking checked against hand-computed scores and the orders the
// ranking promises (OR semantics, IDF, phrases, replacement, removal, the
// filter never leaving a top-k short).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "service/lexical/lex_index.h"
#include "service/lexical/lex_text.h"
}

namespace {

class LexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = lex_analyzer_create("english");
    ASSERT_NE(nullptr, a_);
    x_ = lex_index_create();
    ASSERT_NE(nullptr, x_);
  }
  void TearDown() override {
    lex_index_free(x_);
    lex_analyzer_free(a_);
    lex_terms_free(&t_);
  }

  std::vector<std::string> Words(const std::string& text) {
    EXPECT_EQ(0, lex_analyze(a_, text.data(), text.size(), &t_));
    std::vector<std::string> w;
    for (size_t i = 0; i < t_.nwords; i++) w.push_back(lex_term(&t_, i));
    return w;
  }
  std::vector<std::string> Pairs(const std::string& text) {
    EXPECT_EQ(0, lex_analyze(a_, text.data(), text.size(), &t_));
    std::vector<std::string> p;
    for (size_t i = t_.nwords; i < t_.n; i++) p.push_back(lex_term(&t_, i));
    return p;
  }

  void Put(uint32_t doc, const std::string& text) {
    ASSERT_EQ(0, lex_analyze(a_, text.data(), text.size(), &t_));
    ASSERT_EQ(0, lex_index_put(x_, doc, &t_));
  }

  std::vector<lex_hit> Search(const std::string& q, size_t k = 10, lex_accept_fn accept = nullptr,
                              void* arg = nullptr, lex_before_fn before = nullptr) {
    EXPECT_EQ(0, lex_analyze(a_, q.data(), q.size(), &t_));
    std::vector<lex_hit> out(k);
    size_t n = 0;
    lex_search_how how = {accept, before, arg, nullptr};
    EXPECT_EQ(0, lex_index_search(x_, &t_, k, &how, out.data(), &n));
    out.resize(n);
    return out;
  }

  static std::vector<uint32_t> Docs(const std::vector<lex_hit>& h) {
    std::vector<uint32_t> d;
    for (const auto& x : h) d.push_back(x.doc);
    return d;
  }

  lex_analyzer* a_ = nullptr;
  lex_index* x_ = nullptr;
  lex_terms t_ = {};
};

TEST_F(LexTest, WordsAreLowerCasedStemmedAndStopWordsDropped) {
  EXPECT_EQ((std::vector<std::string>{"painter", "paint", "paint", "paint"}),
            Words("The PAINTER painted; paintings, and paints!"));
  EXPECT_EQ(Words("alice"), Words("Alice's"));
  EXPECT_EQ((std::vector<std::string>{}), Words("it is what it was, of the and"));
  // Digits stay; bytes of UTF-8 letters are kept as they are.
  EXPECT_EQ((std::vector<std::string>{"2023", "caf\xc3\xa9"}), Words("in 2023 at the caf\xc3\xa9"));
  // A word over LEX_WORD_MAX bytes is dropped, not cut.
  EXPECT_EQ((std::vector<std::string>{"short"}), Words(std::string(80, 'x') + " short"));
  EXPECT_EQ(nullptr, lex_analyzer_create("klingon"));
}

TEST_F(LexTest, FollowingWordsMakePairsAcrossStopWords) {
  EXPECT_EQ((std::vector<std::string>{"new york", "york pizza"}), Pairs("New York pizza"));
  EXPECT_EQ((std::vector<std::string>{"bank america"}), Pairs("Bank of America"));
  EXPECT_EQ((std::vector<std::string>{}), Pairs("alone"));
}

TEST_F(LexTest, ScoresAreTextbookBm25) {
  Put(0, "apple banana");
  Put(1, "apple");
  // banana: N = 2, df = 1, tf = 1, |d0| = 2, avgdl = 1.5.
  double idf = std::log(1 + (2 - 1 + 0.5) / (1 + 0.5));
  double want =
      idf * 1 * (LEX_BM25_K1 + 1) / (1 + LEX_BM25_K1 * (1 - LEX_BM25_B + LEX_BM25_B * 2 / 1.5));
  auto h = Search("banana");
  ASSERT_EQ(1u, h.size());
  EXPECT_EQ(0u, h[0].doc);
  EXPECT_NEAR(want, h[0].score, 1e-12);
  // apple is in both: the shorter document ranks first.
  EXPECT_EQ((std::vector<uint32_t>{1, 0}), Docs(Search("apple")));
}

TEST_F(LexTest, ADocumentSharingTwoOfEightWordsStillRanks) {
  Put(0, "we painted the kitchen walls blue last spring");
  Put(1, "the weather report for tomorrow");
  Put(2, "groceries: milk, eggs, bread");
  auto h = Search("what colour did Caroline choose when she repainted her kitchen walls");
  EXPECT_EQ((std::vector<uint32_t>{0}), Docs(h));
}

TEST_F(LexTest, ARareWordOutranksACommonOne) {
  for (uint32_t d = 0; d < 20; d++) Put(d, "meeting notes " + std::to_string(d));
  Put(20, "meeting about the zeppelin");
  Put(21, "zeppelin");
  Put(22, "meeting meeting meeting");
  auto h = Search("meeting zeppelin");
  ASSERT_GE(h.size(), 3u);
  EXPECT_EQ(20u, h[0].doc);  // both words
  EXPECT_EQ(21u, h[1].doc);  // the rare one alone beats the common one three times
}

TEST_F(LexTest, APhraseFoundWholeRanksAboveItsWordsScattered) {
  Put(0, "york has a new museum");
  Put(1, "a museum in new york");
  auto h = Search("new york museum");
  ASSERT_EQ(2u, h.size());
  EXPECT_EQ(1u, h[0].doc);
  EXPECT_GT(h[0].score, h[1].score);
}

TEST_F(LexTest, ReplacedAndRemovedDocumentsAreGoneAndNoLongerWeigh) {
  Put(0, "orange juice");
  Put(1, "orange peel");
  Put(2, "lemon");
  EXPECT_EQ(3u, lex_index_docs(x_));
  Put(0, "apple juice");  // replaced
  EXPECT_EQ((std::vector<uint32_t>{1}), Docs(Search("orange")));
  EXPECT_EQ((std::vector<uint32_t>{0}), Docs(Search("apple")));
  lex_index_remove(x_, 1);
  lex_index_remove(x_, 1);   // twice is once
  lex_index_remove(x_, 99);  // never indexed
  EXPECT_EQ(2u, lex_index_docs(x_));
  EXPECT_TRUE(Search("orange peel").empty());
  // IDF counts live documents only: juice is now in 1 of 2.
  auto h = Search("juice");
  ASSERT_EQ(1u, h.size());
  double idf = std::log(1 + (2 - 1 + 0.5) / (1 + 0.5));
  double avgdl = (2 + 1) / 2.0;  // "apple juice", "lemon"
  EXPECT_NEAR(
      idf * (LEX_BM25_K1 + 1) / (1 + LEX_BM25_K1 * (1 - LEX_BM25_B + LEX_BM25_B * 2 / avgdl)),
      h[0].score, 1e-12);
  // Many removals compact the postings and leave the rest intact.
  for (uint32_t d = 10; d < 1010; d++) Put(d, "common word " + std::to_string(d));
  for (uint32_t d = 10; d < 1000; d++) lex_index_remove(x_, d);
  EXPECT_EQ(12u, lex_index_docs(x_));
  EXPECT_EQ(10u, Search("common", 100).size());
}

int Even(void*, uint32_t doc) { return doc % 2 == 0; }

TEST_F(LexTest, TheFilterNeverLeavesTheTopKShort) {
  for (uint32_t d = 0; d < 50; d++)
    Put(d, std::string(d % 5 + 1, 'z') == "z" ? "z topic" : "topic");
  auto h = Search("topic", 10, Even, nullptr);
  ASSERT_EQ(10u, h.size());
  for (const auto& x : h) EXPECT_EQ(0u, x.doc % 2);
  // Best first, ties by document number.
  for (size_t i = 1; i < h.size(); i++)
    EXPECT_TRUE(h[i - 1].score > h[i].score ||
                (h[i - 1].score == h[i].score && h[i - 1].doc < h[i].doc));
}

// Descending document numbers: the caller's ids, in another order.
int Backwards(void*, uint32_t a, uint32_t b) { return a > b; }

TEST_F(LexTest, TiesFollowTheCallersOrderAtTheCutAndWithin) {
  for (uint32_t d = 0; d < 30; d++) Put(d, "same words here");
  auto h = Search("same words", 5, nullptr, nullptr, Backwards);
  ASSERT_EQ(5u, h.size());
  for (size_t i = 0; i < h.size(); i++) EXPECT_EQ(29 - i, h[i].doc) << i;
  h = Search("same words", 5);
  ASSERT_EQ(5u, h.size());
  for (size_t i = 0; i < h.size(); i++) EXPECT_EQ(i, h[i].doc) << i;
}

TEST(LexThreadTest, EachThreadKeepsItsOwnAnalyzer) {
  lex_analyzer* mine = lex_analyzer_of_thread("english");
  ASSERT_NE(nullptr, mine);
  EXPECT_EQ(mine, lex_analyzer_of_thread("english"));
  lex_analyzer* theirs = nullptr;
  std::thread([&] { theirs = lex_analyzer_of_thread("english"); }).join();
  EXPECT_NE(nullptr, theirs);
  EXPECT_NE(mine, theirs);
  EXPECT_EQ(nullptr, lex_analyzer_of_thread("klingon"));
  lex_analyzer* german = lex_analyzer_of_thread("german");
  ASSERT_NE(nullptr, german);
  lex_terms t = {};
  const char* text = "Häuser";
  ASSERT_EQ(0, lex_analyze(german, text, strlen(text), &t));
  ASSERT_EQ(1u, t.n);
  EXPECT_STREQ("haus", lex_term(&t, 0));  // German's stemmer, and its umlaut rule
  lex_terms_free(&t);
}

int Odd(void*, uint32_t doc) { return doc % 2 == 1; }

// Scores computed over the visible documents only: what hidden documents
// hold changes neither the scores nor the order a caller sees.
TEST_F(LexTest, HiddenDocumentsDoNotWeighInTheScores) {
  Put(1, "merger plans");
  Put(3, "holiday plans");
  Put(5, "merger");
  unsigned char odd[64];
  for (int d = 0; d < 64; d++) odd[d] = d % 2;
  lex_search_how how = {Odd, nullptr, nullptr, odd};
  ASSERT_EQ(0, lex_analyze(a_, "merger plans", 12, &t_));
  std::vector<lex_hit> before(10), after(10), leaky(10);
  size_t nb = 0, na = 0, nl = 0;
  ASSERT_EQ(0, lex_index_search(x_, &t_, 10, &how, before.data(), &nb));
  // Hidden documents full of "merger" (and one more "plans"), as many as
  // the visible ones: the visible frequencies stay what they were.
  Put(10, "merger merger talks");
  Put(12, "merger plans leaked");
  Put(14, "merger");
  ASSERT_EQ(0, lex_analyze(a_, "merger plans", 12, &t_));  // Put reused t_
  ASSERT_EQ(0, lex_index_search(x_, &t_, 10, &how, after.data(), &na));
  ASSERT_EQ(3u, nb);
  ASSERT_EQ(nb, na);
  for (size_t i = 0; i < na; i++) EXPECT_EQ(before[i].doc, after[i].doc) << i;
  // Only N moved (6 documents, not 3), the same for every term: the
  // visible document frequencies (merger 2, plans 2) are unchanged, so
  // both terms move alike and the ranking with them.
  EXPECT_EQ(1u, after[0].doc);
  // Without the visible filter the hidden documents make "merger" more
  // common than "plans", and doc 3 ("holiday plans") overtakes doc 5.
  how.visible = nullptr;
  ASSERT_EQ(0, lex_index_search(x_, &t_, 10, &how, leaky.data(), &nl));
  ASSERT_EQ(3u, nl);
  EXPECT_EQ(3u, leaky[1].doc);
  EXPECT_EQ(5u, after[1].doc);  // the visible order: "merger" as rare as "plans"
  EXPECT_EQ(3u, after[2].doc);
}

TEST_F(LexTest, NothingMatchesNothing) {
  EXPECT_TRUE(Search("anything").empty());
  Put(0, "something");
  EXPECT_TRUE(Search("").empty());
  EXPECT_TRUE(Search("the of and").empty());
  EXPECT_TRUE(Search("unknown").empty());
  EXPECT_GT(lex_index_bytes(x_), 0u);
}

}  // namespace
