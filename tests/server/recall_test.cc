// Lexical recall end to end (issue 31): on a server with no embedder, a
// collection of dims 0 keeps text memories and EpisodicMemory.Search ranks
// them by BM25 through the gRPC API: OR semantics, stemming, rarer words
// and whole phrases weighing more; texts returned with payloads; the read
// diode (tenant, owner, label) and payload filters inside the ranking;
// replaced and deleted texts gone on every replica; Forget erasing the
// text from PostgreSQL; vectors and texts in one collection; bad input.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/util/json_util.h"
#include "memory/v1/episodic_memory.pb.h"
#include "memory/v1/privacy.pb.h"
#include "tests/server/recall_fixture.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using grpc::StatusCode;
using testing_client::Result;

// Turns of a conversation an agent was told, one memory each.
const std::vector<std::string> kMemories = {
    "I parked the car on level 3 of the airport garage, next to the elevator",  // 0
    "My sister Ana lives in New York and works as a nurse",                     // 1
    "We painted the kitchen a pale green colour last spring",                   // 2
    "The dentist appointment moved to Thursday at 9 in the morning",            // 3
    "I am allergic to peanuts, so no satay at the team dinner",                 // 4
    "Ana recommended a new book about York, the English city",                  // 5
    "The garage door opener battery needs replacing",                           // 6
    "Remember that the wifi password at the cabin is on the fridge",            // 7
};

using RecallTest = recall_testing::RecallFixture;

TEST_F(RecallTest, AQuestionFindsItsMemoryWithoutAnEmbedder) {
  MustCreate("mem", alice_);
  MustRemember("mem", kMemories, alice_);

  // The agent's question shares two words with the memory, in other forms.
  auto r = Search("mem", "Where did I park my car?", alice_);
  ASSERT_FALSE(r.points().empty());
  EXPECT_EQ(0u, r.points(0).point().id().num());
  EXPECT_EQ(kMemories[0], r.points(0).point().text());  // the text comes back
  EXPECT_EQ(0, r.points(0).point().payload().fields().at("n").number_value());
  EXPECT_GT(r.points(0).score(), 0.f);
  for (int i = 1; i < r.points_size(); i++)
    EXPECT_GE(r.points(i - 1).score(), r.points(i).score()) << "best first";

  // Stemming: "painting" finds "painted".
  r = Search("mem", "painting the kitchen", alice_);
  ASSERT_FALSE(r.points().empty());
  EXPECT_EQ(2u, r.points(0).point().id().num());

  // OR semantics: one shared word of eight is enough to rank.
  auto ids = Ids(Search("mem", "what about the peanuts situation we discussed yesterday", alice_));
  ASSERT_EQ(1u, ids.size());
  EXPECT_EQ(4u, ids[0]);

  // A phrase found whole outranks its words scattered: 1 has "New York",
  // 5 has "new" and "York" apart.
  ids = Ids(Search("mem", "New York", alice_));
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(1u, ids[0]);
  EXPECT_EQ(5u, ids[1]);

  // A rare word outweighs a common one: "garage" is in two memories,
  // "battery" in one.
  ids = Ids(Search("mem", "garage battery", alice_));
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(6u, ids[0]);

  // Nothing shared: nothing found, and stop words alone find nothing.
  EXPECT_TRUE(Search("mem", "quantum chromodynamics", alice_).points().empty());
  EXPECT_TRUE(Search("mem", "the of and what", alice_).points().empty());

  // The mode can be asked for; VECTOR cannot run without vectors.
  EXPECT_EQ(0u, Ids(Search("mem", "parked car", alice_, 10, nullptr, SEARCH_MODE_LEXICAL))[0]);
  EpisodicMemorySearchRequest vec;
  vec.set_collection("mem");
  vec.set_text("parked car");
  vec.set_mode(SEARCH_MODE_VECTOR);
  Result bad = Call("Search", vec, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, bad.status.error_code());
  EXPECT_NE(std::string::npos, bad.status.error_message().find("no vector yet"))
      << bad.status.error_message();

  // Limit, offset and the threshold (a BM25 score) page the ranking.
  auto all = Search("mem", "Ana garage car", alice_);
  ASSERT_GE(all.points_size(), 4);
  EpisodicMemorySearchRequest page;
  page.set_collection("mem");
  page.set_text("Ana garage car");
  page.set_limit(2);
  page.set_offset(1);
  Result pr = Call("Search", page, alice_);
  ASSERT_TRUE(pr.status.ok()) << pr.status.error_message();
  EpisodicMemorySearchResponse pg;
  ASSERT_TRUE(pg.ParseFromString(pr.body));
  ASSERT_EQ(2, pg.points_size());
  EXPECT_EQ(all.points(1).point().id().num(), pg.points(0).point().id().num());
  EXPECT_EQ(all.points(2).point().id().num(), pg.points(1).point().id().num());
  page.set_offset(0);
  page.set_limit(10);
  page.set_score_threshold(all.points(1).score());
  pr = Call("Search", page, alice_);
  ASSERT_TRUE(pr.status.ok());
  ASSERT_TRUE(pg.ParseFromString(pr.body));
  EXPECT_EQ(2, pg.points_size());
}

TEST_F(RecallTest, TheReadDiodeAndFiltersApplyInsideTheRanking) {
  const std::string bob = Token("t1", "bob", "episodic:read episodic:write");
  const std::string bob_all = Token("t1", "bob", "episodic:read:all episodic:write");
  const std::string low = Token("t1", "carol", "episodic:read:all", "PUBLIC");
  const std::string other_tenant = Token("t2", "alice", "episodic:read:all episodic:write");
  MustCreate("mem", alice_);
  MustRemember("mem", {"alice keeps the boat keys in the blue drawer"}, alice_, 1);
  MustRemember("mem", {"bob keeps the boat keys under the mat"}, bob, 2);
  MustRemember("mem", {"the boat keys spare copy is in the safe"}, alice_, 3, LABEL_SECRET);

  // Owners see their own; :all sees the tenant's; a low clearance misses
  // the secret one; filters narrow the ranking itself.
  auto own = Ids(Search("mem", "boat keys", alice_));
  std::sort(own.begin(), own.end());
  EXPECT_EQ((std::vector<uint64_t>{1, 3}), own);
  EXPECT_EQ((std::vector<uint64_t>{2}), Ids(Search("mem", "boat keys", bob)));
  EXPECT_EQ(3u, Ids(Search("mem", "boat keys", bob_all)).size());
  auto seen = Ids(Search("mem", "boat keys safe", low));
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ((std::vector<uint64_t>{1, 2}), seen) << "a SECRET memory reached a PUBLIC clearance";
  // limit 1 with the best one hidden still returns one: the hidden point
  // never takes a place in the top k.
  auto best = Search("mem", "boat keys spare copy safe", bob_all, 1);
  ASSERT_EQ(1, best.points_size());
  EXPECT_EQ(3u, best.points(0).point().id().num());
  EXPECT_EQ(1u, Ids(Search("mem", "boat keys spare copy safe", low, 1)).size());
  EXPECT_EQ((std::vector<uint64_t>{2}),
            Ids(Search("mem", "boat keys", bob_all, 10, nullptr, SEARCH_MODE_AUTO,
                       R"({"must":[{"field":{"key":"n","matchValue":2}}]})")));

  // Another tenant has its own "mem": nothing of t1's is there.
  MustCreate("mem", other_tenant);
  EXPECT_TRUE(Search("mem", "boat keys", other_tenant).points().empty());
}

// What hidden points hold does not weigh in the caller's ranking: a word
// common among another owner's points is as rare for bob as it is among
// his own (so the order he sees says nothing of theirs).
TEST_F(RecallTest, HiddenPointsDoNotWeighInTheRanking) {
  const std::string bob = Token("t1", "bob", "episodic:read episodic:write");
  MustCreate("mem", alice_);
  MustRemember("mem", {"merger plans", "holiday plans", "merger"}, bob, 1);
  auto before = Ids(Search("mem", "merger plans", bob));
  ASSERT_EQ((std::vector<uint64_t>{1, 3, 2}), before);  // "merger" alone is shorter
  MustRemember("mem", {"merger merger talks", "merger plans leaked", "merger"}, alice_, 10);
  EXPECT_EQ(before, Ids(Search("mem", "merger plans", bob)));
  // alice, who sees only hers, ranks by hers alone too; :all sees all.
  EXPECT_EQ(3u, Ids(Search("mem", "merger plans", alice_)).size());
}

TEST_F(RecallTest, ReplacedDeletedAndForgottenTextsAreGoneOnEveryReplica) {
  const std::string forget = Token("t1", "admin", "privacy:forget:all");
  Replica b = Launch();
  MustCreate("mem", alice_);
  MustRemember("mem", {"the locker code is 4417 for the gym"}, alice_, 1);
  MustRemember("mem", {"the garden hose is in the shed"}, alice_, 2);
  MustRemember("mem", {"my passport number is kept by subject s-9"}, alice_, 3, LABEL_UNSPECIFIED,
               R"({"subject_id":"s-9"})");
  EXPECT_EQ((std::vector<uint64_t>{1}), Ids(Search("mem", "locker code", alice_, 10, &b)));

  // Replaced: the old words no longer find it, the new ones do.
  MustRemember("mem", {"the bike lock combination changed"}, alice_, 1);
  EXPECT_TRUE(Search("mem", "locker code", alice_, 10, &b).points().empty());
  EXPECT_TRUE(Search("mem", "locker code", alice_).points().empty());
  EXPECT_EQ((std::vector<uint64_t>{1}), Ids(Search("mem", "bike lock", alice_, 10, &b)));

  // Deleted through one replica: gone from the other's ranking.
  DeletePointsRequest del;
  del.set_collection("mem");
  del.mutable_ids()->add_ids()->set_num(2);
  Result dr = Call("DeletePoints", del, alice_);
  ASSERT_TRUE(dr.status.ok()) << dr.status.error_message();
  EXPECT_TRUE(Search("mem", "garden hose shed", alice_, 10, &b).points().empty());
  EXPECT_EQ(0, TextRows("garden hose"));

  // Forgotten by subject: gone from both replicas and from PostgreSQL.
  EXPECT_EQ((std::vector<uint64_t>{3}), Ids(Search("mem", "passport number", alice_, 10, &b)));
  EXPECT_EQ(1, TextRows("passport number"));
  PrivacyForgetRequest fr;
  fr.set_subject_id("s-9");
  Result f = Call("Forget", fr, forget, nullptr, "Privacy");
  ASSERT_TRUE(f.status.ok()) << f.status.error_message();
  EXPECT_TRUE(Search("mem", "passport number", alice_, 10, &b).points().empty());
  EXPECT_TRUE(Search("mem", "passport number", alice_).points().empty());
  EXPECT_EQ(0, TextRows("passport number"));
  EXPECT_EQ((std::vector<uint64_t>{1}), Ids(Search("mem", "bike lock", alice_)));
}

TEST_F(RecallTest, VectorsAndTextsShareACollection) {
  MustCreate("mixed", alice_);
  MustRemember("mixed", {"text only: the spare tyre is flat"}, alice_, 1);
  // The first vector sets dims (3); a point may carry a vector and a text.
  EpisodicMemoryUpsertRequest up;
  up.set_collection("mixed");
  PointInput* p = up.add_points();
  p->mutable_id()->set_num(2);
  for (float x : {1.f, 0.f, 0.f}) p->add_vector(x);
  p->set_text("vector and text: the tyre pressure is 2.4 bar");
  p = up.add_points();
  p->mutable_id()->set_num(3);
  for (float x : {0.f, 1.f, 0.f}) p->add_vector(x);
  Result r = Call("Upsert", up, alice_);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  GetCollectionRequest gc;
  gc.set_name("mixed");
  r = Call("GetCollection", gc, alice_);
  GetCollectionResponse col;
  ASSERT_TRUE(col.ParseFromString(r.body));
  EXPECT_EQ(3, col.collection().dims());

  // Another length is refused now, and changes nothing.
  EpisodicMemoryUpsertRequest wrong;
  wrong.set_collection("mixed");
  p = wrong.add_points();
  p->mutable_id()->set_num(9);
  for (float x : {1.f, 1.f}) p->add_vector(x);
  r = Call("Upsert", wrong, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("3 dimensions"))
      << r.status.error_message();

  // Lexically: the points with a text; by vector: the points with one.
  EXPECT_EQ((std::vector<uint64_t>{2, 1}), Ids(Search("mixed", "tyre pressure", alice_)));
  EpisodicMemorySearchRequest vs;
  vs.set_collection("mixed");
  for (float x : {1.f, 0.1f, 0.f}) vs.add_vector(x);
  vs.set_with_vector(true);
  r = Call("Search", vs, alice_);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EpisodicMemorySearchResponse hits;
  ASSERT_TRUE(hits.ParseFromString(r.body));
  ASSERT_EQ(2, hits.points_size());
  EXPECT_EQ(2u, hits.points(0).point().id().num());
  EXPECT_EQ(3u, hits.points(1).point().id().num());
  EXPECT_EQ(3, hits.points(0).point().vector_size());

  // GetPoints and Count see text-only points too.
  GetPointsRequest get;
  get.set_collection("mixed");
  get.add_ids()->set_num(1);
  get.set_with_payload(true);
  get.set_with_vector(true);
  r = Call("GetPoints", get, alice_);
  GetPointsResponse got;
  ASSERT_TRUE(got.ParseFromString(r.body));
  ASSERT_EQ(1, got.points_size());
  EXPECT_EQ("text only: the spare tyre is flat", got.points(0).text());
  EXPECT_EQ(0, got.points(0).vector_size());
  EpisodicMemoryCountRequest cnt;
  cnt.set_collection("mixed");
  r = Call("Count", cnt, alice_);
  EpisodicMemoryCountResponse n;
  ASSERT_TRUE(n.ParseFromString(r.body));
  EXPECT_EQ(3, n.count());
}

TEST_F(RecallTest, BadInputIsRefusedAndChangesNothing) {
  MustCreate("mem", alice_);
  MustRemember("mem", {"one memory"}, alice_, 1);
  struct Case {
    std::string what, want;
    EpisodicMemoryUpsertRequest up;
  };
  EpisodicMemoryUpsertRequest neither;
  neither.set_collection("mem");
  neither.add_points()->mutable_id()->set_num(5);
  EpisodicMemoryUpsertRequest too_long = neither;
  too_long.mutable_points(0)->set_text(std::string(32769, 'a'));
  EpisodicMemoryUpsertRequest bad_utf8 = neither;
  bad_utf8.mutable_points(0)->set_text("caf\xc3");
  EpisodicMemoryUpsertRequest mixed_dims = neither;
  for (float x : {1.f, 2.f}) mixed_dims.mutable_points(0)->add_vector(x);
  PointInput* second = mixed_dims.add_points();
  second->mutable_id()->set_num(6);
  for (float x : {1.f, 2.f, 3.f}) second->add_vector(x);
  for (const auto& [req, want] : std::vector<std::pair<EpisodicMemoryUpsertRequest, std::string>>{
           {neither, "give a vector, a text or both"},
           {too_long, "points[0].text: 32769 bytes"},
           {bad_utf8, "not valid UTF-8"},
           {mixed_dims, "one length per collection"}}) {
    Result r = Call("Upsert", req, alice_);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << want;
    EXPECT_NE(std::string::npos, r.status.error_message().find(want)) << r.status.error_message();
  }
  GetCollectionRequest gc;
  gc.set_name("mem");
  GetCollectionResponse col;
  ASSERT_TRUE(col.ParseFromString(Call("GetCollection", gc, alice_).body));
  EXPECT_EQ(0, col.collection().dims()) << "a refused batch set dims";

  EpisodicMemorySearchRequest s;
  s.set_collection("mem");
  s.set_mode(SEARCH_MODE_LEXICAL);
  Result r = Call("Search", s, alice_);  // no text
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("mode: LEXICAL"));
  s.set_text("memory");
  s.set_mode(static_cast<SearchMode>(7));
  r = Call("Search", s, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("mode: 7"));
  s.set_mode(SEARCH_MODE_AUTO);
  for (float x : {1.f, 0.f}) s.add_vector(x);
  s.clear_text();
  r = Call("Search", s, alice_);  // a vector where there is none yet
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("dims 0"));
  // Injection strings are words like any other.
  EXPECT_TRUE(Search("mem", "'); DROP TABLE episodic_points; --", alice_).points().empty());
  EXPECT_EQ((std::vector<uint64_t>{1}), Ids(Search("mem", "memory", alice_)));
}

}  // namespace
