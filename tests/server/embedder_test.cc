// Text instead of vectors, end to end: the real memoryd binary, real
// tokens, real PostgreSQL, and the embedder contract stand-in
// (tests/contract/embedder_contract_server.py: it checks every request
// against the OpenAI embeddings API's shape and answers in its response
// and error shapes). EpisodicMemory Upsert and Search by text, collections
// that record their model and refuse another, batching, each of the
// embedder's faults as a clear status that changed nothing, the Router's
// text queries, and the long-term recall with its per-user read diode.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "memory/v1/episodic_memory.pb.h"
#include "memory/v1/global_memory.pb.h"
#include "memory/v1/router.pb.h"
#include "tests/testing/embedder_standin.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Unary;

const char kModel[] = "standin-embed-16";

google::protobuf::Struct Json(const std::string& json) {
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  return s;
}

// The stand-in's recorded contract violations, "[]" when there were none.
std::string Violations(EmbedderStandin& e) {
  std::string v = e.Violations();
  v.erase(v.find_last_not_of(" \r\n") + 1);
  return v;
}

// How many requests the stand-in's log holds (its JSON list's entries).
int RequestCount(EmbedderStandin& e) {
  std::string log = e.Requests();
  int n = 0;
  for (size_t at = 0; (at = log.find("\"method\"", at)) != std::string::npos; at++) n++;
  return n;
}

class EmbedderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    ASSERT_TRUE(emb_.Start(std::string(kModel) + "=16,standin-embed-32=32")) << emb_.Log();
    proc_ = Launch({});
    all_ = Token("t1", "alice",
                 "episodic:read:all episodic:write:all global:read:all "
                 "global:write:all router:query");
  }

  void TearDown() override {
    // Every request memoryd sent matched the embeddings API's shape.
    EXPECT_EQ("[]", Violations(emb_));
  }

  // A memoryd on the test database with the stand-in as its embedder
  // (model: kModel unless extra names another), trusting the first one's
  // keys.
  std::unique_ptr<MemorydProcess> Launch(std::vector<std::string> extra, bool embedder = true) {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=1"};
    if (embedder) {
      args.push_back("--embedder-url=" + emb_.base_url());
      args.push_back(std::string("--embedder-model=") + kModel);
    }
    if (keys_) args.push_back("--jwks=" + keys_->jwks_path());
    args.insert(args.end(), extra.begin(), extra.end());
    auto m = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(m->Start()) << m->Log();
    if (!keys_) keys_ = m->keys();
    return m;
  }

  std::string Token(const std::string& tenant, const std::string& sub, const std::string& scope,
                    const std::string& clr = "SECRET") {
    TestClaims c;
    c.tenant = tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = clr;
    return keys_->Mint(c);
  }

  Result Call(const std::string& method, const google::protobuf::Message& req,
              const std::string& token, MemorydProcess* m = nullptr, int deadline_ms = 10000) {
    auto ch = testing_client::Connect((m ? m : proc_.get())->port());
    return Unary(ch, "/memory.v1." + method, req.SerializeAsString(), deadline_ms,
                 {{"authorization", TestKeys::Bearer(token)}});
  }

  template <typename Resp>
  Resp Must(const std::string& method, const google::protobuf::Message& req,
            const std::string& token, MemorydProcess* m = nullptr) {
    Result res = Call(method, req, token, m);
    EXPECT_TRUE(res.status.ok()) << method << ": " << res.status.error_message();
    Resp resp;
    EXPECT_TRUE(resp.ParseFromString(res.body));
    return resp;
  }

  Result Create(const std::string& name, int dims, const std::string& model = "",
                MemorydProcess* m = nullptr) {
    CreateCollectionRequest req;
    req.set_name(name);
    req.set_dims(dims);
    req.set_distance(DISTANCE_COSINE);
    req.set_embedder_model(model);
    return Call("EpisodicMemory/CreateCollection", req, all_, m);
  }

  Collection Get(const std::string& name) {
    GetCollectionRequest req;
    req.set_name(name);
    return Must<GetCollectionResponse>("EpisodicMemory/GetCollection", req, all_).collection();
  }

  static PointInput TextPoint(uint64_t id, const std::string& text,
                              Label label = LABEL_UNSPECIFIED) {
    PointInput p;
    p.mutable_id()->set_num(id);
    p.set_text(text);
    *p.mutable_payload() = Json("{\"text\":\"" + text + "\"}");
    p.set_label(label);
    return p;
  }

  Result Upsert(const std::string& coll, const std::vector<PointInput>& pts,
                const std::string& token = "", MemorydProcess* m = nullptr,
                int deadline_ms = 10000) {
    EpisodicMemoryUpsertRequest req;
    req.set_collection(coll);
    for (const auto& p : pts) *req.add_points() = p;
    return Call("EpisodicMemory/Upsert", req, token.empty() ? all_ : token, m, deadline_ms);
  }

  // By the text's embedding alone (SEARCH_MODE_VECTOR), unless mode says.
  Result Search(const std::string& coll, const std::string& text, const std::string& token = "",
                MemorydProcess* m = nullptr, int deadline_ms = 10000,
                SearchMode mode = SEARCH_MODE_VECTOR) {
    EpisodicMemorySearchRequest req;
    req.set_collection(coll);
    req.set_text(text);
    req.set_limit(10);
    req.set_with_payload(true);
    req.set_mode(mode);
    return Call("EpisodicMemory/Search", req, token.empty() ? all_ : token, m, deadline_ms);
  }

  // The payload texts of a text search's hits, best first.
  std::vector<std::string> SearchTexts(const std::string& coll, const std::string& text,
                                       const std::string& token = "") {
    Result r = Search(coll, text, token);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EpisodicMemorySearchResponse resp;
    resp.ParseFromString(r.body);
    std::vector<std::string> out;
    for (const auto& sp : resp.points())
      out.push_back(sp.point().payload().fields().at("text").string_value());
    return out;
  }

  int64_t Count(const std::string& coll) {
    EpisodicMemoryCountRequest req;
    req.set_collection(coll);
    req.set_exact(true);
    return Must<EpisodicMemoryCountResponse>("EpisodicMemory/Count", req, all_).count();
  }

  PgTestDb db_;
  EmbedderStandin emb_;
  TestKeys* keys_ = nullptr;
  std::unique_ptr<MemorydProcess> proc_;
  std::string all_;
};

// ---------------------------------------------------------------- round trip

TEST_F(EmbedderTest, TextIsEmbeddedStoredAndSearchedWithTheCollectionsModel) {
  // dims 0: the model's length, asked of the embedder; the model recorded.
  Result c = Create("notes", 0);
  ASSERT_TRUE(c.status.ok()) << c.status.error_message();
  Collection col = Get("notes");
  EXPECT_EQ(16, col.dims());
  EXPECT_EQ(kModel, col.embedder_model());

  ASSERT_TRUE(Upsert("notes", {TextPoint(1, "the quick red fox jumps"),
                               TextPoint(2, "tax law and accounting rules"),
                               TextPoint(3, "a lazy brown dog sleeps")})
                  .status.ok());
  EXPECT_EQ(3, Count("notes"));
  auto hits = SearchTexts("notes", "red fox");
  ASSERT_EQ(3u, hits.size());
  EXPECT_EQ("the quick red fox jumps", hits[0]);
  EXPECT_EQ("tax law and accounting rules", SearchTexts("notes", "accounting law")[0]);

  // The stored vector is the embedder's for that text, at unit length: a
  // search by the vector the stand-in gives for the text finds it first
  // with a score of 1.
  std::string body = emb_.Send(
      "POST", "/v1/embeddings",
      std::string("{\"model\":\"") + kModel + "\",\"input\":[\"a lazy brown dog sleeps\"]}");
  google::protobuf::Struct answer = Json(body);
  const auto& vec =
      answer.fields().at("data").list_value().values(0).struct_value().fields().at("embedding");
  EpisodicMemorySearchRequest vreq;
  vreq.set_collection("notes");
  for (const auto& x : vec.list_value().values()) vreq.add_vector(float(x.number_value()));
  auto vresp = Must<EpisodicMemorySearchResponse>("EpisodicMemory/Search", vreq, all_);
  ASSERT_GT(vresp.points_size(), 0);
  EXPECT_EQ(3u, vresp.points(0).point().id().num());
  EXPECT_NEAR(1.0, vresp.points(0).score(), 1e-4);

  // Every embeddings request had the API's shape with memoryd's model.
  std::string log = emb_.Requests();
  EXPECT_NE(std::string::npos, log.find("\"encoding_format\":\"float\"")) << log;
  EXPECT_NE(std::string::npos, log.find(std::string("\"model\":\"") + kModel)) << log;
  EXPECT_EQ(std::string::npos, log.find("standin-embed-32")) << log;
}

TEST_F(EmbedderTest, TextsGoInBatchesOfEmbedderBatch) {
  auto small = Launch({"--embedder-batch=2"});
  ASSERT_TRUE(Create("b", 16, "", small.get()).status.ok());
  emb_.ClearRequests();
  const std::vector<std::string> texts = {"apples", "violins", "glaciers", "tax", "sailing"};
  std::vector<PointInput> pts;
  for (size_t i = 0; i < texts.size(); i++) pts.push_back(TextPoint(i + 1, texts[i]));
  ASSERT_TRUE(Upsert("b", pts, "", small.get()).status.ok());
  EXPECT_EQ(3, RequestCount(emb_));  // 2 + 2 + 1
  std::string log = emb_.Requests();
  EXPECT_NE(std::string::npos, log.find("\"input\":[\"sailing\"]")) << log;
  EXPECT_EQ(5, Count("b"));
  // Each text landed on its own point: every one is its own best hit, at
  // a score of 1 (the same text, the same vector).
  for (const auto& t : texts) {
    EpisodicMemorySearchRequest req;
    req.set_collection("b");
    req.set_text(t);
    req.set_with_payload(true);
    req.set_mode(SEARCH_MODE_VECTOR);
    auto resp = Must<EpisodicMemorySearchResponse>("EpisodicMemory/Search", req, all_);
    ASSERT_GT(resp.points_size(), 0);
    EXPECT_EQ(t, resp.points(0).point().payload().fields().at("text").string_value());
    EXPECT_NEAR(1.0, resp.points(0).score(), 1e-4);
  }
}

// ---------------------------------------------------------------- models

TEST_F(EmbedderTest, ACollectionKeepsOneModelAndRefusesTextOfAnother) {
  // Recorded by the first text upsert.
  ASSERT_TRUE(Create("first", 16).status.ok());
  EXPECT_EQ("", Get("first").embedder_model());
  ASSERT_TRUE(Upsert("first", {TextPoint(1, "hello there")}).status.ok());
  EXPECT_EQ(kModel, Get("first").embedder_model());

  // Declared at creation for another model: text is refused, nothing is
  // written and the embedder is not asked; vectors are the client's word.
  ASSERT_TRUE(Create("theirs", 16, "text-embedding-3-small").status.ok());
  emb_.ClearRequests();
  Result r = Upsert("theirs", {TextPoint(1, "hello")});
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("text-embedding-3-small"))
      << r.status.error_message();
  EXPECT_NE(std::string::npos, r.status.error_message().find(kModel)) << r.status.error_message();
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, Search("theirs", "hello").status.error_code());
  EXPECT_EQ(0, RequestCount(emb_));
  EXPECT_EQ(0, Count("theirs"));
  PointInput raw;
  raw.mutable_id()->set_num(9);
  for (int i = 0; i < 16; i++) raw.add_vector(i == 3 ? 1.0f : 0.0f);
  EXPECT_TRUE(Upsert("theirs", {raw}).status.ok());

  // A replica embedding with another model refuses the recorded
  // collection, and a collection of another length is refused without
  // recording anything.
  auto other = Launch({"--embedder-model=standin-embed-32"});
  r = Upsert("first", {TextPoint(2, "more")}, "", other.get());
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("mixing models is refused"))
      << r.status.error_message();
  r = Search("first", "hello", "", other.get());
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  ASSERT_TRUE(Create("eight", 8).status.ok());
  r = Upsert("eight", {TextPoint(1, "hello")});
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("16-dimensional"))
      << r.status.error_message();
  EXPECT_NE(std::string::npos, r.status.error_message().find("8 are needed"))
      << r.status.error_message();
  EXPECT_EQ("", Get("eight").embedder_model());
  EXPECT_EQ(0, Count("eight"));

  // dims 0 with a declared model other than the server's is refused.
  r = Create("clash", 0, "standin-embed-32");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("embedder_model"));
}

// ---------------------------------------------------------------- bad input

TEST_F(EmbedderTest, BadTextIsRefusedAndChangesNothing) {
  ASSERT_TRUE(Create("c", 16).status.ok());
  emb_.ClearRequests();
  PointInput both = TextPoint(1, "hello");
  both.add_vector(1.0f);  // a vector with the text is the point's: 16 are needed
  Result r = Upsert("c", {TextPoint(2, "fine"), both});
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("points[1].vector: 1 components"))
      << r.status.error_message();
  r = Upsert("c", {TextPoint(1, std::string(32769, 'a'))});
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("points[0].text: 32769 bytes"))
      << r.status.error_message();
  // PII in a text is refused under the default policy (reject): it would
  // have been sent to the embedder.
  r = Upsert("c", {TextPoint(1, "write to bob@example.com")});
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("points[0].text"))
      << r.status.error_message();
  EpisodicMemorySearchRequest sboth;
  sboth.set_collection("c");
  sboth.set_text("x");
  sboth.add_vector(1.0f);
  r = Call("EpisodicMemory/Search", sboth, all_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("vector and text"));
  EXPECT_EQ(0, Count("c"));
  EXPECT_EQ(0, RequestCount(emb_));  // nothing reached the embedder
  EXPECT_EQ("", Get("c").embedder_model());
}

TEST_F(EmbedderTest, UnderRedactTheRedactedTextIsWhatIsEmbedded) {
  auto redact = Launch({"--pii-policy=redact"});
  ASSERT_TRUE(Create("r", 16, "", redact.get()).status.ok());
  emb_.ClearRequests();
  PointInput p = TextPoint(1, "write to bob@example.com about the trip");
  p.clear_payload();
  ASSERT_TRUE(Upsert("r", {p}, "", redact.get()).status.ok());
  std::string log = emb_.Requests();
  EXPECT_EQ(std::string::npos, log.find("bob@example.com")) << log;
  EXPECT_NE(std::string::npos, log.find("about the trip")) << log;
  EXPECT_EQ(1, Count("r"));
}

TEST_F(EmbedderTest, WithoutAnEmbedderTextIsKeptAndRankedLexically) {
  auto plain = Launch({}, /*embedder=*/false);
  ASSERT_TRUE(Create("v", 4, "", plain.get()).status.ok());
  Result r = Upsert("v", {TextPoint(1, "hello there"), TextPoint(2, "goodbye")}, "", plain.get());
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ("", Get("v").embedder_model());  // no model recorded: nothing was embedded
  r = Search("v", "hello", "", plain.get(), 10000, SEARCH_MODE_AUTO);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EpisodicMemorySearchResponse hits;
  ASSERT_TRUE(hits.ParseFromString(r.body));
  ASSERT_EQ(1, hits.points_size());
  EXPECT_EQ(1u, hits.points(0).point().id().num());
  EXPECT_EQ("hello there", hits.points(0).point().text());
  // The Router's vector part ranks the same way.
  RouterQueryRequest q;
  q.mutable_vector_search()->set_collection("v");
  q.mutable_vector_search()->set_text("hello");
  r = Call("Router/Query", q, all_, plain.get());
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  RouterQueryResponse rr;
  ASSERT_TRUE(rr.ParseFromString(r.body));
  ASSERT_EQ(1, rr.results_size());
  // Asking for the vector search itself still needs the embedder.
  EpisodicMemorySearchRequest vec;
  vec.set_collection("v");
  vec.set_text("hello");
  vec.set_mode(SEARCH_MODE_VECTOR);
  r = Call("EpisodicMemory/Search", vec, all_, plain.get());
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("--embedder-url"))
      << r.status.error_message();
}

TEST_F(EmbedderTest, AVectorGivenWithItsTextIsKeptAndTheTextNotEmbedded) {
  ASSERT_TRUE(Create("c", 16).status.ok());
  emb_.ClearRequests();
  PointInput both = TextPoint(1, "the harbour ferry leaves at noon");
  for (int i = 0; i < 16; i++) both.add_vector(i == 3 ? 1.0f : 0.0f);
  ASSERT_TRUE(Upsert("c", {both}).status.ok());
  EXPECT_EQ(0, RequestCount(emb_));  // the client's vector: nothing embedded
  EpisodicMemorySearchRequest lex;
  lex.set_collection("c");
  lex.set_text("ferry");
  lex.set_mode(SEARCH_MODE_LEXICAL);
  lex.set_with_payload(true);
  Result r = Call("EpisodicMemory/Search", lex, all_);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EpisodicMemorySearchResponse hits;
  ASSERT_TRUE(hits.ParseFromString(r.body));
  ASSERT_EQ(1, hits.points_size());
  EXPECT_EQ("the harbour ferry leaves at noon", hits.points(0).point().text());
  // AUTO with an embedder: the text's embedding searches the vectors too.
  ASSERT_TRUE(Search("c", "ferry", "", nullptr, 10000, SEARCH_MODE_AUTO).status.ok());
  EXPECT_EQ(1, RequestCount(emb_));
}

// ---------------------------------------------------------------- hybrid

// AUTO with an embedder ranks a text both ways and fuses the rankings:
// each hit says which parts found it, at which rank, and its score is
// the sum of weight / (60 + rank) over them.
TEST_F(EmbedderTest, HybridSearchFusesTheLexicalAndTheVectorRankings) {
  ASSERT_TRUE(Create("h", 0).status.ok());
  std::vector<PointInput> pts;
  const char* texts[] = {"the ferry to the island leaves at noon", "ferry tickets are sold online",
                         "the island has one bakery", "a bakery opens at seven",
                         "tickets for the museum"};
  for (uint64_t i = 0; i < 5; i++) pts.push_back(TextPoint(i + 1, texts[i]));
  ASSERT_TRUE(Upsert("h", pts).status.ok());
  Result r = Search("h", "ferry tickets", "", nullptr, 10000, SEARCH_MODE_AUTO);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EpisodicMemorySearchResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_FALSE(resp.partial());
  ASSERT_EQ(5, resp.points_size());  // the vector part ranks every point
  int both = 0;
  std::set<std::pair<int, int>> ranks;  // (part, rank) appear once each
  for (int i = 0; i < resp.points_size(); i++) {
    const ScoredPoint& sp = resp.points(i);
    double want = 0;
    for (const SearchPartHit& ph : sp.parts()) {
      EXPECT_GE(ph.rank(), 1);
      EXPECT_TRUE(ranks.insert({ph.part(), ph.rank()}).second) << ph.part() << " " << ph.rank();
      want += 1.0 / (60 + ph.rank());
    }
    EXPECT_NEAR(want, sp.score(), 1e-6) << i;
    if (i) {
      EXPECT_GE(resp.points(i - 1).score(), sp.score());
    }
    both += sp.parts_size() == 2;
  }
  EXPECT_EQ(3, both);  // the three texts sharing a word with the question
  // The lexical part's own best is the text with both words.
  int lexical_best = 0;
  for (const ScoredPoint& sp : resp.points()) {
    for (const SearchPartHit& ph : sp.parts()) {
      if (ph.part() != SEARCH_PART_LEXICAL || ph.rank() != 1) continue;
      lexical_best++;
      EXPECT_EQ("ferry tickets are sold online", sp.point().text());
    }
  }
  EXPECT_EQ(1, lexical_best);

  // Weights: the vector part's ranking alone decides when it weighs 100.
  EpisodicMemorySearchRequest wreq;
  wreq.set_collection("h");
  wreq.set_text("ferry tickets");
  wreq.set_mode(SEARCH_MODE_HYBRID);
  wreq.set_vector_weight(100);
  auto weighted = Must<EpisodicMemorySearchResponse>("EpisodicMemory/Search", wreq, all_);
  auto vec_only = Must<EpisodicMemorySearchResponse>(
      "EpisodicMemory/Search",
      [&] {
        EpisodicMemorySearchRequest v = wreq;
        v.set_mode(SEARCH_MODE_VECTOR);
        return v;
      }(),
      all_);
  ASSERT_EQ(vec_only.points_size(), weighted.points_size());
  for (int i = 0; i < weighted.points_size(); i++)
    EXPECT_EQ(vec_only.points(i).point().id().num(), weighted.points(i).point().id().num()) << i;
  EXPECT_EQ(SEARCH_PART_VECTOR, vec_only.points(0).parts(0).part());

  // Paging cuts the fused ranking.
  wreq.set_vector_weight(0);
  wreq.set_limit(2);
  wreq.set_offset(1);
  auto page = Must<EpisodicMemorySearchResponse>("EpisodicMemory/Search", wreq, all_);
  ASSERT_EQ(2, page.points_size());
  EXPECT_EQ(resp.points(1).point().id().num(), page.points(0).point().id().num());
  EXPECT_EQ(resp.points(2).point().id().num(), page.points(1).point().id().num());

  // What HYBRID cannot take.
  EpisodicMemorySearchRequest bad = wreq;
  bad.set_score_threshold(0.5f);
  r = Call("EpisodicMemory/Search", bad, all_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("score_threshold: not with HYBRID"));
  bad = wreq;
  bad.set_lexical_weight(-1);
  r = Call("EpisodicMemory/Search", bad, all_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("lexical_weight"));
  // AUTO under a threshold is the single search by the embedding.
  bad = wreq;
  bad.set_mode(SEARCH_MODE_AUTO);
  bad.set_score_threshold(-1);
  auto single = Must<EpisodicMemorySearchResponse>("EpisodicMemory/Search", bad, all_);
  ASSERT_GT(single.points_size(), 0);
  EXPECT_EQ(1, single.points(0).parts_size());
  EXPECT_EQ(SEARCH_PART_VECTOR, single.points(0).parts(0).part());
}

// The embedder down or slow leaves the lexical part's answer, marked
// partial, by the call's deadline; a setup fault still fails the call.
TEST_F(EmbedderTest, AHybridWhoseVectorPartFailsAnswersWithTheLexicalPart) {
  ASSERT_TRUE(Create("p", 0).status.ok());
  ASSERT_TRUE(Upsert("p", {TextPoint(1, "the ferry leaves at noon"), TextPoint(2, "a bakery")})
                  .status.ok());
  ASSERT_NE(std::string::npos, emb_.Fault(R"({"status": 503})").find("faults"));
  Result r = Search("p", "ferry", "", nullptr, 10000, SEARCH_MODE_AUTO);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EpisodicMemorySearchResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_TRUE(resp.partial());
  EXPECT_NE(std::string::npos, resp.partial_detail().find("vector part: UNAVAILABLE"))
      << resp.partial_detail();
  ASSERT_EQ(1, resp.points_size());
  EXPECT_EQ(1u, resp.points(0).point().id().num());
  ASSERT_EQ(1, resp.points(0).parts_size());
  EXPECT_EQ(SEARCH_PART_LEXICAL, resp.points(0).parts(0).part());
  // The Router's vector part answers the same way, and says so.
  ASSERT_NE(std::string::npos, emb_.Fault(R"({"status": 503})").find("faults"));
  RouterQueryRequest q;
  q.mutable_vector_search()->set_collection("p");
  q.mutable_vector_search()->set_text("ferry");
  auto routed = Must<RouterQueryResponse>("Router/Query", q, all_);
  EXPECT_TRUE(routed.partial());
  ASSERT_EQ(1, routed.results_size());
  ASSERT_EQ(1, routed.results(0).search_parts_size());
  EXPECT_EQ(SEARCH_PART_LEXICAL, routed.results(0).search_parts(0).part());
  ASSERT_EQ(1, routed.tiers_size());
  EXPECT_EQ(TIER_OUTCOME_ANSWERED, routed.tiers(0).outcome());
  EXPECT_NE(std::string::npos, routed.tiers(0).detail().find("vector part: UNAVAILABLE"))
      << routed.tiers(0).detail();
  emb_.ClearFaults();

  emb_.Fault(R"({"delay_ms": 4000})");
  auto t0 = std::chrono::steady_clock::now();
  r = Search("p", "ferry", "", nullptr, 1500, SEARCH_MODE_HYBRID);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_TRUE(resp.partial());
  EXPECT_NE(std::string::npos, resp.partial_detail().find("DEADLINE_EXCEEDED"))
      << resp.partial_detail();
  EXPECT_EQ(1, resp.points_size());
  EXPECT_LT(ms, 1500) << "answered by the call's deadline";
  emb_.ClearFaults();

  // A collection of another model: the call's fault, not a partial answer.
  ASSERT_TRUE(Create("theirs32", 32, "standin-embed-32").status.ok());
  ASSERT_TRUE(Upsert("theirs32", {[] {
                       PointInput p;
                       p.mutable_id()->set_num(1);
                       for (int i = 0; i < 32; i++) p.add_vector(i == 0 ? 1.f : 0.f);
                       p.set_text("ferry");
                       return p;
                     }()})
                  .status.ok());
  r = Search("theirs32", "ferry", "", nullptr, 10000, SEARCH_MODE_HYBRID);
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code()) << r.status.error_message();
}

// ---------------------------------------------------------------- faults

TEST_F(EmbedderTest, EachEmbedderFaultIsAClearStatusAndWritesNothing) {
  ASSERT_TRUE(Create("f", 16).status.ok());
  struct Case {
    std::string fault;
    StatusCode code;
    std::string want;
  } cases[] = {
      {R"({"status": 503})", StatusCode::UNAVAILABLE, "embedder is unavailable (HTTP 503)"},
      {R"({"status": 429, "body": {"error": {"message": "Rate limit reached", "type": "requests",
          "param": null, "code": "rate_limit_exceeded"}}})",
       StatusCode::UNAVAILABLE, "Rate limit reached (type requests, code rate_limit_exceeded)"},
      {R"({"status": 400, "body": {"error": {"message": "input too long", "type":
          "invalid_request_error", "param": "input", "code": null}}})",
       StatusCode::INVALID_ARGUMENT, "input too long"},
      {R"({"status": 401, "body": {"error": {"message": "Incorrect API key provided.", "type":
          "invalid_request_error", "param": null, "code": "invalid_api_key"}}})",
       StatusCode::UNAVAILABLE, "refused the API key"},
      {R"({"status": 200, "body": {"object": "list", "data": [], "model": "m",
          "usage": {"prompt_tokens": 0, "total_tokens": 0}}})",
       StatusCode::INTERNAL, "answered 0 embeddings for 1 inputs"},
      {R"({"status": 200, "body": "not json"})", StatusCode::INTERNAL, "not JSON"},
      // libcurl sends again once on a fresh connection when a kept-alive
      // one closes unanswered: both attempts are dropped.
      {R"({"close": true, "count": 2})", StatusCode::UNAVAILABLE, "unreachable"},
  };
  for (const auto& c : cases) {
    ASSERT_NE(std::string::npos, emb_.Fault(c.fault).find("faults")) << c.fault;
    Result r = Upsert("f", {TextPoint(1, "hello")});
    EXPECT_EQ(c.code, r.status.error_code()) << c.fault << ": " << r.status.error_message();
    EXPECT_NE(std::string::npos, r.status.error_message().find(c.want))
        << c.fault << ": " << r.status.error_message();
    emb_.ClearFaults();
  }
  EXPECT_EQ(0, Count("f"));
  EXPECT_EQ("", Get("f").embedder_model());  // a failed first upsert records nothing

  // A model the embedder does not have: memoryd's configuration.
  auto unknown = Launch({"--embedder-model=no-such-model"});
  Result r = Upsert("f", {TextPoint(1, "hello")}, "", unknown.get());
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("no-such-model` does not exist"))
      << r.status.error_message();

  // Slow: the call ends at its deadline, not the embedder's.
  emb_.Fault(R"({"delay_ms": 4000})");
  auto t0 = std::chrono::steady_clock::now();
  r = Search("f", "hello", "", nullptr, 800);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(StatusCode::DEADLINE_EXCEEDED, r.status.error_code()) << r.status.error_message();
  EXPECT_LT(took, std::chrono::milliseconds(3000));
  emb_.ClearFaults();

  // Down: UNAVAILABLE naming where it was looked for; back: it answers.
  int port = emb_.port();
  emb_.Stop();
  r = Search("f", "hello");
  EXPECT_EQ(StatusCode::UNAVAILABLE, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("embedder at http://127.0.0.1:"))
      << r.status.error_message();
  ASSERT_TRUE(emb_.Start(std::string(kModel) + "=16", "", port)) << emb_.Log();
  EXPECT_TRUE(Upsert("f", {TextPoint(1, "hello")}).status.ok());
  EXPECT_EQ(1, Count("f"));
}

TEST_F(EmbedderTest, TheApiKeyGoesAsABearerToken) {
  EmbedderStandin locked;
  ASSERT_TRUE(locked.Start(std::string(kModel) + "=16", "sekret")) << locked.Log();
  auto good = Launch({"--embedder-url=" + locked.base_url(), "--embedder-api-key=sekret"});
  ASSERT_TRUE(Create("k", 16, "", good.get()).status.ok());
  EXPECT_TRUE(Upsert("k", {TextPoint(1, "hello")}, "", good.get()).status.ok());
  auto bad = Launch({"--embedder-url=" + locked.base_url(), "--embedder-api-key=wrong"});
  Result r = Search("k", "hello", "", bad.get());
  EXPECT_EQ(StatusCode::UNAVAILABLE, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("Incorrect API key"))
      << r.status.error_message();
  // Neither key is ever logged.
  EXPECT_EQ(std::string::npos, good->Log().find("sekret"));
  EXPECT_EQ(std::string::npos, bad->Log().find("wrong"));
  EXPECT_EQ("[]", Violations(locked));
}

// ---------------------------------------------------------------- router

class RecallTest : public EmbedderTest {
 protected:
  void SetUp() override {
    EmbedderTest::SetUp();
    alice_ = Token("t1", "alice",
                   "episodic:read episodic:write global:read global:write router:query", "SECRET");
    bob_ = Token("t1", "bob", "episodic:read episodic:write global:read global:write router:query",
                 "SECRET");
    ASSERT_TRUE(Create("mem", 16).status.ok());
    ASSERT_TRUE(Upsert("mem",
                       {TextPoint(1, "alice saw a red fox in the garden"),
                        TextPoint(2, "alice pays her taxes in april")},
                       alice_)
                    .status.ok());
    ASSERT_TRUE(Upsert("mem",
                       {TextPoint(3, "bob keeps a red fox as a pet"),
                        TextPoint(4, "bob has a secret about the fox", LABEL_SECRET)},
                       bob_)
                    .status.ok());
    Entity(alice_, "fox-a", "animal", "red fox of the garden");
    Entity(bob_, "fox-b", "animal", "pet red fox");
  }

  void Entity(const std::string& token, const std::string& id, const std::string& type,
              const std::string& name) {
    PutEntityRequest req;
    req.set_id(id);
    req.set_type(type);
    req.set_name(name);
    Result r = Call("GlobalMemory/PutEntity", req, token);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }

  RouterQueryRequest Recall(const std::string& text, const std::string& user = "") {
    RouterQueryRequest q;
    q.mutable_recall()->set_text(text);
    q.mutable_recall()->set_collection("mem");
    q.mutable_recall()->set_user(user);
    q.set_limit(10);
    return q;
  }

  // What a recall returned: "point:<id>" and "entity:<id>", best first.
  std::vector<std::string> Recalled(const RouterQueryRequest& q, const std::string& token,
                                    RouterQueryResponse* out = nullptr) {
    Result r = Call("Router/Query", q, token);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    RouterQueryResponse resp;
    resp.ParseFromString(r.body);
    std::vector<std::string> got;
    for (const auto& res : resp.results())
      got.push_back(res.has_entity() ? "entity:" + res.entity().id()
                                     : "point:" + std::to_string(res.point().id().num()));
    if (out) *out = resp;
    return got;
  }

  std::string alice_, bob_;
};

TEST_F(RecallTest, VectorAndHybridQueriesTakeText) {
  RouterQueryRequest q;
  q.mutable_vector_search()->set_collection("mem");
  q.mutable_vector_search()->set_text("taxes in april");
  q.mutable_vector_search()->set_with_payload(true);
  auto resp = Must<RouterQueryResponse>("Router/Query", q, alice_);
  ASSERT_GT(resp.results_size(), 0);
  EXPECT_EQ(2u, resp.results(0).point().id().num());

  RouterQueryRequest h;
  h.mutable_hybrid()->mutable_vector_search()->set_collection("mem");
  h.mutable_hybrid()->mutable_vector_search()->set_text("red fox");
  h.mutable_hybrid()->mutable_graph_query()->set_text_query("fox");
  resp = Must<RouterQueryResponse>("Router/Query", h, all_);
  std::set<std::string> tiers;
  for (const auto& t : resp.tiers())
    if (t.outcome() == TIER_OUTCOME_ANSWERED) tiers.insert(Tier_Name(t.tier()));
  EXPECT_EQ((std::set<std::string>{"TIER_EPISODIC", "TIER_GLOBAL"}), tiers);

  // Both a vector and a text: the request's fault.
  q.mutable_vector_search()->add_vector(1.0f);
  Result r = Call("Router/Query", q, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
}

TEST_F(RecallTest, RecallReturnsOnlyTheUsersOwnMemories) {
  // The caller's own, even with the `:all` breadth: alice's fox and her
  // entity, never bob's.
  RouterQueryResponse resp;
  auto got = Recalled(Recall("red fox"), all_, &resp);
  std::set<std::string> s(got.begin(), got.end());
  EXPECT_TRUE(s.count("point:1")) << ::testing::PrintToString(got);
  EXPECT_TRUE(s.count("entity:fox-a")) << ::testing::PrintToString(got);
  EXPECT_FALSE(s.count("point:3") || s.count("point:4") || s.count("entity:fox-b"))
      << ::testing::PrintToString(got);
  EXPECT_EQ(2, resp.tiers_size());
  EXPECT_FALSE(resp.partial());
  // The best answers to the text are alice's fox point and entity (equal
  // fused scores: the graph's first).
  auto best = Recalled(Recall("a red fox in the garden"), alice_);
  ASSERT_GE(best.size(), 2u);
  EXPECT_EQ((std::set<std::string>{"point:1", "entity:fox-a"}),
            (std::set<std::string>{best[0], best[1]}));

  // For bob, with the `:all` breadth: bob's only.
  got = Recalled(Recall("red fox", "bob"), all_);
  s = std::set<std::string>(got.begin(), got.end());
  EXPECT_TRUE(s.count("point:3") && s.count("point:4") && s.count("entity:fox-b"))
      << ::testing::PrintToString(got);
  EXPECT_FALSE(s.count("point:1") || s.count("entity:fox-a")) << ::testing::PrintToString(got);

  // Labels above the caller's ceiling stay hidden in another user's memory.
  std::string pub =
      Token("t1", "alice", "episodic:read:all global:read:all router:query", "PUBLIC");
  got = Recalled(Recall("red fox", "bob"), pub);
  s = std::set<std::string>(got.begin(), got.end());
  EXPECT_TRUE(s.count("point:3")) << ::testing::PrintToString(got);
  EXPECT_FALSE(s.count("point:4")) << ::testing::PrintToString(got);

  // Without the `:all` breadth, another user's memory is refused; with it
  // for one tier only, the other tier is SKIPPED, saying why.
  Result r = Call("Router/Query", Recall("red fox", "bob"), alice_);
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("episodic:read:all"))
      << r.status.error_message();
  std::string half = Token("t1", "alice", "episodic:read:all global:read router:query");
  got = Recalled(Recall("red fox", "bob"), half, &resp);
  s = std::set<std::string>(got.begin(), got.end());
  EXPECT_TRUE(s.count("point:3") && !s.count("entity:fox-b")) << ::testing::PrintToString(got);
  EXPECT_TRUE(resp.partial());
  bool skipped = false;
  for (const auto& t : resp.tiers())
    if (t.tier() == TIER_GLOBAL && t.outcome() == TIER_OUTCOME_SKIPPED)
      skipped = t.detail().find("global:read:all") != std::string::npos;
  EXPECT_TRUE(skipped);

  // Naming oneself is the same as naming no one: alice's two points (the
  // vector part ranks every one of them) and her entity.
  got = Recalled(Recall("red fox", "alice"), alice_);
  s = std::set<std::string>(got.begin(), got.end());
  EXPECT_EQ((std::set<std::string>{"point:1", "point:2", "entity:fox-a"}), s);

  // Another tenant's alice, with a collection of the same name, sees only
  // her tenant's memories, even with the `:all` breadths.
  std::string other = Token("t2", "alice",
                            "episodic:read:all episodic:write global:read:all global:write "
                            "router:query");
  CreateCollectionRequest cc;
  cc.set_name("mem");
  cc.set_dims(16);
  cc.set_distance(DISTANCE_COSINE);
  ASSERT_TRUE(Call("EpisodicMemory/CreateCollection", cc, other).status.ok());
  ASSERT_TRUE(Upsert("mem", {TextPoint(7, "a red fox of another tenant")}, other).status.ok());
  Entity(other, "fox-t2", "animal", "red fox elsewhere");
  got = Recalled(Recall("red fox"), other);
  EXPECT_EQ((std::set<std::string>{"point:7", "entity:fox-t2"}),
            std::set<std::string>(got.begin(), got.end()));
  got = Recalled(Recall("red fox", "bob"), other);  // t2 has no bob
  EXPECT_TRUE(got.empty()) << ::testing::PrintToString(got);
}

TEST_F(RecallTest, BadRecallsAreRefusedAndWordlessTextSkipsTheGraph) {
  RouterQueryRequest q = Recall("");
  Result r = Call("Router/Query", q, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("recall.text: required"));
  q = Recall("fox", std::string(300, 'u'));
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("Router/Query", q, all_).status.error_code());
  q = Recall("fox");
  q.mutable_recall()->set_collection("");
  r = Call("Router/Query", q, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("recall.collection"))
      << r.status.error_message();
  // Only punctuation: no words for the graph, which is skipped saying so.
  RouterQueryResponse resp;
  Recalled(Recall("?!"), alice_, &resp);
  bool said = false;
  for (const auto& t : resp.tiers())
    if (t.tier() == TIER_GLOBAL) said = t.detail().find("no words") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
