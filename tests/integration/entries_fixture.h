// The fixture of the Entries tier's integration tests (entries_*_test.cc):
// the Entries tier (service/entries) in-process against a real PostgreSQL,
// called through a real gRPC client over loopback. Callers are set by a
// test interceptor from an `x-test-principal` JSON header (the real token
// interceptor is tested in tests/server/auth_test).
#ifndef MEMORYD_TESTS_INTEGRATION_ENTRIES_FIXTURE_H
#define MEMORYD_TESTS_INTEGRATION_ENTRIES_FIXTURE_H
#include <gtest/gtest.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "memory/v1/entries.pb.h"
#include "tests/testing/backend_loop.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/pg_testdb.h"

extern "C" {
#include "service/audit/audit.h"
#include "service/auth/principal.h"
#include "service/core/arena.h"
#include "service/entries/entries_service.h"
#include "service/rpc/rpc.h"
#include "service/store/apg.h"
#include "service/store/evloop.h"
#include "service/store/pg_migrate.h"
#include "service/store/pg_pool.h"
#include "service/tier/tier.h"
}

namespace entries_testing {

using memory::v1::EntriesAppendRequest;
using memory::v1::EntriesAppendResponse;
using memory::v1::EntriesDeleteEntryRequest;
using memory::v1::EntriesDeleteEntryResponse;
using memory::v1::EntriesListRequest;
using memory::v1::EntriesListResponse;
using memory::v1::EntriesPurgeExpiredRequest;
using memory::v1::EntriesPurgeExpiredResponse;
using memory::v1::EntriesReadRequest;
using memory::v1::EntriesReadResponse;
using memory::v1::EntriesReplaceRequest;
using memory::v1::EntriesReplaceResponse;
using memory::v1::EntriesSearchRequest;
using memory::v1::EntriesSearchResponse;
using memory::v1::EntriesStatsRequest;
using memory::v1::EntriesStatsResponse;
using memory::v1::EntriesWriteRequest;
using memory::v1::EntriesWriteResponse;
using testing_client::Unary;

inline constexpr char kWrite[] = "/memory.v1.Entries/Write";
inline constexpr char kRead[] = "/memory.v1.Entries/Read";
inline constexpr char kList[] = "/memory.v1.Entries/List";
inline constexpr char kSearch[] = "/memory.v1.Entries/Search";
inline constexpr char kDelete[] = "/memory.v1.Entries/DeleteEntry";
inline constexpr char kStats[] = "/memory.v1.Entries/Stats";
inline constexpr char kAppend[] = "/memory.v1.Entries/Append";
inline constexpr char kReplace[] = "/memory.v1.Entries/Replace";
inline constexpr char kPurge[] = "/memory.v1.Entries/PurgeExpired";

using Code = grpc::StatusCode;

// ---- the test caller ----

// A caller's claims; Json() is what the test interceptor reads.
struct Who {
  std::string sub = "alice";
  std::string tenant = "t1";
  std::string scope = "entries:read entries:write";
  std::vector<std::string> ns = {"*:*:*"};
  int clr = 4;  // SECRET
  int lvl = 1;  // PUBLIC

  Who& Sub(const std::string& s) {
    sub = s;
    return *this;
  }
  Who& Tenant(const std::string& t) {
    tenant = t;
    return *this;
  }
  Who& Scope(const std::string& s) {
    scope = s;
    return *this;
  }
  Who& Ns(std::vector<std::string> v) {
    ns = std::move(v);
    return *this;
  }
  Who& Clr(int c) {
    clr = c;
    return *this;
  }
  Who& Lvl(int l) {
    lvl = l;
    return *this;
  }

  std::string Json() const {
    json_t* j = json_object();
    json_object_set_new(j, "sub", json_string(sub.c_str()));
    json_object_set_new(j, "tenant", json_string(tenant.c_str()));
    json_object_set_new(j, "scope", json_string(scope.c_str()));
    json_t* a = json_array();
    for (const auto& g : ns) json_array_append_new(a, json_string(g.c_str()));
    json_object_set_new(j, "ns", a);
    json_object_set_new(j, "clr", json_integer(clr));
    json_object_set_new(j, "lvl", json_integer(lvl));
    char* s = json_dumps(j, JSON_COMPACT);
    std::string out(s);
    free(s);
    json_decref(j);
    return out;
  }
};

inline char* Dup(const char* s) { return strdup(s ? s : ""); }

// Turns x-test-principal into a principal and checks the method's scope,
// as the real authn interceptor does with a verified token.
inline grpc_status_code TestAuth(rpc_call* call, void*) {
  const rpc_method* m = rpc_call_method(call);
  if (!m || !m->scope) return GRPC_STATUS_OK;
  const char* hdr = rpc_call_metadata(call, "x-test-principal");
  if (!hdr) {
    rpc_call_set_error(call, "test: no x-test-principal header");
    return GRPC_STATUS_UNAUTHENTICATED;
  }
  json_t* j = json_loads(hdr, 0, nullptr);
  if (!j) {
    rpc_call_set_error(call, "test: bad x-test-principal");
    return GRPC_STATUS_UNAUTHENTICATED;
  }
  auto* c = static_cast<jwt_claims*>(calloc(1, sizeof(jwt_claims)));
  c->sub = Dup(json_string_value(json_object_get(j, "sub")));
  c->tenant = Dup(json_string_value(json_object_get(j, "tenant")));
  c->jti = Dup("test-jti");
  std::vector<std::string> scopes;
  std::string sc = json_string_value(json_object_get(j, "scope"));
  for (size_t pos = 0; pos <= sc.size();) {
    size_t sp = sc.find(' ', pos);
    if (sp == std::string::npos) sp = sc.size();
    if (sp > pos) scopes.push_back(sc.substr(pos, sp - pos));
    pos = sp + 1;
  }
  c->nscopes = scopes.size();
  c->scopes = static_cast<char**>(calloc(scopes.size() + 1, sizeof(char*)));
  for (size_t i = 0; i < scopes.size(); i++) c->scopes[i] = Dup(scopes[i].c_str());
  json_t* ns = json_object_get(j, "ns");
  c->nns = json_array_size(ns);
  c->ns = c->nns ? static_cast<char**>(calloc(c->nns, sizeof(char*))) : nullptr;
  for (size_t i = 0; i < c->nns; i++) c->ns[i] = Dup(json_string_value(json_array_get(ns, i)));
  c->clr = static_cast<jwt_label>(json_integer_value(json_object_get(j, "clr")));
  c->lvl = static_cast<jwt_label>(json_integer_value(json_object_get(j, "lvl")));
  c->exp = time(nullptr) + 3600;
  json_decref(j);
  principal* p = principal_create(c);
  if (!p) return GRPC_STATUS_RESOURCE_EXHAUSTED;
  if (principal_scope(p, m->scope) == PRINCIPAL_DENY) {
    principal_unref(p);
    rpc_call_set_error(call, "test: token lacks scope %s", m->scope);
    return GRPC_STATUS_PERMISSION_DENIED;
  }
  rpc_call_set_principal(call, p, principal_release);
  return GRPC_STATUS_OK;
}

// ---- fixture ----

// What a test may set on the tier it restarts (RestartWith).
struct TierOptions {
  pii_policy pii = PII_POLICY_REJECT;
  size_t max_response_bytes = 0; /* 0: the tier's default */
};

class EntriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    conn_ = PQconnectdb(db_.url().c_str());
    ASSERT_EQ(CONNECTION_OK, PQstatus(conn_)) << PQerrorMessage(conn_);
    int applied = 0;
    char err[512] = "";
    ASSERT_EQ(0, pg_migrate(conn_, memoryd_migrations, memoryd_migrations_count, &applied, err,
                            sizeof err))
        << err;
    ASSERT_EQ(0, pg_pool_create(db_.url().c_str(), 4, 5, &pool_, err, sizeof err)) << err;
    // The event loop's pool, as main.c starts it (Read runs on it).
    std::string why;
    ASSERT_TRUE(StartBackendLoop(db_.url(), BackendLoopOptions(), &loop_, &pga_, &why)) << why;
    ASSERT_EQ(0, audit_create(pool_, nullptr, &aud_, err, sizeof err)) << err;
    grpc_init();
    StartServer(TierOptions());
  }

  void TearDown() override {
    StopServer();
    audit_free(aud_);
    StopBackendLoop(&loop_, &pga_);
    pg_pool_free(pool_);
    grpc_shutdown();
    PQfinish(conn_);
  }

  void StartServer(const TierOptions& o) {
    rpc_server_options so = {};
    so.listen = "127.0.0.1:0";
    so.workers = 4;
    so.max_message_bytes = 4 * 1024 * 1024;
    char err[256];
    ASSERT_EQ(0, rpc_server_create(&so, &srv_, err, sizeof err)) << err;
    ASSERT_EQ(0, rpc_server_add_interceptor(srv_, TestAuth, nullptr));
    tier_env env = {};
    env.pg = pool_;
    env.pga = pga_;
    env.audit = aud_;
    env.pii = o.pii;
    env.max_response_bytes = o.max_response_bytes;
    static const tier* const tiers[] = {&entries_tier};
    ASSERT_EQ(0, tier_set_open(tiers, 1, &env, srv_, &svc_, err, sizeof err)) << err;
    ASSERT_EQ(0, audit_observe(srv_, aud_));
    ASSERT_EQ(0, rpc_server_start(srv_, err, sizeof err)) << err;
    ch_ = testing_client::Connect(rpc_server_port(srv_));
  }

  void StopServer() {
    ch_.reset();
    if (srv_) {
      rpc_server_shutdown(srv_, 1000);
      rpc_server_free(srv_);
      srv_ = nullptr;
    }
    tier_set_free(svc_);
    svc_ = nullptr;
  }

  // A second server with other options (the audit keeps one per server).
  void RestartWith(const TierOptions& o) {
    StopServer();
    audit_free(aud_);
    char err[256];
    ASSERT_EQ(0, audit_create(pool_, nullptr, &aud_, err, sizeof err)) << err;
    StartServer(o);
  }

  template <typename Resp>
  grpc::Status Call(const char* method, const google::protobuf::Message& req, Resp* out,
                    const Who& who = Who()) {
    auto r = Unary(ch_, method, req.SerializeAsString(), 20000, {{"x-test-principal", who.Json()}});
    if (r.status.ok() && out) {
      EXPECT_TRUE(out->ParseFromString(r.body));
    }
    return r.status;
  }

  static EntriesWriteRequest W(const std::string& ns, const std::string& key,
                               const std::string& value) {
    EntriesWriteRequest w;
    w.set_namespace_(ns);
    w.set_key(key);
    w.set_value(value);
    return w;
  }

  EntriesWriteResponse MustWrite(const EntriesWriteRequest& w, const Who& who = Who()) {
    EntriesWriteResponse resp;
    grpc::Status st = Call(kWrite, w, &resp, who);
    EXPECT_TRUE(st.ok()) << w.namespace_() << "/" << w.key() << ": " << st.error_message();
    return resp;
  }
  EntriesWriteResponse Put(const std::string& ns, const std::string& key, const std::string& value,
                           const Who& who = Who()) {
    return MustWrite(W(ns, key, value), who);
  }

  grpc::Status Read(const std::string& ns, const std::string& key, EntriesReadResponse* out,
                    const Who& who = Who()) {
    EntriesReadRequest r;
    r.set_namespace_(ns);
    r.set_key(key);
    return Call(kRead, r, out, who);
  }

  // Every (namespace/key) a List over pattern returns, following pages.
  std::vector<std::string> ListAll(const std::string& ns_pattern, const std::string& key_pattern,
                                   const Who& who = Who(), int page_size = 0) {
    std::vector<std::string> out;
    EntriesListRequest req;
    req.set_namespace_pattern(ns_pattern);
    req.set_key_pattern(key_pattern);
    req.set_page_size(page_size);
    for (int guard = 0; guard < 1000; guard++) {
      EntriesListResponse resp;
      grpc::Status st = Call(kList, req, &resp, who);
      EXPECT_TRUE(st.ok()) << st.error_message();
      if (!st.ok()) break;
      for (const auto& e : resp.entries()) out.push_back(e.namespace_() + "/" + e.key());
      if (resp.next_page_token().empty()) break;
      req.set_page_token(resp.next_page_token());
    }
    return out;
  }

  std::vector<std::string> SearchKeys(const EntriesSearchRequest& req, const Who& who = Who()) {
    EntriesSearchResponse resp;
    grpc::Status st = Call(kSearch, req, &resp, who);
    EXPECT_TRUE(st.ok()) << st.error_message();
    std::vector<std::string> out;
    for (const auto& e : resp.entries()) out.push_back(e.key());
    return out;
  }
  std::vector<std::string> SearchTerm(const std::string& term, const Who& who = Who()) {
    EntriesSearchRequest req;
    req.set_term(term);
    return SearchKeys(req, who);
  }

  EntriesStatsResponse Stats(const std::string& pattern = "", const Who& who = Who()) {
    EntriesStatsRequest req;
    req.set_namespace_pattern(pattern);
    EntriesStatsResponse resp;
    grpc::Status st = Call(kStats, req, &resp, who);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  int64_t Count(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    int64_t n =
        PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? atoll(PQgetvalue(r, 0, 0)) : -1;
    if (n < 0) {
      ADD_FAILURE() << sql << ": " << PQresultErrorMessage(r);
    }
    PQclear(r);
    return n;
  }
  int64_t RowCount() { return Count("SELECT count(*) FROM entries"); }

  void ExpectInvalid(const char* method, const google::protobuf::Message& req,
                     const std::string& field, const Who& who = Who()) {
    EntriesWriteResponse ignored;
    auto r = Unary(ch_, method, req.SerializeAsString(), 20000, {{"x-test-principal", who.Json()}});
    EXPECT_EQ(Code::INVALID_ARGUMENT, r.status.error_code())
        << method << " " << field << ": " << r.status.error_message();
    EXPECT_NE(std::string::npos, r.status.error_message().find(field))
        << method << ": message should name " << field << ": " << r.status.error_message();
  }

  PgTestDb db_;
  PGconn* conn_ = nullptr;
  pg_pool* pool_ = nullptr;
  evloop* loop_ = nullptr;
  apg* pga_ = nullptr;
  audit* aud_ = nullptr;
  rpc_server* srv_ = nullptr;
  tier_set* svc_ = nullptr;
  std::shared_ptr<grpc::Channel> ch_;
};

inline std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace entries_testing

#endif
