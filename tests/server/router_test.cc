// The Router end to end: a real memoryd and PostgreSQL. Each query kind
// against the tier's own method, the hybrid fusion on a hand-computed
// example, a slow tier (PostgreSQL holding a lock) giving a partial answer
// within the deadline with its statement cancelled, QueryStream's order and
// cancellation, scopes, the read diode and bad input.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <thread>

#include "memory/v1/entries.pb.h"
#include "memory/v1/episodic_memory.pb.h"
#include "memory/v1/global_memory.pb.h"
#include "memory/v1/router.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/qdrant_standin.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using google::protobuf::Struct;
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Unary;
using Clock = std::chrono::steady_clock;

Struct Json(const std::string& json) {
  Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  return s;
}

class RouterTest : public ::testing::Test {
 protected:
  // More memoryd flags (the Qdrant fixture's).
  virtual std::vector<std::string> ExtraArgs() { return {}; }

  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=1"};
    for (const auto& a : ExtraArgs()) args.push_back(a);
    proc_ = std::make_unique<MemorydProcess>(args);
    ASSERT_TRUE(proc_->Start()) << proc_->Log();
    ch_ = testing_client::Connect(proc_->port());
    all_ = Token("t1", "alice", kAll);
  }

  // memoryd ends cleanly: under ASan/UBSan a report (a leak of a run's
  // memory, say) makes its exit code non-zero or shows in its log.
  void TearDown() override {
    if (!proc_) return;
    EXPECT_EQ(0, proc_->Stop(SIGTERM, 10000)) << proc_->Log();
    EXPECT_EQ(std::string::npos, proc_->Log().find("runtime error")) << proc_->Log();
  }

  static constexpr const char* kAll =
      "router:query global:read global:write episodic:read episodic:write";

  std::string Token(const std::string& tenant, const std::string& sub, const std::string& scope,
                    const std::string& clr = "SECRET") {
    TestClaims c;
    c.tenant = tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = clr;
    c.lvl = "PUBLIC";
    return proc_->keys()->Mint(c);
  }

  Result Call(const std::string& method, const google::protobuf::Message& req,
              const std::string& token, int timeout_ms = 10000) {
    return Unary(ch_, method, req.SerializeAsString(), timeout_ms,
                 {{"authorization", TestKeys::Bearer(token)}});
  }

  void MustCall(const std::string& method, const google::protobuf::Message& req,
                const std::string& token) {
    Result r = Call(method, req, token);
    ASSERT_TRUE(r.status.ok()) << method << ": " << r.status.error_message();
  }

  void Entity(const std::string& token, const std::string& id, const std::string& type,
              const std::string& name, Label label = LABEL_UNSPECIFIED) {
    PutEntityRequest req;
    req.set_id(id);
    req.set_type(type);
    req.set_name(name);
    req.set_label(label);
    MustCall("/memory.v1.GlobalMemory/PutEntity", req, token);
  }

  void Link(const std::string& token, const std::string& src, const std::string& dst) {
    PutRelationshipRequest req;
    req.set_source_id(src);
    req.set_type("knows");
    req.set_target_id(dst);
    MustCall("/memory.v1.GlobalMemory/PutRelationship", req, token);
  }

  void Collection(const std::string& token, const std::string& name) {
    CreateCollectionRequest req;
    req.set_name(name);
    req.set_dims(2);
    req.set_distance(DISTANCE_COSINE);
    MustCall("/memory.v1.EpisodicMemory/CreateCollection", req, token);
  }

  void Point(const std::string& token, const std::string& coll, uint64_t id, float x, float y,
             const std::string& payload = "{}", Label label = LABEL_UNSPECIFIED) {
    EpisodicMemoryUpsertRequest req;
    req.set_collection(coll);
    PointInput* p = req.add_points();
    p->mutable_id()->set_num(id);
    p->add_vector(x);
    p->add_vector(y);
    *p->mutable_payload() = Json(payload);
    p->set_label(label);
    MustCall("/memory.v1.EpisodicMemory/Upsert", req, token);
  }

  static VectorSearchQuery Vector(const std::string& coll, float x, float y) {
    VectorSearchQuery q;
    q.set_collection(coll);
    q.add_vector(x);
    q.add_vector(y);
    q.set_with_payload(true);
    return q;
  }

  RouterQueryResponse MustQuery(const RouterQueryRequest& req, const std::string& token) {
    Result r = Call("/memory.v1.Router/Query", req, token);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    RouterQueryResponse resp;
    EXPECT_TRUE(resp.ParseFromString(r.body));
    return resp;
  }

  // "e:<id>" or "p:<num>" per result, in order.
  static std::vector<std::string> Names(const RouterQueryResponse& resp) {
    std::vector<std::string> out;
    for (const auto& r : resp.results())
      out.push_back(r.has_entity() ? "e:" + r.entity().id()
                                   : "p:" + std::to_string(r.point().id().num()));
    return out;
  }

  static const TierReport* Report(const RouterQueryResponse& resp, Tier tier) {
    for (const auto& t : resp.tiers())
      if (t.tier() == tier) return &t;
    return nullptr;
  }

  // A QueryStream call of req, its request sent and half-closed.
  std::unique_ptr<testing_client::Stream> QueryStream(const RouterQueryStreamRequest& req,
                                                      int timeout_ms) {
    auto s = std::make_unique<testing_client::Stream>(
        ch_, "/memory.v1.Router/QueryStream", timeout_ms,
        std::map<std::string, std::string>{{"authorization", TestKeys::Bearer(all_)}});
    EXPECT_TRUE(s->Write(req.SerializeAsString()));
    EXPECT_TRUE(s->WritesDone());
    return s;
  }

  // A session holding table locked (ACCESS EXCLUSIVE, until ROLLBACK):
  // every statement on it waits.
  std::unique_ptr<PgSession> LockTable(const std::string& table) {
    auto locker = std::make_unique<PgSession>(db_.url());
    EXPECT_TRUE(locker->ok()) << locker->error();
    locker->Value("BEGIN");
    locker->Value("LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE");
    return locker;
  }

  // Polls until pred holds or ms pass; true if it held.
  template <typename Pred>
  static bool Eventually(Pred pred, int ms, int every_ms = 10) {
    auto until = Clock::now() + std::chrono::milliseconds(ms);
    while (!pred() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(every_ms));
    return pred();
  }

  // The hand-computed example's data: graph a, b, c (type "doc"); points 1
  // (names b), 2 (names nothing), 3 (names z, not in the graph).
  void FusionData(const std::string& token) {
    Entity(token, "a", "doc", "alpha");
    Entity(token, "b", "doc", "beta");
    Entity(token, "c", "doc", "gamma");
    Collection(token, "mem");
    Point(token, "mem", 1, 1, 0, R"({"entity_id":"b"})");
    Point(token, "mem", 2, 1, 0.5, R"({"note":"x"})");
    Point(token, "mem", 3, 0.5, 1, R"({"entity_id":"z"})");
  }

  // A replica on the test Redis, trusting the first memoryd's keys.
  std::unique_ptr<MemorydProcess> Replica() {
    auto m = std::make_unique<MemorydProcess>(std::vector<std::string>{
        "--pg-url=" + db_.url(), "--shutdown-grace=1", "--redis-url=" + TestRedisUrl(),
        "--jwks=" + proc_->keys()->jwks_path()});
    EXPECT_TRUE(m->Start()) << m->Log();
    return m;
  }

  // The recent lookup of ns/key on ch: its response.
  RouterQueryResponse Recent(const std::shared_ptr<grpc::Channel>& ch, const std::string& token,
                             const std::string& ns, const std::string& key) {
    RouterQueryRequest req;
    req.mutable_recent_lookup()->set_namespace_(ns);
    req.mutable_recent_lookup()->set_key(key);
    Result r = Unary(ch, "/memory.v1.Router/Query", req.SerializeAsString(), 10000,
                     {{"authorization", TestKeys::Bearer(token)}});
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    RouterQueryResponse resp;
    EXPECT_TRUE(resp.ParseFromString(r.body));
    return resp;
  }

  // "<tier>:<outcome>" per report, and the value found ("" for none).
  static std::string Levels(const RouterQueryResponse& resp) {
    std::string out;
    for (const auto& t : resp.tiers())
      out += (out.empty() ? "" : " ") + Tier_Name(t.tier()).substr(5) + ":" +
             TierOutcome_Name(t.outcome()).substr(13);
    return out;
  }
  static std::string Value(const RouterQueryResponse& resp) {
    return resp.results_size() ? resp.results(0).entry().value() : "";
  }

  void Write(const std::shared_ptr<grpc::Channel>& ch, const std::string& token,
             const std::string& ns, const std::string& key, const std::string& value,
             Label label = LABEL_UNSPECIFIED) {
    EntriesWriteRequest req;
    req.set_namespace_(ns);
    req.set_key(key);
    req.set_value(value);
    req.set_label(label);
    Result r = Unary(ch, "/memory.v1.Entries/Write", req.SerializeAsString(), 10000,
                     {{"authorization", TestKeys::Bearer(token)}});
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }

  PgTestDb db_;
  std::unique_ptr<MemorydProcess> proc_;
  std::shared_ptr<grpc::Channel> ch_;
  std::string all_;
};

TEST_F(RouterTest, GraphQueryAnswersAsQueryEntitiesAndTraverseDo) {
  Entity(all_, "ada", "person", "Ada Lovelace");
  Entity(all_, "bob", "person", "Bob Engine");
  Entity(all_, "eng", "machine", "Analytical Engine");
  Entity(all_, "far", "person", "Far Away");
  Link(all_, "ada", "eng");
  Link(all_, "eng", "bob");
  Link(all_, "bob", "far");

  RouterQueryRequest req;
  req.mutable_graph_query()->set_entity_type("person");
  RouterQueryResponse resp = MustQuery(req, all_);
  EXPECT_EQ((std::vector<std::string>{"e:ada", "e:bob", "e:far"}), Names(resp));
  ASSERT_EQ(1, resp.tiers_size());
  EXPECT_EQ(TIER_GLOBAL, resp.tiers(0).tier());
  EXPECT_EQ(TIER_OUTCOME_ANSWERED, resp.tiers(0).outcome());
  EXPECT_EQ(3, resp.tiers(0).result_count());
  EXPECT_FALSE(resp.partial());
  EXPECT_EQ(TIER_GLOBAL, resp.results(0).tier());
  EXPECT_DOUBLE_EQ(1.0, resp.results(0).score());

  // Full text: only the entities whose name matches, best rank first.
  req.mutable_graph_query()->set_entity_type("");
  req.mutable_graph_query()->set_text_query("engine");
  resp = MustQuery(req, all_);
  std::vector<std::string> names = Names(resp);
  std::sort(names.begin(), names.end());
  EXPECT_EQ((std::vector<std::string>{"e:bob", "e:eng"}), names);
  EXPECT_GT(resp.results(0).score(), 0);

  // A traversal from ada, depth 2, filtered to persons: bob at depth 2
  // (far is at depth 3); ada herself at depth 0.
  req.mutable_graph_query()->set_text_query("");
  req.mutable_graph_query()->set_start_id("ada");
  req.mutable_graph_query()->set_entity_type("person");
  req.mutable_graph_query()->set_max_depth(2);
  resp = MustQuery(req, all_);
  EXPECT_EQ((std::vector<std::string>{"e:ada", "e:bob"}), Names(resp));
  ASSERT_EQ(2, resp.results_size());
  EXPECT_EQ(2, resp.results(1).depth());
  EXPECT_DOUBLE_EQ(1.0 / 3, resp.results(1).score());

  // The same traversal through GlobalMemory.Traverse reaches the same
  // persons: the router adds nothing and loses nothing.
  TraverseRequest tr;
  tr.set_start_id("ada");
  tr.set_max_depth(2);
  Result t = Call("/memory.v1.GlobalMemory/Traverse", tr, all_);
  ASSERT_TRUE(t.status.ok()) << t.status.error_message();
  TraverseResponse tresp;
  ASSERT_TRUE(tresp.ParseFromString(t.body));
  std::vector<std::string> persons;
  for (const auto& n : tresp.nodes())
    if (n.entity().type() == "person") persons.push_back("e:" + n.entity().id());
  EXPECT_EQ(persons, Names(resp));

  // An unknown start entity is NOT_FOUND.
  req.mutable_graph_query()->set_start_id("nobody");
  Result r = Call("/memory.v1.Router/Query", req, all_);
  EXPECT_EQ(StatusCode::NOT_FOUND, r.status.error_code()) << r.status.error_message();
}

TEST_F(RouterTest, VectorSearchAnswersAsEpisodicSearchDoes) {
  Collection(all_, "mem");
  Point(all_, "mem", 1, 1, 0);
  Point(all_, "mem", 2, 1, 0.5, R"({"k":"v"})");
  Point(all_, "mem", 3, 0, 1);
  RouterQueryRequest req;
  *req.mutable_vector_search() = Vector("mem", 1, 0.4f);
  req.mutable_vector_search()->set_score_threshold(0.5f);
  RouterQueryResponse resp = MustQuery(req, all_);

  EpisodicMemorySearchRequest sreq;
  sreq.set_collection("mem");
  sreq.add_vector(1);
  sreq.add_vector(0.4f);
  sreq.set_score_threshold(0.5f);
  sreq.set_with_payload(true);
  Result s = Call("/memory.v1.EpisodicMemory/Search", sreq, all_);
  ASSERT_TRUE(s.status.ok()) << s.status.error_message();
  EpisodicMemorySearchResponse sresp;
  ASSERT_TRUE(sresp.ParseFromString(s.body));
  ASSERT_EQ(2, sresp.points_size());  // point 3 is under the threshold
  ASSERT_EQ(sresp.points_size(), resp.results_size());
  for (int i = 0; i < resp.results_size(); i++) {
    EXPECT_EQ(TIER_EPISODIC, resp.results(i).tier());
    EXPECT_EQ(sresp.points(i).point().id().num(), resp.results(i).point().id().num());
    EXPECT_FLOAT_EQ(sresp.points(i).score(), static_cast<float>(resp.results(i).score()));
  }
  EXPECT_EQ("v", resp.results(0).point().payload().fields().at("k").string_value());
  ASSERT_EQ(1, resp.tiers_size());
  EXPECT_EQ(TIER_EPISODIC, resp.tiers(0).tier());
  EXPECT_EQ(TIER_OUTCOME_ANSWERED, resp.tiers(0).outcome());
  EXPECT_EQ(2, resp.tiers(0).result_count());
}

TEST_F(RouterTest, HybridFusesByReciprocalRankOnAHandComputedExample) {
  FusionData(all_);
  RouterQueryRequest req;
  *req.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, 0);
  req.mutable_hybrid()->mutable_graph_query()->set_entity_type("doc");
  RouterQueryResponse resp = MustQuery(req, all_);
  // Graph ranks (by id): a 1, b 2, c 3. Vector ranks (cosine to (1,0)):
  // point 1 (names b) 1, point 2 2, point 3 (names z) 3.
  //   b = 1/62 + 1/61, a = 1/61, p2 = 1/62, c = 1/63, p3 = 1/63 (a tie:
  //   graph results first).
  EXPECT_EQ((std::vector<std::string>{"e:b", "e:a", "p:2", "e:c", "p:3"}), Names(resp));
  ASSERT_EQ(5, resp.results_size());
  EXPECT_NEAR(1.0 / 62 + 1.0 / 61, resp.results(0).score(), 1e-12);
  EXPECT_NEAR(1.0 / 61, resp.results(1).score(), 1e-12);
  EXPECT_NEAR(1.0 / 62, resp.results(2).score(), 1e-12);
  EXPECT_NEAR(1.0 / 63, resp.results(3).score(), 1e-12);
  EXPECT_NEAR(1.0 / 63, resp.results(4).score(), 1e-12);
  // b was produced by both tiers and carries the point that named it.
  ASSERT_EQ(2, resp.results(0).tiers_size());
  EXPECT_EQ(TIER_GLOBAL, resp.results(0).tiers(0));
  EXPECT_EQ(TIER_EPISODIC, resp.results(0).tiers(1));
  EXPECT_EQ(1u, resp.results(0).entity_point().id().num());
  EXPECT_EQ(1, resp.results(1).tiers_size());
  EXPECT_EQ(TIER_EPISODIC, resp.results(2).tier());
  EXPECT_EQ(2, resp.tiers_size());
  EXPECT_FALSE(resp.partial());

  // A traversal boosts nearer entities: from a (a -> b -> c), a at depth
  // 0 weighs 2, b at depth 1 weighs 1.5, c at depth 2 weighs 4/3.
  Link(all_, "a", "b");
  Link(all_, "b", "c");
  req.mutable_hybrid()->mutable_graph_query()->set_start_id("a");
  req.set_limit(3);
  resp = MustQuery(req, all_);
  //   a = 2/61, b = 1.5/62 + 1/61, p2 = 1/62, c = (4/3)/63, p3 = 1/63.
  EXPECT_EQ((std::vector<std::string>{"e:b", "e:a", "e:c"}), Names(resp));
  ASSERT_EQ(3, resp.results_size());
  EXPECT_NEAR(1.5 / 62 + 1.0 / 61, resp.results(0).score(), 1e-12);
  EXPECT_NEAR(2.0 / 61, resp.results(1).score(), 1e-12);
  EXPECT_NEAR((4.0 / 3) / 63, resp.results(2).score(), 1e-12);
  EXPECT_EQ(2, resp.results(2).depth());
}

TEST_F(RouterTest, ScopesDecideWhichPartsRun) {
  FusionData(all_);
  RouterQueryRequest hybrid;
  *hybrid.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, 0);
  hybrid.mutable_hybrid()->mutable_graph_query()->set_entity_type("doc");

  // Without episodic:read the hybrid runs its graph part alone.
  std::string graph_only = Token("t1", "alice", "router:query global:read");
  RouterQueryResponse resp = MustQuery(hybrid, graph_only);
  EXPECT_EQ((std::vector<std::string>{"e:a", "e:b", "e:c"}), Names(resp));
  EXPECT_TRUE(resp.partial());
  const TierReport* ep = Report(resp, TIER_EPISODIC);
  ASSERT_NE(nullptr, ep);
  EXPECT_EQ(TIER_OUTCOME_SKIPPED, ep->outcome());
  EXPECT_NE(std::string::npos, ep->detail().find("episodic:read")) << ep->detail();

  // A single-tier query without its scope, or a hybrid without either, is
  // refused.
  RouterQueryRequest vec;
  *vec.mutable_vector_search() = Vector("mem", 1, 0);
  Result r = Call("/memory.v1.Router/Query", vec, graph_only);
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("episodic:read"));
  r = Call("/memory.v1.Router/Query", hybrid, Token("t1", "alice", "router:query"));
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, r.status.error_code());
  // router:query itself is required.
  r = Call("/memory.v1.Router/Query", vec, Token("t1", "alice", "global:read episodic:read"));
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, r.status.error_code());
}

TEST_F(RouterTest, TheReadDiodeHoldsOnEveryQueryKind) {
  // alice's records, one of them SECRET; bob's (same tenant); t2's.
  Entity(all_, "pub", "doc", "public doc");
  Entity(all_, "sec", "doc", "secret doc", LABEL_SECRET);
  Collection(all_, "mem");
  Point(all_, "mem", 1, 1, 0, R"({"entity_id":"pub"})");
  Point(all_, "mem", 2, 1, 0.1f, R"({"entity_id":"sec"})", LABEL_SECRET);
  std::string bob = Token("t1", "bob", kAll);
  Entity(bob, "bobs", "doc", "bob doc");
  Point(bob, "mem", 3, 1, 0.2f, R"({"entity_id":"bobs"})");
  std::string other = Token("t2", "alice", kAll);
  Entity(other, "foreign", "doc", "foreign doc");
  Collection(other, "mem");
  Point(other, "mem", 4, 1, 0, R"({"entity_id":"foreign"})");

  // alice cleared for INTERNAL only, reading her own records.
  std::string low = Token("t1", "alice", "router:query global:read episodic:read", "INTERNAL");
  RouterQueryRequest req;
  *req.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, 0);
  req.mutable_hybrid()->mutable_graph_query()->set_entity_type("doc");
  EXPECT_EQ((std::vector<std::string>{"e:pub"}), Names(MustQuery(req, low)));
  RouterQueryRequest g;
  g.mutable_graph_query()->set_entity_type("doc");
  EXPECT_EQ((std::vector<std::string>{"e:pub"}), Names(MustQuery(g, low)));
  RouterQueryRequest v;
  *v.mutable_vector_search() = Vector("mem", 1, 0);
  EXPECT_EQ((std::vector<std::string>{"p:1"}), Names(MustQuery(v, low)));

  // With the :all breadths and full clearance: the whole tenant, never t2.
  std::string wide =
      Token("t1", "alice", "router:query global:read:all episodic:read:all", "SECRET");
  std::vector<std::string> names = Names(MustQuery(g, wide));
  EXPECT_EQ((std::vector<std::string>{"e:bobs", "e:pub", "e:sec"}), names);
  names = Names(MustQuery(v, wide));
  std::sort(names.begin(), names.end());
  EXPECT_EQ((std::vector<std::string>{"p:1", "p:2", "p:3"}), names);
}

TEST_F(RouterTest, BadInputIsRefusedNamingTheField) {
  Collection(all_, "mem");
  struct Case {
    RouterQueryRequest req;
    std::string field;
  };
  std::vector<Case> cases(6);
  cases[0].field = "query";
  cases[1].req.set_limit(1001);
  cases[1].req.mutable_graph_query();
  cases[1].field = "limit";
  cases[2].req.mutable_hybrid()->mutable_graph_query();
  cases[2].field = "hybrid.vector_search";
  *cases[3].req.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, 0);
  cases[3].field = "hybrid.graph_query";
  cases[4].req.mutable_vector_search()->set_collection("mem");
  cases[4].req.mutable_vector_search()->add_vector(1);
  cases[4].field = "vector_search.vector";
  *cases[5].req.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, NAN);
  cases[5].req.mutable_hybrid()->mutable_graph_query()->set_entity_type(std::string(200, 't'));
  cases[5].field = "hybrid.graph_query.type";
  for (const Case& c : cases) {
    Result r = Call("/memory.v1.Router/Query", c.req, all_);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << c.field;
    EXPECT_EQ(0u, r.status.error_message().rfind(c.field, 0))
        << c.field << ": " << r.status.error_message();
  }
  RouterQueryRequest unknown;
  *unknown.mutable_vector_search() = Vector("nope", 1, 0);
  Result r = Call("/memory.v1.Router/Query", unknown, all_);
  EXPECT_EQ(StatusCode::NOT_FOUND, r.status.error_code()) << r.status.error_message();
  // A hybrid's graph part starts before the vector part's collection is
  // checked: the request's fault still fails the call, the graph part
  // cancelled.
  RouterQueryRequest h;
  h.mutable_hybrid()->mutable_graph_query()->set_entity_type("doc");
  h.mutable_hybrid()->mutable_vector_search()->set_collection("mem");
  h.mutable_hybrid()->mutable_vector_search()->add_vector(1);
  r = Call("/memory.v1.Router/Query", h, all_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_EQ(0u, r.status.error_message().rfind("hybrid.vector_search.vector", 0))
      << r.status.error_message();
  h.mutable_hybrid()->mutable_vector_search()->set_collection("nope");
  r = Call("/memory.v1.Router/Query", h, all_);
  EXPECT_EQ(StatusCode::NOT_FOUND, r.status.error_code()) << r.status.error_message();
  RouterQueryStreamRequest hs;
  *hs.mutable_hybrid() = h.hybrid();
  auto s = QueryStream(hs, 10000);
  std::string body;
  while (s->Read(&body)) {
  }
  EXPECT_EQ(StatusCode::NOT_FOUND, s->Finish().error_code());
}

// A graph predicate QueryEntities refuses is refused by the router too,
// before any part starts: INVALID_ARGUMENT naming it, never UNAVAILABLE
// ("every tier failed", which clients retry) nor a partial hybrid.
TEST_F(RouterTest, InvalidGraphPredicatesAreRefusedBeforeAnyPartRuns) {
  Collection(all_, "mem");
  std::vector<PropertyPredicate> bad(3);
  bad[0].set_path("a");
  bad[0].set_op(static_cast<PredicateOp>(99));
  bad[0].mutable_value()->set_number_value(1);
  bad[1].set_op(PREDICATE_OP_EQ);  // no path
  bad[1].mutable_value()->set_number_value(1);
  bad[2].set_path("a");
  bad[2].set_op(PREDICATE_OP_EQ);  // no value
  for (size_t i = 0; i < bad.size(); i++) {
    SCOPED_TRACE("predicate " + std::to_string(i));
    QueryEntitiesRequest direct;
    *direct.add_predicates() = bad[i];
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT,
              Call("/memory.v1.GlobalMemory/QueryEntities", direct, all_).status.error_code());
    RouterQueryRequest g;
    *g.mutable_graph_query()->add_predicates() = bad[i];
    Result r = Call("/memory.v1.Router/Query", g, all_);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << r.status.error_message();
    EXPECT_EQ(0u, r.status.error_message().rfind("graph_query.predicates[0]", 0))
        << r.status.error_message();
    RouterQueryRequest h;
    *h.mutable_hybrid()->mutable_graph_query()->add_predicates() = bad[i];
    *h.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, 0);
    r = Call("/memory.v1.Router/Query", h, all_);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << r.status.error_message();
    EXPECT_EQ(0u, r.status.error_message().rfind("hybrid.graph_query.predicates[0]", 0))
        << r.status.error_message();
    RouterQueryStreamRequest hs;
    *hs.mutable_hybrid() = h.hybrid();
    auto s = QueryStream(hs, 10000);
    std::string body;
    int messages = 0;
    while (s->Read(&body)) messages++;
    EXPECT_EQ(0, messages);  // no part answered
    grpc::Status st = s->Finish();
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, st.error_code()) << st.error_message();
  }
}

// The graph part waits on a lock PostgreSQL holds for another session: the
// call answers within its deadline with the vector part's results, the
// graph reported DEADLINE_EXCEEDED, and its statement no longer runs.
TEST_F(RouterTest, ASlowTierGivesAPartialAnswerWithinTheDeadline) {
  FusionData(all_);
  auto locker = LockTable("entities");
  RouterQueryRequest req;
  *req.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, 0);
  req.mutable_hybrid()->mutable_graph_query()->set_entity_type("doc");
  auto t0 = Clock::now();
  Result r = Call("/memory.v1.Router/Query", req, all_, 1500);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_LT(ms, 1500);
  RouterQueryResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_TRUE(resp.partial());
  EXPECT_EQ((std::vector<std::string>{"p:1", "p:2", "p:3"}), Names(resp));
  const TierReport* g = Report(resp, TIER_GLOBAL);
  ASSERT_NE(nullptr, g);
  EXPECT_EQ(TIER_OUTCOME_DEADLINE_EXCEEDED, g->outcome());
  EXPECT_EQ(0, g->result_count());
  EXPECT_GE(g->latency().seconds() * 1000 + g->latency().nanos() / 1000000, 1000);
  EXPECT_EQ(TIER_OUTCOME_ANSWERED, Report(resp, TIER_EPISODIC)->outcome());
  // Nobody waits on the lock any more: the statement was cancelled (the
  // cancel request reaches PostgreSQL just after the answer).
  Eventually([&] { return locker->LockWaiters() == 0; }, 2000);
  EXPECT_EQ(0, locker->LockWaiters());

  // Every tier late: DEADLINE_EXCEEDED for the call.
  RouterQueryRequest graph;
  graph.mutable_graph_query()->set_entity_type("doc");
  r = Call("/memory.v1.Router/Query", graph, all_, 500);
  EXPECT_EQ(StatusCode::DEADLINE_EXCEEDED, r.status.error_code()) << r.status.error_message();
  locker->Value("ROLLBACK");
}

// QueryStream sends each tier's message as it answers (the free vector part
// first, the blocked graph part never), and the client's cancel stops the
// graph part's statement in PostgreSQL within milliseconds.
TEST_F(RouterTest, QueryStreamSendsTiersAsTheyAnswerAndCancelStopsTheRest) {
  FusionData(all_);
  RouterQueryStreamRequest req;
  *req.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, 0);
  req.mutable_hybrid()->mutable_graph_query()->set_entity_type("doc");
  {
    // Unhindered: two tier messages, then the fused one, then OK.
    auto s = QueryStream(req, 10000);
    std::vector<RouterQueryStreamResponse> msgs;
    std::string body;
    while (s->Read(&body)) {
      RouterQueryStreamResponse m;
      ASSERT_TRUE(m.ParseFromString(body));
      msgs.push_back(m);
    }
    EXPECT_TRUE(s->Finish().ok());
    ASSERT_EQ(3u, msgs.size());
    EXPECT_FALSE(msgs[0].fused());
    EXPECT_FALSE(msgs[1].fused());
    EXPECT_NE(msgs[0].report().tier(), msgs[1].report().tier());
    EXPECT_TRUE(msgs[2].fused());
    EXPECT_FALSE(msgs[2].has_report());
    ASSERT_EQ(5, msgs[2].results_size());
    EXPECT_EQ("b", msgs[2].results(0).entity().id());
  }
  auto locker = LockTable("entities");
  auto s = QueryStream(req, 30000);
  std::string body;
  ASSERT_TRUE(s->Read(&body, 5000));
  RouterQueryStreamResponse first;
  ASSERT_TRUE(first.ParseFromString(body));
  EXPECT_EQ(TIER_EPISODIC, first.report().tier());
  EXPECT_EQ(3, first.results_size());
  // The graph part waits on the lock until the client cancels.
  Eventually([&] { return locker->LockWaiters() >= 1; }, 5000);
  ASSERT_EQ(1, locker->LockWaiters());
  auto t0 = Clock::now();
  s->Cancel();
  Eventually([&] { return locker->LockWaiters() == 0; }, 5000, 2);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_EQ(0, locker->LockWaiters());
  EXPECT_LT(ms, 1000) << "the graph statement ran on " << ms << " ms after the cancel";
  printf("cancel -> graph statement gone: %lld ms\n", static_cast<long long>(ms));
  locker->Value("ROLLBACK");
}

TEST_F(RouterTest, OneAuditRowNamesEveryRecordReturned) {
  FusionData(all_);
  RouterQueryRequest req;
  *req.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, 0);
  req.mutable_hybrid()->mutable_graph_query()->set_entity_type("doc");
  Result r = Unary(ch_, "/memory.v1.Router/Query", req.SerializeAsString(), 10000,
                   {{"authorization", TestKeys::Bearer(all_)}, {"x-request-id", "route-1"}});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  PgSession pg(db_.url());
  std::string targets;
  Eventually(
      [&] {
        targets = pg.Value(
            "SELECT count(*) || '|' || string_agg(t, ',' ORDER BY t) FROM audit_log, "
            "unnest(target_ids) t WHERE request_id = 'route-1' GROUP BY id");
        return !targets.empty();
      },
      5000, 20);
  EXPECT_EQ("6|entity:a,entity:b,entity:c,point:mem/1,point:mem/2,point:mem/3", targets);
  EXPECT_EQ("1", pg.Value("SELECT count(*) FROM audit_log WHERE request_id = 'route-1'"));
}

}  // namespace

namespace {

// Tenants unique to this run: the shared Redis outlives test runs.
std::string Tenant(const std::string& name) {
  static const std::string run =
      std::to_string(getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count());
  return name + "-" + run;
}

// recent_lookup on two replicas sharing Redis: PostgreSQL fills L2 and L1,
// the next lookup answers from L1, the other replica's from L2; a write on
// either replica is seen at once there and within the invalidation delay on
// the other; a delete empties both.
TEST_F(RouterTest, RecentLookupIsCacheAsideAndEveryWriteInvalidatesIt) {
  ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
  auto a = Replica(), b = Replica();
  auto cha = testing_client::Connect(a->port()), chb = testing_client::Connect(b->port());
  std::string tok = Token(Tenant("recent"), "alice", "router:query entries:read entries:write");
  Write(cha, tok, "app:notes:x", "k", "v1");

  RouterQueryResponse r = Recent(cha, tok, "app:notes:x", "k");
  EXPECT_EQ("CACHE_L1:MISS CACHE_L2:MISS ENTRIES:ANSWERED", Levels(r));
  EXPECT_EQ("v1", Value(r));
  ASSERT_EQ(1, r.results_size());
  EXPECT_EQ(TIER_ENTRIES, r.results(0).tier());
  EXPECT_EQ("alice", r.results(0).entry().meta().owner());
  r = Recent(cha, tok, "app:notes:x", "k");
  EXPECT_EQ("CACHE_L1:ANSWERED CACHE_L2:SKIPPED ENTRIES:SKIPPED", Levels(r));
  EXPECT_EQ("v1", Value(r));
  EXPECT_EQ(TIER_CACHE_L1, r.results(0).tier());
  // a's fill of L2 is sent as a answers; give it a wide margin to land.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  r = Recent(chb, tok, "app:notes:x", "k");
  EXPECT_EQ("CACHE_L1:MISS CACHE_L2:ANSWERED ENTRIES:SKIPPED", Levels(r));
  EXPECT_EQ("v1", Value(r));

  // A write on b: b reads it at once; a within the invalidation delay.
  Write(chb, tok, "app:notes:x", "k", "v2");
  EXPECT_EQ("v2", Value(Recent(chb, tok, "app:notes:x", "k")));
  auto t0 = Clock::now();
  std::string seen;
  Eventually([&] { return (seen = Value(Recent(cha, tok, "app:notes:x", "k"))) == "v2"; }, 2000, 1);
  EXPECT_EQ("v2", seen);
  printf("invalidation on the other replica: %lld us\n",
         static_cast<long long>(
             std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count()));

  // Append goes through the same invalidation.
  EntriesAppendRequest app;
  app.set_namespace_("app:notes:x");
  app.set_key("k");
  app.set_value("+");
  Result ar = Unary(cha, "/memory.v1.Entries/Append", app.SerializeAsString(), 10000,
                    {{"authorization", TestKeys::Bearer(tok)}});
  ASSERT_TRUE(ar.status.ok()) << ar.status.error_message();
  EXPECT_EQ("v2+", Value(Recent(cha, tok, "app:notes:x", "k")));

  // A delete empties every copy: no result, not NOT_FOUND.
  EntriesDeleteEntryRequest del;
  del.set_namespace_("app:notes:x");
  del.set_key("k");
  Result dr = Unary(cha, "/memory.v1.Entries/DeleteEntry", del.SerializeAsString(), 10000,
                    {{"authorization", TestKeys::Bearer(tok)}});
  ASSERT_TRUE(dr.status.ok()) << dr.status.error_message();
  r = Recent(cha, tok, "app:notes:x", "k");
  EXPECT_EQ(0, r.results_size());
  EXPECT_EQ("CACHE_L1:MISS CACHE_L2:MISS ENTRIES:ANSWERED", Levels(r));
  Eventually([&] { return Recent(chb, tok, "app:notes:x", "k").results_size() == 0; }, 2000, 1);
  EXPECT_EQ(0, Recent(chb, tok, "app:notes:x", "k").results_size());
  EXPECT_EQ(0, a->Stop(SIGTERM, 10000)) << a->Log();
  EXPECT_EQ(0, b->Stop(SIGTERM, 10000)) << b->Log();
}

// Concurrent lookups of a cold entry load it once: with the entries table
// locked, 16 lookups leave one statement waiting on the lock, not 16; when
// the lock goes, all 16 answer with the entry.
TEST_F(RouterTest, ConcurrentRecentLookupsOfOneEntryLoadItOnce) {
  ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
  auto a = Replica();
  auto ch = testing_client::Connect(a->port());
  std::string tok = Token(Tenant("flight"), "alice", "router:query entries:read entries:write");
  Write(ch, tok, "app:notes:x", "cold", "c");
  auto locker = LockTable("entries");
  std::vector<std::thread> calls;
  std::vector<std::string> values(16);
  for (int i = 0; i < 16; i++)
    calls.emplace_back([&, i] { values[i] = Value(Recent(ch, tok, "app:notes:x", "cold")); });
  Eventually([&] { return locker->LockWaiters() >= 1; }, 5000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others arrive
  EXPECT_EQ(1, locker->LockWaiters());
  locker->Value("ROLLBACK");
  for (auto& t : calls) t.join();
  for (const auto& v : values) EXPECT_EQ("c", v);
  EXPECT_EQ(0, a->Stop(SIGTERM, 10000)) << a->Log();
}

// Copies are tenant-wide, so the read diode applies to each one handed
// out: another owner, a label above the clearance and another tenant see
// nothing, and a hidden copy looks exactly like an absent entry (the
// reports too). The namespace must be within the token's ns claim.
TEST_F(RouterTest, RecentLookupKeepsTheReadDiodeOnEveryCopy) {
  ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
  auto a = Replica();
  auto ch = testing_client::Connect(a->port());
  std::string t = Tenant("diode");
  std::string alice = Token(t, "alice", "router:query entries:read entries:write");
  Write(ch, alice, "app:notes:x", "pub", "p");
  Write(ch, alice, "app:notes:x", "sec", "s", LABEL_SECRET);
  // Warm every copy as alice (cleared SECRET).
  EXPECT_EQ("p", Value(Recent(ch, alice, "app:notes:x", "pub")));
  EXPECT_EQ("s", Value(Recent(ch, alice, "app:notes:x", "sec")));
  EXPECT_EQ("s", Value(Recent(ch, alice, "app:notes:x", "sec")));

  std::string bob = Token(t, "bob", "router:query entries:read");
  RouterQueryResponse r = Recent(ch, bob, "app:notes:x", "pub");
  EXPECT_EQ(0, r.results_size());
  EXPECT_EQ("CACHE_L1:MISS CACHE_L2:MISS ENTRIES:ANSWERED", Levels(r));
  std::string low = Token(t, "alice", "router:query entries:read", "INTERNAL");
  EXPECT_EQ(0, Recent(ch, low, "app:notes:x", "sec").results_size());
  EXPECT_EQ("p", Value(Recent(ch, low, "app:notes:x", "pub")));
  std::string wide = Token(t, "bob", "router:query entries:read:all", "SECRET");
  EXPECT_EQ("s", Value(Recent(ch, wide, "app:notes:x", "sec")));
  std::string other = Token(Tenant("other"), "alice", "router:query entries:read:all");
  EXPECT_EQ(0, Recent(ch, other, "app:notes:x", "pub").results_size());

  TestClaims c;
  c.tenant = t;
  c.sub = "alice";
  c.scope = "router:query entries:read";
  c.ns = {"other:*:*"};
  RouterQueryRequest req;
  req.mutable_recent_lookup()->set_namespace_("app:notes:x");
  req.mutable_recent_lookup()->set_key("pub");
  Result res = Unary(ch, "/memory.v1.Router/Query", req.SerializeAsString(), 10000,
                     {{"authorization", TestKeys::Bearer(proc_->keys()->Mint(c))}});
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, res.status.error_code()) << res.status.error_message();
  // Without entries:read: PERMISSION_DENIED; a bad key: INVALID_ARGUMENT.
  res = Unary(ch, "/memory.v1.Router/Query", req.SerializeAsString(), 10000,
              {{"authorization", TestKeys::Bearer(Token(t, "alice", "router:query"))}});
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, res.status.error_code());
  req.mutable_recent_lookup()->set_key("");
  res = Unary(ch, "/memory.v1.Router/Query", req.SerializeAsString(), 10000,
              {{"authorization", TestKeys::Bearer(alice)}});
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, res.status.error_code());
  EXPECT_EQ(0u, res.status.error_message().rfind("recent_lookup.key", 0))
      << res.status.error_message();
  EXPECT_EQ(0, a->Stop(SIGTERM, 10000)) << a->Log();
}

}  // namespace

namespace {

// EpisodicMemory on Qdrant (the contract stand-in, which can be slowed or
// stopped), one task thread: a slow Qdrant costs the vector part its
// budget and no more (the transfer is abandoned, so the thread is free at
// once), a stopped one is reported UNAVAILABLE while the graph answers.
class RouterQdrantTest : public RouterTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    EXPECT_TRUE(qdrant_.Start()) << qdrant_.Log();
    return {"--qdrant-url=" + qdrant_.url(), "--task-threads=1"};
  }

  RouterQueryRequest Hybrid() {
    RouterQueryRequest req;
    *req.mutable_hybrid()->mutable_vector_search() = Vector("mem", 1, 0);
    req.mutable_hybrid()->mutable_graph_query()->set_entity_type("doc");
    return req;
  }

  // How long the one task thread takes to serve GetCollection (ms).
  int64_t TaskThreadWait() {
    GetCollectionRequest gr;
    gr.set_name("mem");
    auto t0 = Clock::now();
    Result r = Call("/memory.v1.EpisodicMemory/GetCollection", gr, all_, 10000);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  }

  QdrantStandin qdrant_;
};

TEST_F(RouterQdrantTest, ASlowQdrantCostsTheVectorPartItsBudgetAndNoMore) {
  FusionData(all_);
  ASSERT_EQ(5u, Names(MustQuery(Hybrid(), all_)).size());
  ASSERT_EQ(
      std::string::npos,
      qdrant_.Fault(R"({"path_regex":"/points/(query|search)$","delay_ms":4000})").find("ERROR"));
  auto t0 = Clock::now();
  Result r = Call("/memory.v1.Router/Query", Hybrid(), all_, 1000);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_LT(ms, 1000);
  RouterQueryResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_TRUE(resp.partial());
  EXPECT_EQ((std::vector<std::string>{"e:a", "e:b", "e:c"}), Names(resp));
  EXPECT_EQ(TIER_OUTCOME_DEADLINE_EXCEEDED, Report(resp, TIER_EPISODIC)->outcome());
  EXPECT_EQ(TIER_OUTCOME_ANSWERED, Report(resp, TIER_GLOBAL)->outcome());
  // The Qdrant transfer was abandoned: the one task thread is free now,
  // not in 3 s when the stand-in would answer.
  EXPECT_LT(TaskThreadWait(), 1000);
  EXPECT_EQ("[]", qdrant_.Violations());
}

TEST_F(RouterQdrantTest, AStoppedQdrantIsReportedUnavailableWhileTheGraphAnswers) {
  FusionData(all_);
  qdrant_.Stop();
  RouterQueryResponse resp = MustQuery(Hybrid(), all_);
  EXPECT_TRUE(resp.partial());
  EXPECT_EQ((std::vector<std::string>{"e:a", "e:b", "e:c"}), Names(resp));
  const TierReport* ep = Report(resp, TIER_EPISODIC);
  ASSERT_NE(nullptr, ep);
  EXPECT_EQ(TIER_OUTCOME_UNAVAILABLE, ep->outcome());
  EXPECT_FALSE(ep->detail().empty());
  // The vector part alone: every tier failed.
  RouterQueryRequest vec;
  *vec.mutable_vector_search() = Vector("mem", 1, 0);
  Result r = Call("/memory.v1.Router/Query", vec, all_);
  EXPECT_EQ(StatusCode::UNAVAILABLE, r.status.error_code()) << r.status.error_message();
}

// QueryStream: the graph answers first, the client cancels, and the
// vector part's Qdrant transfer ends at once.
TEST_F(RouterQdrantTest, CancellingAStreamEndsTheQdrantTransfer) {
  FusionData(all_);
  ASSERT_EQ(
      std::string::npos,
      qdrant_.Fault(R"({"path_regex":"/points/(query|search)$","delay_ms":6000})").find("ERROR"));
  qdrant_.ClearRequests();
  RouterQueryStreamRequest req;
  *req.mutable_hybrid() = Hybrid().hybrid();
  auto s = QueryStream(req, 30000);
  std::string body;
  ASSERT_TRUE(s->Read(&body, 5000));
  RouterQueryStreamResponse first;
  ASSERT_TRUE(first.ParseFromString(body));
  EXPECT_EQ(TIER_GLOBAL, first.report().tier());
  bool at_qdrant =
      Eventually([&] { return qdrant_.Requests().find("/points/") != std::string::npos; }, 5000);
  ASSERT_TRUE(at_qdrant) << qdrant_.Requests();
  s->Cancel();
  EXPECT_EQ(StatusCode::CANCELLED, s->Finish().error_code());
  EXPECT_LT(TaskThreadWait(), 1000);
}

}  // namespace
