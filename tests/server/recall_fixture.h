// The fixture of the recall tests (recall_test, recall_options_test): a
// memoryd with no embedder over a test database, a token, and helpers to
// make text collections, remember texts and search them through the gRPC
// API.
#ifndef MEMORYD_TESTS_SERVER_RECALL_FIXTURE_H
#define MEMORYD_TESTS_SERVER_RECALL_FIXTURE_H

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/util/json_util.h"
#include "memory/v1/episodic_memory.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace recall_testing {

using namespace memory::v1;  // NOLINT: many message types
using testing_client::Result;

class RecallFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    a_ = Launch();
    alice_ = Token("t1", "alice", "episodic:read episodic:write");
  }

  struct Replica {
    std::unique_ptr<MemorydProcess> proc;
    std::shared_ptr<grpc::Channel> ch;
  };

  Replica Launch() {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=1"};
    if (keys_) args.push_back("--jwks=" + keys_->jwks_path());
    Replica r;
    r.proc = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(r.proc->Start()) << r.proc->Log();
    if (!keys_) keys_ = r.proc->keys();
    r.ch = testing_client::Connect(r.proc->port());
    return r;
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
              const std::string& token, const Replica* r = nullptr,
              const std::string& service = "EpisodicMemory") {
    return testing_client::Unary((r ? r : &a_)->ch, "/memory.v1." + service + "/" + method,
                                 req.SerializeAsString(), 10000,
                                 {{"authorization", TestKeys::Bearer(token)}});
  }

  void MustCreate(const std::string& name, const std::string& token) {
    CreateCollectionRequest req;
    req.set_name(name);
    req.set_distance(DISTANCE_COSINE);  // dims 0: text only, no embedder asked
    Result r = Call("CreateCollection", req, token);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    CreateCollectionResponse resp;
    ASSERT_TRUE(resp.ParseFromString(r.body));
    EXPECT_EQ(0, resp.collection().dims());
    EXPECT_EQ("", resp.collection().embedder_model());
  }

  // Upserts texts as points first_id.. with payload {"n": i} (and label).
  void MustRemember(const std::string& col, const std::vector<std::string>& texts,
                    const std::string& token, uint64_t first_id = 0,
                    Label label = LABEL_UNSPECIFIED, const std::string& payload_json = "") {
    EpisodicMemoryUpsertRequest req;
    req.set_collection(col);
    for (size_t i = 0; i < texts.size(); i++) {
      PointInput* p = req.add_points();
      p->mutable_id()->set_num(first_id + i);
      p->set_text(texts[i]);
      p->set_label(label);
      std::string json =
          payload_json.empty() ? "{\"n\":" + std::to_string(first_id + i) + "}" : payload_json;
      ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, p->mutable_payload()).ok());
    }
    Result r = Call("Upsert", req, token);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }

  EpisodicMemorySearchResponse Search(const std::string& col, const std::string& text,
                                      const std::string& token, int limit = 10,
                                      const Replica* rep = nullptr,
                                      SearchMode mode = SEARCH_MODE_AUTO,
                                      const std::string& filter_json = "") {
    EpisodicMemorySearchRequest req;
    req.set_collection(col);
    req.set_text(text);
    req.set_limit(limit);
    req.set_with_payload(true);
    req.set_mode(mode);
    if (!filter_json.empty()) {
      EXPECT_TRUE(
          google::protobuf::util::JsonStringToMessage(filter_json, req.mutable_filter()).ok());
    }
    Result r = Call("Search", req, token, rep);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EpisodicMemorySearchResponse resp;
    EXPECT_TRUE(resp.ParseFromString(r.body));
    return resp;
  }

  static std::vector<uint64_t> Ids(const EpisodicMemorySearchResponse& r) {
    std::vector<uint64_t> ids;
    for (const auto& p : r.points()) ids.push_back(p.point().id().num());
    return ids;
  }

  // Rows of episodic_points (tombstones included) whose text holds needle.
  int TextRows(const std::string& needle) {
    PgSession s(db_.url());
    std::string sql =
        "SELECT count(*) FROM episodic_points WHERE strpos(text, '" + needle + "') > 0";
    PGresult* res = PQexec(s.conn(), sql.c_str());
    EXPECT_EQ(PGRES_TUPLES_OK, PQresultStatus(res)) << PQerrorMessage(s.conn());
    int n = PQresultStatus(res) == PGRES_TUPLES_OK ? atoi(PQgetvalue(res, 0, 0)) : -1;
    PQclear(res);
    return n;
  }

  PgTestDb db_;
  Replica a_;
  TestKeys* keys_ = nullptr;
  std::string alice_;
};

}  // namespace recall_testing

#endif
