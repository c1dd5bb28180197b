// privacy_fixture: what the Privacy tests share (privacy_test.cc,
// privacy_reach_test.cc): replicas of a real memoryd on one PostgreSQL and
// Redis, tokens, records of a data subject in every tier (Seed), every
// read path's answer as text (ReadEverything), Forget, Export and the
// offline receipt check.
#ifndef MEMORYD_TESTS_SERVER_PRIVACY_FIXTURE_H
#define MEMORYD_TESTS_SERVER_PRIVACY_FIXTURE_H

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "memory/v1/blackboard.pb.h"
#include "memory/v1/cache.pb.h"
#include "memory/v1/entries.pb.h"
#include "memory/v1/episodic_memory.pb.h"
#include "memory/v1/global_memory.pb.h"
#include "memory/v1/privacy.pb.h"
#include "memory/v1/router.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/qdrant_standin.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/test_keys.h"

namespace privacy_test {

using namespace memory::v1;  // NOLINT: many message types
using google::protobuf::Struct;
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Unary;
using Clock = std::chrono::steady_clock;

// Names unique to this run and call: the shared Redis outlives tests and
// test runs, so no two tests may share a tenant or a subject.
inline std::string Unique(const std::string& name) {
  static const std::string run =
      std::to_string(getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count());
  static int n = 0;
  return name + "-" + run + "-" + std::to_string(++n);
}

inline Struct Json(const std::string& json) {
  Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  return s;
}

constexpr const char* kEverything =
    "global:* episodic:* entries:* cache:* blackboard:* router:query privacy:forget:all "
    "privacy:read:all pii:write";

struct Replica {
  std::unique_ptr<MemorydProcess> proc;
  std::shared_ptr<grpc::Channel> ch;
};

class PrivacyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
    tenant_ = Unique("acme");
  }

  // Every replica ends cleanly: under ASan/UBSan a report shows in its
  // exit code or its log.
  void TearDown() override {
    for (auto& r : replicas_) {
      if (!r->proc) continue;
      EXPECT_EQ(0, r->proc->Stop(SIGTERM, 10000)) << r->proc->Log();
      EXPECT_EQ(std::string::npos, r->proc->Log().find("runtime error")) << r->proc->Log();
    }
  }

  // A replica on redis_url (the shared Redis by default); every replica
  // trusts the first one's keys.
  Replica& Launch(std::vector<std::string> extra = {}, std::string redis_url = "") {
    std::vector<std::string> args = {
        "--pg-url=" + db_.url(), "--shutdown-grace=1", "--health-interval-ms=100",
        "--cache-entities", "--redis-url=" + (redis_url.empty() ? TestRedisUrl() : redis_url)};
    if (keys_) {
      args.push_back("--jwks=" + keys_->jwks_path());
      args.push_back("--signing-key=" + keys_->signing_key_path());
    }
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = std::make_unique<Replica>();
    r->proc = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(r->proc->Start()) << r->proc->Log();
    if (!keys_) keys_ = r->proc->keys();
    r->ch = testing_client::Connect(r->proc->port());
    replicas_.push_back(std::move(r));
    return *replicas_.back();
  }

  std::string Token(const std::string& sub, const std::string& scope, std::string tenant = "",
                    const std::string& clr = "SECRET",
                    const std::vector<std::string>& ns = {"agent:*:*"}) {
    TestClaims c;
    c.tenant = tenant.empty() ? tenant_ : tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = clr;
    c.lvl = "PUBLIC";
    c.ns = ns;
    return keys_->Mint(c);
  }

  static Result Call(const Replica& r, const std::string& method,
                     const google::protobuf::Message& req, const std::string& token,
                     int timeout_ms = 10000) {
    return Unary(r.ch, method, req.SerializeAsString(), timeout_ms,
                 {{"authorization", TestKeys::Bearer(token)}});
  }

  static void MustCall(const Replica& r, const std::string& method,
                       const google::protobuf::Message& req, const std::string& token) {
    Result res = Call(r, method, req, token);
    ASSERT_TRUE(res.status.ok()) << method << ": " << res.status.error_message();
  }

  // Records in every tier; those of subject (when not empty) carry it in
  // their JSON content, names starting with `tag`-one; the others (`tag`-
  // keep) do not. Relationship two->one touches an erased entity; the
  // "likes" one is tagged itself.
  void Seed(const Replica& r, const std::string& tok, const std::string& tag,
            const std::string& subject) {
    const std::string subj = subject.empty() ? "" : R"("subject_id":")" + subject + R"(",)";
    for (const auto& [id, props] : std::vector<std::pair<std::string, std::string>>{
             {tag + "-one", "{" + subj + R"("note":"about one"})"},
             {tag + "-keep2", R"({"note":"keep"})"},
             {tag + "-keep3", R"({"note":"keep"})"}}) {
      PutEntityRequest e;
      e.set_id(id);
      e.set_type("person");
      e.set_name(id);
      *e.mutable_properties() = Json(props);
      MustCall(r, "/memory.v1.GlobalMemory/PutEntity", e, tok);
    }
    auto link = [&](const std::string& src, const std::string& type, const std::string& dst,
                    const std::string& props) {
      PutRelationshipRequest q;
      q.set_source_id(src);
      q.set_type(type);
      q.set_target_id(dst);
      *q.mutable_properties() = Json(props);
      MustCall(r, "/memory.v1.GlobalMemory/PutRelationship", q, tok);
    };
    link(tag + "-keep2", "knows", tag + "-one", "{}");
    link(tag + "-keep2", "likes", tag + "-keep3", "{" + subj + R"("w":1})");
    link(tag + "-keep3", "knows", tag + "-keep2", "{}");
    for (const auto& [id, prov] : std::vector<std::pair<std::string, std::string>>{
             {tag + "-one-task", "{" + subj + R"("src":"chat"})"},
             {tag + "-keep-task", R"({"src":"keep"})"}}) {
      RecordTaskRequest t;
      t.set_id(id);
      t.set_type("chat");
      t.set_status(TASK_STATUS_SUCCEEDED);
      *t.mutable_provenance() = Json(prov);
      MustCall(r, "/memory.v1.GlobalMemory/RecordTask", t, tok);
    }
    CreateCollectionRequest cc;
    cc.set_name("mem");
    cc.set_dims(2);
    cc.set_distance(DISTANCE_COSINE);
    Result created = Call(r, "/memory.v1.EpisodicMemory/CreateCollection", cc, tok);
    ASSERT_TRUE(created.status.ok() || created.status.error_code() == StatusCode::ALREADY_EXISTS)
        << created.status.error_message();
    EpisodicMemoryUpsertRequest up;
    up.set_collection("mem");
    uint64_t base = next_point_;
    next_point_ += 2;
    for (const auto& [id, payload] : std::vector<std::pair<uint64_t, std::string>>{
             {base, "{" + subj + R"("text":")" + tag + R"(-one point"})"},
             {base + 1, R"({"text":")" + tag + R"(-keep point"})"}}) {
      PointInput* p = up.add_points();
      p->mutable_id()->set_num(id);
      p->add_vector(1);
      p->add_vector(id == base ? 0.1f : 0.2f);
      *p->mutable_payload() = Json(payload);
    }
    MustCall(r, "/memory.v1.EpisodicMemory/Upsert", up, tok);
    for (const auto& [key, meta] : std::vector<std::pair<std::string, std::string>>{
             {tag + "-one-entry", "{" + subj + R"("k":1})"}, {tag + "-keep-entry", "{}"}}) {
      EntriesWriteRequest w;
      w.set_namespace_("agent:wf:n1");
      w.set_key(key);
      w.set_value("hello " + key);
      w.set_content_type("text/plain");
      *w.mutable_metadata() = Json(meta);
      MustCall(r, "/memory.v1.Entries/Write", w, tok);
    }
    CacheSetRequest cs;
    cs.set_key(tag + "-one-cached");
    cs.set_value("cached " + tag + "-one");
    cs.mutable_ttl()->set_seconds(600);
    MustCall(r, "/memory.v1.Cache/Set", cs, tok);
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {tag + "-one-item", "{" + subj + R"("v":")" + tag + R"(-one"})"},
             {tag + "-keep-item", R"({"v":"keep"})"}}) {
      BlackboardPostRequest p;
      p.set_task_id("board-" + tenant_);
      p.set_key(key);
      ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(value, p.mutable_value()).ok());
      MustCall(r, "/memory.v1.Blackboard/Post", p, tok);
    }
  }

  // What every read path returns on r for tag's records, as text (status
  // codes of direct reads included), for the caller tok.
  std::string ReadEverything(const Replica& r, const std::string& tok, const std::string& tag) {
    std::string out;
    auto add = [&](const std::string& what, const Result& res, google::protobuf::Message* m) {
      out += what + ": " + std::to_string(res.status.error_code()) + " ";
      if (res.status.ok() && m && m->ParseFromString(res.body)) out += m->DebugString();
      out += "\n";
    };
    GetEntityRequest ge;
    ge.set_id(tag + "-one");
    GetEntityResponse ger;
    add("GetEntity", Call(r, "/memory.v1.GlobalMemory/GetEntity", ge, tok), &ger);
    QueryEntitiesRequest qe;
    qe.set_type("person");
    QueryEntitiesResponse qer;
    add("QueryEntities", Call(r, "/memory.v1.GlobalMemory/QueryEntities", qe, tok), &qer);
    TraverseRequest tr;
    tr.set_start_id(tag + "-keep2");
    tr.set_direction(EDGE_DIRECTION_BOTH);
    tr.set_max_depth(3);
    TraverseResponse trr;
    add("Traverse", Call(r, "/memory.v1.GlobalMemory/Traverse", tr, tok), &trr);
    ListTasksRequest lt;
    ListTasksResponse ltr;
    add("ListTasks", Call(r, "/memory.v1.GlobalMemory/ListTasks", lt, tok), &ltr);
    EpisodicMemorySearchRequest es;
    es.set_collection("mem");
    es.add_vector(1);
    es.add_vector(0.1f);
    es.set_limit(100);
    es.set_with_payload(true);
    EpisodicMemorySearchResponse esr;
    add("Search", Call(r, "/memory.v1.EpisodicMemory/Search", es, tok), &esr);
    GetPointsRequest gp;
    gp.set_collection("mem");
    for (uint64_t id = 1; id < next_point_; id++) gp.add_ids()->set_num(id);
    gp.set_with_payload(true);
    GetPointsResponse gpr;
    add("GetPoints", Call(r, "/memory.v1.EpisodicMemory/GetPoints", gp, tok), &gpr);
    EntriesReadRequest er;
    er.set_namespace_("agent:wf:n1");
    er.set_key(tag + "-one-entry");
    EntriesReadResponse err;
    add("Entries.Read", Call(r, "/memory.v1.Entries/Read", er, tok), &err);
    EntriesListRequest el;
    el.set_namespace_pattern("agent:*:*");
    el.set_with_values(true);
    EntriesListResponse elr;
    add("Entries.List", Call(r, "/memory.v1.Entries/List", el, tok), &elr);
    EntriesSearchRequest esq;
    esq.set_term("hello");
    esq.set_with_values(true);
    EntriesSearchResponse esqr;
    add("Entries.Search", Call(r, "/memory.v1.Entries/Search", esq, tok), &esqr);
    CacheGetRequest cg;
    cg.set_key(tag + "-one-cached");
    CacheGetResponse cgr;
    Result cached = Call(r, "/memory.v1.Cache/Get", cg, tok);
    add("Cache.Get", cached, nullptr);  // the answer names the key asked for: not that
    if (cgr.ParseFromString(cached.body))
      out += CacheLookup_Name(cgr.item().lookup()) + " " + cgr.item().value() + "\n";
    BlackboardReadRequest br;
    br.set_task_id("board-" + tenant_);
    BlackboardReadResponse brr;
    add("Blackboard.Read", Call(r, "/memory.v1.Blackboard/Read", br, tok), &brr);
    auto sub = Subscribe(r, tok);
    std::string first;
    BlackboardSubscribeResponse snap;
    if (sub->Read(&first, 10000) && snap.ParseFromString(first))
      out += "Blackboard.Subscribe: " + snap.DebugString() + "\n";
    sub->Cancel();
    sub->Finish();
    RouterQueryRequest rq;
    rq.mutable_recent_lookup()->set_namespace_("agent:wf:n1");
    rq.mutable_recent_lookup()->set_key(tag + "-one-entry");
    RouterQueryResponse rqr;
    add("Router.recent", Call(r, "/memory.v1.Router/Query", rq, tok), &rqr);
    RouterQueryRequest rh;
    rh.mutable_hybrid()->mutable_graph_query()->set_entity_type("person");
    rh.mutable_hybrid()->mutable_vector_search()->set_collection("mem");
    rh.mutable_hybrid()->mutable_vector_search()->add_vector(1);
    rh.mutable_hybrid()->mutable_vector_search()->add_vector(0.1f);
    rh.mutable_hybrid()->mutable_vector_search()->set_with_payload(true);
    RouterQueryResponse rhr;
    add("Router.hybrid", Call(r, "/memory.v1.Router/Query", rh, tok), &rhr);
    return out;
  }

  // A Blackboard.Subscribe stream of the test's board on r.
  std::unique_ptr<testing_client::Stream> Subscribe(const Replica& r, const std::string& tok) {
    BlackboardSubscribeRequest req;
    req.set_task_id("board-" + tenant_);
    auto s = std::make_unique<testing_client::Stream>(
        r.ch, "/memory.v1.Blackboard/Subscribe", 30000,
        std::map<std::string, std::string>{{"authorization", TestKeys::Bearer(tok)}});
    EXPECT_TRUE(s->Write(req.SerializeAsString()));
    EXPECT_TRUE(s->WritesDone());
    return s;
  }

  int64_t PointCount(const Replica& r, const std::string& tok) {
    EpisodicMemoryCountRequest req;
    req.set_collection("mem");
    req.set_exact(true);
    Result res = Call(r, "/memory.v1.EpisodicMemory/Count", req, tok);
    EXPECT_TRUE(res.status.ok()) << res.status.error_message();
    EpisodicMemoryCountResponse resp;
    resp.ParseFromString(res.body);
    return resp.count();
  }

  Result Forget(const Replica& r, const std::string& tok, const std::string& principal,
                const std::string& subject_id, bool dry_run = false) {
    PrivacyForgetRequest req;
    if (!principal.empty()) req.set_principal(principal);
    if (!subject_id.empty()) req.set_subject_id(subject_id);
    req.set_dry_run(dry_run);
    req.set_reason("ticket 42");
    return Call(r, "/memory.v1.Privacy/Forget", req, tok, 30000);
  }

  ForgetReceipt MustForget(const Replica& r, const std::string& tok, const std::string& principal,
                           const std::string& subject_id, bool dry_run = false) {
    Result res = Forget(r, tok, principal, subject_id, dry_run);
    EXPECT_TRUE(res.status.ok()) << res.status.error_message();
    PrivacyForgetResponse resp;
    EXPECT_TRUE(resp.ParseFromString(res.body));
    return resp.receipt();
  }

  static std::map<int, int64_t> Counts(const ForgetReceipt& r) {
    std::map<int, int64_t> m;
    for (const auto& c : r.counts()) m[c.tier()] = c.erased_count();
    return m;
  }

  // Privacy.Export of principal or subject_id on r: the records and the
  // stream's status.
  std::pair<std::vector<PrivacyExportResponse>, grpc::Status> Export(
      const Replica& r, const std::string& tok, const std::string& principal,
      const std::string& subject_id, std::string* skipped = nullptr) {
    PrivacyExportRequest req;
    if (!principal.empty()) req.set_principal(principal);
    if (!subject_id.empty()) req.set_subject_id(subject_id);
    testing_client::Stream s(r.ch, "/memory.v1.Privacy/Export", 60000,
                             {{"authorization", TestKeys::Bearer(tok)}});
    EXPECT_TRUE(s.Write(req.SerializeAsString()));
    EXPECT_TRUE(s.WritesDone());
    std::vector<PrivacyExportResponse> out;
    std::string msg;
    while (s.Read(&msg, 30000)) {
      out.emplace_back();
      EXPECT_TRUE(out.back().ParseFromString(msg));
    }
    grpc::Status st = s.Finish();
    if (skipped) *skipped = s.Trailer("memoryd-export-skipped");
    return {out, st};
  }

  // "kind id" of each exported record, sorted.
  static std::vector<std::string> Names(const std::vector<PrivacyExportResponse>& recs) {
    std::vector<std::string> v;
    for (const auto& r : recs) v.push_back(r.kind() + " " + r.id());
    std::sort(v.begin(), v.end());
    return v;
  }

  // `memoryd receipt verify` on jws: its exit status and output.
  std::pair<int, std::string> VerifyReceipt(const std::string& jws) {
    std::string path = ::testing::TempDir() + "/receipt-" + std::to_string(getpid()) + ".jws";
    std::ofstream(path) << jws << "\n";
    std::string cmd = MemorydProcess::BinaryPath() + " receipt verify --jwks " +
                      keys_->jwks_path() + " --file " + path + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    int st = p ? pclose(p) : -1;
    unlink(path.c_str());
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
  }

  PgTestDb db_;
  TestKeys* keys_ = nullptr;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<std::unique_ptr<MemorydProcess>> stopped_;
  std::string tenant_;
  uint64_t next_point_ = 1;
};

}  // namespace privacy_test

#endif
