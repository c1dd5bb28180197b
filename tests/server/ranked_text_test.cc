// TEXT_MATCH_RANKED end to end (issue 31, item 4): Entries.Search and
// GlobalMemory.QueryEntities take a question, match any of its words in
// any form and rank by BM25 with a score per result, through the gRPC API:
// the ranking order on a small fixed corpus (a 2-of-8-word match ranks,
// stemming, a rare word above a common one), the read diode inside the
// ranking (another tenant, owner or a higher label never appears nor
// changes a score), paging of ranked entities, the strict modes unchanged,
// bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "google/protobuf/util/json_util.h"
#include "memory/v1/entries.pb.h"
#include "memory/v1/global_memory.pb.h"
#include "tests/server/recall_fixture.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using grpc::StatusCode;
using testing_client::Result;

// What an agent was told, one record each. Several share "Ana"; "painted"
// and "nurse" occur once.
const std::vector<std::string> kNotes = {
    "My sister Ana lives in New York and works as a nurse",     // 0
    "We painted the kitchen a pale green colour last spring",   // 1
    "Ana recommended a new book about York, the English city",  // 2
    "Ana and Tom had dinner with Ana's parents on Sunday",      // 3
    "The garage door opener battery needs replacing",           // 4
};

class RankedTextTest : public recall_testing::RecallFixture {
 protected:
  void SetUp() override {
    RecallFixture::SetUp();
    scopes_ = "entries:read entries:write global:read global:write";
    writer_ = Token("t1", "alice", scopes_);
  }

  void MustWriteEntry(const std::string& key, const std::string& text, const std::string& token,
                      Label label = LABEL_UNSPECIFIED) {
    EntriesWriteRequest req;
    req.set_namespace_("app:notes:alice");
    req.set_key(key);
    req.set_value(text);
    req.set_content_type("text/plain");
    req.set_label(label);
    Result r = Call("Write", req, token, nullptr, "Entries");
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }

  void MustPutEntity(const std::string& id, const std::string& name, const std::string& note,
                     const std::string& token, Label label = LABEL_UNSPECIFIED) {
    PutEntityRequest req;
    req.set_id(id);
    req.set_type("note");
    req.set_name(name);
    req.set_label(label);
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage("{\"note\":\"" + note + "\"}",
                                                            req.mutable_properties())
                    .ok());
    Result r = Call("PutEntity", req, token, nullptr, "GlobalMemory");
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }

  Result SearchEntries(const std::string& term, const std::string& token,
                       TextMatch match = TEXT_MATCH_RANKED, int limit = 10,
                       bool with_values = true) {
    EntriesSearchRequest req;
    req.set_term(term);
    req.set_match(match);
    req.set_limit(limit);
    req.set_with_values(with_values);
    return Call("Search", req, token, nullptr, "Entries");
  }

  EntriesSearchResponse MustSearchEntries(const std::string& term, const std::string& token,
                                          TextMatch match = TEXT_MATCH_RANKED,
                                          bool with_values = true) {
    Result r = SearchEntries(term, token, match, 10, with_values);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EntriesSearchResponse resp;
    EXPECT_TRUE(resp.ParseFromString(r.body));
    return resp;
  }

  static std::vector<std::string> Keys(const EntriesSearchResponse& r) {
    std::vector<std::string> v;
    for (const auto& e : r.entries()) v.push_back(e.key());
    return v;
  }

  QueryEntitiesResponse MustQuery(const std::string& text, const std::string& token,
                                  int page_size = 10, const std::string& page_token = "",
                                  EntityOrderBy order = ENTITY_ORDER_BY_UNSPECIFIED) {
    QueryEntitiesRequest req;
    req.set_text_query(text);
    req.set_text_match(TEXT_MATCH_RANKED);
    req.set_order_by(order);
    req.set_page_size(page_size);
    req.set_page_token(page_token);
    Result r = Call("QueryEntities", req, token, nullptr, "GlobalMemory");
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    QueryEntitiesResponse resp;
    EXPECT_TRUE(resp.ParseFromString(r.body));
    return resp;
  }

  static std::vector<std::string> Ids(const QueryEntitiesResponse& r) {
    std::vector<std::string> v;
    for (const auto& e : r.entities()) v.push_back(e.id());
    return v;
  }

  std::string scopes_, writer_;
};

TEST_F(RankedTextTest, EntriesRankAQuestionsWordsInAnyFormAndNumber) {
  for (size_t i = 0; i < kNotes.size(); i++)
    MustWriteEntry("n" + std::to_string(i), kNotes[i], writer_);

  // Two of eight words ("sister", "nurse"), stop words aside: found, first.
  EntriesSearchResponse r =
      MustSearchEntries("which of my relatives is a sister working as nurse?", writer_);
  ASSERT_FALSE(r.entries().empty());
  EXPECT_EQ("n0", r.entries(0).key());
  ASSERT_EQ(r.entries_size(), r.scores_size());
  for (int i = 1; i < r.scores_size(); i++) EXPECT_GE(r.scores(i - 1), r.scores(i));
  EXPECT_GT(r.scores(0), 0);
  EXPECT_EQ(kNotes[0], r.entries(0).value()) << "values as asked";

  // Stemming: "painting" finds "painted".
  EXPECT_EQ((std::vector<std::string>{"n1"}), Keys(MustSearchEntries("painting", writer_)));

  // A rare word outweighs a common one: two texts of one length, one with
  // "nurse" (in 2 entries), one with "Ana" (in 4).
  MustWriteEntry("rare", "nurse came today", writer_);
  MustWriteEntry("common", "Ana came today", writer_);
  r = MustSearchEntries("Ana nurse", writer_);
  std::vector<std::string> keys = Keys(r);
  ASSERT_EQ("n0", keys.at(0)) << "both words";
  auto at = [&](const std::string& k) {
    return std::find(keys.begin(), keys.end(), k) - keys.begin();
  };
  EXPECT_LT(at("rare"), at("common"));
  EXPECT_LT(at("common"), static_cast<long>(keys.size()));
  // Without values the same ranking and scores.
  EntriesSearchResponse bare = MustSearchEntries("Ana nurse", writer_, TEXT_MATCH_RANKED, false);
  EXPECT_EQ(keys, Keys(bare));
  ASSERT_EQ(r.scores_size(), bare.scores_size());
  for (int i = 0; i < r.scores_size(); i++) EXPECT_EQ(r.scores(i), bare.scores(i));
  EXPECT_EQ("", bare.entries(0).value());

  // The strict mode stays: a substring, no scores.
  r = MustSearchEntries("painted the kitchen", writer_, TEXT_MATCH_STRICT);
  EXPECT_EQ((std::vector<std::string>{"n1"}), Keys(r));
  EXPECT_EQ(0, r.scores_size());
  EXPECT_TRUE(MustSearchEntries("painting", writer_, TEXT_MATCH_STRICT).entries().empty());
  // Stop words alone match nothing.
  EXPECT_TRUE(MustSearchEntries("the of a", writer_).entries().empty());
}

TEST_F(RankedTextTest, HiddenEntriesNeitherAppearNorWeighInTheScores) {
  for (size_t i = 0; i < kNotes.size(); i++)
    MustWriteEntry("n" + std::to_string(i), kNotes[i], writer_);
  EntriesSearchResponse before = MustSearchEntries("Ana nurse", writer_);
  ASSERT_GE(before.entries_size(), 1);

  // Another tenant, another owner and a SECRET entry, all about Ana the nurse.
  std::string other_tenant = Token("t2", "alice", scopes_);
  std::string bob = Token("t1", "bob", scopes_);
  for (const std::string* tok : {&other_tenant, &bob})
    for (int i = 0; i < 3; i++)
      MustWriteEntry("h" + std::to_string(i), "Ana the nurse, nurse Ana", *tok);
  MustWriteEntry("secret", "Ana the nurse earns a secret salary", writer_, LABEL_SECRET);

  std::string alice_public = Token("t1", "alice", scopes_, "CONFIDENTIAL");
  EntriesSearchResponse after = MustSearchEntries("Ana nurse", alice_public);
  ASSERT_EQ(before.entries_size(), after.entries_size());
  for (int i = 0; i < after.entries_size(); i++) {
    EXPECT_EQ(before.entries(i).key(), after.entries(i).key());
    EXPECT_EQ(before.scores(i), after.scores(i)) << "a hidden entry changed a score";
  }
  // The SECRET one is there for a token that may read it, and changes them.
  EntriesSearchResponse all = MustSearchEntries("Ana nurse", writer_);
  EXPECT_EQ(before.entries_size() + 1, all.entries_size());
}

TEST_F(RankedTextTest, EntitiesRankByNameAndStringPropertiesAndPage) {
  for (size_t i = 0; i < kNotes.size(); i++)
    MustPutEntity("e" + std::to_string(i), "note " + std::to_string(i), kNotes[i], writer_);
  MustPutEntity("ana", "Ana Lopez", "a nurse in New York", writer_);

  QueryEntitiesResponse r = MustQuery("who is the nurse called Ana?", writer_);
  ASSERT_GE(r.entities_size(), 2);
  ASSERT_EQ(r.entities_size(), r.scores_size());
  std::vector<std::string> ids = Ids(r);
  EXPECT_TRUE(ids[0] == "ana" || ids[0] == "e0") << ids[0];
  for (int i = 1; i < r.scores_size(); i++) EXPECT_GE(r.scores(i - 1), r.scores(i));
  EXPECT_EQ("e1", Ids(MustQuery("painting", writer_)).at(0));

  // Pages of the ranking join up, by the cursor of the last score.
  QueryEntitiesResponse whole = MustQuery("Ana York nurse", writer_, 10);
  ASSERT_GE(whole.entities_size(), 4);
  std::vector<std::string> paged;
  std::string token;
  do {
    QueryEntitiesResponse p = MustQuery("Ana York nurse", writer_, 2, token);
    for (const auto& e : p.entities()) paged.push_back(e.id());
    token = p.next_page_token();
  } while (!token.empty() && paged.size() < 20);
  EXPECT_EQ(Ids(whole), paged);

  // Ranked by another key: those sharing a word, by name, paged.
  std::vector<std::string> by_name;
  token.clear();
  do {
    QueryEntitiesResponse p = MustQuery("Ana York nurse", writer_, 3, token, ENTITY_ORDER_BY_NAME);
    EXPECT_EQ(p.entities_size(), p.scores_size());
    for (const auto& e : p.entities()) by_name.push_back(e.name());
    token = p.next_page_token();
  } while (!token.empty() && by_name.size() < 20);
  EXPECT_EQ((std::vector<std::string>{"Ana Lopez", "note 0", "note 2", "note 3"}), by_name);

  // Strict (the default) still requires every word, and gives ts_rank.
  QueryEntitiesRequest strict;
  strict.set_text_query("nurse Ana");
  Result s = Call("QueryEntities", strict, writer_, nullptr, "GlobalMemory");
  ASSERT_TRUE(s.status.ok()) << s.status.error_message();
  QueryEntitiesResponse sr;
  ASSERT_TRUE(sr.ParseFromString(s.body));
  std::vector<std::string> strict_ids = Ids(sr);
  std::sort(strict_ids.begin(), strict_ids.end());
  EXPECT_EQ((std::vector<std::string>{"ana", "e0"}), strict_ids);
  EXPECT_EQ(sr.entities_size(), sr.scores_size());
}

TEST_F(RankedTextTest, HiddenEntitiesNeitherAppearNorWeighInTheScores) {
  for (size_t i = 0; i < kNotes.size(); i++)
    MustPutEntity("e" + std::to_string(i), "note " + std::to_string(i), kNotes[i], writer_);
  std::string alice_low = Token("t1", "alice", scopes_, "CONFIDENTIAL");
  QueryEntitiesResponse before = MustQuery("Ana nurse", alice_low);
  std::string bob = Token("t1", "bob", scopes_);
  std::string other_tenant = Token("t2", "alice", scopes_);
  MustPutEntity("b1", "Ana", "nurse nurse Ana", bob);
  MustPutEntity("t2", "Ana", "nurse nurse Ana", other_tenant);
  MustPutEntity("s1", "Ana", "the nurse's secret", writer_, LABEL_SECRET);
  QueryEntitiesResponse after = MustQuery("Ana nurse", alice_low);
  ASSERT_EQ(Ids(before), Ids(after));
  for (int i = 0; i < after.scores_size(); i++) EXPECT_EQ(before.scores(i), after.scores(i));
  std::vector<std::string> all = Ids(MustQuery("Ana nurse", writer_));
  EXPECT_NE(all.end(), std::find(all.begin(), all.end(), "s1"));
  EXPECT_EQ(all.end(), std::find(all.begin(), all.end(), "b1"));
}

TEST_F(RankedTextTest, AValueOfAMegabyteIsWrittenAndRankedByItsBeginning) {
  // 30000 distinct words, about 1 MB: more than a tsvector may hold whole.
  std::string big = "zebrafish";
  for (int i = 0; big.size() < 1000000; i++) big += " h" + std::to_string(i * 7919);
  MustWriteEntry("big", big, writer_);
  EntriesSearchResponse r = MustSearchEntries("zebrafish", writer_, TEXT_MATCH_RANKED, false);
  EXPECT_EQ((std::vector<std::string>{"big"}), Keys(r));
  // Append goes through the other write path.
  EntriesAppendRequest app;
  app.set_namespace_("app:notes:alice");
  app.set_key("big");
  app.set_value(" tail");
  Result a = Call("Append", app, writer_, nullptr, "Entries");
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ((std::vector<std::string>{"big"}),
            Keys(MustSearchEntries("zebrafish", writer_, TEXT_MATCH_RANKED, false)));
}

// A --text-language PostgreSQL has no configuration of (libstemmer's
// "porter") is said at start; ranked queries then match words unstemmed.
TEST_F(RankedTextTest, ALanguagePostgreSQLLacksIsSaidAtStart) {
  const std::string warning = "PostgreSQL has no text search configuration";
  EXPECT_EQ(std::string::npos, a_.proc->Log().find(warning)) << "english is PostgreSQL's";
  MemorydProcess porter({"--pg-url=" + db_.url(), "--shutdown-grace=1",
                         "--jwks=" + keys_->jwks_path(), "--text-language=porter"});
  ASSERT_TRUE(porter.Start()) << porter.Log();
  EXPECT_NE(std::string::npos, porter.LogWith(warning).find(warning)) << porter.Log();
  auto ch = testing_client::Connect(porter.port());
  EntriesWriteRequest w;
  w.set_namespace_("app:notes:alice");
  w.set_key("p");
  w.set_value("we painted the fence");
  Result r = testing_client::Unary(ch, "/memory.v1.Entries/Write", w.SerializeAsString(), 10000,
                                   {{"authorization", TestKeys::Bearer(writer_)}});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EntriesSearchRequest q;
  q.set_match(TEXT_MATCH_RANKED);
  for (const char* term : {"painted", "painting"}) {
    q.set_term(term);
    r = testing_client::Unary(ch, "/memory.v1.Entries/Search", q.SerializeAsString(), 10000,
                              {{"authorization", TestKeys::Bearer(writer_)}});
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EntriesSearchResponse resp;
    ASSERT_TRUE(resp.ParseFromString(r.body));
    EXPECT_EQ(std::string(term) == "painted" ? 1 : 0, resp.entries_size()) << term;
  }
}

TEST_F(RankedTextTest, BadRankedRequestsAreRefused) {
  Result r = SearchEntries("", writer_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("give term"))
      << r.status.error_message();
  r = SearchEntries("x", writer_, static_cast<TextMatch>(9));
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("match: 9"));
  QueryEntitiesRequest q;
  q.set_text_match(TEXT_MATCH_RANKED);
  r = Call("QueryEntities", q, writer_, nullptr, "GlobalMemory");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("give text_query"));
  // Injection strings are words like any other.
  MustWriteEntry("k", "a plain note", writer_);
  EXPECT_TRUE(MustSearchEntries("'); DROP TABLE entries; --", writer_).entries().empty());
  EXPECT_EQ(1, MustSearchEntries("note", writer_).entries_size());
}

}  // namespace
