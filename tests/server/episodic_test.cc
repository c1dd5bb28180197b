// EpisodicMemory end to end: the real memoryd binary, real tokens, real
// PostgreSQL, on the embedded backend (episodic_test) and — the same file
// built with EPISODIC_TEST_QDRANT — on the Qdrant backend talking to the
// Qdrant contract stand-in (qdrant_store_test). Every method; each
// distance; score thresholds and paging; every filter kind; tenant, owner
// and label isolation; the write diode and PII policy; bad input that
// changes nothing; two replicas sharing one store.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpc/health/v1/health.pb.h"
#include "memory/v1/episodic_memory.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"
#ifdef EPISODIC_TEST_QDRANT
#include "tests/testing/qdrant_standin.h"
#endif

namespace {

using namespace memory::v1;  // NOLINT: many message types
using google::protobuf::Struct;
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Unary;

Struct Json(const std::string& json) {
  Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  return s;
}

Filter F(const std::string& json) {
  Filter f;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &f).ok()) << json;
  return f;
}

PointId Num(uint64_t n) {
  PointId id;
  id.set_num(n);
  return id;
}

PointId Uuid(const std::string& u) {
  PointId id;
  id.set_uuid(u);
  return id;
}

std::string IdText(const PointId& id) {
  return id.has_uuid() ? id.uuid() : std::to_string(id.num());
}

#ifdef EPISODIC_TEST_QDRANT
// The stand-in's recorded spec violations, "[]" when there were none.
std::string CleanViolations(QdrantStandin& q) {
  std::string v = q.Violations();
  v.erase(v.find_last_not_of(" \r\n") + 1);
  return v;
}
#endif

struct Replica {
  std::unique_ptr<MemorydProcess> proc;
  std::shared_ptr<grpc::Channel> ch;
};

class EpisodicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
#ifdef EPISODIC_TEST_QDRANT
    ASSERT_TRUE(qdrant_.Start()) << qdrant_.Log();
#endif
    a_ = Launch();
    alice_ = Token("t1", "alice", "episodic:read:all episodic:write:all");
  }

#ifdef EPISODIC_TEST_QDRANT
  void TearDown() override {
    // Every request memoryd sent must have matched Qdrant's published spec.
    EXPECT_EQ("[]", CleanViolations(qdrant_));
  }
#endif

  Replica Launch(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=1"};
#ifdef EPISODIC_TEST_QDRANT
    args.push_back("--qdrant-url=" + qdrant_.url());
#endif
    if (keys_) args.push_back("--jwks=" + keys_->jwks_path());
    args.insert(args.end(), extra.begin(), extra.end());
    Replica r;
    r.proc = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(r.proc->Start()) << r.proc->Log();
    if (!keys_) keys_ = r.proc->keys();
    r.ch = testing_client::Connect(r.proc->port());
    return r;
  }

  std::string Token(const std::string& tenant, const std::string& sub, const std::string& scope,
                    const std::string& clr = "SECRET", const std::string& lvl = "PUBLIC") {
    TestClaims c;
    c.tenant = tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = clr;
    c.lvl = lvl;
    return keys_->Mint(c);
  }

  Result Call(const std::string& method, const google::protobuf::Message& req,
              const std::string& token, const Replica* r = nullptr) {
    return Unary((r ? r : &a_)->ch, "/memory.v1.EpisodicMemory/" + method, req.SerializeAsString(),
                 10000, {{"authorization", TestKeys::Bearer(token)}});
  }

  template <typename Resp>
  Resp Must(const std::string& method, const google::protobuf::Message& req,
            const std::string& token, const Replica* r = nullptr) {
    Result res = Call(method, req, token, r);
    EXPECT_TRUE(res.status.ok()) << method << ": " << res.status.error_message();
    Resp resp;
    EXPECT_TRUE(resp.ParseFromString(res.body));
    return resp;
  }

  Result Create(const std::string& token, const std::string& name, int dims, Distance d,
                const Replica* r = nullptr) {
    CreateCollectionRequest req;
    req.set_name(name);
    req.set_dims(dims);
    req.set_distance(d);
    return Call("CreateCollection", req, token, r);
  }

  void MustCreate(const std::string& token, const std::string& name, int dims, Distance d) {
    Result r = Create(token, name, dims, d);
    ASSERT_TRUE(r.status.ok()) << name << ": " << r.status.error_message();
  }

  static PointInput P(const PointId& id, std::vector<float> v, const std::string& payload = "{}",
                      Label label = LABEL_UNSPECIFIED) {
    PointInput p;
    *p.mutable_id() = id;
    for (float x : v) p.add_vector(x);
    *p.mutable_payload() = Json(payload);
    p.set_label(label);
    return p;
  }

  Result Upsert(const std::string& token, const std::string& coll,
                const std::vector<PointInput>& pts, const Replica* r = nullptr) {
    EpisodicMemoryUpsertRequest req;
    req.set_collection(coll);
    for (const auto& p : pts) *req.add_points() = p;
    return Call("Upsert", req, token, r);
  }

  void MustUpsert(const std::string& token, const std::string& coll,
                  const std::vector<PointInput>& pts, const Replica* r = nullptr) {
    Result res = Upsert(token, coll, pts, r);
    ASSERT_TRUE(res.status.ok()) << res.status.error_message();
  }

  EpisodicMemorySearchRequest SearchReq(const std::string& coll, std::vector<float> v,
                                        int limit = 10) {
    EpisodicMemorySearchRequest req;
    req.set_collection(coll);
    for (float x : v) req.add_vector(x);
    req.set_limit(limit);
    return req;
  }

  // Ids of the hits in order.
  std::vector<std::string> SearchIds(const std::string& token,
                                     const EpisodicMemorySearchRequest& req,
                                     const Replica* r = nullptr) {
    auto resp = Must<EpisodicMemorySearchResponse>("Search", req, token, r);
    std::vector<std::string> ids;
    for (const auto& sp : resp.points()) ids.push_back(IdText(sp.point().id()));
    return ids;
  }

  int64_t Count(const std::string& token, const std::string& coll, const std::string& filter = "",
                const Replica* r = nullptr) {
    EpisodicMemoryCountRequest req;
    req.set_collection(coll);
    req.set_exact(true);
    if (!filter.empty()) *req.mutable_filter() = F(filter);
    Result res = Call("Count", req, token, r);
    EXPECT_TRUE(res.status.ok()) << filter << ": " << res.status.error_message();
    EpisodicMemoryCountResponse resp;
    resp.ParseFromString(res.body);
    return resp.count();
  }

  // Ids (sorted as text) matching a filter through Search with a huge limit.
  std::set<std::string> Matching(const std::string& token, const std::string& coll, int dims,
                                 const std::string& filter) {
    auto req = SearchReq(coll, std::vector<float>(dims, 1.0f), 1000);
    *req.mutable_filter() = F(filter);
    auto ids = SearchIds(token, req);
    return std::set<std::string>(ids.begin(), ids.end());
  }

  PgTestDb db_;
#ifdef EPISODIC_TEST_QDRANT
  QdrantStandin qdrant_;
#endif
  TestKeys* keys_ = nullptr;
  Replica a_;
  std::string alice_;
};

// ---------------------------------------------------------------- collections

TEST_F(EpisodicTest, CollectionsAreCreatedListedPagedAndDeleted) {
  for (const char* n : {"c-b", "c-a", "c_c"}) MustCreate(alice_, n, 4, DISTANCE_COSINE);
  GetCollectionRequest get;
  get.set_name("c-a");
  auto got = Must<GetCollectionResponse>("GetCollection", get, alice_);
  EXPECT_EQ("c-a", got.collection().name());
  EXPECT_EQ(4, got.collection().dims());
  EXPECT_EQ(DISTANCE_COSINE, got.collection().distance());
  EXPECT_EQ("t1", got.collection().meta().tenant());
  EXPECT_EQ("alice", got.collection().meta().owner());
  EXPECT_EQ(LABEL_PUBLIC, got.collection().meta().label());

  EXPECT_EQ(StatusCode::ALREADY_EXISTS, Create(alice_, "c-a", 8, DISTANCE_DOT).status.error_code());

  ListCollectionsRequest list;
  list.set_page_size(2);
  auto p1 = Must<ListCollectionsResponse>("ListCollections", list, alice_);
  ASSERT_EQ(2, p1.collections_size());
  EXPECT_EQ("c-a", p1.collections(0).name());
  EXPECT_EQ("c-b", p1.collections(1).name());
  ASSERT_FALSE(p1.next_page_token().empty());
  list.set_page_token(p1.next_page_token());
  auto p2 = Must<ListCollectionsResponse>("ListCollections", list, alice_);
  ASSERT_EQ(1, p2.collections_size());
  EXPECT_EQ("c_c", p2.collections(0).name());
  EXPECT_TRUE(p2.next_page_token().empty());

  // Another caller cannot reuse the token; another tenant sees nothing.
  std::string bob = Token("t1", "bob", "episodic:read");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("ListCollections", list, bob).status.error_code());
  std::string eve = Token("t2", "eve", "episodic:read episodic:write:all");
  EXPECT_EQ(0, Must<ListCollectionsResponse>("ListCollections", ListCollectionsRequest(), eve)
                   .collections_size());
  EXPECT_EQ(StatusCode::NOT_FOUND, Call("GetCollection", get, eve).status.error_code());
  // The same name in another tenant is another collection.
  MustCreate(eve, "c-a", 2, DISTANCE_EUCLID);

  // Deleting needs episodic:write:all (it removes everyone's points).
  DeleteCollectionRequest del;
  del.set_name("c-a");
  std::string writer = Token("t1", "carol", "episodic:read episodic:write");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Call("DeleteCollection", del, writer).status.error_code());
  ASSERT_TRUE(Call("DeleteCollection", del, alice_).status.ok());
  EXPECT_EQ(StatusCode::NOT_FOUND, Call("GetCollection", get, alice_).status.error_code());
  EXPECT_EQ(StatusCode::NOT_FOUND, Call("DeleteCollection", del, alice_).status.error_code());
  EXPECT_TRUE(Call("GetCollection", get, eve).status.ok());
}

TEST_F(EpisodicTest, ARecreatedCollectionStartsEmpty) {
  MustCreate(alice_, "again", 2, DISTANCE_DOT);
  MustUpsert(alice_, "again", {P(Num(1), {1, 0}), P(Num(2), {0, 1})});
  EXPECT_EQ(2, Count(alice_, "again"));
  DeleteCollectionRequest del;
  del.set_name("again");
  ASSERT_TRUE(Call("DeleteCollection", del, alice_).status.ok());
  MustCreate(alice_, "again", 3, DISTANCE_DOT);
  EXPECT_EQ(0, Count(alice_, "again"));
  MustUpsert(alice_, "again", {P(Num(7), {1, 1, 1})});
  EXPECT_EQ((std::vector<std::string>{"7"}), SearchIds(alice_, SearchReq("again", {1, 0, 0})));
}

TEST_F(EpisodicTest, CollectionRequestsAreValidated) {
  struct Case {
    std::string name;
    int dims;
    Distance d;
    std::string want;
  } cases[] = {
      {"", 4, DISTANCE_DOT, "name: required"},
      {std::string(65, 'x'), 4, DISTANCE_DOT, "name: 65 characters"},
      {"a b", 4, DISTANCE_DOT, "name: only"},
      {"x'; DROP TABLE episodic_points; --", 4, DISTANCE_DOT, "name: only"},
      {"ok", -1, DISTANCE_DOT, "dims: -1"},
      {"ok", 65537, DISTANCE_DOT, "dims: 65537"},
      {"ok", 4, DISTANCE_UNSPECIFIED, "distance"},
  };
  for (const auto& c : cases) {
    Result r = Create(alice_, c.name, c.dims, c.d);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << c.name;
    EXPECT_NE(std::string::npos, r.status.error_message().find(c.want)) << r.status.error_message();
  }
  // dims 0 asks the server's embedder, and this server has none: the
  // embedded backend makes a text-only collection (recall_test goes on
  // from there), Qdrant needs dims.
  Result r = Create(alice_, "ok", 0, DISTANCE_DOT);
#ifdef EPISODIC_TEST_QDRANT
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("--embedder-url"))
      << r.status.error_message();
  EXPECT_EQ(0, Must<ListCollectionsResponse>("ListCollections", ListCollectionsRequest(), alice_)
                   .collections_size());
#else
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  CreateCollectionResponse made;
  ASSERT_TRUE(made.ParseFromString(r.body));
  EXPECT_EQ(0, made.collection().dims());
#endif
}

// ---------------------------------------------------------------- search

TEST_F(EpisodicTest, SearchRanksByEachDistance) {
  MustCreate(alice_, "cos", 2, DISTANCE_COSINE);
  MustCreate(alice_, "dot", 2, DISTANCE_DOT);
  MustCreate(alice_, "l2", 2, DISTANCE_EUCLID);
  std::vector<PointInput> pts = {P(Num(1), {1, 0}), P(Num(2), {10, 1}), P(Num(3), {0, 2}),
                                 P(Num(4), {-1, 0})};
  for (const char* c : {"cos", "dot", "l2"}) MustUpsert(alice_, c, pts);

  // Cosine: angle only. (10,1) is nearly along x; (1,0) exactly.
  auto cos = Must<EpisodicMemorySearchResponse>("Search", SearchReq("cos", {2, 0}), alice_);
  ASSERT_EQ(4, cos.points_size());
  EXPECT_EQ("1", IdText(cos.points(0).point().id()));
  EXPECT_NEAR(1.0, cos.points(0).score(), 1e-6);
  EXPECT_EQ("2", IdText(cos.points(1).point().id()));
  EXPECT_NEAR(10 / std::sqrt(101.0), cos.points(1).score(), 1e-6);
  EXPECT_EQ("3", IdText(cos.points(2).point().id()));
  EXPECT_NEAR(0.0, cos.points(2).score(), 1e-6);
  EXPECT_NEAR(-1.0, cos.points(3).score(), 1e-6);

  // Dot: magnitude counts.
  auto dot = Must<EpisodicMemorySearchResponse>("Search", SearchReq("dot", {1, 1}), alice_);
  ASSERT_EQ(4, dot.points_size());
  EXPECT_EQ("2", IdText(dot.points(0).point().id()));
  EXPECT_FLOAT_EQ(11, dot.points(0).score());
  EXPECT_EQ("3", IdText(dot.points(1).point().id()));
  EXPECT_EQ("1", IdText(dot.points(2).point().id()));
  EXPECT_FLOAT_EQ(-1, dot.points(3).score());

  // Euclid: the score is the distance, lower first.
  auto l2 = Must<EpisodicMemorySearchResponse>("Search", SearchReq("l2", {0, 1}), alice_);
  ASSERT_EQ(4, l2.points_size());
  EXPECT_EQ("3", IdText(l2.points(0).point().id()));
  EXPECT_NEAR(1.0, l2.points(0).score(), 1e-6);
  EXPECT_EQ("1", IdText(l2.points(1).point().id()));
  EXPECT_NEAR(std::sqrt(2.0), l2.points(1).score(), 1e-6);
  EXPECT_EQ("4", IdText(l2.points(2).point().id()));
  EXPECT_EQ("2", IdText(l2.points(3).point().id()));
  EXPECT_NEAR(10.0, l2.points(3).score(), 1e-5);
}

TEST_F(EpisodicTest, CosineVectorsComeBackNormalizedAndPayloadsOnlyWhenAsked) {
  MustCreate(alice_, "cos", 2, DISTANCE_COSINE);
  MustUpsert(alice_, "cos", {P(Num(1), {3, 4}, R"({"k":"v","n":[1,2.5,{"deep":true}]})")});
  auto req = SearchReq("cos", {1, 0});
  auto bare = Must<EpisodicMemorySearchResponse>("Search", req, alice_);
  ASSERT_EQ(1, bare.points_size());
  EXPECT_EQ(0, bare.points(0).point().vector_size());
  EXPECT_FALSE(bare.points(0).point().has_payload());
  req.set_with_payload(true);
  req.set_with_vector(true);
  auto full = Must<EpisodicMemorySearchResponse>("Search", req, alice_);
  ASSERT_EQ(2, full.points(0).point().vector_size());
  EXPECT_NEAR(0.6, full.points(0).point().vector(0), 1e-6);
  EXPECT_NEAR(0.8, full.points(0).point().vector(1), 1e-6);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      Json(R"({"k":"v","n":[1,2.5,{"deep":true}]})"), full.points(0).point().payload()))
      << full.points(0).point().payload().DebugString();
  EXPECT_EQ("alice", full.points(0).point().meta().owner());
  EXPECT_EQ(1, full.points(0).point().meta().version());
}

TEST_F(EpisodicTest, TiesAreOrderedByIdAndPagesNeitherRepeatNorSkip) {
  MustCreate(alice_, "ties", 2, DISTANCE_DOT);
  std::vector<PointInput> pts;
  // 30 points with only 3 distinct scores; numbers before UUIDs on ties.
  for (int i = 0; i < 27; i++) pts.push_back(P(Num(100 - i), {float(i % 3), 0}));
  pts.push_back(P(Uuid("00000000-0000-0000-0000-000000000002"), {2, 0}));
  pts.push_back(P(Uuid("00000000-0000-0000-0000-000000000001"), {2, 0}));
  pts.push_back(P(Num(5), {2, 0}));
  MustUpsert(alice_, "ties", pts);
  auto all = SearchIds(alice_, SearchReq("ties", {1, 0}, 100));
  ASSERT_EQ(30u, all.size());
  EXPECT_EQ("5", all[0]);
  EXPECT_EQ("74", all[1]);  // 100 - 26: the smallest other numeric id with score 2
  EXPECT_EQ("00000000-0000-0000-0000-000000000001", all[10]);
  EXPECT_EQ("00000000-0000-0000-0000-000000000002", all[11]);

  std::vector<std::string> paged;
  for (int off = 0; off < 30; off += 7) {
    auto req = SearchReq("ties", {1, 0}, 7);
    req.set_offset(off);
    for (auto& id : SearchIds(alice_, req)) paged.push_back(id);
  }
  EXPECT_EQ(all, paged);
}

TEST_F(EpisodicTest, ScoreThresholdsCutByDistanceKind) {
  MustCreate(alice_, "dot", 1, DISTANCE_DOT);
  MustCreate(alice_, "l2", 1, DISTANCE_EUCLID);
  std::vector<PointInput> pts;
  for (int i = 1; i <= 5; i++) pts.push_back(P(Num(i), {float(i)}));
  MustUpsert(alice_, "dot", pts);
  MustUpsert(alice_, "l2", pts);
  auto dot = SearchReq("dot", {1});
  dot.set_score_threshold(3);  // score >= 3
  EXPECT_EQ((std::vector<std::string>{"5", "4", "3"}), SearchIds(alice_, dot));
  auto l2 = SearchReq("l2", {0});
  l2.set_score_threshold(2.5);  // distance <= 2.5
  EXPECT_EQ((std::vector<std::string>{"1", "2"}), SearchIds(alice_, l2));
}

// RecallOptions on vectors, on either backend: the time window inside the
// search (on Qdrant a range on memoryd.updated_us), and de-duplication by
// the vectors' cosine.
TEST_F(EpisodicTest, ATimeWindowAndDiversityShapeAVectorSearch) {
  MustCreate(alice_, "win", 2, DISTANCE_COSINE);
  MustUpsert(alice_, "win", {P(Num(1), {1, 0}), P(Num(2), {1, 0.01f})});
  usleep(20000);
  MustUpsert(alice_, "win", {P(Num(3), {0.6f, 0.8f}), P(Num(4), {0, 1})});
  auto all = Must<EpisodicMemorySearchResponse>("Search", SearchReq("win", {1, 0}, 4), alice_);
  ASSERT_EQ(4, all.points_size());
  int64_t t3 = 0;
  for (const auto& p : all.points()) {
    if (p.point().id().num() == 3) {
      t3 = p.point().meta().update_time().seconds() * 1000000 +
           p.point().meta().update_time().nanos() / 1000;
    }
  }
  ASSERT_GT(t3, 0);
  auto since = SearchReq("win", {1, 0}, 4);
  since.mutable_options()->mutable_time_range()->mutable_start_time()->set_seconds(t3 / 1000000);
  since.mutable_options()->mutable_time_range()->mutable_start_time()->set_nanos(
      static_cast<int32_t>(t3 % 1000000) * 1000);
  EXPECT_EQ((std::vector<std::string>{"3", "4"}), SearchIds(alice_, since));
  auto before = SearchReq("win", {1, 0}, 4);
  *before.mutable_options()->mutable_time_range()->mutable_end_time() =
      since.options().time_range().start_time();
  EXPECT_EQ((std::vector<std::string>{"1", "2"}), SearchIds(alice_, before));
  // 1 and 2 are near copies: with diversity the other direction is second.
  auto div = SearchReq("win", {1, 0}, 2);
  EXPECT_EQ((std::vector<std::string>{"1", "2"}), SearchIds(alice_, div));
  div.mutable_options()->set_diversity(0.5f);
  EXPECT_EQ((std::vector<std::string>{"1", "3"}), SearchIds(alice_, div));
}

// ---------------------------------------------------------------- filters

class EpisodicFilterTest : public EpisodicTest {
 protected:
  void SetUp() override {
    EpisodicTest::SetUp();
    MustCreate(alice_, "f", 2, DISTANCE_DOT);
    MustUpsert(alice_, "f",
               {P(Num(1), {1, 0}, R"({"color":"red","n":1,"ok":true,"tags":["a","b"]})"),
                P(Num(2), {1, 0}, R"({"color":"blue","n":2.5,"ok":false,"tags":[]})"),
                P(Num(3), {1, 0},
                  R"({"color":"red","n":7,"city":{"name":"Oslo","zips":[1,2]},)"
                  R"("people":[{"name":"ann","age":30},{"name":"bo","age":12}]})"),
                P(Num(4), {1, 0}, R"({"color":null,"n":"7"})"),
                P(Uuid("5c56c793-69f3-4fbf-87e6-c4bf54c28c26"), {1, 0}, R"({})")});
  }
  std::set<std::string> M(const std::string& filter) {
    std::set<std::string> via_search = Matching(alice_, "f", 2, filter);
    // Count must agree with Search for every filter.
    EXPECT_EQ(static_cast<int64_t>(via_search.size()), Count(alice_, "f", filter)) << filter;
    return via_search;
  }
  using S = std::set<std::string>;
  const std::string u_ = "5c56c793-69f3-4fbf-87e6-c4bf54c28c26";
};

TEST_F(EpisodicFilterTest, MatchValueComparesStringsBoolsAndIntegers) {
  EXPECT_EQ((S{"1", "3"}), M(R"({"must":[{"field":{"key":"color","matchValue":"red"}}]})"));
  EXPECT_EQ((S{"2"}), M(R"({"must":[{"field":{"key":"ok","matchValue":false}}]})"));
  // Integers match integer payload values only: 7 (not "7", not 2.5).
  EXPECT_EQ((S{"3"}), M(R"({"must":[{"field":{"key":"n","matchValue":7}}]})"));
  EXPECT_EQ((S{"4"}), M(R"({"must":[{"field":{"key":"n","matchValue":"7"}}]})"));
  // A list field matches when one element does.
  EXPECT_EQ((S{"1"}), M(R"({"must":[{"field":{"key":"tags","matchValue":"b"}}]})"));
}

TEST_F(EpisodicFilterTest, MatchAnyAndExcept) {
  EXPECT_EQ((S{"1", "2", "3"}),
            M(R"({"must":[{"field":{"key":"color","matchAny":["red","blue"]}}]})"));
  EXPECT_EQ((S{"1", "3"}), M(R"({"must":[{"field":{"key":"n","matchAny":[1,7]}}]})"));
  // except: a non-null value not in the list (a float or a string is "not
  // in" an integer list); a missing field or null does not match.
  EXPECT_EQ((S{"2"}), M(R"({"must":[{"field":{"key":"color","matchExcept":["red"]}}]})"));
  EXPECT_EQ((S{"1", "2", "4"}), M(R"({"must":[{"field":{"key":"n","matchExcept":[7]}}]})"));
  EXPECT_EQ((S{"1"}), M(R"({"must":[{"field":{"key":"tags","matchExcept":["a"]}}]})"));
}

TEST_F(EpisodicFilterTest, RangeOnNumbers) {
  EXPECT_EQ((S{"2", "3"}), M(R"({"must":[{"field":{"key":"n","range":{"gt":1}}}]})"));
  EXPECT_EQ((S{"1", "2"}), M(R"({"must":[{"field":{"key":"n","range":{"gte":1,"lte":2.5}}}]})"));
  EXPECT_EQ((S{"1"}), M(R"({"must":[{"field":{"key":"n","range":{"lt":2.5}}}]})"));
  EXPECT_EQ((S{"3"}), M(R"({"must":[{"field":{"key":"city.zips","range":{"gte":2}}}]})"));
}

TEST_F(EpisodicFilterTest, IsEmptyHasIdAndNestedPaths) {
  // Missing, null or [] are empty.
  EXPECT_EQ((S{"2", "3", "4", u_}), M(R"({"must":[{"isEmpty":{"key":"tags"}}]})"));
  EXPECT_EQ((S{"4", u_}), M(R"({"must":[{"isEmpty":{"key":"color"}}]})"));
  EXPECT_EQ((S{"2", u_}), M(R"({"must":[{"hasId":{"ids":[{"num":2},{"num":99},)"
                            R"({"uuid":"5C56C793-69F3-4FBF-87E6-C4BF54C28C26"}]}}]})"));
  EXPECT_EQ((S{"3"}), M(R"({"must":[{"field":{"key":"city.name","matchValue":"Oslo"}}]})"));
  EXPECT_EQ((S{"3"}), M(R"({"must":[{"field":{"key":"people[].name","matchValue":"bo"}}]})"));
  EXPECT_EQ((S{"3"}), M(R"({"must":[{"field":{"key":"people[].age","range":{"lt":18}}}]})"));
  // Without [] a path does not step into an array of objects.
  EXPECT_EQ((S{}), M(R"({"must":[{"field":{"key":"people.name","matchValue":"bo"}}]})"));
}

TEST_F(EpisodicFilterTest, MustShouldMustNotAndNestedFilters) {
  EXPECT_EQ((S{"1", "2"}), M(R"({"should":[{"field":{"key":"n","matchValue":1}},)"
                             R"({"field":{"key":"ok","matchValue":false}}]})"));
  EXPECT_EQ((S{"2", "4", u_}), M(R"({"mustNot":[{"field":{"key":"color","matchValue":"red"}}]})"));
  // (red AND n=7) OR (blue)
  EXPECT_EQ((S{"2", "3"}),
            M(R"({"should":[{"filter":{"must":[{"field":{"key":"color","matchValue":"red"}},)"
              R"({"field":{"key":"n","matchValue":7}}]}},)"
              R"({"filter":{"must":[{"field":{"key":"color","matchValue":"blue"}}]}}]})"));
  EXPECT_EQ((S{"1"}), M(R"({"must":[{"field":{"key":"color","matchValue":"red"}}],)"
                        R"("mustNot":[{"field":{"key":"n","range":{"gt":5}}}]})"));
  EXPECT_EQ((S{"1", "2", "3", "4", u_}), M("{}"));
}

TEST_F(EpisodicFilterTest, BadFiltersAreRefusedNamingTheField) {
  struct Case {
    std::string filter, want;
  } cases[] = {
      {R"({"must":[{}]})", "filter.must[0]: set one of"},
      {R"({"must":[{"field":{"key":"a b","matchValue":1}}]})", "filter.must[0].field.key"},
      {R"({"must":[{"field":{"key":"a"}}]})", "filter.must[0].field: set one of"},
      {R"({"must":[{"field":{"key":"a","matchValue":1.5}}]})", "integers"},
      {R"({"must":[{"field":{"key":"a","matchValue":null}}]})", "a string, a bool or an integer"},
      {R"({"should":[{"field":{"key":"a","matchAny":["x",1]}}]})",
       "filter.should[0].field.match_any[1]"},
      {R"({"must":[{"field":{"key":"a","matchAny":[]}}]})", "1 to 1024"},
      {R"({"must":[{"field":{"key":"a","matchExcept":[true]}}]})", "strings or integers"},
      {R"({"must":[{"field":{"key":"a","range":{}}}]})", "at least one bound"},
      {R"({"mustNot":[{"hasId":{"ids":[{"uuid":"nope"}]}}]})", "filter.must_not[0].has_id.ids[0]"},
      {R"({"must":[{"hasId":{}}]})", "1 to 1024 ids"},
  };
  for (const auto& c : cases) {
    EpisodicMemoryCountRequest req;
    req.set_collection("f");
    *req.mutable_filter() = F(c.filter);
    Result r = Call("Count", req, alice_);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << c.filter;
    EXPECT_NE(std::string::npos, r.status.error_message().find(c.want))
        << c.filter << " -> " << r.status.error_message();
  }
  // Nesting and size limits.
  std::string deep = R"({"must":[{"field":{"key":"a","matchValue":1}}]})";
  for (int i = 0; i < 8; i++) deep = R"({"must":[{"filter":)" + deep + "}]}";
  EpisodicMemoryCountRequest req;
  req.set_collection("f");
  *req.mutable_filter() = F(deep);
  Result r = Call("Count", req, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("8 deep")) << r.status.error_message();
  std::string wide = R"({"must":[)";
  for (int i = 0; i < 65; i++)
    wide += std::string(i ? "," : "") + R"({"field":{"key":"a","matchValue":1}})";
  *req.mutable_filter() = F(wide + "]}");
  r = Call("Count", req, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("64 conditions"));
}

// ---------------------------------------------------------------- points

TEST_F(EpisodicTest, GetPointsKeepsTheAskedOrderAndLeavesOutMissingIds) {
  MustCreate(alice_, "g", 2, DISTANCE_EUCLID);
  MustUpsert(alice_, "g",
             {P(Num(1), {1, 2}, R"({"a":1})"), P(Num(2), {3, 4}),
              P(Uuid("5c56c793-69f3-4fbf-87e6-c4bf54c28c26"), {5, 6})});
  GetPointsRequest req;
  req.set_collection("g");
  *req.add_ids() = Uuid("5C56C793-69F3-4FBF-87E6-C4BF54C28C26");
  *req.add_ids() = Num(42);
  *req.add_ids() = Num(1);
  req.set_with_vector(true);
  auto resp = Must<GetPointsResponse>("GetPoints", req, alice_);
  ASSERT_EQ(2, resp.points_size());
  EXPECT_EQ("5c56c793-69f3-4fbf-87e6-c4bf54c28c26", resp.points(0).id().uuid());
  EXPECT_EQ(1u, resp.points(1).id().num());
  EXPECT_FLOAT_EQ(2, resp.points(1).vector(1));
  EXPECT_FALSE(resp.points(1).has_payload());
}

TEST_F(EpisodicTest, UpsertReplacesAndCountsVersions) {
  MustCreate(alice_, "u", 2, DISTANCE_DOT);
  MustUpsert(alice_, "u", {P(Num(1), {1, 0}, R"({"v":1})")});
  MustUpsert(alice_, "u", {P(Num(1), {0, 1}, R"({"v":2})")});
  GetPointsRequest req;
  req.set_collection("u");
  *req.add_ids() = Num(1);
  req.set_with_payload(true);
  req.set_with_vector(true);
  auto p = Must<GetPointsResponse>("GetPoints", req, alice_).points(0);
  EXPECT_EQ(2, p.meta().version());
  EXPECT_FLOAT_EQ(1, p.vector(1));
  EXPECT_EQ(2, p.payload().fields().at("v").number_value());
  EXPECT_LE(p.meta().create_time().seconds(), p.meta().update_time().seconds());
  EXPECT_EQ(1, Count(alice_, "u"));
}

TEST_F(EpisodicTest, DeletePointsByIdsAndByFilter) {
  MustCreate(alice_, "d", 1, DISTANCE_DOT);
  std::vector<PointInput> pts;
  for (int i = 1; i <= 10; i++)
    pts.push_back(P(Num(i), {float(i)}, i % 2 ? R"({"odd":true})" : R"({"odd":false})"));
  MustUpsert(alice_, "d", pts);
  DeletePointsRequest del;
  del.set_collection("d");
  *del.mutable_ids()->add_ids() = Num(1);
  *del.mutable_ids()->add_ids() = Num(2);
  *del.mutable_ids()->add_ids() = Num(99);
  EXPECT_EQ(2, Must<DeletePointsResponse>("DeletePoints", del, alice_).deleted_count());
  DeletePointsRequest byf;
  byf.set_collection("d");
  *byf.mutable_filter() = F(R"({"must":[{"field":{"key":"odd","matchValue":true}}]})");
  EXPECT_EQ(4, Must<DeletePointsResponse>("DeletePoints", byf, alice_).deleted_count());
  EXPECT_EQ(4, Count(alice_, "d"));
  EXPECT_EQ((std::vector<std::string>{"10", "8", "6", "4"}),
            SearchIds(alice_, SearchReq("d", {1})));
  // Deleted ids can be written again, as new points.
  MustUpsert(alice_, "d", {P(Num(1), {100})});
  EXPECT_EQ("1", SearchIds(alice_, SearchReq("d", {1}))[0]);
  DeletePointsRequest none;
  none.set_collection("d");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("DeletePoints", none, alice_).status.error_code());
}

// ---------------------------------------------------------------- diodes

TEST_F(EpisodicTest, ReadsSeeOnlyTheCallersTenantOwnPointsAndLabelsUpToClearance) {
  MustCreate(alice_, "iso", 1, DISTANCE_DOT);
  std::string bob = Token("t1", "bob", "episodic:read episodic:write");
  MustUpsert(alice_, "iso", {P(Num(1), {1}), P(Num(2), {2}, "{}", LABEL_SECRET)});
  MustUpsert(bob, "iso", {P(Num(3), {3})});
  std::string all_public = Token("t1", "auditor", "episodic:read:all", "PUBLIC");
  std::string all_secret = Token("t1", "boss", "episodic:read:all", "SECRET");

  EXPECT_EQ((std::vector<std::string>{"3"}), SearchIds(bob, SearchReq("iso", {1})));
  EXPECT_EQ((std::vector<std::string>{"3", "1"}), SearchIds(all_public, SearchReq("iso", {1})));
  EXPECT_EQ((std::vector<std::string>{"3", "2", "1"}),
            SearchIds(all_secret, SearchReq("iso", {1})));
  EXPECT_EQ(1, Count(bob, "iso"));
  EXPECT_EQ(2, Count(all_public, "iso"));
  EXPECT_EQ(3, Count(all_secret, "iso"));
  // Hidden points look missing to GetPoints.
  GetPointsRequest get;
  get.set_collection("iso");
  for (int i = 1; i <= 3; i++) *get.add_ids() = Num(i);
  EXPECT_EQ(1, Must<GetPointsResponse>("GetPoints", get, bob).points_size());
  EXPECT_EQ(2, Must<GetPointsResponse>("GetPoints", get, all_public).points_size());
  // Offsets count visible points only.
  auto req = SearchReq("iso", {1}, 1);
  req.set_offset(1);
  EXPECT_EQ((std::vector<std::string>{"1"}), SearchIds(all_public, req));
  // Another tenant has no such collection.
  std::string eve = Token("t2", "eve", "episodic:read:all");
  EXPECT_EQ(StatusCode::NOT_FOUND, Call("Search", SearchReq("iso", {1}), eve).status.error_code());
}

TEST_F(EpisodicTest, WritesAreStampedUpAndNeverOverwriteWhatTheCallerCannotModify) {
  MustCreate(alice_, "w", 1, DISTANCE_DOT);
  std::string bob = Token("t1", "bob", "episodic:read episodic:write", "SECRET", "CONFIDENTIAL");
  MustUpsert(bob, "w", {P(Num(1), {1}, "{}", LABEL_PUBLIC)});
  GetPointsRequest get;
  get.set_collection("w");
  *get.add_ids() = Num(1);
  EXPECT_EQ(LABEL_CONFIDENTIAL,
            Must<GetPointsResponse>("GetPoints", get, bob).points(0).meta().label());

  std::string carol = Token("t1", "carol", "episodic:read:all episodic:write");
  Result r = Upsert(carol, "w", {P(Num(1), {9}), P(Num(2), {2})});
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, r.status.error_code()) << r.status.error_message();
  DeletePointsRequest del;
  del.set_collection("w");
  *del.mutable_ids()->add_ids() = Num(1);
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Call("DeletePoints", del, carol).status.error_code());
  // Nothing of the refused batch was written.
  EXPECT_EQ(1, Count(alice_, "w"));
  // Delete by filter passes over points the caller may not modify.
  DeletePointsRequest byf;
  byf.set_collection("w");
  *byf.mutable_filter() = Filter();
  EXPECT_EQ(0, Must<DeletePointsResponse>("DeletePoints", byf, carol).deleted_count());

  // With :all, alice updates bob's point: the owner stays, the label never drops.
  MustUpsert(alice_, "w", {P(Num(1), {5}, "{}", LABEL_PUBLIC)});
  auto p = Must<GetPointsResponse>("GetPoints", get, alice_).points(0);
  EXPECT_EQ("bob", p.meta().owner());
  EXPECT_EQ(LABEL_CONFIDENTIAL, p.meta().label());
  EXPECT_EQ(2, p.meta().version());
  // A point labelled above the writer's clearance cannot be touched.
  MustUpsert(alice_, "w", {P(Num(3), {3}, "{}", LABEL_SECRET)});
  std::string low = Token("t1", "dan", "episodic:read episodic:write:all", "INTERNAL");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Upsert(low, "w", {P(Num(3), {0})}).status.error_code());
}

TEST_F(EpisodicTest, PiiInPayloadsIsRefusedUnlessTheTokenMayWriteIt) {
  MustCreate(alice_, "pii", 1, DISTANCE_DOT);
  Result r =
      Upsert(alice_, "pii", {P(Num(1), {1}), P(Num(2), {1}, R"({"who":"ann@example.com"})")});
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("email at points[1].payload.who"))
      << r.status.error_message();
  EXPECT_EQ(0, Count(alice_, "pii"));
  std::string ok = Token("t1", "alice", "episodic:read episodic:write pii:write");
  MustUpsert(ok, "pii", {P(Num(2), {1}, R"({"who":"ann@example.com"})")});
  GetPointsRequest get;
  get.set_collection("pii");
  *get.add_ids() = Num(2);
  auto p = Must<GetPointsResponse>("GetPoints", get, ok).points(0);
  ASSERT_EQ(1, p.meta().pii_kinds_size());
  EXPECT_EQ("email", p.meta().pii_kinds(0));
}

// ---------------------------------------------------------------- bad input

TEST_F(EpisodicTest, BadPointsAreRefusedAndChangeNothing) {
  MustCreate(alice_, "b", 3, DISTANCE_COSINE);
  MustUpsert(alice_, "b", {P(Num(1), {1, 0, 0})});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::vector<PointInput> pts;
    std::string want;
  } cases[] = {
      {{P(Num(2), {1, 0})}, "points[0].vector: 2 components; collection b has 3 dimensions"},
      {{P(Num(2), {1, 0, 0}), P(Num(3), {1, nan, 0})}, "points[1].vector[1]: NaN"},
      {{P(Num(2), {1, 0, inf})}, "points[0].vector[2]: infinity"},
      {{P(PointId(), {1, 0, 0})}, "points[0].id: required"},
      {{P(Uuid("not-a-uuid"), {1, 0, 0})}, "points[0].id: \"not-a-uuid\" is not a UUID"},
      {{P(Num(2), {1, 0, 0}), P(Num(2), {0, 1, 0})}, "id 2 appears more than once"},
      {{P(Num(2), {1, 0, 0}, R"({"big":")" + std::string(70000, 'x') + R"("})")},
       "points[0].payload: 70010 bytes"},
      {{}, "points: 0 points"},
  };
  for (const auto& c : cases) {
    Result r = Upsert(alice_, "b", c.pts);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << c.want;
    EXPECT_NE(std::string::npos, r.status.error_message().find(c.want))
        << c.want << " -> " << r.status.error_message();
  }
  std::vector<PointInput> many;
  for (int i = 0; i < 1001; i++) many.push_back(P(Num(i + 10), {1, 0, 0}));
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Upsert(alice_, "b", many).status.error_code());
  EXPECT_EQ(StatusCode::NOT_FOUND, Upsert(alice_, "nope", {P(Num(1), {1})}).status.error_code());
  EXPECT_EQ(1, Count(alice_, "b"));

  auto s = SearchReq("b", {1, 0, nan});
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("Search", s, alice_).status.error_code());
  s = SearchReq("b", {1, 0, 0}, 1001);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("Search", s, alice_).status.error_code());
  s = SearchReq("b", {1, 0, 0});
  s.set_offset(10001);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("Search", s, alice_).status.error_code());
  GetPointsRequest get;
  get.set_collection("b");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("GetPoints", get, alice_).status.error_code());
  // Injection strings are names like any other (and refused by the name rule).
  get.set_collection("b' OR '1'='1");
  *get.add_ids() = Num(1);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("GetPoints", get, alice_).status.error_code());
}

TEST_F(EpisodicTest, ScopesAreEnforced) {
  MustCreate(alice_, "s", 1, DISTANCE_DOT);
  std::string reader = Token("t1", "r", "episodic:read");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Upsert(reader, "s", {P(Num(1), {1})}).status.error_code());
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Create(reader, "s2", 1, DISTANCE_DOT).status.error_code());
  std::string writer = Token("t1", "w", "episodic:write");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Call("Search", SearchReq("s", {1}), writer).status.error_code());
}

// ---------------------------------------------------------------- replicas

TEST_F(EpisodicTest, AWriteOnOneReplicaIsSeenByTheOthersNextRead) {
  Replica b = Launch();
  MustCreate(alice_, "r", 2, DISTANCE_DOT);
  MustUpsert(alice_, "r", {P(Num(1), {1, 0})});
  // b loads the collection now, then catches up on later writes.
  EXPECT_EQ((std::vector<std::string>{"1"}), SearchIds(alice_, SearchReq("r", {1, 0}), &b));
  MustUpsert(alice_, "r", {P(Num(2), {2, 0}), P(Num(1), {0, 1})});
  EXPECT_EQ((std::vector<std::string>{"2", "1"}), SearchIds(alice_, SearchReq("r", {1, 0}), &b));
  DeletePointsRequest del;
  del.set_collection("r");
  *del.mutable_ids()->add_ids() = Num(2);
  ASSERT_TRUE(Call("DeletePoints", del, alice_, &b).status.ok());
  EXPECT_EQ((std::vector<std::string>{"1"}), SearchIds(alice_, SearchReq("r", {1, 0})));
  // A collection deleted and re-created on one replica is new on the other.
  DeleteCollectionRequest dc;
  dc.set_name("r");
  ASSERT_TRUE(Call("DeleteCollection", dc, alice_).status.ok());
  EXPECT_EQ(StatusCode::NOT_FOUND,
            Call("Search", SearchReq("r", {1, 0}), alice_, &b).status.error_code());
  MustCreate(alice_, "r", 2, DISTANCE_DOT);
  EXPECT_EQ(0, Count(alice_, "r", "", &b));
}

TEST_F(EpisodicTest, ManyPointsLoadAndSearchAcrossCatchUpPages) {
  MustCreate(alice_, "big", 8, DISTANCE_EUCLID);
  // 5000 points in batches of 1000: more than one catch-up page.
  for (int b = 0; b < 5; b++) {
    std::vector<PointInput> pts;
    for (int i = 0; i < 1000; i++) {
      int id = b * 1000 + i;
      std::vector<float> v(8, float(id));
      pts.push_back(P(Num(id), v, R"({"bucket":)" + std::to_string(id % 10) + "}"));
    }
    MustUpsert(alice_, "big", pts);
  }
  Replica b = Launch();
  EXPECT_EQ(5000, Count(alice_, "big", "", &b));
  EXPECT_EQ(500,
            Count(alice_, "big", R"({"must":[{"field":{"key":"bucket","matchValue":3}}]})", &b));
  auto ids = SearchIds(alice_, SearchReq("big", std::vector<float>(8, 4321.2f), 3), &b);
  EXPECT_EQ((std::vector<std::string>{"4321", "4322", "4320"}), ids);
}

// Every write is answered only once its audit row is stored (with the
// embedded backend in the write's own transaction, with Qdrant right after
// the write): killed the moment its answer arrives, memoryd leaves the row
// behind. (Through the audit queue, which waits up to 10 ms to batch, the
// row died with the process.)
TEST_F(EpisodicTest, EveryWriteIsAuditedBeforeItIsAnswered) {
  PgSession db(db_.url());
  ASSERT_TRUE(db.ok()) << db.error();
  std::vector<Replica> killed;  // kept: the first one owns the test keys
  auto rows_after_kill = [&](const std::string& method, const google::protobuf::Message& req,
                             const std::string& rid) {
    Result r = Unary(a_.ch, "/memory.v1.EpisodicMemory/" + method, req.SerializeAsString(), 10000,
                     {{"authorization", TestKeys::Bearer(alice_)}, {"x-request-id", rid}});
    kill(a_.proc->pid(), SIGKILL);
    a_.proc->Wait(5000);
    EXPECT_TRUE(r.status.ok()) << method << ": " << r.status.error_message();
    std::string n =
        db.Value("SELECT count(*) FROM audit_log WHERE request_id = '" + rid +
                 "' AND status_code = 0 AND method = '/memory.v1.EpisodicMemory/" + method + "'");
    killed.push_back(std::move(a_));
    a_ = Launch();
    return n;
  };
  CreateCollectionRequest create;
  create.set_name("audited");
  create.set_dims(2);
  create.set_distance(DISTANCE_DOT);
  EXPECT_EQ("1", rows_after_kill("CreateCollection", create, "w-create"));
  EpisodicMemoryUpsertRequest up;
  up.set_collection("audited");
  *up.add_points() = P(Num(1), {1, 0});
  EXPECT_EQ("1", rows_after_kill("Upsert", up, "w-upsert"));
  DeletePointsRequest del;
  del.set_collection("audited");
  *del.mutable_ids()->add_ids() = Num(1);
  EXPECT_EQ("1", rows_after_kill("DeletePoints", del, "w-delete"));
  DeleteCollectionRequest drop;
  drop.set_name("audited");
  EXPECT_EQ("1", rows_after_kill("DeleteCollection", drop, "w-drop"));
  // The targets are in the rows.
  EXPECT_EQ("{point:audited/1}",
            db.Value("SELECT target_ids::text FROM audit_log WHERE request_id = 'w-upsert'"));
}

// A client's cancel reaches the catalog's PostgreSQL statement (every
// method starts with it, on a task-pool thread): with the catalog table
// locked, a Search waits on the lock; its client cancels (the deadline is
// far off), and a moment later no session waits on the lock any more.
TEST_F(EpisodicTest, ACancelledCallLeavesNoCatalogStatementWaiting) {
  MustCreate(alice_, "cat", 2, DISTANCE_DOT);
  PgSession admin(db_.url());
  ASSERT_TRUE(admin.ok()) << admin.error();
  admin.Value("BEGIN");
  admin.Value("LOCK TABLE episodic_collections IN ACCESS EXCLUSIVE MODE");
  testing_client::Stream search(a_.ch, "/memory.v1.EpisodicMemory/Search", 30000,
                                {{"authorization", TestKeys::Bearer(alice_)}});
  ASSERT_TRUE(search.Write(SearchReq("cat", {1, 0}).SerializeAsString()));
  ASSERT_TRUE(search.WritesDone());
  // Up to 15 s: under CI's full parallel load the call can take a while to
  // reach PostgreSQL.
  bool blocked = false;
  for (int i = 0; i < 1500 && !blocked; i++) {
    blocked = admin.LockWaiters() != 0;
    if (!blocked) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!blocked) {  // say what PostgreSQL saw instead
    PGresult* r = PQexec(admin.conn(),
                         "SELECT backend_type || ' ' || coalesce(wait_event_type, '-') || ' ' ||"
                         " coalesce(state, '-') || ' ' || left(query, 100) FROM pg_stat_activity"
                         " WHERE datname = current_database()");
    for (int i = 0; i < PQntuples(r); i++) ADD_FAILURE() << "session: " << PQgetvalue(r, i, 0);
    PQclear(r);
  }
  ASSERT_TRUE(blocked) << "the Search never waited on the lock\n" << a_.proc->Log();
  search.Cancel();
  EXPECT_EQ(StatusCode::CANCELLED, search.Finish().error_code());
  auto cancelled_at = std::chrono::steady_clock::now();
  bool gone = false;
  while (!gone && std::chrono::steady_clock::now() - cancelled_at < std::chrono::seconds(5)) {
    gone = admin.LockWaiters() == 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - cancelled_at)
                  .count();
  EXPECT_TRUE(gone) << "the cancelled statement still waits on the lock";
  // The watchdog cuts at once; the server notices within its check
  // interval (100 ms). The margin is for a loaded machine.
  EXPECT_LT(took, 1000) << "the cancelled statement outlived the cancel by " << took << " ms";
  admin.Value("ROLLBACK");
  // The pool serves the next call (Must fails the test otherwise).
  EXPECT_TRUE(SearchIds(alice_, SearchReq("cat", {1, 0})).empty());
}

// Two principals, each allowed to modify only its own points, upsert the
// same new id at the same moment through two replicas, 30 times: each time
// exactly one of them creates the point and the other is refused (the
// point is no longer absent: it is the other's), and the stored owner is
// the one that succeeded. (On Qdrant, which has no conditional write, both
// used to see the id absent and both succeed, the later silently taking
// over the other's point.)
TEST_F(EpisodicTest, ConcurrentWritersOfOneNewIdNeverBothSucceed) {
  MustCreate(alice_, "race", 2, DISTANCE_DOT);
  std::string alice = Token("t1", "alice", "episodic:read:all episodic:write");
  std::string bob = Token("t1", "bob", "episodic:read:all episodic:write");
  Replica b = Launch();
  int both = 0, neither = 0, wrong_owner = 0;
  for (int round = 0; round < 30; round++) {
    Result ra, rb;
    std::atomic<int> ready{0};
    auto go = [&](const std::string& tok, const Replica* r, Result* out) {
      ready++;
      while (ready.load() < 2) {
      }
      *out = Upsert(tok, "race", {P(Num(1000 + round), {1, 0})}, r);
    };
    std::thread ta(go, alice, &a_, &ra), tb(go, bob, &b, &rb);
    ta.join();
    tb.join();
    if (ra.status.ok() && rb.status.ok()) both++;
    if (!ra.status.ok() && !rb.status.ok()) neither++;
    for (const Result* r : {&ra, &rb}) {
      if (!r->status.ok()) {
        EXPECT_EQ(StatusCode::PERMISSION_DENIED, r->status.error_code())
            << r->status.error_message();
      }
    }
    GetPointsRequest get;
    get.set_collection("race");
    *get.add_ids() = Num(1000 + round);
    auto got = Must<GetPointsResponse>("GetPoints", get, alice_);
    if (got.points_size() != 1 ||
        got.points(0).meta().owner() != (ra.status.ok() ? "alice" : "bob"))
      wrong_owner++;
  }
  EXPECT_EQ(0, both) << "both writers of a new id succeeded";
  EXPECT_EQ(0, neither);
  EXPECT_EQ(0, wrong_owner);
}

#ifndef EPISODIC_TEST_QDRANT
// The embedded index's memory budget (--episodic-index-max-mb): past it the
// least recently used idle collection leaves memory and comes back on its
// next read; a collection that alone needs more than the budget fails its
// reads RESOURCE_EXHAUSTED naming the flag, and the others go on.
TEST_F(EpisodicTest, EmbeddedIndexKeepsToItsMemoryBudget) {
  auto fill = [&](const std::string& name, int n) {
    MustCreate(alice_, name, 128, DISTANCE_EUCLID);
    for (int start = 0; start < n; start += 1000) {
      std::vector<PointInput> pts;
      for (int i = start; i < n && i < start + 1000; i++)
        pts.push_back(P(Num(i), std::vector<float>(128, float(i))));
      MustUpsert(alice_, name, pts);
    }
  };
  fill("a", 600);  // about 0.6 MiB in memory each
  fill("b", 600);
  fill("c", 1500);  // about 1.2 MiB: over the whole budget alone
  Replica small = Launch({"--episodic-index-max-mb=1"});
  auto nearest = [&](const std::string& coll, float at) {
    return SearchIds(alice_, SearchReq(coll, std::vector<float>(128, at), 1), &small);
  };
  EXPECT_EQ((std::vector<std::string>{"17"}), nearest("a", 17.2f));
  EXPECT_EQ((std::vector<std::string>{"18"}), nearest("b", 18.1f));  // a leaves memory
  EXPECT_NE(
      std::string::npos,
      small.proc->LogWith("idle collections left memory").find("idle collections left memory"))
      << small.proc->Log();
  EXPECT_EQ((std::vector<std::string>{"599"}), nearest("a", 700.0f));  // loaded again
  Result big = Call("Search", SearchReq("c", std::vector<float>(128, 1.0f), 1), alice_, &small);
  EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, big.status.error_code()) << big.status.error_message();
  EXPECT_NE(std::string::npos, big.status.error_message().find("--episodic-index-max-mb"))
      << big.status.error_message();
  EXPECT_EQ((std::vector<std::string>{"3"}), nearest("b", 3.0f));
  // The default budget holds all three.
  EXPECT_EQ(1500, Count(alice_, "c"));
}
#endif

#ifdef EPISODIC_TEST_QDRANT
// ---------------------------------------------------------------- Qdrant only

class EpisodicQdrantTest : public EpisodicTest {
 protected:
  void SetUp() override {
    EpisodicTest::SetUp();
    MustCreate(alice_, "q", 2, DISTANCE_DOT);
    MustUpsert(alice_, "q", {P(Num(1), {1, 0}), P(Num(2), {0, 1})});
  }
  Result SearchWithin(int timeout_ms) {
    return Unary(a_.ch, "/memory.v1.EpisodicMemory/Search",
                 SearchReq("q", {1, 0}).SerializeAsString(), timeout_ms,
                 {{"authorization", TestKeys::Bearer(alice_)}});
  }
};

TEST_F(EpisodicQdrantTest, EachQdrantErrorClassMapsToAStatusThatSaysWhy) {
  struct Case {
    std::string fault;
    StatusCode want;
    std::string message;
  } cases[] = {
      {R"({"status":500,"body":{"status":{"error":"Service internal error: disk"},"time":0}})",
       StatusCode::UNAVAILABLE, "Service internal error: disk"},
      {R"({"status":503,"body":{"status":{"error":"No active replica"},"time":0}})",
       StatusCode::UNAVAILABLE, "No active replica"},
      {R"({"status":429,"body":{"status":{"error":"Too many requests"},"time":0}})",
       StatusCode::UNAVAILABLE, "Too many requests"},
      {R"({"status":400,"body":{"status":{"error":"Wrong input: bad vector"},"time":0}})",
       StatusCode::INVALID_ARGUMENT, "Wrong input: bad vector"},
      {R"({"status":422,"body":{"status":{"error":"Validation error: limit"},"time":0}})",
       StatusCode::INVALID_ARGUMENT, "Validation error: limit"},
      {R"({"status":404,"body":{"status":{"error":"Not found: Collection"},"time":0}})",
       StatusCode::NOT_FOUND, "Not found"},
      {R"({"status":401,"body":"Must provide an API key","content_type":"text/plain"})",
       StatusCode::UNAVAILABLE, "API key"},
      {R"({"status":403,"body":"Invalid API key or JWT","content_type":"text/plain"})",
       StatusCode::UNAVAILABLE, "Invalid API key or JWT"},
      {R"({"status":200,"body":"this is not json","content_type":"text/plain"})",
       StatusCode::INTERNAL, ""},
      // libcurl retries once on a fresh connection when a reused one is
      // closed before the answer: two closes make the call fail.
      {R"({"close":true,"count":2})", StatusCode::UNAVAILABLE, ""},
  };
  for (const auto& c : cases) {
    std::string f = c.fault;
    f.insert(1, R"("path_regex":"/points/(query|search)$",)");
    ASSERT_EQ(std::string::npos, qdrant_.Fault(f).find("ERROR")) << f;
    Result r = SearchWithin(10000);
    EXPECT_EQ(c.want, r.status.error_code()) << c.fault << " -> " << r.status.error_message();
    EXPECT_NE(std::string::npos, r.status.error_message().find(c.message))
        << c.fault << " -> " << r.status.error_message();
    // The fault was one answer: the next call is served again.
    EXPECT_TRUE(SearchWithin(10000).status.ok()) << c.fault;
  }
}

TEST_F(EpisodicQdrantTest, ASlowQdrantEndsTheCallAtItsDeadline) {
  ASSERT_EQ(
      std::string::npos,
      qdrant_.Fault(R"({"path_regex":"/points/(query|search)$","delay_ms":3000})").find("ERROR"));
  auto t0 = std::chrono::steady_clock::now();
  Result r = SearchWithin(800);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_EQ(StatusCode::DEADLINE_EXCEEDED, r.status.error_code()) << r.status.error_message();
  EXPECT_LT(ms, 2500);
}

// A client's cancel ends the Qdrant transfer at once: on a replica with
// one task thread, a Search stuck on a slow Qdrant and then cancelled no
// longer holds that thread, so the next call is served long before Qdrant
// would have answered.
TEST_F(EpisodicQdrantTest, ACancelledCallAbandonsItsQdrantTransferAtOnce) {
  Replica b = Launch({"--task-threads=1"});
  ASSERT_EQ(
      std::string::npos,
      qdrant_.Fault(R"({"path_regex":"/points/(query|search)$","delay_ms":6000})").find("ERROR"));
  qdrant_.ClearRequests();
  testing_client::Stream search(b.ch, "/memory.v1.EpisodicMemory/Search", 30000,
                                {{"authorization", TestKeys::Bearer(alice_)}});
  ASSERT_TRUE(search.Write(SearchReq("q", {1, 0}).SerializeAsString()));
  ASSERT_TRUE(search.WritesDone());
  // Cancel only once the search is waiting on Qdrant.
  bool at_qdrant = false;
  for (int i = 0; i < 500 && !at_qdrant; i++) {
    at_qdrant = qdrant_.Requests().find("/points/") != std::string::npos;
    if (!at_qdrant) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(at_qdrant) << qdrant_.Requests();
  search.Cancel();
  EXPECT_EQ(StatusCode::CANCELLED, search.Finish().error_code());
  auto t0 = std::chrono::steady_clock::now();
  GetCollectionRequest gr;
  gr.set_name("q");
  Result r = Unary(b.ch, "/memory.v1.EpisodicMemory/GetCollection", gr.SerializeAsString(), 4000,
                   {{"authorization", TestKeys::Bearer(alice_)}});
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_LT(ms, 3000) << "the task thread was still held by the cancelled search";
}

TEST_F(EpisodicQdrantTest, ALeftoverQdrantCollectionIsTakenOverOnlyWhenItFits) {
  // The Qdrant name of this tenant's collection "q" gives the naming prefix.
  std::string log = qdrant_.Requests();
  size_t at = log.find("/collections/memoryd_");
  ASSERT_NE(std::string::npos, at) << log;
  std::string prefix = log.substr(at + 13, log.find("_q", at) + 1 - (at + 13));
  ASSERT_EQ(std::string::npos, qdrant_
                                   .Send("PUT", "/collections/" + prefix + "odd",
                                         R"({"vectors":{"size":3,"distance":"Dot"}})")
                                   .find("ERROR"));
  ASSERT_EQ(std::string::npos, qdrant_
                                   .Send("PUT", "/collections/" + prefix + "fits",
                                         R"({"vectors":{"size":2,"distance":"Dot"}})")
                                   .find("ERROR"));
  // Another shape: refused, and the catalog keeps nothing.
  Result r = Create(alice_, "odd", 2, DISTANCE_DOT);
  EXPECT_EQ(StatusCode::ALREADY_EXISTS, r.status.error_code()) << r.status.error_message();
  EXPECT_NE(std::string::npos, r.status.error_message().find(prefix + "odd"))
      << r.status.error_message();
  GetCollectionRequest get;
  get.set_name("odd");
  EXPECT_EQ(StatusCode::NOT_FOUND, Call("GetCollection", get, alice_).status.error_code());
  // Same shape, empty: adopted.
  MustCreate(alice_, "fits", 2, DISTANCE_DOT);
  MustUpsert(alice_, "fits", {P(Num(1), {1, 1})});
  EXPECT_EQ(1, Count(alice_, "fits"));
}

TEST_F(EpisodicQdrantTest, EveryReadCarriesTheCallersTenantAndTheIndexIsATenantIndex) {
  std::string bob = Token("t1", "bob", "episodic:read");
  qdrant_.ClearRequests();
  SearchIds(bob, SearchReq("q", {1, 0}));
  Count(bob, "q");
  GetPointsRequest get;
  get.set_collection("q");
  *get.add_ids() = Num(1);
  Must<GetPointsResponse>("GetPoints", get, bob);
  std::string log = qdrant_.Requests();
  for (const char* path : {"/points/query", "/points/count", "/points/scroll"})
    EXPECT_NE(std::string::npos, log.find(path)) << path;
  // Tenant, owner (bob reads :own) and label conditions went to Qdrant.
  EXPECT_NE(std::string::npos, log.find(R"("memoryd.tenant")")) << log;
  EXPECT_NE(std::string::npos, log.find(R"("memoryd.owner")")) << log;
  EXPECT_NE(std::string::npos, log.find(R"("memoryd.label")")) << log;
  EXPECT_EQ(0, Count(bob, "q"));  // alice's points are not bob's

  qdrant_.ClearRequests();
  MustCreate(alice_, "idx", 2, DISTANCE_DOT);
  log = qdrant_.Requests();
  EXPECT_NE(std::string::npos, log.find(R"("is_tenant":true)")) << log;
}

#endif

// What /metrics says of the backend: the embedded index's collections and
// points, or the requests memoryd made of Qdrant by outcome.
TEST_F(EpisodicTest, TheBackendsFiguresAreOnMetrics) {
  Replica m = Launch({"--metrics-listen=127.0.0.1:0"});
  int port = MetricsPortFromLog(m.proc->Log());
  ASSERT_GT(port, 0) << m.proc->Log();
  MustCreate(alice_, "metered", 2, DISTANCE_DOT);
  MustUpsert(alice_, "metered", {P(Num(1), {1, 0}), P(Num(2), {0, 1}), P(Num(3), {1, 1})}, &m);
  // The embedded index loads a collection when it is next read.
  Result search = Call("Search", SearchReq("metered", {1, 0}), alice_, &m);
  ASSERT_TRUE(search.status.ok()) << search.status.error_message();
  std::string text = ScrapeMetrics(port);
#ifdef EPISODIC_TEST_QDRANT
  const std::string q = "backend=\"qdrant\",pool=\"http\"";
  EXPECT_GE(MetricSample(text, "memoryd_backend_requests_total{" + q + ",outcome=\"ok\"}"), 2)
      << text;
  EXPECT_GE(MetricSample(text, "memoryd_backend_request_duration_seconds_count{" + q + "}"), 2)
      << text;
  EXPECT_EQ(-1, MetricSample(text, "memoryd_episodic_index_points")) << text;
  // A fault at Qdrant counts as unavailable.
  qdrant_.Fault(R"({"status": 503, "body": "down", "path_regex": "/points", "count": 1})");
  EXPECT_EQ(StatusCode::UNAVAILABLE,
            Call("Search", SearchReq("metered", {1, 0}), alice_, &m).status.error_code());
  text = ScrapeMetrics(port);
  EXPECT_EQ(1,
            MetricSample(text, "memoryd_backend_requests_total{" + q + ",outcome=\"unavailable\"}"))
      << text;
#else
  EXPECT_EQ(3, MetricSample(text, "memoryd_episodic_index_points")) << text;
  EXPECT_EQ(1, MetricSample(text, "memoryd_episodic_index_collections")) << text;
  EXPECT_GT(MetricSample(text, "memoryd_episodic_index_bytes"), 0) << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_episodic_index_evictions_total")) << text;
#endif
}

#ifdef EPISODIC_TEST_QDRANT
TEST_F(EpisodicQdrantTest, TheCallersTraceGoesOnToQdrantWithASpanOfItsOwn) {
  MustCreate(alice_, "traced", 2, DISTANCE_DOT);
  qdrant_.ClearRequests();
  const std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string client_span = "00f067aa0ba902b7";
  Result r = Unary(a_.ch, "/memory.v1.EpisodicMemory/Search",
                   SearchReq("traced", {1, 0}).SerializeAsString(), 10000,
                   {{"authorization", TestKeys::Bearer(alice_)},
                    {"traceparent", "00-" + trace + "-" + client_span + "-01"}});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  std::string log = qdrant_.Requests();
  size_t at = log.find(R"("traceparent": "00-)" + trace + "-");
  if (at == std::string::npos) at = log.find(R"("traceparent":"00-)" + trace + "-");
  ASSERT_NE(std::string::npos, at) << log;
  // memoryd's own span id, not the client's, and the client's flags.
  EXPECT_EQ(std::string::npos, log.find(client_span)) << log;
  EXPECT_NE(std::string::npos, log.find("-01\"", at)) << log;
  // A call without one starts a trace of its own: Qdrant sees it too.
  qdrant_.ClearRequests();
  SearchIds(alice_, SearchReq("traced", {1, 0}));
  log = qdrant_.Requests();
  EXPECT_NE(std::string::npos, log.find("traceparent")) << log;
  EXPECT_EQ(std::string::npos, log.find(trace)) << log;
}

TEST_F(EpisodicQdrantTest, HealthAndCallsFollowQdrantDownAndBack) {
  Replica b = Launch({"--health-interval-ms=100"});
  auto health = [&] {
    grpc::health::v1::HealthCheckRequest req;
    req.set_service("memory.v1.EpisodicMemory");
    Result res = Unary(b.ch, "/grpc.health.v1.Health/Check", req.SerializeAsString(), 2000);
    grpc::health::v1::HealthCheckResponse resp;
    return res.status.ok() && resp.ParseFromString(res.body) ? int(resp.status()) : -1;
  };
  auto eventually = [](auto pred) {
    for (int i = 0; i < 250 && !pred(); i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return pred();
  };
  const int serving = grpc::health::v1::HealthCheckResponse::SERVING;
  EXPECT_EQ(serving, health());
  int port = qdrant_.port();
  qdrant_.Stop();
  EXPECT_TRUE(eventually([&] { return health() != serving; }));
  Result r = Call("Search", SearchReq("q", {1, 0}), alice_, &b);
  EXPECT_EQ(StatusCode::UNAVAILABLE, r.status.error_code()) << r.status.error_message();
  EXPECT_NE(std::string::npos, r.status.error_message().find("qdrant")) << r.status.error_message();
  // Calls that need no Qdrant still work.
  GetCollectionRequest get;
  get.set_name("q");
  EXPECT_TRUE(Call("GetCollection", get, alice_, &b).status.ok());
  ASSERT_TRUE(qdrant_.Start("1.19.0", "", port)) << qdrant_.Log();
  EXPECT_TRUE(eventually([&] { return health() == serving; }));
  MustCreate(alice_, "after", 2, DISTANCE_DOT);
  MustUpsert(alice_, "after", {P(Num(1), {1, 0})}, &b);
  EXPECT_EQ(1, Count(alice_, "after", "", &b));
}

TEST_F(EpisodicQdrantTest, AServerOlderThan110IsSearchedThroughPointsSearch) {
  QdrantStandin old;
  ASSERT_TRUE(old.Start("1.9.7")) << old.Log();
  Replica r = Launch({"--qdrant-url=" + old.url()});  // the later flag wins
  ASSERT_TRUE(Create(alice_, "old", 1, DISTANCE_DOT, &r).status.ok());
  MustUpsert(alice_, "old", {P(Num(1), {1}), P(Num(2), {2}), P(Num(3), {3})}, &r);
  EXPECT_EQ((std::vector<std::string>{"3", "2", "1"}),
            SearchIds(alice_, SearchReq("old", {1}), &r));
  std::string log = old.Requests();
  EXPECT_NE(std::string::npos, log.find("/points/search")) << log;
  EXPECT_EQ(std::string::npos, log.find("/points/query")) << log;
  EXPECT_EQ(std::string::npos, log.find(R"("is_tenant")")) << log;
  EXPECT_EQ("[]", CleanViolations(old));
}

TEST_F(EpisodicQdrantTest, TheApiKeyIsSentAndARefusedKeyIsReported) {
  QdrantStandin locked;
  ASSERT_TRUE(locked.Start("1.19.0", "s3cret")) << locked.Log();
  Replica good = Launch({"--qdrant-url=" + locked.url(), "--qdrant-api-key=s3cret"});
  Replica bad = Launch({"--qdrant-url=" + locked.url(), "--qdrant-api-key=wrong"});
  ASSERT_TRUE(Create(alice_, "k", 1, DISTANCE_DOT, &good).status.ok());
  MustUpsert(alice_, "k", {P(Num(1), {1})}, &good);
  Result r = Call("Search", SearchReq("k", {1}), alice_, &bad);
  EXPECT_EQ(StatusCode::UNAVAILABLE, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("API key"))
      << r.status.error_message();
  EXPECT_EQ(std::string::npos, r.status.error_message().find("wrong"))
      << "the key itself must never be echoed: " << r.status.error_message();
  EXPECT_EQ("[]", CleanViolations(locked));
}
#endif

}  // namespace
