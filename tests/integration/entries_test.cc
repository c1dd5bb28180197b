// The Entries tier (service/entries) against a real PostgreSQL, through a
// real gRPC client over loopback: every method, field validation, the read
// and write diodes, namespaces, tenants, CAS, expiry, compression, PII,
// injection strings, pagination under concurrent inserts, lost connections
// and the audit trail. Callers are set by a test interceptor from an
// `x-test-principal` JSON header (the real token interceptor is tested in
// tests/server/auth_test).
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
#include "tests/testing/grpc_client.h"
#include "tests/testing/pg_testdb.h"

extern "C" {
#include "service/audit/audit.h"
#include "service/core/arena.h"
#include "service/auth/principal.h"
#include "service/pb/pbjson.h"
#include "service/entries/entries_service.h"
#include "service/entries/entries_token.h"
#include "service/rpc/rpc.h"
#include "service/store/pg_migrate.h"
#include "service/store/pg_pool.h"
}

namespace {

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

const char kWrite[] = "/memory.v1.Entries/Write";
const char kRead[] = "/memory.v1.Entries/Read";
const char kList[] = "/memory.v1.Entries/List";
const char kSearch[] = "/memory.v1.Entries/Search";
const char kDelete[] = "/memory.v1.Entries/DeleteEntry";
const char kStats[] = "/memory.v1.Entries/Stats";
const char kAppend[] = "/memory.v1.Entries/Append";
const char kReplace[] = "/memory.v1.Entries/Replace";
const char kPurge[] = "/memory.v1.Entries/PurgeExpired";

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

  Who& Sub(const std::string& s) { sub = s; return *this; }
  Who& Tenant(const std::string& t) { tenant = t; return *this; }
  Who& Scope(const std::string& s) { scope = s; return *this; }
  Who& Ns(std::vector<std::string> v) { ns = std::move(v); return *this; }
  Who& Clr(int c) { clr = c; return *this; }
  Who& Lvl(int l) { lvl = l; return *this; }

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

char* Dup(const char* s) { return strdup(s ? s : ""); }

// Turns x-test-principal into a principal and checks the method's scope,
// as the real authn interceptor does with a verified token.
grpc_status_code TestAuth(rpc_call* call, void*) {
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

// ---- pure codecs (no server) ----

TEST(EntriesTokenCodec, RoundTripsAndRefusesOtherBindings) {
  arena* a = arena_create();
  entries_token_binding b = {"t1", "alice", "a:*:*", "*"};
  char* tok = entries_token_encode(a, &b, "a:b:c", "key with spaces/and:colons");
  ASSERT_NE(nullptr, tok);
  const char *ns = nullptr, *key = nullptr;
  ASSERT_EQ(0, entries_token_decode(a, &b, tok, &ns, &key));
  EXPECT_STREQ("a:b:c", ns);
  EXPECT_STREQ("key with spaces/and:colons", key);
  entries_token_binding other[] = {{"t2", "alice", "a:*:*", "*"},
                                   {"t1", "bob", "a:*:*", "*"},
                                   {"t1", "alice", "a:b:*", "*"},
                                   {"t1", "alice", "a:*:*", "k*"}};
  for (const auto& o : other) EXPECT_EQ(-1, entries_token_decode(a, &o, tok, &ns, &key));
  // Every truncation and every single-character change is refused.
  std::string t(tok);
  for (size_t n = 0; n < t.size(); n++)
    EXPECT_EQ(-1, entries_token_decode(a, &b, t.substr(0, n).c_str(), &ns, &key)) << n;
  for (size_t i = 0; i < t.size(); i++) {
    std::string bent = t;
    bent[i] = bent[i] == 'x' ? 'y' : 'x';
    EXPECT_EQ(-1, entries_token_decode(a, &b, bent.c_str(), &ns, &key)) << i;
  }
  EXPECT_EQ(-1, entries_token_decode(a, &b, std::string(5000, 'A').c_str(), &ns, &key));
  arena_free(a);
}

TEST(EntriesJsonCodec, StructSurvivesJsonExactly) {
  arena* a = arena_create();
  // JSON -> Struct -> JSON -> Struct: numbers come back as the same doubles.
  const char* json =
      "{\"n\":[0.1,-2.5e-300,1e308,123456789012345678,-0.0],\"s\":\"\\u00e9\\\"\","
      "\"o\":{\"x\":null,\"t\":true}}";
  Google__Protobuf__Struct* s = nullptr;
  ASSERT_EQ(0, pbjson_to_struct(a, json, strlen(json), &s));
  char* text = nullptr;
  size_t len = 0;
  char err[256];
  ASSERT_EQ(0, pbjson_from_struct(s, "metadata", &text, &len, err, sizeof err)) << err;
  Google__Protobuf__Struct* back = nullptr;
  ASSERT_EQ(0, pbjson_to_struct(a, text, len, &back));
  free(text);
  ASSERT_EQ(3u, back->n_fields);
  const Google__Protobuf__Value* n = nullptr;
  for (size_t i = 0; i < back->n_fields; i++)
    if (strcmp(back->fields[i]->key, "n") == 0) n = back->fields[i]->value;
  ASSERT_NE(nullptr, n);
  ASSERT_EQ(5u, n->list_value->n_values);
  EXPECT_EQ(0.1, n->list_value->values[0]->number_value);
  EXPECT_EQ(-2.5e-300, n->list_value->values[1]->number_value);
  EXPECT_EQ(1e308, n->list_value->values[2]->number_value);
  EXPECT_EQ(123456789012345678.0, n->list_value->values[3]->number_value);
  EXPECT_EQ(-1, pbjson_to_struct(a, "[1]", 3, &back));
  EXPECT_EQ(-1, pbjson_to_struct(a, "{", 1, &back));
  arena_free(a);
}

// ---- fixture ----

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
    ASSERT_EQ(0, audit_create(pool_, nullptr, &aud_, err, sizeof err)) << err;
    grpc_init();
    StartServer(nullptr);
  }

  void TearDown() override {
    StopServer();
    audit_free(aud_);
    pg_pool_free(pool_);
    grpc_shutdown();
    PQfinish(conn_);
  }

  void StartServer(const entries_options* o) {
    rpc_server_options so = {};
    so.listen = "127.0.0.1:0";
    so.workers = 4;
    so.max_message_bytes = 4 * 1024 * 1024;
    char err[256];
    ASSERT_EQ(0, rpc_server_create(&so, &srv_, err, sizeof err)) << err;
    ASSERT_EQ(0, rpc_server_add_interceptor(srv_, TestAuth, nullptr));
    ASSERT_EQ(0, entries_register(srv_, pool_, aud_, o, &svc_));
    ASSERT_EQ(0, audit_register(srv_, aud_));
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
    entries_service_free(svc_);
    svc_ = nullptr;
  }

  // A second server with other options (the audit keeps one per server).
  void RestartWith(const entries_options& o) {
    StopServer();
    audit_free(aud_);
    char err[256];
    ASSERT_EQ(0, audit_create(pool_, nullptr, &aud_, err, sizeof err)) << err;
    StartServer(&o);
  }

  template <typename Resp>
  grpc::Status Call(const char* method, const google::protobuf::Message& req, Resp* out,
                    const Who& who = Who()) {
    auto r = Unary(ch_, method, req.SerializeAsString(), 20000,
                   {{"x-test-principal", who.Json()}});
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
  EntriesWriteResponse Put(const std::string& ns, const std::string& key,
                           const std::string& value, const Who& who = Who()) {
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
    int64_t n = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                    ? atoll(PQgetvalue(r, 0, 0))
                    : -1;
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
    auto r = Unary(ch_, method, req.SerializeAsString(), 20000,
                   {{"x-test-principal", who.Json()}});
    EXPECT_EQ(Code::INVALID_ARGUMENT, r.status.error_code())
        << method << " " << field << ": " << r.status.error_message();
    EXPECT_NE(std::string::npos, r.status.error_message().find(field))
        << method << ": message should name " << field << ": " << r.status.error_message();
  }

  PgTestDb db_;
  PGconn* conn_ = nullptr;
  pg_pool* pool_ = nullptr;
  audit* aud_ = nullptr;
  rpc_server* srv_ = nullptr;
  entries_service* svc_ = nullptr;
  std::shared_ptr<grpc::Channel> ch_;
};

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// ---- Write / Read ----

TEST_F(EntriesTest, WriteThenReadRoundTripsEverything) {
  EntriesWriteRequest w = W("planner:build:step1", "plan", "first draft");
  w.set_content_type("text/plain");
  w.add_tags("draft");
  w.add_tags("v1");
  w.add_tags("draft");  // duplicate, dropped
  auto* f = w.mutable_metadata()->mutable_fields();
  (*f)["pi"].set_number_value(3.141592653589793);
  (*f)["tiny"].set_number_value(5e-324);
  (*f)["big"].set_number_value(1e300);
  (*f)["int"].set_number_value(42);
  (*f)["neg"].set_number_value(-0.1);
  (*f)["name"].set_string_value("Zoë ☃ 𝄞 \"quoted\" \\ back");
  (*f)["none"].set_null_value(google::protobuf::NULL_VALUE);
  (*f)["yes"].set_bool_value(true);
  (*f)["no"].set_bool_value(false);
  auto* list = (*f)["list"].mutable_list_value();
  list->add_values()->set_number_value(1);
  list->add_values()->set_string_value("two");
  auto* inner = list->add_values()->mutable_struct_value()->mutable_fields();
  (*inner)["deep"].mutable_list_value()->add_values()->set_bool_value(false);
  (*f)["empty"].mutable_struct_value();

  EntriesWriteResponse wr = MustWrite(w);
  EXPECT_TRUE(wr.created());
  EXPECT_EQ(1, wr.meta().version());
  EXPECT_EQ("t1", wr.meta().tenant());
  EXPECT_EQ("alice", wr.meta().owner());
  EXPECT_EQ(memory::v1::LABEL_PUBLIC, wr.meta().label());
  EXPECT_FALSE(wr.meta().has_expire_time());
  EXPECT_GT(wr.meta().create_time().seconds(), 1600000000);

  EntriesReadResponse rr;
  ASSERT_TRUE(Read("planner:build:step1", "plan", &rr).ok());
  const auto& e = rr.entry();
  EXPECT_EQ("planner:build:step1", e.namespace_());
  EXPECT_EQ("plan", e.key());
  EXPECT_EQ("first draft", e.value());
  EXPECT_EQ("text/plain", e.content_type());
  EXPECT_EQ(11, e.size_bytes());
  ASSERT_EQ(2, e.tags_size());
  EXPECT_EQ("draft", e.tags(0));
  EXPECT_EQ("v1", e.tags(1));
  EXPECT_EQ(wr.meta().SerializeAsString(), e.meta().SerializeAsString());
  // The Struct comes back equal, field for field (map order aside).
  EXPECT_EQ(w.metadata().fields_size(), e.metadata().fields_size());
  for (const auto& kv : w.metadata().fields()) {
    auto it = e.metadata().fields().find(kv.first);
    ASSERT_NE(it, e.metadata().fields().end()) << kv.first;
    EXPECT_EQ(kv.second.SerializeAsString(), it->second.SerializeAsString()) << kv.first;
  }
}

TEST_F(EntriesTest, EmptyContentTypeBecomesOctetStream) {
  Put("a:b:c", "k", "v");
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("a:b:c", "k", &rr).ok());
  EXPECT_EQ("application/octet-stream", rr.entry().content_type());
  EXPECT_EQ(0, rr.entry().metadata().fields_size());
}

TEST_F(EntriesTest, ReplaceBumpsVersionKeepsOwnerAndCreateTime) {
  auto first = Put("a:b:c", "k", "one");
  usleep(20000);
  EntriesWriteRequest w = W("a:b:c", "k", "two");
  w.add_tags("t");
  auto second = MustWrite(w);
  EXPECT_FALSE(second.created());
  EXPECT_EQ(2, second.meta().version());
  EXPECT_EQ(first.meta().create_time().SerializeAsString(),
            second.meta().create_time().SerializeAsString());
  auto ns = [](const google::protobuf::Timestamp& t) {
    return t.seconds() * 1000000000LL + t.nanos();
  };
  EXPECT_GT(ns(second.meta().update_time()), ns(first.meta().update_time()));
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("a:b:c", "k", &rr).ok());
  EXPECT_EQ("two", rr.entry().value());
  EXPECT_EQ(1, rr.entry().tags_size());
  EXPECT_EQ(1, RowCount());
}

TEST_F(EntriesTest, ReadOfMissingEntryIsNotFound) {
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("a:b:c", "nope", &rr).error_code());
}

TEST_F(EntriesTest, BinaryAndMaximalValuesRoundTrip) {
  std::string bin("\x00\xff\x01\x80 zero", 10);
  Put("a:b:c", "bin", bin);
  std::string max(1024 * 1024, 'x');
  for (size_t i = 0; i < max.size(); i += 7) max[i] = static_cast<char>(i * 31);
  Put("a:b:c", "max", max);
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("a:b:c", "bin", &rr).ok());
  EXPECT_EQ(bin, rr.entry().value());
  ASSERT_TRUE(Read("a:b:c", "max", &rr).ok());
  EXPECT_EQ(max, rr.entry().value());
  EXPECT_EQ(1024 * 1024, rr.entry().size_bytes());
}

TEST_F(EntriesTest, LargeValuesAreStoredCompressedTransparently) {
  std::string v;
  for (int i = 0; v.size() < 2048; i++) v += "line " + std::to_string(i) + " of a log\n";
  v.resize(2048);
  Put("a:b:c", "big", v);
  Put("a:b:c", "small", "tiny");
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("a:b:c", "big", &rr).ok());
  EXPECT_EQ(v, rr.entry().value());
  EXPECT_EQ(2048, rr.entry().size_bytes());
  auto s = Stats();
  EXPECT_EQ(2, s.entry_count());
  EXPECT_EQ(2048 + 4, s.value_bytes());
  EXPECT_LT(s.stored_bytes(), s.value_bytes());
  EXPECT_EQ(1, s.compressed_count());
  EXPECT_EQ(1, Count("SELECT count(*) FROM entries WHERE key = 'big' AND compressed"
                     " AND octet_length(value) < 2048"));
}

// ---- validation ----

TEST_F(EntriesTest, WriteRejectsEveryBadFieldNamingItAndStoresNothing) {
  auto bad = [&](EntriesWriteRequest w, const std::string& field) {
    ExpectInvalid(kWrite, w, field);
  };
  bad(W("", "k", "v"), "namespace");
  bad(W("a:b", "k", "v"), "namespace");
  bad(W("a:b:c:d", "k", "v"), "namespace");
  bad(W("a:b c:d", "k", "v"), "namespace");
  bad(W("a::c", "k", "v"), "namespace");
  bad(W("a:*:c", "k", "v"), "namespace");
  bad(W(std::string(65, 'a') + ":b:c", "k", "v"), "namespace");
  bad(W("a:b:c", "", "v"), "key");
  bad(W("a:b:c", "k*", "v"), "key");
  bad(W("a:b:c", "k\ttab", "v"), "key");
  bad(W("a:b:c", std::string(513, 'k'), "v"), "key");
  bad(W("a:b:c", "bad\xff utf8", "v"), "key");
  bad(W("a:b:c", "k", std::string(1024 * 1024 + 1, 'v')), "value");
  {
    auto w = W("a:b:c", "k", "v");
    w.set_content_type(std::string(129, 'c'));
    bad(w, "content_type");
    w.set_content_type("text/\x01plain");
    bad(w, "content_type");
  }
  {
    auto w = W("a:b:c", "k", "v");
    for (int i = 0; i < 33; i++) w.add_tags("t" + std::to_string(i));
    bad(w, "tags");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.add_tags("");
    bad(w, "tags[0]");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.add_tags("ok");
    w.add_tags(std::string(65, 't'));
    bad(w, "tags[1]");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.add_tags("new\nline");
    bad(w, "tags[0]");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.set_label(static_cast<memory::v1::Label>(9));
    bad(w, "label");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.mutable_expire_time()->set_seconds(time(nullptr) - 10);
    bad(w, "expire_time");
    w.mutable_expire_time()->set_seconds(time(nullptr) + 60);
    w.mutable_expire_time()->set_nanos(-1);
    bad(w, "expire_time");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.mutable_ttl()->set_seconds(0);
    bad(w, "ttl");
    w.mutable_ttl()->set_seconds(-5);
    bad(w, "ttl");
    w.mutable_ttl()->set_seconds(315576000000LL);  // 10000 years
    bad(w, "ttl");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.set_expected_version(-1);
    bad(w, "expected_version");
  }
  {
    auto w = W("a:b:c", "k", "v");
    (*w.mutable_metadata()->mutable_fields())["x"].mutable_list_value()->add_values()
        ->set_number_value(std::nan(""));
    bad(w, "metadata.x[0]");
  }
  {
    auto w = W("a:b:c", "k", "v");
    (*w.mutable_metadata()->mutable_fields())["blob"].set_string_value(
        std::string(70 * 1024, 'm'));
    bad(w, "metadata");
  }
  EXPECT_EQ(0, RowCount());
}

TEST_F(EntriesTest, ReadAndDeleteRejectBadNamespaceAndKey) {
  EntriesReadRequest r;
  r.set_namespace_("a:b");
  r.set_key("k");
  ExpectInvalid(kRead, r, "namespace");
  r.set_namespace_("a:b:c");
  r.set_key("");
  ExpectInvalid(kRead, r, "key");
  r.set_key("a*");
  ExpectInvalid(kRead, r, "key");
  EntriesDeleteEntryRequest d;
  d.set_namespace_("x");
  d.set_key("k");
  ExpectInvalid(kDelete, d, "namespace");
  d.set_namespace_("a:b:c");
  d.set_key("");
  ExpectInvalid(kDelete, d, "key");
  d.set_key("k");
  d.set_expected_version(-3);
  ExpectInvalid(kDelete, d, "expected_version");
}

TEST_F(EntriesTest, ListSearchStatsRejectBadFields) {
  EntriesListRequest l;
  l.set_namespace_pattern("a:b");
  ExpectInvalid(kList, l, "namespace_pattern");
  l.set_namespace_pattern("a:b:c:d");
  ExpectInvalid(kList, l, "namespace_pattern");
  l.set_namespace_pattern("a:%:c");
  ExpectInvalid(kList, l, "namespace_pattern");
  l.set_namespace_pattern("");
  l.set_key_pattern("bad\x01");
  ExpectInvalid(kList, l, "key_pattern");
  l.set_key_pattern("");
  l.set_page_size(-1);
  ExpectInvalid(kList, l, "page_size");
  l.set_page_size(0);
  l.set_page_token("garbage!");
  ExpectInvalid(kList, l, "page_token");
  l.set_page_token("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
  ExpectInvalid(kList, l, "page_token");

  EntriesSearchRequest s;
  s.set_namespace_pattern("::");
  ExpectInvalid(kSearch, s, "namespace_pattern");
  s.Clear();
  s.set_term(std::string(257, 't'));
  ExpectInvalid(kSearch, s, "term");
  s.set_term("bad \xff utf8");
  ExpectInvalid(kSearch, s, "term");
  s.Clear();
  for (int i = 0; i < 33; i++) s.add_tags("t" + std::to_string(i));
  ExpectInvalid(kSearch, s, "tags");
  s.Clear();
  s.add_tags("");
  ExpectInvalid(kSearch, s, "tags[0]");
  s.Clear();
  s.set_content_type(std::string(200, 'c'));
  ExpectInvalid(kSearch, s, "content_type");
  s.Clear();
  s.set_created_by("bob\x02");
  ExpectInvalid(kSearch, s, "created_by");
  s.Clear();
  s.mutable_time_range()->mutable_start_time()->set_nanos(-5);
  ExpectInvalid(kSearch, s, "time_range.start_time");
  s.Clear();
  s.mutable_time_range()->mutable_end_time()->set_seconds(300000000000LL);
  ExpectInvalid(kSearch, s, "time_range.end_time");
  s.Clear();
  s.mutable_time_range()->mutable_start_time()->set_seconds(2000);
  s.mutable_time_range()->mutable_end_time()->set_seconds(1000);
  ExpectInvalid(kSearch, s, "time_range");
  s.Clear();
  s.set_limit(-1);
  ExpectInvalid(kSearch, s, "limit");
  s.set_limit(1001);
  ExpectInvalid(kSearch, s, "limit");

  EntriesStatsRequest st;
  st.set_namespace_pattern("a:b:c:d");
  ExpectInvalid(kStats, st, "namespace_pattern");
}

TEST_F(EntriesTest, ScopesAreCheckedPerMethod) {
  Who reader = Who().Scope("entries:read");
  EntriesWriteResponse ignored;
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kWrite, W("a:b:c", "k", "v"), &ignored, reader)
                                         .error_code());
  EXPECT_EQ(0, RowCount());
  EntriesReadResponse rr;
  EXPECT_EQ(Code::PERMISSION_DENIED, Read("a:b:c", "k", &rr, Who().Scope("entries:write"))
                                         .error_code());
}

// ---- namespaces and tenants ----

TEST_F(EntriesTest, NamespaceOutsideTheNsClaimIsPermissionDenied) {
  Who planner = Who().Ns({"planner:*:*"});
  Put("planner:x:y", "k", "v", planner);
  Put("coder:x:y", "k", "v");  // written by a wide token
  EntriesWriteResponse w;
  grpc::Status st = Call(kWrite, W("coder:x:y", "k2", "v"), &w, planner);
  EXPECT_EQ(Code::PERMISSION_DENIED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("coder:x:y")) << st.error_message();
  EntriesReadResponse rr;
  st = Read("coder:x:y", "k", &rr, planner);
  EXPECT_EQ(Code::PERMISSION_DENIED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("coder:x:y")) << st.error_message();
  EntriesDeleteEntryRequest d;
  d.set_namespace_("coder:x:y");
  d.set_key("k");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kDelete, d, &dr, planner).error_code());
  // List, Search and Stats only look inside the token's globs.
  EXPECT_EQ(std::vector<std::string>{"planner:x:y/k"}, ListAll("*:*:*", "*", planner));
  EXPECT_EQ(std::vector<std::string>{"k"}, SearchTerm("k", planner));
  EXPECT_EQ(1, Stats("", planner).entry_count());
  EXPECT_EQ(2, Stats("").entry_count());
  // No ns claim at all: nothing.
  Who none = Who().Ns({});
  EXPECT_TRUE(ListAll("", "", none).empty());
  EXPECT_EQ(0, Stats("", none).entry_count());
  EXPECT_EQ(Code::PERMISSION_DENIED, Read("planner:x:y", "k", &rr, none).error_code());
}

TEST_F(EntriesTest, GlobStarStaysInsideOneSegment) {
  Put("ab:c:d", "k", "v");
  Put("a:bc:d", "k", "v");
  EXPECT_EQ(std::vector<std::string>{"ab:c:d/k"}, ListAll("a*:c:d", "*"));
  EXPECT_EQ(std::vector<std::string>{"a:bc:d/k"}, ListAll("a:*c:*", "*"));
  Who narrow = Who().Ns({"a*:c:*"});
  EXPECT_EQ(std::vector<std::string>{"ab:c:d/k"}, ListAll("", "", narrow));
  // `_` and `.` in globs and patterns are literal, not LIKE wildcards.
  Put("u_v:x:y", "k", "v");
  Put("uzv:x:y", "k", "v");
  Put("u.v:x:y", "k", "v");
  EXPECT_EQ(std::vector<std::string>{"u_v:x:y/k"}, ListAll("", "", Who().Ns({"u_v:*:*"})));
  EXPECT_EQ(std::vector<std::string>{"u_v:x:y/k"}, ListAll("u_*:*:*", ""));
  EXPECT_EQ(1, Stats("", Who().Ns({"u_v:x:y"})).entry_count());
}

TEST_F(EntriesTest, TenantsNeverSeeEachOther) {
  Who a = Who().Tenant("tenant-a").Scope("entries:read:all entries:write:all");
  Who b = Who().Tenant("tenant-b").Scope("entries:read:all entries:write:all");
  Put("shared:ns:x", "secret", "a's data", a);
  Put("shared:ns:x", "other", "a's other", a);
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("shared:ns:x", "secret", &rr, b).error_code());
  EXPECT_TRUE(ListAll("", "", b).empty());
  EXPECT_TRUE(SearchTerm("secret", b).empty());
  EXPECT_EQ(0, Stats("", b).entry_count());
  // b writing the same key creates b's own entry; a's is untouched.
  auto wr = Put("shared:ns:x", "secret", "b's data", b);
  EXPECT_TRUE(wr.created());
  EXPECT_EQ("tenant-b", wr.meta().tenant());
  ASSERT_TRUE(Read("shared:ns:x", "secret", &rr, a).ok());
  EXPECT_EQ("a's data", rr.entry().value());
  EXPECT_EQ(1, Stats("", b).entry_count());
  // b deleting does not touch a's.
  EntriesDeleteEntryRequest d;
  d.set_namespace_("shared:ns:x");
  d.set_key("other");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::NOT_FOUND, Call(kDelete, d, &dr, b).error_code());
  EXPECT_EQ(3, RowCount());
  // A page token of tenant a is refused for tenant b.
  EntriesListRequest l;
  l.set_page_size(1);
  EntriesListResponse lr;
  ASSERT_TRUE(Call(kList, l, &lr, a).ok());
  ASSERT_FALSE(lr.next_page_token().empty());
  l.set_page_token(lr.next_page_token());
  ExpectInvalid(kList, l, "page_token", b);
}

// ---- read diode ----

TEST_F(EntriesTest, OwnReadBreadthSeesOnlyOwnEntries) {
  Who alice;
  Who bob = Who().Sub("bob");
  Put("team:x:y", "alice-1", "a", alice);
  Put("team:x:y", "bob-1", "b", bob);
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("team:x:y", "alice-1", &rr, bob).error_code());
  EXPECT_EQ(std::vector<std::string>{"team:x:y/bob-1"}, ListAll("", "", bob));
  EXPECT_EQ(std::vector<std::string>{"bob-1"}, SearchTerm("-1", bob));
  EXPECT_EQ(1, Stats("", bob).entry_count());
  // created_by another principal with :own breadth finds nothing.
  EntriesSearchRequest s;
  s.set_created_by("alice");
  EXPECT_TRUE(SearchKeys(s, bob).empty());

  Who bob_all = Who().Sub("bob").Scope("entries:read:all entries:write");
  ASSERT_TRUE(Read("team:x:y", "alice-1", &rr, bob_all).ok());
  EXPECT_EQ("alice", rr.entry().meta().owner());
  EXPECT_EQ(2u, ListAll("", "", bob_all).size());
  EXPECT_EQ(2, Stats("", bob_all).entry_count());
  EXPECT_EQ(std::vector<std::string>{"alice-1"}, SearchKeys(s, bob_all));
}

TEST_F(EntriesTest, ConfidentialIsInvisibleToInternalClearance) {
  EntriesWriteRequest w = W("lab:x:y", "conf", "classified findings");
  w.set_label(memory::v1::LABEL_CONFIDENTIAL);
  EXPECT_EQ(memory::v1::LABEL_CONFIDENTIAL, MustWrite(w).meta().label());
  Put("lab:x:y", "open", "classified? no");
  Who internal = Who().Clr(2);
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("lab:x:y", "conf", &rr, internal).error_code());
  EXPECT_EQ(std::vector<std::string>{"lab:x:y/open"}, ListAll("", "", internal));
  EXPECT_EQ(std::vector<std::string>{"open"}, SearchTerm("classified", internal));
  auto s = Stats("", internal);
  EXPECT_EQ(1, s.entry_count());
  EXPECT_EQ(14, s.value_bytes());
  // Nor may it overwrite or delete what it cannot read.
  EntriesWriteResponse ignored;
  EXPECT_EQ(Code::PERMISSION_DENIED,
            Call(kWrite, W("lab:x:y", "conf", "overwrite"), &ignored, internal).error_code());
  EntriesDeleteEntryRequest d;
  d.set_namespace_("lab:x:y");
  d.set_key("conf");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kDelete, d, &dr, internal).error_code());
  ASSERT_TRUE(Read("lab:x:y", "conf", &rr).ok());
  EXPECT_EQ("classified findings", rr.entry().value());
}

// ---- write diode ----

TEST_F(EntriesTest, SecretFloorStampsPublicWriteAsSecret) {
  Who secret = Who().Lvl(4).Clr(4);
  EntriesWriteRequest w = W("ops:x:y", "k", "v");
  w.set_label(memory::v1::LABEL_PUBLIC);
  EXPECT_EQ(memory::v1::LABEL_SECRET, MustWrite(w, secret).meta().label());
  EXPECT_EQ(1, Count("SELECT count(*) FROM entries WHERE label = 4"));
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("ops:x:y", "k", &rr, Who().Clr(3)).error_code());
}

TEST_F(EntriesTest, ExistingLabelIsNeverLowered) {
  EntriesWriteRequest w = W("ops:x:y", "k", "v1");
  w.set_label(memory::v1::LABEL_CONFIDENTIAL);
  MustWrite(w);
  w.set_value("v2");
  w.set_label(memory::v1::LABEL_PUBLIC);
  auto r = MustWrite(w);
  EXPECT_EQ(memory::v1::LABEL_CONFIDENTIAL, r.meta().label());
  EXPECT_EQ(2, r.meta().version());
}

TEST_F(EntriesTest, ModifyingAnotherOwnersEntryNeedsWriteAll) {
  Put("team:x:y", "doc", "alice's");
  Who bob = Who().Sub("bob").Scope("entries:read:all entries:write");
  EntriesWriteResponse w;
  grpc::Status st = Call(kWrite, W("team:x:y", "doc", "bob's"), &w, bob);
  EXPECT_EQ(Code::PERMISSION_DENIED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("entries:write:all")) << st.error_message();
  EntriesDeleteEntryRequest d;
  d.set_namespace_("team:x:y");
  d.set_key("doc");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kDelete, d, &dr, bob).error_code());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("team:x:y", "doc", &rr).ok());
  EXPECT_EQ("alice's", rr.entry().value());
  EXPECT_EQ(1, rr.entry().meta().version());

  Who bob_all = Who().Sub("bob").Scope("entries:read:all entries:write:all");
  auto wr = MustWrite(W("team:x:y", "doc", "bob's edit"), bob_all);
  EXPECT_EQ("alice", wr.meta().owner());  // an update never changes the owner
  EXPECT_EQ(2, wr.meta().version());
  EXPECT_TRUE(Call(kDelete, d, &dr, bob_all).ok());
  EXPECT_EQ(0, RowCount());
}

// ---- compare-and-set ----

TEST_F(EntriesTest, ExpectedVersionIsCompareAndSet) {
  EntriesWriteRequest w = W("cas:x:y", "k", "v1");
  w.set_expected_version(0);
  EXPECT_TRUE(MustWrite(w).created());
  EntriesWriteResponse out;
  grpc::Status st = Call(kWrite, w, &out);
  EXPECT_EQ(Code::ABORTED, st.error_code()) << st.error_message();
  w.set_expected_version(1);
  w.set_value("v2");
  EXPECT_EQ(2, MustWrite(w).meta().version());
  EXPECT_EQ(Code::ABORTED, Call(kWrite, w, &out).error_code());  // still 1: stale
  w.set_expected_version(7);
  w.set_key("absent");
  EXPECT_EQ(Code::ABORTED, Call(kWrite, w, &out).error_code());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("cas:x:y", "k", &rr).ok());
  EXPECT_EQ("v2", rr.entry().value());
  EXPECT_EQ(Code::NOT_FOUND, Read("cas:x:y", "absent", &rr).error_code());

  EntriesDeleteEntryRequest d;
  d.set_namespace_("cas:x:y");
  d.set_key("k");
  d.set_expected_version(1);
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::ABORTED, Call(kDelete, d, &dr).error_code());
  d.set_expected_version(2);
  EXPECT_TRUE(Call(kDelete, d, &dr).ok());
  EXPECT_EQ(0, RowCount());
}

TEST_F(EntriesTest, ConcurrentCreatesWithExpectedVersionZeroHaveOneWinner) {
  std::atomic<int> ok{0}, aborted{0}, other{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; i++)
    ts.emplace_back([&, i] {
      EntriesWriteRequest w = W("race:x:y", "k", "writer " + std::to_string(i));
      w.set_expected_version(0);
      EntriesWriteResponse out;
      grpc::Status st = Call(kWrite, w, &out);
      if (st.ok()) ok++;
      else if (st.error_code() == Code::ABORTED) aborted++;
      else other++;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(1, ok.load());
  EXPECT_EQ(7, aborted.load());
  EXPECT_EQ(0, other.load());
}

TEST_F(EntriesTest, ConcurrentUnconditionalWritesAllSucceedAndCountVersions) {
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; i++)
    ts.emplace_back([&, i] {
      EntriesWriteResponse out;
      if (Call(kWrite, W("race:x:y", "k", "w" + std::to_string(i)), &out).ok()) ok++;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(8, ok.load());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("race:x:y", "k", &rr).ok());
  EXPECT_EQ(8, rr.entry().meta().version());
}

// ---- delete ----

TEST_F(EntriesTest, DeleteRemovesAndThenIsNotFound) {
  Put("d:x:y", "k", "v");
  EntriesDeleteEntryRequest d;
  d.set_namespace_("d:x:y");
  d.set_key("k");
  EntriesDeleteEntryResponse dr;
  EXPECT_TRUE(Call(kDelete, d, &dr).ok());
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("d:x:y", "k", &rr).error_code());
  EXPECT_EQ(Code::NOT_FOUND, Call(kDelete, d, &dr).error_code());
}

// ---- expiry ----

TEST_F(EntriesTest, ExpiredEntriesAreGoneForEveryReader) {
  EntriesWriteRequest w = W("tmp:x:y", "short", "soon gone");
  w.mutable_ttl()->set_seconds(1);
  auto wr = MustWrite(w);
  ASSERT_TRUE(wr.meta().has_expire_time());
  EXPECT_GE(wr.meta().expire_time().seconds(), time(nullptr));
  EntriesWriteRequest w2 = W("tmp:x:y", "long", "stays");
  w2.mutable_expire_time()->set_seconds(time(nullptr) + 3600);
  MustWrite(w2);
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("tmp:x:y", "short", &rr).ok());
  EXPECT_TRUE(rr.entry().meta().has_expire_time());
  EXPECT_EQ(2, Stats().entry_count());

  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  EXPECT_EQ(Code::NOT_FOUND, Read("tmp:x:y", "short", &rr).error_code());
  EXPECT_EQ(std::vector<std::string>{"tmp:x:y/long"}, ListAll("", ""));
  EXPECT_EQ(std::vector<std::string>{"long"}, SearchTerm("s"));
  EXPECT_EQ(1, Stats().entry_count());
  EntriesDeleteEntryRequest d;
  d.set_namespace_("tmp:x:y");
  d.set_key("short");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::NOT_FOUND, Call(kDelete, d, &dr).error_code());
  // Writing it again creates a new entry (version 1), even under CAS 0,
  // and even for another owner.
  EntriesWriteRequest again = W("tmp:x:y", "short", "back");
  again.set_expected_version(0);
  auto ar = MustWrite(again, Who().Sub("carol"));
  EXPECT_TRUE(ar.created());
  EXPECT_EQ(1, ar.meta().version());
  EXPECT_EQ("carol", ar.meta().owner());
  EXPECT_FALSE(ar.meta().has_expire_time());
}

// ---- search ----

TEST_F(EntriesTest, SearchMatchesTermCaseInsensitivelyInKeyOrTextValue) {
  Put("s:x:y", "greeting", "Hello World");
  Put("s:x:y", "HELLO-key", "nothing here");
  Put("s:x:y", "umlaut", "Grüße aus MÜNCHEN");
  Put("s:x:y", "binary", std::string("hello\xff\xfe", 7));  // not UTF-8: key only
  EXPECT_EQ(Sorted({"greeting", "HELLO-key"}), Sorted(SearchTerm("hello")));
  EXPECT_EQ(std::vector<std::string>{"umlaut"}, SearchTerm("münchen"));
  EXPECT_EQ(std::vector<std::string>{"binary"}, SearchTerm("BINA"));
  EXPECT_EQ(4u, SearchTerm("").size());
}

TEST_F(EntriesTest, SearchFiltersByTagsContentTypeCreatorAndTime) {
  EntriesWriteRequest a = W("s:x:y", "a", "1");
  a.add_tags("red");
  a.add_tags("big");
  a.set_content_type("text/plain");
  MustWrite(a);
  EntriesWriteRequest b = W("s:x:y", "b", "2");
  b.add_tags("red");
  b.set_content_type("application/json");
  MustWrite(b, Who().Sub("bob"));
  Who all = Who().Scope("entries:read:all entries:write");
  EntriesSearchRequest s;
  s.add_tags("red");
  EXPECT_EQ(2u, SearchKeys(s, all).size());
  s.add_tags("big");
  EXPECT_EQ(std::vector<std::string>{"a"}, SearchKeys(s, all));
  s.Clear();
  s.set_content_type("application/json");
  EXPECT_EQ(std::vector<std::string>{"b"}, SearchKeys(s, all));
  s.Clear();
  s.set_created_by("bob");
  EXPECT_EQ(std::vector<std::string>{"b"}, SearchKeys(s, all));
  s.Clear();
  // Most recently updated first; limit.
  EXPECT_EQ((std::vector<std::string>{"b", "a"}), SearchKeys(s, all));
  s.set_limit(1);
  EXPECT_EQ(std::vector<std::string>{"b"}, SearchKeys(s, all));
  s.Clear();
  s.mutable_time_range()->mutable_start_time()->set_seconds(time(nullptr) + 3600);
  EXPECT_TRUE(SearchKeys(s, all).empty());
  s.Clear();
  s.mutable_time_range()->mutable_end_time()->set_seconds(time(nullptr) + 3600);
  s.mutable_time_range()->mutable_start_time()->set_seconds(time(nullptr) - 3600);
  EXPECT_EQ(2u, SearchKeys(s, all).size());
  // Values only when asked for.
  s.Clear();
  EntriesSearchResponse resp;
  ASSERT_TRUE(Call(kSearch, s, &resp, all).ok());
  for (const auto& e : resp.entries()) {
    EXPECT_TRUE(e.value().empty());
    EXPECT_EQ(1, e.size_bytes());
  }
  s.set_with_values(true);
  ASSERT_TRUE(Call(kSearch, s, &resp, all).ok());
  for (const auto& e : resp.entries()) EXPECT_FALSE(e.value().empty());
}

// ---- injection strings ----

TEST_F(EntriesTest, InjectionStringsAreStoredAndMatchedLiterally) {
  const std::vector<std::string> keys = {"'; DROP TABLE entries; --", "%", "_", "\\", "a%b",
                                         "a_b", "axb", "plain"};
  for (const auto& k : keys) Put("inj:x:y", k, "value " + k);
  for (const auto& k : keys) {
    EntriesReadResponse rr;
    ASSERT_TRUE(Read("inj:x:y", k, &rr).ok()) << k;
    EXPECT_EQ("value " + k, rr.entry().value());
  }
  EXPECT_EQ(static_cast<int64_t>(keys.size()), RowCount());  // the table is still there
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/%"}, ListAll("", "%"));
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/_"}, ListAll("", "_"));
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/\\"}, ListAll("", "\\"));
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/a%b"}, ListAll("", "a%*"));
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/a_b"}, ListAll("", "a_*"));
  EXPECT_EQ(Sorted({"a%b", "%"}), Sorted(SearchTerm("%")));
  EXPECT_EQ(Sorted({"a_b", "_"}), Sorted(SearchTerm("_")));
  EXPECT_EQ(std::vector<std::string>{"\\"}, SearchTerm("\\"));
  EXPECT_EQ(std::vector<std::string>{"'; DROP TABLE entries; --"}, SearchTerm("'; drop"));
  // Injection in a namespace pattern is a bad pattern, not SQL.
  EntriesListRequest l;
  l.set_namespace_pattern("inj:x:y' OR '1'='1");
  ExpectInvalid(kList, l, "namespace_pattern");
  // Tags and metadata carry them as data too.
  EntriesWriteRequest w = W("inj:x:y", "tagged", "v");
  w.add_tags("'); DELETE FROM entries; --");
  w.add_tags("{\"a\",\"b\"}");
  (*w.mutable_metadata()->mutable_fields())["q"].set_string_value("'||pg_sleep(5)||'");
  MustWrite(w);
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("inj:x:y", "tagged", &rr).ok());
  ASSERT_EQ(2, rr.entry().tags_size());
  EXPECT_EQ("'); DELETE FROM entries; --", rr.entry().tags(0));
  EXPECT_EQ("{\"a\",\"b\"}", rr.entry().tags(1));
  EXPECT_EQ("'||pg_sleep(5)||'", rr.entry().metadata().fields().at("q").string_value());
  EntriesSearchRequest s;
  s.add_tags("{\"a\",\"b\"}");
  EXPECT_EQ(std::vector<std::string>{"tagged"}, SearchKeys(s));
}

// ---- pagination ----

TEST_F(EntriesTest, PagesCoverEveryEntryOnceUnderConcurrentInserts) {
  char key[32];
  std::vector<std::string> want;
  for (int i = 0; i < 120; i++) {
    snprintf(key, sizeof key, "k%03d", i * 2);  // even numbers; inserts take odd ones
    Put(i % 2 ? "pg:a:b" : "pg:a:c", key, "v");
    want.push_back(std::string(i % 2 ? "pg:a:b/" : "pg:a:c/") + key);
  }
  std::sort(want.begin(), want.end());
  std::atomic<bool> stop{false};
  std::atomic<int> inserted{0};
  std::thread writer([&] {
    for (int i = 0; !stop && i < 120; i++) {
      char k[32];
      snprintf(k, sizeof k, "k%03d", i * 2 + 1);
      EntriesWriteResponse out;
      if (Call(kWrite, W(i % 2 ? "pg:a:b" : "pg:a:c", k, "new"), &out).ok()) inserted++;
    }
  });
  std::vector<std::string> got;
  EntriesListRequest req;
  req.set_page_size(7);
  for (int guard = 0; guard < 500; guard++) {
    EntriesListResponse resp;
    ASSERT_TRUE(Call(kList, req, &resp).ok());
    EXPECT_LE(resp.entries_size(), 7);
    for (const auto& e : resp.entries()) got.push_back(e.namespace_() + "/" + e.key());
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  writer.join();
  EXPECT_GT(inserted.load(), 0);
  // Ordered, no repeats, and every entry that existed throughout is there.
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(got.size(), std::set<std::string>(got.begin(), got.end()).size());
  std::set<std::string> gs(got.begin(), got.end());
  for (const auto& w : want) EXPECT_TRUE(gs.count(w)) << "skipped " << w;
}

TEST_F(EntriesTest, PageSizeDefaultsTo50AndCapsAt1000) {
  for (int i = 0; i < 60; i++) Put("ps:x:y", "k" + std::to_string(1000 + i), "v");
  EntriesListRequest req;
  EntriesListResponse resp;
  ASSERT_TRUE(Call(kList, req, &resp).ok());
  EXPECT_EQ(50, resp.entries_size());
  EXPECT_FALSE(resp.next_page_token().empty());
  req.set_page_size(100000);
  ASSERT_TRUE(Call(kList, req, &resp).ok());
  EXPECT_EQ(60, resp.entries_size());
  EXPECT_TRUE(resp.next_page_token().empty());
  // Without with_values, sizes but no values; with it, values.
  EXPECT_TRUE(resp.entries(0).value().empty());
  EXPECT_EQ(1, resp.entries(0).size_bytes());
  req.set_with_values(true);
  ASSERT_TRUE(Call(kList, req, &resp).ok());
  EXPECT_EQ("v", resp.entries(0).value());
}

TEST_F(EntriesTest, PageTokensAreBoundToCallerAndFilters) {
  for (int i = 0; i < 5; i++) Put("pt:x:y", "k" + std::to_string(i), "v");
  Put("pt:x:y", "bob's", "v", Who().Sub("bob"));
  EntriesListRequest req;
  req.set_namespace_pattern("pt:*:*");
  req.set_page_size(2);
  EntriesListResponse resp;
  ASSERT_TRUE(Call(kList, req, &resp).ok());
  ASSERT_FALSE(resp.next_page_token().empty());
  std::string tok = resp.next_page_token();
  EntriesListRequest other = req;
  other.set_page_token(tok);
  other.set_namespace_pattern("pt:x:*");
  ExpectInvalid(kList, other, "page_token");
  other = req;
  other.set_page_token(tok);
  other.set_key_pattern("k*");
  ExpectInvalid(kList, other, "page_token");
  other = req;
  other.set_page_token(tok);
  ExpectInvalid(kList, other, "page_token", Who().Sub("bob"));
  // Tampering with one character breaks the seal.
  other = req;
  std::string bent = tok;
  bent[bent.size() / 2] = bent[bent.size() / 2] == 'A' ? 'B' : 'A';
  other.set_page_token(bent);
  ExpectInvalid(kList, other, "page_token");
  // The same request continues; page size may change.
  other = req;
  other.set_page_token(tok);
  other.set_page_size(10);
  ASSERT_TRUE(Call(kList, other, &resp).ok());
  EXPECT_EQ(3, resp.entries_size());
  EXPECT_EQ("k2", resp.entries(0).key());
}

TEST_F(EntriesTest, ListStopsEarlyWhenValuesExceedTheResponseBudget) {
  entries_options o = {};
  o.max_response_bytes = 3000;
  RestartWith(o);
  for (int i = 0; i < 5; i++) Put("bud:x:y", "k" + std::to_string(i), std::string(1000, 'a' + i));
  EntriesListRequest req;
  req.set_with_values(true);
  std::vector<std::string> got;
  for (int guard = 0; guard < 10; guard++) {
    EntriesListResponse resp;
    ASSERT_TRUE(Call(kList, req, &resp).ok());
    EXPECT_LE(resp.entries_size(), 3);
    for (const auto& e : resp.entries()) {
      EXPECT_EQ(1000u, e.value().size());
      got.push_back(e.key());
    }
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  EXPECT_EQ((std::vector<std::string>{"k0", "k1", "k2", "k3", "k4"}), got);
}

TEST_F(EntriesTest, ListPagesStayUnderTheMessageLimitWithLargeMetadata) {
  EntriesWriteRequest w = W("md:x:y", "", "v");
  (*w.mutable_metadata()->mutable_fields())["blob"].set_string_value(std::string(60000, 'm'));
  for (int i = 0; i < 80; i++) {
    w.set_key("k" + std::to_string(100 + i));
    MustWrite(w);
  }
  // 80 x 60 KB would not fit in one 4 MiB message: the server cuts pages.
  EXPECT_EQ(80u, ListAll("", "", Who(), 1000).size());
}

// ---- stats ----

TEST_F(EntriesTest, StatsCountsVisibleEntriesUnderAPattern) {
  Put("st:a:x", "1", "12345");
  Put("st:a:x", "2", "123");
  Put("st:b:x", "1", "1");
  Put("zz:a:x", "1", "1");
  auto s = Stats("st:*:*");
  EXPECT_EQ(3, s.entry_count());
  EXPECT_EQ(2, s.namespace_count());
  EXPECT_EQ(9, s.value_bytes());
  EXPECT_EQ(9, s.stored_bytes());
  EXPECT_EQ(0, s.compressed_count());
  EXPECT_EQ(4, Stats().entry_count());
  EXPECT_EQ(0, Stats("none:*:*").entry_count());
}

// ---- PII ----

struct PiiCase {
  const char* kind;
  std::string text;
};

std::vector<PiiCase> PiiCases() {
  return {
      {"email", "contact jane.doe@example.com please"},
      {"phone", "call +1 415 555 2671 today"},
      {"payment_card", "card 4111 1111 1111 1111 exp"},
      {"national_id", "ssn 123-45-6789 on file"},
      {"iban", "pay to DE89 3704 0044 0532 0130 00 now"},
      {"api_key", "key sk_live_4eC39HqLyjWDarjtT1zdp7dc here"},
      {"private_key", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
                      "-----END PRIVATE KEY-----\n"},
      {"bearer_token", "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123"},
  };
}

TEST_F(EntriesTest, EachPiiKindInAValueIsRejectedByNameAndNothingIsStored) {
  for (const auto& c : PiiCases()) {
    EntriesWriteResponse out;
    grpc::Status st = Call(kWrite, W("pii:x:y", std::string("k-") + c.kind, c.text), &out);
    EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code()) << c.kind << ": " << st.error_message();
    EXPECT_NE(std::string::npos, st.error_message().find(c.kind))
        << c.kind << ": " << st.error_message();
    EXPECT_NE(std::string::npos, st.error_message().find("value"))
        << c.kind << ": " << st.error_message();
  }
  EXPECT_EQ(0, RowCount());
}

TEST_F(EntriesTest, PiiInKeyTagsAndMetadataIsRejectedWithItsPath) {
  EntriesWriteResponse out;
  grpc::Status st = Call(kWrite, W("pii:x:y", "bob@example.com", "v"), &out);
  EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("key")) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("email")) << st.error_message();

  EntriesWriteRequest w = W("pii:x:y", "k", "clean");
  w.add_tags("fine");
  w.add_tags("ssn 123-45-6789");
  st = Call(kWrite, w, &out);
  EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("tags[1]")) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("national_id")) << st.error_message();

  w = W("pii:x:y", "k", "clean");
  auto* f = w.mutable_metadata()->mutable_fields();
  auto* b = (*f)["a"].mutable_struct_value()->mutable_fields();
  auto* l = (*b)["b"].mutable_list_value();
  l->add_values()->set_string_value("x");
  l->add_values()->set_string_value("y");
  l->add_values()->set_string_value("mail me: eve@example.org");
  st = Call(kWrite, w, &out);
  EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("metadata.a.b[2]")) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("email")) << st.error_message();
  EXPECT_EQ(0, RowCount());
}

TEST_F(EntriesTest, PiiWriteScopeStoresAsIsAndListsKinds) {
  Who priv = Who().Scope("entries:read entries:write pii:write");
  EntriesWriteRequest w = W("pii:x:y", "k", "jane.doe@example.com 123-45-6789");
  auto wr = MustWrite(w, priv);
  std::set<std::string> kinds(wr.meta().pii_kinds().begin(), wr.meta().pii_kinds().end());
  EXPECT_TRUE(kinds.count("email"));
  EXPECT_TRUE(kinds.count("national_id"));
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("pii:x:y", "k", &rr, priv).ok());
  EXPECT_EQ("jane.doe@example.com 123-45-6789", rr.entry().value());
  EXPECT_EQ(wr.meta().pii_kinds_size(), rr.entry().meta().pii_kinds_size());
  // Clean writes carry no kinds.
  EXPECT_EQ(0, Put("pii:x:y", "clean", "nothing personal").meta().pii_kinds_size());
}

TEST_F(EntriesTest, RedactPolicyStoresRedactedValues) {
  entries_options o = {};
  o.pii_policy = ENTRIES_PII_REDACT;
  RestartWith(o);
  EntriesWriteRequest w = W("pii:x:y", "k", "write to jane.doe@example.com soon");
  w.add_tags("owner jane.doe@example.com");
  (*w.mutable_metadata()->mutable_fields())["who"].set_string_value("call +1 415 555 2671");
  auto wr = MustWrite(w);
  EXPECT_EQ(0, wr.meta().pii_kinds_size());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("pii:x:y", "k", &rr).ok());
  EXPECT_EQ(std::string::npos, rr.entry().value().find("jane.doe@example.com"))
      << rr.entry().value();
  EXPECT_NE(std::string::npos, rr.entry().value().find("write to ")) << rr.entry().value();
  ASSERT_EQ(1, rr.entry().tags_size());
  EXPECT_EQ(std::string::npos, rr.entry().tags(0).find("jane.doe@")) << rr.entry().tags(0);
  std::string who = rr.entry().metadata().fields().at("who").string_value();
  EXPECT_EQ(std::string::npos, who.find("555 2671")) << who;
  EXPECT_EQ(0, Count("SELECT count(*) FROM entries WHERE search_text LIKE '%jane.doe%'"));
}

// ---- Append / Replace / PurgeExpired ----

TEST_F(EntriesTest, AppendAddsBytesAndKeepsEverythingElse) {
  EntriesWriteRequest w = W("ap:x:y", "log", "abc");
  w.add_tags("t");
  w.set_content_type("text/plain");
  w.set_label(memory::v1::LABEL_INTERNAL);
  (*w.mutable_metadata()->mutable_fields())["m"].set_number_value(1);
  MustWrite(w);
  EntriesAppendRequest a;
  a.set_namespace_("ap:x:y");
  a.set_key("log");
  a.set_value("def");
  EntriesAppendResponse ar;
  ASSERT_TRUE(Call(kAppend, a, &ar).ok());
  EXPECT_EQ(6, ar.size_bytes());
  EXPECT_EQ(2, ar.meta().version());
  EXPECT_EQ(memory::v1::LABEL_INTERNAL, ar.meta().label());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("ap:x:y", "log", &rr).ok());
  EXPECT_EQ("abcdef", rr.entry().value());
  EXPECT_EQ("text/plain", rr.entry().content_type());
  EXPECT_EQ(1, rr.entry().tags_size());
  EXPECT_EQ(1, rr.entry().metadata().fields().at("m").number_value());
  // Empty appends only bump the version; growing past 1 KiB compresses.
  a.set_value("");
  ASSERT_TRUE(Call(kAppend, a, &ar).ok());
  EXPECT_EQ(3, ar.meta().version());
  a.set_value(std::string(3000, 'z'));
  ASSERT_TRUE(Call(kAppend, a, &ar).ok());
  EXPECT_EQ(3006, ar.size_bytes());
  ASSERT_TRUE(Read("ap:x:y", "log", &rr).ok());
  EXPECT_EQ("abcdef" + std::string(3000, 'z'), rr.entry().value());
  EXPECT_EQ(1, Stats().compressed_count());
  // SearchText follows the value.
  EXPECT_EQ(std::vector<std::string>{"log"}, SearchTerm("defzzz"));
  // CAS, missing entries and the size limit.
  a.set_value("x");
  a.set_expected_version(1);
  EXPECT_EQ(Code::ABORTED, Call(kAppend, a, &ar).error_code());
  a.set_expected_version(4);
  EXPECT_TRUE(Call(kAppend, a, &ar).ok());
  a.clear_expected_version();
  a.set_value(std::string(1024 * 1024, 'q'));
  grpc::Status st = Call(kAppend, a, &ar);
  EXPECT_EQ(Code::FAILED_PRECONDITION, st.error_code()) << st.error_message();
  a.set_key("missing");
  a.set_value("x");
  EXPECT_EQ(Code::NOT_FOUND, Call(kAppend, a, &ar).error_code());
  a.set_key("log");
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kAppend, a, &ar, Who().Sub("bob").Scope(
                                                               "entries:read:all entries:write"))
                                         .error_code());
  a.set_namespace_("bad");
  ExpectInvalid(kAppend, a, "namespace");
  ASSERT_TRUE(Read("ap:x:y", "log", &rr).ok());
  EXPECT_EQ(5, rr.entry().meta().version());
}

TEST_F(EntriesTest, AppendIsScannedForPiiAsAWhole) {
  Put("ap:x:y", "k", "contact: jane.doe@exa");
  EntriesAppendRequest a;
  a.set_namespace_("ap:x:y");
  a.set_key("k");
  a.set_value("mple.com");
  EntriesAppendResponse ar;
  grpc::Status st = Call(kAppend, a, &ar);
  EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code()) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("email")) << st.error_message();
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("ap:x:y", "k", &rr).ok());
  EXPECT_EQ("contact: jane.doe@exa", rr.entry().value());
  EXPECT_EQ(1, rr.entry().meta().version());
  Who priv = Who().Scope("entries:read entries:write pii:write");
  ASSERT_TRUE(Call(kAppend, a, &ar, priv).ok());
  ASSERT_EQ(1, ar.meta().pii_kinds_size());
  EXPECT_EQ("email", ar.meta().pii_kinds(0));
}

TEST_F(EntriesTest, ReplaceRewritesOccurrencesAndCountsThem) {
  Put("rp:x:y", "k", "a-b-a-b-a");
  EntriesReplaceRequest r;
  r.set_namespace_("rp:x:y");
  r.set_key("k");
  r.set_find("a");
  r.set_replacement("xy");
  r.set_max_replacements(2);
  EntriesReplaceResponse rr;
  ASSERT_TRUE(Call(kReplace, r, &rr).ok());
  EXPECT_EQ(2, rr.replacement_count());
  EXPECT_EQ(2, rr.meta().version());
  EntriesReadResponse got;
  ASSERT_TRUE(Read("rp:x:y", "k", &got).ok());
  EXPECT_EQ("xy-b-xy-b-a", got.entry().value());
  r.set_find("-");
  r.set_replacement("");
  r.set_max_replacements(0);
  ASSERT_TRUE(Call(kReplace, r, &rr).ok());
  EXPECT_EQ(4, rr.replacement_count());
  ASSERT_TRUE(Read("rp:x:y", "k", &got).ok());
  EXPECT_EQ("xybxyba", got.entry().value());
  // Overlaps are not double-counted: "aaa" holds one "aa".
  Put("rp:x:y", "o", "aaa");
  r.set_key("o");
  r.set_find("aa");
  r.set_replacement("b");
  ASSERT_TRUE(Call(kReplace, r, &rr).ok());
  EXPECT_EQ(1, rr.replacement_count());
  ASSERT_TRUE(Read("rp:x:y", "o", &got).ok());
  EXPECT_EQ("ba", got.entry().value());
  // No occurrence: nothing written, version unchanged.
  r.set_find("zzz");
  ASSERT_TRUE(Call(kReplace, r, &rr).ok());
  EXPECT_EQ(0, rr.replacement_count());
  EXPECT_EQ(2, rr.meta().version());
  // Bad requests and the size limit.
  r.set_find("");
  ExpectInvalid(kReplace, r, "find");
  r.set_find(std::string(64 * 1024 + 1, 'f'));
  ExpectInvalid(kReplace, r, "find");
  r.set_find("b");
  r.set_max_replacements(-1);
  ExpectInvalid(kReplace, r, "max_replacements");
  r.set_max_replacements(0);
  r.set_replacement(std::string(1024 * 1024, 'r'));
  grpc::Status st = Call(kReplace, r, &rr);
  EXPECT_EQ(Code::FAILED_PRECONDITION, st.error_code()) << st.error_message();
  r.set_key("missing");
  r.set_replacement("c");
  EXPECT_EQ(Code::NOT_FOUND, Call(kReplace, r, &rr).error_code());
}

TEST_F(EntriesTest, PurgeExpiredRemovesOnlyTheTenantsExpiredEntries) {
  auto expiring = [&](const std::string& key, const Who& who) {
    EntriesWriteRequest w = W("pu:x:y", key, "v");
    w.mutable_ttl()->set_nanos(300000000);
    MustWrite(w, who);
  };
  expiring("a1", Who());
  expiring("b1", Who().Sub("bob"));
  expiring("other-tenant", Who().Tenant("t2"));
  Put("pu:x:y", "keeps", "v");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EntriesPurgeExpiredRequest p;
  EntriesPurgeExpiredResponse pr;
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kPurge, p, &pr).error_code());  // needs admin
  Who admin = Who().Scope("admin");
  p.set_namespace_pattern("zz:*:*");
  ASSERT_TRUE(Call(kPurge, p, &pr, admin).ok());
  EXPECT_EQ(0, pr.purged_count());
  p.set_namespace_pattern("");
  ASSERT_TRUE(Call(kPurge, p, &pr, admin).ok());
  EXPECT_EQ(2, pr.purged_count());
  EXPECT_EQ(2, RowCount());  // t1's live entry and t2's expired one
  p.set_namespace_pattern("a:b");
  ExpectInvalid(kPurge, p, "namespace_pattern", admin);
}

// ---- deadlines ----

TEST_F(EntriesTest, AWriteBlockedPastItsDeadlineEndsAndFreesItsConnection) {
  Put("dl:x:y", "k", "v");
  PGresult* r = PQexec(conn_, "BEGIN; SELECT 1 FROM entries WHERE key = 'k' FOR UPDATE");
  ASSERT_EQ(PGRES_TUPLES_OK, PQresultStatus(r)) << PQresultErrorMessage(r);
  PQclear(r);
  // More blocked calls than the pool has connections: each must give its
  // connection back when its statement_timeout fires.
  for (int i = 0; i < 6; i++) {
    auto res = Unary(ch_, kWrite, W("dl:x:y", "k", "blocked").SerializeAsString(), 300,
                     {{"x-test-principal", Who().Json()}});
    EXPECT_EQ(Code::DEADLINE_EXCEEDED, res.status.error_code()) << res.status.error_message();
  }
  // Let every server-side deadline pass (grpc-timeout is rounded up) before
  // the lock goes: none of the timed-out writes may then commit.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  r = PQexec(conn_, "ROLLBACK");
  PQclear(r);
  auto t0 = std::chrono::steady_clock::now();
  auto wr = Put("dl:x:y", "k", "after");
  EXPECT_EQ(2, wr.meta().version());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// ---- PostgreSQL trouble ----

TEST_F(EntriesTest, KilledConnectionsGiveUnavailableOrSuccessNeverACrash) {
  Put("pg:x:y", "k", "v");
  for (int round = 0; round < 3; round++) {
    PGresult* r = PQexec(conn_,
                         "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                         " WHERE datname = current_database() AND pid <> pg_backend_pid()");
    ASSERT_EQ(PGRES_TUPLES_OK, PQresultStatus(r)) << PQresultErrorMessage(r);
    PQclear(r);
    EntriesReadResponse rr;
    grpc::Status st = Read("pg:x:y", "k", &rr);
    EXPECT_TRUE(st.ok() || st.error_code() == Code::UNAVAILABLE) << st.error_message();
    EntriesWriteResponse wr;
    st = Call(kWrite, W("pg:x:y", "k" + std::to_string(round), "v"), &wr);
    EXPECT_TRUE(st.ok() || st.error_code() == Code::UNAVAILABLE) << st.error_message();
    EntriesListRequest l;
    EntriesListResponse lr;
    st = Call(kList, l, &lr);
    EXPECT_TRUE(st.ok() || st.error_code() == Code::UNAVAILABLE) << st.error_message();
  }
  // And the service recovers by itself.
  EntriesReadResponse rr;
  grpc::Status st;
  for (int i = 0; i < 5; i++) {
    st = Read("pg:x:y", "k", &rr);
    if (st.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ("v", rr.entry().value());
}

// ---- audit ----

TEST_F(EntriesTest, WritesAreAuditedInTheirTransactionAndReadsByTarget) {
  Put("au:x:y", "k1", "v");
  // Written inside the data's transaction: there as soon as Write returns.
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/Write'"
                     " AND 'au:x:y/k1' = ANY(target_ids) AND status_code = 0"
                     " AND principal = 'alice' AND tenant = 't1'"));
  EntriesDeleteEntryRequest d;
  d.set_namespace_("au:x:y");
  d.set_key("k1");
  EntriesDeleteEntryResponse dr;
  ASSERT_TRUE(Call(kDelete, d, &dr).ok());
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method ="
                     " '/memory.v1.Entries/DeleteEntry' AND 'au:x:y/k1' = ANY(target_ids)"));
  Put("au:x:y", "k2", "v");
  Put("au:x:y", "k3", "v");
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("au:x:y", "k2", &rr).ok());
  ASSERT_EQ(2u, ListAll("au:*:*", "*").size());
  // A failed write is audited too, by the observer, with its status.
  EntriesWriteResponse wr;
  EntriesWriteRequest cas = W("au:x:y", "k2", "v");
  cas.set_expected_version(9);
  EXPECT_EQ(Code::ABORTED, Call(kWrite, cas, &wr).error_code());
  ASSERT_EQ(0, audit_flush(aud_, rpc_now_ms() + 5000));
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/Read'"
                     " AND target_ids = ARRAY['au:x:y/k2']"));
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/List'"
                     " AND target_ids @> ARRAY['au:x:y/k2', 'au:x:y/k3']"));
  EXPECT_EQ(1, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/Write'"
                     " AND 'au:x:y/k2' = ANY(target_ids) AND status_code = 10"));
  // Each write is recorded once (in its transaction, not again by the observer).
  EXPECT_EQ(3, Count("SELECT count(*) FROM audit_log WHERE method = '/memory.v1.Entries/Write'"
                     " AND status_code = 0"));
}

}  // namespace
