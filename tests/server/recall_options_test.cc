// RecallOptions end to end (issue 31, item 5): a time window, a recency
// boost and de-duplication by maximal marginal relevance on
// EpisodicMemory.Search and the Router's vector_search, through the gRPC
// API on a server with no embedder (texts ranked lexically) and on a
// vector collection; bad options refused, naming the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "google/protobuf/util/time_util.h"
#include "memory/v1/router.pb.h"
#include "tests/server/recall_fixture.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using google::protobuf::util::TimeUtil;
using grpc::StatusCode;
using testing_client::Result;

class RecallOptionsTest : public recall_testing::RecallFixture {
 protected:
  // A lexical search of col by text with options, limit and offset.
  Result Raw(const std::string& col, const std::string& text, const RecallOptions& opts,
             int limit = 10, int offset = 0) {
    EpisodicMemorySearchRequest req;
    req.set_collection(col);
    req.set_text(text);
    req.set_limit(limit);
    req.set_offset(offset);
    *req.mutable_options() = opts;
    return Call("Search", req, alice_);
  }

  EpisodicMemorySearchResponse With(const std::string& col, const std::string& text,
                                    const RecallOptions& opts, int limit = 10, int offset = 0) {
    Result r = Raw(col, text, opts, limit, offset);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EpisodicMemorySearchResponse resp;
    EXPECT_TRUE(resp.ParseFromString(r.body));
    return resp;
  }

  // The update time of each hit, in microseconds, by id.
  static int64_t UpdatedUs(const EpisodicMemorySearchResponse& r, uint64_t id) {
    for (const auto& p : r.points()) {
      if (p.point().id().num() == id) {
        return TimeUtil::TimestampToMicroseconds(p.point().meta().update_time());
      }
    }
    ADD_FAILURE() << "no hit " << id;
    return 0;
  }
};

TEST_F(RecallOptionsTest, ATimeWindowKeepsOnlyMemoriesUpdatedInIt) {
  MustCreate("mem", alice_);
  for (uint64_t id = 1; id <= 3; id++) {
    MustRemember("mem", {"we talked about the garden fence " + std::to_string(id)}, alice_, id);
    usleep(20000);  // distinct update times, microseconds apart at least
  }
  RecallOptions none;
  EpisodicMemorySearchResponse all = With("mem", "garden fence", none);
  ASSERT_EQ(3, all.points_size());
  int64_t t1 = UpdatedUs(all, 1), t2 = UpdatedUs(all, 2), t3 = UpdatedUs(all, 3);
  ASSERT_LT(t1, t2);
  ASSERT_LT(t2, t3);

  RecallOptions mid;  // [t2, t3): the second alone; the end is exclusive
  *mid.mutable_time_range()->mutable_start_time() = TimeUtil::MicrosecondsToTimestamp(t2);
  *mid.mutable_time_range()->mutable_end_time() = TimeUtil::MicrosecondsToTimestamp(t3);
  EXPECT_EQ((std::vector<uint64_t>{2}), Ids(With("mem", "garden fence", mid)));
  RecallOptions since;  // [t2, ...)
  *since.mutable_time_range()->mutable_start_time() = TimeUtil::MicrosecondsToTimestamp(t2);
  std::vector<uint64_t> got = Ids(With("mem", "garden fence", since));
  std::sort(got.begin(), got.end());
  EXPECT_EQ((std::vector<uint64_t>{2, 3}), got);
  RecallOptions before;  // [..., t2)
  *before.mutable_time_range()->mutable_end_time() = TimeUtil::MicrosecondsToTimestamp(t2);
  EXPECT_EQ((std::vector<uint64_t>{1}), Ids(With("mem", "garden fence", before)));

  // The Router's vector_search takes the same window.
  RouterQueryRequest rq;
  VectorSearchQuery* vq = rq.mutable_vector_search();
  vq->set_collection("mem");
  vq->set_text("garden fence");
  *vq->mutable_options() = mid;
  std::string router_token = Token("t1", "alice", "episodic:read router:query");
  Result r = Call("Query", rq, router_token, nullptr, "Router");
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  RouterQueryResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.body));
  ASSERT_EQ(1, resp.results_size());
  EXPECT_EQ(2u, resp.results(0).point().id().num());
}

TEST_F(RecallOptionsTest, TheRecencyBoostPutsNewerMemoriesFirstByTheirAge) {
  MustCreate("mem", alice_);
  // Two memories alike in words: without the boost the tie goes to the
  // lower id, the older one.
  MustRemember("mem", {"the team meets on the rooftop terrace"}, alice_, 1);
  usleep(300000);
  MustRemember("mem", {"the team meets on the rooftop terrace"}, alice_, 2);
  RecallOptions none;
  EpisodicMemorySearchResponse plain = With("mem", "where does the team meet", none);
  ASSERT_EQ((std::vector<uint64_t>{1, 2}), Ids(plain));
  ASSERT_EQ(plain.points(0).score(), plain.points(1).score());
  double raw = plain.points(0).score();

  RecallOptions boost;
  boost.mutable_recency_half_life()->set_seconds(1);
  EpisodicMemorySearchResponse b = With("mem", "where does the team meet", boost);
  ASSERT_EQ((std::vector<uint64_t>{2, 1}), Ids(b));
  // Each score is the relevance times 2^(-age / 1 s), age measured at one
  // moment for both: their ratio is 2^((t2 - t1) / 1 s).
  double dt = (UpdatedUs(b, 2) - UpdatedUs(b, 1)) / 1e6;
  ASSERT_GT(dt, 0.25);
  EXPECT_NEAR(std::exp2(dt), b.points(0).score() / b.points(1).score(), 1e-3);
  EXPECT_LT(b.points(0).score(), raw);
  // The parts keep the score they found the memory with.
  ASSERT_EQ(1, b.points(0).parts_size());
  EXPECT_FLOAT_EQ(static_cast<float>(raw), b.points(0).parts(0).score());

  // A boost of ten years changes no order: a better match stays first.
  MustRemember("mem", {"the rooftop terrace is closed for the winter"}, alice_, 3);
  boost.mutable_recency_half_life()->set_seconds(3650LL * 86400);
  EpisodicMemorySearchResponse slow = With("mem", "the team meets on the rooftop", boost);
  ASSERT_EQ(3, slow.points_size());
  EXPECT_NE(3u, slow.points(0).point().id().num());
}

TEST_F(RecallOptionsTest, DiversityLetsNearDuplicatesGiveWayToTheNextDifferentMemory) {
  MustCreate("mem", alice_);
  MustRemember("mem",
               {"I parked the car on level 3 of the airport garage",
                "I parked the car on level 3 of the airport garage today",
                "I parked the car on level 3 of the airport garage again",
                "the car keys are in the garage drawer", "we sold the old bike last year"},
               alice_, 1);
  const std::string q = "where did I park the car in the garage";
  RecallOptions none;
  std::vector<uint64_t> plain = Ids(With("mem", q, none, 3));
  std::sort(plain.begin(), plain.end());
  ASSERT_EQ((std::vector<uint64_t>{1, 2, 3}), plain) << "the near-duplicates rank first";

  // Against the best, the near-duplicates' relevance is about 1 and their
  // overlap 6/7; the keys' relevance is about 0.3, their overlap 2/8. At
  // 0.7 novelty outweighs the copies' extra relevance (0.3 * 0.3 - 0.7 *
  // 0.25 > 0.3 * 1 - 0.7 * 0.86); at 0.5 it would not, quite.
  RecallOptions div;
  div.set_diversity(0.7f);
  EpisodicMemorySearchResponse d = With("mem", q, div, 3);
  std::vector<uint64_t> got = Ids(d);
  ASSERT_EQ(3u, got.size());
  EXPECT_TRUE(got[0] >= 1 && got[0] <= 3) << "the best match stays first";
  EXPECT_EQ(4u, got[1]) << "the different memory comes second";
  // Hits keep their relevance scores.
  EpisodicMemorySearchResponse p4 = With("mem", q, none, 5);
  for (const auto& hit : d.points()) {
    for (const auto& ref : p4.points()) {
      if (ref.point().id().num() == hit.point().id().num()) {
        EXPECT_EQ(ref.score(), hit.score());
      }
    }
  }
  // Payloads and texts stay out unless asked for, although compared.
  EXPECT_FALSE(d.points(0).point().has_payload());
  EXPECT_EQ("", d.points(0).point().text());

  // Pages of a de-duplicated ranking join up.
  std::vector<uint64_t> whole = Ids(With("mem", q, div, 4));
  std::vector<uint64_t> paged = Ids(With("mem", q, div, 2));
  std::vector<uint64_t> second = Ids(With("mem", q, div, 2, 2));
  paged.insert(paged.end(), second.begin(), second.end());
  EXPECT_EQ(whole, paged);
}

TEST_F(RecallOptionsTest, DiversityComparesVectorsWhenPointsHaveThem) {
  CreateCollectionRequest c;
  c.set_name("vec");
  c.set_dims(3);
  c.set_distance(DISTANCE_COSINE);
  ASSERT_TRUE(Call("CreateCollection", c, alice_).status.ok());
  EpisodicMemoryUpsertRequest up;
  up.set_collection("vec");
  // Query (1,0,0): points 1 and 2 are copies, 3 as relevant (cosine 0.8
  // all three) but another direction (cosine 0.64 to 1), 4 unrelated.
  const float vs[4][3] = {{0.8f, 0, 0.6f}, {0.8f, 0, 0.6f}, {0.8f, 0.6f, 0}, {0, 1, 0}};
  for (int i = 0; i < 4; i++) {
    PointInput* p = up.add_points();
    p->mutable_id()->set_num(i + 1);
    for (float x : vs[i]) p->add_vector(x);
  }
  Result r = Call("Upsert", up, alice_);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  for (double diversity : {0.0, 0.5}) {
    EpisodicMemorySearchRequest s;
    s.set_collection("vec");
    for (float x : {1.f, 0.f, 0.f}) s.add_vector(x);
    s.set_limit(2);
    s.mutable_options()->set_diversity(static_cast<float>(diversity));
    r = Call("Search", s, alice_);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EpisodicMemorySearchResponse resp;
    ASSERT_TRUE(resp.ParseFromString(r.body));
    ASSERT_EQ(2, resp.points_size());
    EXPECT_EQ(0, resp.points(0).point().vector_size()) << "vectors only when asked for";
    uint64_t second = resp.points(1).point().id().num();
    EXPECT_EQ(1u, resp.points(0).point().id().num());
    if (diversity == 0) {
      EXPECT_EQ(2u, second) << "1, 2 and 3 tie (cosine 0.8): by id";
    } else {
      EXPECT_EQ(3u, second) << "the other direction, not the near-copy";
    }
  }
}

TEST_F(RecallOptionsTest, PagesOfABoostedRankingJoinUpBeyondTheFirstPages) {
  MustCreate("mem", alice_);
  // 40 older memories that match the question better, then 20 newer that
  // match it less: by relevance the newer rank 41 to 60, boosted (1.5
  // half-lives younger) they come first, so a page's pool must reach them.
  std::vector<std::string> old_texts, new_texts;
  for (int i = 0; i < 40; i++)
    old_texts.push_back("lantern lantern lantern number " + std::to_string(i));
  for (int i = 0; i < 20; i++) new_texts.push_back("lantern number " + std::to_string(100 + i));
  MustRemember("mem", old_texts, alice_, 1);
  usleep(1500000);
  MustRemember("mem", new_texts, alice_, 41);
  std::vector<uint64_t> plain = Ids(With("mem", "lantern", RecallOptions(), 60));
  ASSERT_EQ(60u, plain.size());
  ASSERT_LE(plain[0], 40u) << "by relevance the older come first";
  RecallOptions opts;
  opts.mutable_recency_half_life()->set_seconds(1);
  opts.set_diversity(0.3f);
  std::vector<uint64_t> whole = Ids(With("mem", "lantern", opts, 60));
  ASSERT_EQ(60u, whole.size());
  ASSERT_GT(whole[0], 40u) << "boosted, the newer come first";
  std::vector<uint64_t> paged;
  for (int off = 0; off < 60; off += 7) {
    std::vector<uint64_t> page = Ids(With("mem", "lantern", opts, 7, off));
    paged.insert(paged.end(), page.begin(), page.end());
  }
  EXPECT_EQ(whole, paged);
  // Deeper than the pool is refused, naming the bound.
  Result r = Raw("mem", "lantern", opts, 10, 995);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("best 1000 hits"))
      << r.status.error_message();
}

TEST_F(RecallOptionsTest, BadOptionsAreRefusedNamingTheField) {
  MustCreate("mem", alice_);
  MustRemember("mem", {"a memory"}, alice_, 1);
  struct Case {
    RecallOptions opts;
    std::string field;
  };
  std::vector<Case> cases(5);
  cases[0].opts.set_diversity(1.5f);
  cases[0].field = "options.diversity";
  cases[1].opts.set_diversity(std::nanf(""));
  cases[1].field = "options.diversity";
  cases[2].opts.mutable_recency_half_life()->set_nanos(500000000);  // 0.5 s
  cases[2].field = "options.recency_half_life";
  cases[3].opts.mutable_recency_half_life()->set_seconds(3651LL * 86400);
  cases[3].field = "options.recency_half_life";
  *cases[4].opts.mutable_time_range()->mutable_start_time() = TimeUtil::SecondsToTimestamp(200);
  *cases[4].opts.mutable_time_range()->mutable_end_time() = TimeUtil::SecondsToTimestamp(100);
  cases[4].field = "options.time_range";
  for (const Case& c : cases) {
    Result r = Raw("mem", "memory", c.opts);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << c.field;
    EXPECT_NE(std::string::npos, r.status.error_message().find(c.field))
        << r.status.error_message();
  }
  EXPECT_EQ((std::vector<uint64_t>{1}), Ids(With("mem", "memory", RecallOptions())));
}

}  // namespace
