// The audit trail (service/audit) against a real PostgreSQL: the observer
// and its batch writer, audit_write_in_tx, and the Audit service (List, Watch),
// through an in-process rpc_server over loopback gRPC. A test interceptor
// stands in for authn: it builds the caller's principal from x-test-*
// metadata, so tests choose principal, tenant, scopes and token expiry.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/backend_loop.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/pg_testdb.h"

extern "C" {
#include "grpc/health/v1/health.pb-c.h"
#include "memory/v1/audit.pb-c.h"
#include "service/audit/audit.h"
#include "service/audit_service/audit_service.h"
#include "service/auth/principal.h"
#include "service/rpc/rpc.h"
#include "service/store/pg_migrate.h"
#include "service/store/pg_pool.h"
#include "service/store/pgq.h"
}

namespace {

using testing_client::Unary;

// ---- the caller: principal claims carried in test metadata ----

struct Who {
  std::string sub, tenant, scope;
  int exp_in_s = 3600;
  std::string jti = "";  // empty: "jti-<sub>"
};

std::map<std::string, std::string> Md(const Who& w, const std::string& request_id = "") {
  std::map<std::string, std::string> md;
  if (!w.sub.empty()) {
    md["x-test-sub"] = w.sub;
    md["x-test-tenant"] = w.tenant;
    md["x-test-scope"] = w.scope;
    md["x-test-exp-in"] = std::to_string(w.exp_in_s);
    md["x-test-jti"] = w.jti.empty() ? "jti-" + w.sub : w.jti;
  }
  if (!request_id.empty()) md["x-request-id"] = request_id;
  return md;
}

char* Dup(const char* s) { return s ? strdup(s) : nullptr; }

// Stands in for authn: a principal from x-test-* metadata (the claims are
// built the way jwt_verify builds them: every string and array malloc'd,
// freed by jwt_claims_free through principal_unref), then the method's
// scope check. x-test-reject fails the call as a bad token would.
grpc_status_code TestAuth(rpc_call* call, void*) {
  if (rpc_call_metadata(call, "x-test-reject")) {
    rpc_call_set_error(call, "test: bad token");
    return GRPC_STATUS_UNAUTHENTICATED;
  }
  const rpc_method* m = rpc_call_method(call);
  const char* sub = rpc_call_metadata(call, "x-test-sub");
  if (!sub) {
    if (!m->scope) return GRPC_STATUS_OK;
    rpc_call_set_error(call, "test: no token");
    return GRPC_STATUS_UNAUTHENTICATED;
  }
  auto* c = static_cast<jwt_claims*>(calloc(1, sizeof(jwt_claims)));
  c->sub = Dup(sub);
  c->tenant = Dup(rpc_call_metadata(call, "x-test-tenant"));
  c->jti = Dup(rpc_call_metadata(call, "x-test-jti"));
  std::string scopes = rpc_call_metadata(call, "x-test-scope") ?: "";
  std::vector<std::string> parts;
  for (size_t i = 0; i < scopes.size();) {
    size_t j = scopes.find(' ', i);
    if (j == std::string::npos) j = scopes.size();
    if (j > i) parts.push_back(scopes.substr(i, j - i));
    i = j + 1;
  }
  c->scopes = static_cast<char**>(calloc(parts.size() + 1, sizeof(char*)));
  for (const auto& s : parts) c->scopes[c->nscopes++] = Dup(s.c_str());
  c->clr = c->lvl = JWT_LABEL_PUBLIC;
  c->exp = time(nullptr) + atoi(rpc_call_metadata(call, "x-test-exp-in") ?: "3600");
  principal* p = principal_create(c);
  if (!p) return GRPC_STATUS_RESOURCE_EXHAUSTED;
  rpc_call_set_principal(call, p, principal_release);
  if (m->scope && principal_scope(p, m->scope) == PRINCIPAL_DENY) {
    rpc_call_set_error(call, "test: scope %s needed", m->scope);
    return GRPC_STATUS_PERMISSION_DENIED;
  }
  return GRPC_STATUS_OK;
}

// ---- test methods (health messages; `service` carries the parameter) ----

const char* Param(const ProtobufCMessage* req) {
  return reinterpret_cast<const Grpc__Health__V1__HealthCheckRequest*>(req)->service;
}

// Adds the comma-separated targets of "a,b,c"; "fail:a,b" adds them and
// fails with NOT_FOUND.
grpc_status_code Touch(rpc_call* call, const ProtobufCMessage* req, ProtobufCMessage*, void*) {
  std::string s = Param(req);
  bool fail = s.rfind("fail:", 0) == 0;
  if (fail) s = s.substr(5);
  for (size_t i = 0; i < s.size();) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) audit_add_target(call, s.substr(i, j - i).c_str());
    i = j + 1;
  }
  if (fail) {
    rpc_call_set_error(call, "record not found");
    return GRPC_STATUS_NOT_FOUND;
  }
  return GRPC_STATUS_OK;
}

grpc_status_code Ping(rpc_call*, const ProtobufCMessage*, ProtobufCMessage*, void*) {
  return GRPC_STATUS_OK;
}

struct TxCtx {
  pg_pool* pg;
};

// A write handler that audits inside its own transaction: "commit" or
// "rollback" (then ABORTED).
grpc_status_code TxWrite(rpc_call* call, const ProtobufCMessage* req, ProtobufCMessage*,
                         void* arg) {
  auto* ctx = static_cast<TxCtx*>(arg);
  bool commit = strcmp(Param(req), "commit") == 0;
  char err[256];
  pgq_session ss;
  if (pgq_begin(&ss, ctx->pg, "test", rpc_now_ms() + 2000, 0, err, sizeof err) != STATUS_OK)
    return GRPC_STATUS_UNAVAILABLE;
  audit_add_target(call, "tx-target");
  PQclear(PQexec(ss.conn, "BEGIN"));
  int rc = audit_write_in_tx(&ss, call, err, sizeof err);
  PGresult* r = PQexec(ss.conn, rc == 0 && commit ? "COMMIT" : "ROLLBACK");
  bool committed = rc == 0 && commit && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  pgq_end(&ss);
  if (rc != 0) {
    rpc_call_set_error(call, "%s", err);
    return GRPC_STATUS_INTERNAL;
  }
  if (!committed) {
    rpc_call_set_error(call, "rolled back");
    return GRPC_STATUS_ABORTED;
  }
  audit_committed(call);
  return GRPC_STATUS_OK;
}

const ProtobufCMessageDescriptor* kReq = &grpc__health__v1__health_check_request__descriptor;
const ProtobufCMessageDescriptor* kResp = &grpc__health__v1__health_check_response__descriptor;

std::string Req(const std::string& param) {
  Grpc__Health__V1__HealthCheckRequest r = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  r.service = const_cast<char*>(param.c_str());
  std::string out(protobuf_c_message_get_packed_size(&r.base), '\0');
  protobuf_c_message_pack(&r.base, reinterpret_cast<uint8_t*>(&out[0]));
  return out;
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- one memoryd "replica": an rpc_server with its own audit ----

struct Node {
  rpc_server* srv = nullptr;
  audit* a = nullptr;
  audit_service* svc = nullptr;
  TxCtx tx{};
  std::shared_ptr<grpc::Channel> ch;

  void Start(pg_pool* pg, apg* pga, const audit_options& o,
             const audit_service_options& svc_o = {}) {
    char err[512];
    ASSERT_EQ(0, audit_create(pg, &o, &a, err, sizeof err)) << err;
    ASSERT_EQ(0, audit_service_create(pg, pga, &svc_o, &svc, err, sizeof err)) << err;
    tx = {pg};
    rpc_server_options so = {};
    so.listen = "127.0.0.1:0";
    so.workers = 4;
    so.max_message_bytes = 4 * 1024 * 1024;
    ASSERT_EQ(0, rpc_server_create(&so, &srv, err, sizeof err)) << err;
    Add("/test.Memory/Touch", "test:write", Touch, nullptr);
    Add("/test.Memory/TxWrite", "test:write", TxWrite, &tx);
    Add("/test.Other/Ping", "test:read", Ping, nullptr);
    Add("/test.Health/Check", nullptr, Ping, nullptr);
    ASSERT_EQ(0, rpc_server_add_interceptor(srv, TestAuth, nullptr));
    ASSERT_EQ(0, audit_observe(srv, a));
    ASSERT_EQ(0, audit_service_register(srv, svc));
    ASSERT_EQ(0, rpc_server_start(srv, err, sizeof err)) << err;
    ch = testing_client::Connect(rpc_server_port(srv));
  }
  void Add(const char* path, const char* scope, rpc_unary_fn fn, void* arg) {
    rpc_method m = {};
    m.path = path;
    m.kind = RPC_UNARY;
    m.request = kReq;
    m.response = kResp;
    m.scope = scope;
    m.unary = fn;
    m.arg = arg;
    ASSERT_EQ(0, rpc_server_add_method(srv, &m)) << path;
  }
  // Server first (its streams are cancelled), then the Audit service
  // (the listener), then the trail (flushes).
  void Stop() {
    ch.reset();
    if (srv) {
      rpc_server_shutdown(srv, 500);
      rpc_server_free(srv);
      srv = nullptr;
    }
    audit_service_free(svc);
    svc = nullptr;
    audit_free(a);
    a = nullptr;
  }
  grpc::Status Call(const std::string& method, const std::string& param, const Who& who,
                    const std::string& request_id = "") {
    return Unary(ch, method, Req(param), 5000, Md(who, request_id)).status;
  }
  void Flush() { ASSERT_EQ(0, audit_flush(a, rpc_now_ms() + 10000)); }
  size_t Watchers() { return audit_service_watchers(svc); }
  bool WaitWatchers(size_t n) {
    for (int i = 0; i < 500; i++) {
      if (Watchers() == n) return true;
      usleep(10000);
    }
    return false;
  }
};

// ---- decoded records ----

struct Rec {
  std::string id, principal, token_id, tenant, method, request_id;
  std::vector<std::string> targets;
  int status = -1;
  int64_t time_us = 0, duration_us = 0;
};

Rec FromPb(const Memory__V1__AuditRecord* r) {
  Rec o;
  o.id = r->id;
  o.principal = r->principal;
  o.token_id = r->token_id;
  o.tenant = r->tenant;
  o.method = r->method;
  o.request_id = r->request_id;
  for (size_t i = 0; i < r->n_target_ids; i++) o.targets.push_back(r->target_ids[i]);
  o.status = r->status_code;
  if (r->time) o.time_us = r->time->seconds * 1000000 + r->time->nanos / 1000;
  if (r->duration) o.duration_us = r->duration->seconds * 1000000 + r->duration->nanos / 1000;
  return o;
}

struct ListArgs {
  std::string principal, method, target, token;
  int page_size = 0;
  int64_t start_us = -1, end_us = -1;
};

struct ListResult {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
  std::vector<Rec> recs;
  std::string next;
};

Google__Protobuf__Timestamp Ts(int64_t us) {
  Google__Protobuf__Timestamp t = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
  t.seconds = us / 1000000;
  t.nanos = static_cast<int32_t>(us % 1000000 * 1000);
  return t;
}

ListResult List(const std::shared_ptr<grpc::Channel>& ch, const Who& who, const ListArgs& a) {
  Memory__V1__AuditFilter f = MEMORY__V1__AUDIT_FILTER__INIT;
  f.principal = const_cast<char*>(a.principal.c_str());
  f.method = const_cast<char*>(a.method.c_str());
  f.target_id = const_cast<char*>(a.target.c_str());
  Memory__V1__TimeRange tr = MEMORY__V1__TIME_RANGE__INIT;
  Google__Protobuf__Timestamp s = Ts(a.start_us), e = Ts(a.end_us);
  if (a.start_us >= 0) tr.start_time = &s;
  if (a.end_us >= 0) tr.end_time = &e;
  Memory__V1__AuditListRequest req = MEMORY__V1__AUDIT_LIST_REQUEST__INIT;
  req.filter = &f;
  if (a.start_us >= 0 || a.end_us >= 0) req.time_range = &tr;
  req.page_size = a.page_size;
  req.page_token = const_cast<char*>(a.token.c_str());
  std::string body(protobuf_c_message_get_packed_size(&req.base), '\0');
  protobuf_c_message_pack(&req.base, reinterpret_cast<uint8_t*>(&body[0]));
  auto r = Unary(ch, "/memory.v1.Audit/List", body, 10000, Md(who));
  ListResult out;
  out.code = r.status.error_code();
  out.message = r.status.error_message();
  if (!r.status.ok()) return out;
  auto* resp = memory__v1__audit_list_response__unpack(
      nullptr, r.body.size(), reinterpret_cast<const uint8_t*>(r.body.data()));
  EXPECT_NE(nullptr, resp);
  if (!resp) return out;
  for (size_t i = 0; i < resp->n_records; i++) out.recs.push_back(FromPb(resp->records[i]));
  out.next = resp->next_page_token;
  memory__v1__audit_list_response__free_unpacked(resp, nullptr);
  return out;
}

// Every record List returns for who and args, following page tokens.
std::vector<Rec> ListAll(const std::shared_ptr<grpc::Channel>& ch, const Who& who, ListArgs a) {
  std::vector<Rec> all;
  for (int page = 0; page < 100; page++) {
    auto r = List(ch, who, a);
    EXPECT_EQ(grpc::StatusCode::OK, r.code) << r.message;
    all.insert(all.end(), r.recs.begin(), r.recs.end());
    if (r.next.empty()) break;
    a.token = r.next;
  }
  return all;
}

// ---- a Watch stream with metadata, read with timeouts ----

class Watch {
 public:
  Watch(const std::shared_ptr<grpc::Channel>& ch, const Who& who, const std::string& principal,
        const std::string& method, const std::string& target, int timeout_ms = 30000)
      : stub_(ch) {
    for (const auto& kv : Md(who)) ctx_.AddMetadata(kv.first, kv.second);
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    call_ = stub_.PrepareCall(&ctx_, "/memory.v1.Audit/Watch", &cq_);
    call_->StartCall(Tag(1));
    Wait(1, 5000);
    Memory__V1__AuditFilter f = MEMORY__V1__AUDIT_FILTER__INIT;
    f.principal = const_cast<char*>(principal.c_str());
    f.method = const_cast<char*>(method.c_str());
    f.target_id = const_cast<char*>(target.c_str());
    Memory__V1__AuditWatchRequest req = MEMORY__V1__AUDIT_WATCH_REQUEST__INIT;
    req.filter = &f;
    std::string body(protobuf_c_message_get_packed_size(&req.base), '\0');
    protobuf_c_message_pack(&req.base, reinterpret_cast<uint8_t*>(&body[0]));
    grpc::Slice slice(body);
    grpc::ByteBuffer bb(&slice, 1);
    call_->Write(bb, Tag(2));
    Wait(2, 5000);
    call_->WritesDone(Tag(3));
    Wait(3, 5000);
  }
  ~Watch() {
    if (!finished_) {
      ctx_.TryCancel();
      Finish();
    }
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  // The next record; false on timeout or when the stream ended (ended()).
  bool Next(Rec* out, int wait_ms = 5000) {
    if (ended_) return false;
    if (!read_pending_) {
      in_ = grpc::ByteBuffer();
      call_->Read(&in_, Tag(4));
      read_pending_ = true;
    }
    bool ok = false;
    if (!Wait(4, wait_ms, &ok)) return false;
    read_pending_ = false;
    if (!ok) {
      ended_ = true;
      return false;
    }
    std::vector<grpc::Slice> slices;
    std::string s;
    if (in_.Dump(&slices).ok())
      for (const auto& sl : slices) s.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    auto* m = memory__v1__audit_watch_response__unpack(nullptr, s.size(),
                                                       reinterpret_cast<const uint8_t*>(s.data()));
    if (!m || !m->record) return false;
    *out = FromPb(m->record);
    memory__v1__audit_watch_response__free_unpacked(m, nullptr);
    return true;
  }
  bool ended() const { return ended_; }
  void Cancel() { ctx_.TryCancel(); }
  grpc::Status Finish() {
    grpc::Status st;
    call_->Finish(&st, Tag(5));
    Wait(5, 10000);
    finished_ = true;
    return st;
  }

 private:
  static void* Tag(intptr_t n) { return reinterpret_cast<void*>(n); }
  bool Wait(intptr_t want, int wait_ms, bool* ok_out = nullptr) {
    auto until = std::chrono::system_clock::now() + std::chrono::milliseconds(wait_ms);
    for (;;) {
      void* tag;
      bool ok;
      auto st = cq_.AsyncNext(&tag, &ok, until);
      if (st != grpc::CompletionQueue::GOT_EVENT) return false;
      if (tag == Tag(4)) {
        if (want != 4) {  // a pending read completed while waiting for something else
          read_pending_ = false;
          if (!ok) ended_ = true;
          continue;
        }
      }
      if (tag == Tag(want)) {
        if (ok_out) *ok_out = ok;
        return true;
      }
    }
  }
  grpc::ClientContext ctx_;
  grpc::CompletionQueue cq_;
  grpc::GenericStub stub_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  grpc::ByteBuffer in_;
  bool read_pending_ = false, ended_ = false, finished_ = false;
};

// ---- the fixture: a throw-away database, a pool and one node ----

class AuditTest : public ::testing::Test {
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
    ASSERT_EQ(0, pg_pool_create(db_.url().c_str(), 4, 2, &pg_, err, sizeof err)) << err;
    std::string why;
    ASSERT_TRUE(StartBackendLoop(db_.url(), BackendLoopOptions{}, &loop_, &pga_, &why)) << why;
    grpc_init();
    if (StartDefaultNode()) {
      node_.Start(pg_, pga_, audit_options{});
    }
  }
  void TearDown() override {
    for (auto* n : extra_) {
      n->Stop();
      delete n;
    }
    node_.Stop();
    StopBackendLoop(&loop_, &pga_);
    pg_pool_free(pg_);
    grpc_shutdown();
    if (conn_) PQfinish(conn_);
  }
  virtual bool StartDefaultNode() { return true; }
  Node* NewNode(const audit_options& o, const audit_service_options& so = {}) {
    auto* n = new Node();
    extra_.push_back(n);
    n->Start(pg_, pga_, o, so);
    return n;
  }
  // Runs sql on the test's own connection; returns the first value.
  std::string Sql(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    EXPECT_TRUE(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK)
        << sql << ": " << PQresultErrorMessage(r);
    std::string v =
        PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return v;
  }
  int Count(const std::string& where) {
    return atoi(Sql("SELECT count(*) FROM audit_log WHERE " + where).c_str());
  }
  bool WaitCount(const std::string& where, int n) {
    for (int i = 0; i < 500; i++) {
      if (Count(where) == n) return true;
      usleep(10000);
    }
    return false;
  }

  PgTestDb db_;
  PGconn* conn_ = nullptr;
  pg_pool* pg_ = nullptr;
  evloop* loop_ = nullptr;
  apg* pga_ = nullptr;
  Node node_;
  std::vector<Node*> extra_;
};

const Who kAlice{"alice", "t1", "test:write test:read audit:read"};
const Who kBob{"bob", "t1", "test:write test:read audit:read"};
const Who kAuditor{"carol", "t1", "audit:read:all test:write test:read"};
const Who kMallory{"mallory", "t2", "test:write audit:read:all"};

// ---- the observer ----

TEST_F(AuditTest, CallProducesRowWithCallerMethodTargetsStatusAndRequestId) {
  int64_t before = NowUs();
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "ns:a:b/k1,ent-7", kAlice, "req-audit-1").ok());
  int64_t after = NowUs();
  node_.Flush();
  ASSERT_EQ(1, Count("request_id = 'req-audit-1'"));
  EXPECT_EQ("alice|jti-alice|t1|/test.Memory/Touch|{ns:a:b/k1,ent-7}|0",
            Sql("SELECT principal || '|' || token_id || '|' || tenant || '|' || method || '|' || "
                "target_ids::text || '|' || status_code FROM audit_log "
                "WHERE request_id = 'req-audit-1'"));
  // The same row through Audit.List, with its time and duration.
  auto r = List(node_.ch, kAlice, {"", "/test.Memory/Touch", "", ""});
  ASSERT_EQ(grpc::StatusCode::OK, r.code) << r.message;
  ASSERT_EQ(1u, r.recs.size());
  const Rec& rec = r.recs[0];
  EXPECT_EQ("alice", rec.principal);
  EXPECT_EQ("jti-alice", rec.token_id);
  EXPECT_EQ("t1", rec.tenant);
  EXPECT_EQ("/test.Memory/Touch", rec.method);
  EXPECT_EQ((std::vector<std::string>{"ns:a:b/k1", "ent-7"}), rec.targets);
  EXPECT_EQ(0, rec.status);
  EXPECT_EQ("req-audit-1", rec.request_id);
  EXPECT_FALSE(rec.id.empty());
  EXPECT_GE(rec.time_us, before);
  EXPECT_LE(rec.time_us, after);
  EXPECT_GE(rec.duration_us, 0);
  EXPECT_LT(rec.duration_us, after - before + 1000);
}

TEST_F(AuditTest, FailedCallIsAuditedWithItsStatusAndTargets) {
  EXPECT_EQ(grpc::StatusCode::NOT_FOUND,
            node_.Call("/test.Memory/Touch", "fail:gone-1", kAlice, "req-fail").error_code());
  node_.Flush();
  EXPECT_EQ("5|{gone-1}", Sql("SELECT status_code || '|' || target_ids::text FROM audit_log "
                              "WHERE request_id = 'req-fail'"));
}

// A call refused before a token was verified is counted, not queued: a
// flood of them (here 200, with room for 4 records) crowds out no real
// record. A caller refused after authentication is audited as usual.
TEST_F(AuditTest, CallsRejectedBeforeATokenAreCountedAndCrowdOutNothing) {
  audit_options o = {};
  o.queue_capacity = 4;
  o.batch_max = 2;
  Node* small = NewNode(o);
  // The writer's COPY waits on the lock, so the queue cannot drain.
  PGconn* locker = PQconnectdb(db_.url().c_str());
  ASSERT_EQ(CONNECTION_OK, PQstatus(locker));
  PQclear(PQexec(locker, "BEGIN; LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE"));
  for (int i = 0; i < 200; i++) {
    auto md = Md(kAlice, "req-rejected-" + std::to_string(i));
    md["x-test-reject"] = "1";
    ASSERT_EQ(grpc::StatusCode::UNAUTHENTICATED,
              Unary(small->ch, "/test.Memory/Touch", Req("x"), 5000, md).status.error_code());
  }
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED,
            small->Call("/test.Memory/Touch", "x", Who{"eve", "t1", "audit:read"}, "req-denied")
                .error_code());
  ASSERT_TRUE(small->Call("/test.Memory/Touch", "real", kAlice, "req-real").ok());
  EXPECT_EQ(0u, audit_dropped(small->a));
  PQclear(PQexec(locker, "COMMIT"));
  PQfinish(locker);
  small->Flush();
  audit_stats st;
  audit_get_stats(small->a, &st);
  EXPECT_EQ(200u, st.unauthenticated);
  EXPECT_EQ(0u, st.dropped);
  EXPECT_EQ(0, Count("request_id LIKE 'req-rejected-%'"));
  EXPECT_EQ("7|eve|t1", Sql("SELECT status_code || '|' || principal || '|' || tenant "
                            "FROM audit_log WHERE request_id = 'req-denied'"));
  EXPECT_EQ(1, Count("request_id = 'req-real'"));
}

TEST_F(AuditTest, MethodsWithoutScopeAndUnknownMethodsAreNotAudited) {
  ASSERT_TRUE(node_.Call("/test.Health/Check", "", Who{}, "req-health").ok());
  EXPECT_EQ(grpc::StatusCode::UNIMPLEMENTED,
            node_.Call("/test.Nope/Missing", "", kAlice, "req-unknown").error_code());
  ASSERT_TRUE(node_.Call("/test.Other/Ping", "", kAlice, "req-ping").ok());
  node_.Flush();
  EXPECT_EQ(0, Count("request_id IN ('req-health', 'req-unknown')"));
  EXPECT_EQ(1, Count("request_id = 'req-ping'"));
}

TEST_F(AuditTest, GeneratedRequestIdIsRecordedWhenTheClientSendsNone) {
  ASSERT_TRUE(node_.Call("/test.Other/Ping", "", kBob).ok());
  node_.Flush();
  EXPECT_EQ(1, Count("principal = 'bob' AND length(request_id) > 0"));
}

TEST_F(AuditTest, TargetIdsAreCleanedAndBounded) {
  std::string bad = "k\xff\xfe-1";                 // invalid UTF-8
  std::string tricky = "a\"b\\c;d}{e\tf\ng NULL";  // no ',': Touch splits on it
  std::string long_id(5000, 'x');
  ASSERT_TRUE(
      node_.Call("/test.Memory/Touch", bad + "," + tricky + "," + long_id, kAlice, "req-clean")
          .ok());
  node_.Flush();
  auto r = List(node_.ch, kAlice, {"", "/test.Memory/Touch", "", ""});
  ASSERT_EQ(1u, r.recs.size());
  ASSERT_EQ(3u, r.recs[0].targets.size());
  EXPECT_EQ(
      "k?"
      "?-1",
      r.recs[0].targets[0]);  // (no trigraph)
  EXPECT_EQ(tricky, r.recs[0].targets[1]);
  EXPECT_EQ(std::string(1024, 'x'), r.recs[0].targets[2]);
}

// ---- audit_write_in_tx ----

TEST_F(AuditTest, WriteInTxCommittedIsRecordedExactlyOnce) {
  ASSERT_TRUE(node_.Call("/test.Memory/TxWrite", "commit", kAlice, "req-tx-commit").ok());
  node_.Flush();
  EXPECT_EQ(1, Count("request_id = 'req-tx-commit'"));
  EXPECT_EQ("0|{tx-target}|alice", Sql("SELECT status_code || '|' || target_ids::text || '|' || "
                                       "principal FROM audit_log "
                                       "WHERE request_id = 'req-tx-commit'"));
}

TEST_F(AuditTest, WriteInTxRolledBackLeavesOnlyTheObserversFailureRow) {
  EXPECT_EQ(grpc::StatusCode::ABORTED,
            node_.Call("/test.Memory/TxWrite", "rollback", kAlice, "req-tx-rb").error_code());
  node_.Flush();
  EXPECT_EQ(1, Count("request_id = 'req-tx-rb'"));
  EXPECT_EQ("10|{tx-target}", Sql("SELECT status_code || '|' || target_ids::text FROM audit_log "
                                  "WHERE request_id = 'req-tx-rb'"));
}

// ---- Audit.List ----

TEST_F(AuditTest, ListNeverShowsAnotherTenantsRows) {
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "secret-target", kAlice, "req-t1").ok());
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "own-target", kMallory, "req-t2").ok());
  node_.Flush();
  auto all = ListAll(node_.ch, kMallory, {});
  ASSERT_FALSE(all.empty());
  for (const auto& r : all) EXPECT_EQ("t2", r.tenant) << r.method << " " << r.principal;
  // Not through filters either...
  EXPECT_TRUE(List(node_.ch, kMallory, {"alice", "", "", ""}).recs.empty());
  EXPECT_TRUE(List(node_.ch, kMallory, {"", "", "secret-target", ""}).recs.empty());
  EXPECT_TRUE(List(node_.ch, kMallory, {"", "test.Memory", "", ""}).recs.size() == 1);
  // ...nor through another caller's page token.
  for (int i = 0; i < 3; i++)
    ASSERT_TRUE(node_.Call("/test.Memory/Touch", "p" + std::to_string(i), kAuditor).ok());
  node_.Flush();
  auto page = List(node_.ch, kAuditor, {"", "", "", "", 1});
  ASSERT_EQ(grpc::StatusCode::OK, page.code) << page.message;
  ASSERT_FALSE(page.next.empty());
  auto stolen = List(node_.ch, kMallory, {"", "", "", page.next, 1});
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, stolen.code);
  EXPECT_TRUE(stolen.recs.empty());
}

TEST_F(AuditTest, OwnBreadthSeesOnlyItsOwnPrincipalAllSeesTheTenant) {
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "a1", kAlice).ok());
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "b1", kBob).ok());
  node_.Flush();
  ListArgs touch{"", "/test.Memory/Touch", "", ""};
  auto own = List(node_.ch, kAlice, touch);
  ASSERT_EQ(1u, own.recs.size());
  EXPECT_EQ("alice", own.recs[0].principal);
  ListArgs alice_named{"alice", "/test.Memory/Touch", "", ""};
  EXPECT_EQ(1u, List(node_.ch, kAlice, alice_named).recs.size());
  // Naming someone else needs audit:read:all.
  auto denied = List(node_.ch, kAlice, {"bob", "", "", ""});
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED, denied.code);
  EXPECT_NE(std::string::npos, denied.message.find("audit:read:all")) << denied.message;
  auto all = List(node_.ch, kAuditor, touch);
  ASSERT_EQ(2u, all.recs.size());
  auto bobs = List(node_.ch, kAuditor, {"bob", "/test.Memory/Touch", "", ""});
  ASSERT_EQ(1u, bobs.recs.size());
  EXPECT_EQ("bob", bobs.recs[0].principal);
  // A token without audit:read does not get in at all.
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED,
            List(node_.ch, Who{"dave", "t1", "test:read"}, {}).code);
}

TEST_F(AuditTest, ListFiltersByMethodServiceAndTarget) {
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "x1,shared", kAuditor).ok());
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "x2", kAuditor).ok());
  ASSERT_TRUE(node_.Call("/test.Other/Ping", "", kAuditor).ok());
  ASSERT_TRUE(node_.Call("/test.Memory/TxWrite", "commit", kAuditor).ok());
  node_.Flush();
  EXPECT_EQ(2u, List(node_.ch, kAuditor, {"", "/test.Memory/Touch", "", ""}).recs.size());
  EXPECT_EQ(3u, List(node_.ch, kAuditor, {"", "test.Memory", "", ""}).recs.size());
  EXPECT_EQ(1u, List(node_.ch, kAuditor, {"", "test.Other", "", ""}).recs.size());
  auto t = List(node_.ch, kAuditor, {"", "", "shared", ""});
  ASSERT_EQ(1u, t.recs.size());
  EXPECT_EQ((std::vector<std::string>{"x1", "shared"}), t.recs[0].targets);
  EXPECT_TRUE(List(node_.ch, kAuditor, {"", "", "x", ""}).recs.empty());  // whole ids only
  // ("Touch" alone would be a valid service: one without a package.)
  for (const char* bad : {"/Touch", "/test.Memory", "/test.Memory/", "test..Memory", "/a/b/c",
                          "test.Memory/Touch", "/test.Memory/To.uch", "x y", "' OR 1=1 --"}) {
    auto r = List(node_.ch, kAuditor, {"", bad, "", ""});
    EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, r.code) << bad;
    EXPECT_NE(std::string::npos, r.message.find("filter.method")) << r.message;
  }
  // Injection strings in values are just values.
  EXPECT_TRUE(
      List(node_.ch, kAuditor, {"' OR ''='", "", "'); DROP TABLE audit_log; --", ""}).recs.empty());
  EXPECT_EQ(1, atoi(Sql("SELECT count(*) FROM pg_tables WHERE tablename = 'audit_log'").c_str()));
}

TEST_F(AuditTest, ListFiltersByHalfOpenTimeRange) {
  // Ten rows one second apart: [t3, t7) holds t3..t6.
  Sql("INSERT INTO audit_log (time, tenant, principal, method, status_code, duration_us,"
      " request_id) SELECT timestamptz '2024-03-01 00:00:00+00' + g * interval '1 second', 't1',"
      " 'carol', '/test.Memory/Touch', 0, 1, 'tr-' || g FROM generate_series(0, 9) g");
  int64_t t0 = 1709251200LL * 1000000;  // 2024-03-01T00:00:00Z
  auto r = List(node_.ch, kAuditor, {"", "", "", "", 0, t0 + 3000000, t0 + 7000000});
  ASSERT_EQ(grpc::StatusCode::OK, r.code) << r.message;
  ASSERT_EQ(4u, r.recs.size());
  EXPECT_EQ("tr-6", r.recs[0].request_id);  // newest first
  EXPECT_EQ("tr-3", r.recs[3].request_id);
  EXPECT_EQ(t0 + 6000000, r.recs[0].time_us);
  // Open-ended: the List calls themselves are audited, with today's time.
  EXPECT_EQ(3u, List(node_.ch, kAuditor, {"", "/test.Memory/Touch", "", "", 0, t0 + 7000000, -1})
                    .recs.size());
  EXPECT_EQ(1u, List(node_.ch, kAuditor, {"", "", "", "", 0, -1, t0 + 1}).recs.size());
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT,
            List(node_.ch, kAuditor, {"", "", "", "", 0, t0 + 5000000, t0 + 5000000}).code);
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT,
            List(node_.ch, kAuditor, {"", "", "", "", 0, t0 + 7000000, t0 + 3000000}).code);
}

TEST_F(AuditTest, PaginationNeitherRepeatsNorSkipsWhileRowsAreInserted) {
  // 120 rows, three per timestamp so the id tie-break matters.
  Sql("INSERT INTO audit_log (time, tenant, principal, method, status_code, duration_us,"
      " request_id) SELECT timestamptz '2024-01-01 00:00:00+00' + (g / 3) * interval '1 second',"
      " 't1', 'alice', '/test.Memory/Touch', 0, 1, 'page-' || g FROM generate_series(1, 120) g");
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    // Concurrent calls through the observer and rows straight into the
    // table, newer and older than the cursor, inside the paged set's range.
    PGconn* c = PQconnectdb(db_.url().c_str());
    for (int i = 0; !stop; i++) {
      node_.Call("/test.Memory/Touch", "concurrent", kAlice);
      std::string t = "2024-01-01 00:00:" + std::to_string(10 + i % 30) + ".5+00";
      PQclear(PQexec(c, ("INSERT INTO audit_log (time, tenant, principal, method, status_code,"
                         " duration_us, request_id) VALUES ('" +
                         t +
                         "', 't1', 'alice',"
                         " '/test.Memory/Touch', 0, 1, 'late-" +
                         std::to_string(i) + "')")
                            .c_str()));
    }
    PQfinish(c);
  });
  std::map<std::string, int> seen;  // id -> times
  std::set<std::string> originals;
  ListArgs a{"", "/test.Memory/Touch", "", ""};
  a.page_size = 50;
  int pages = 0;
  for (; pages < 100; pages++) {
    auto r = List(node_.ch, kAlice, a);
    EXPECT_EQ(grpc::StatusCode::OK, r.code) << r.message;
    if (r.code != grpc::StatusCode::OK) break;  // (the writer thread must be joined)
    EXPECT_LE(r.recs.size(), 50u);
    for (const auto& rec : r.recs) {
      seen[rec.id]++;
      if (rec.request_id.rfind("page-", 0) == 0) originals.insert(rec.request_id);
    }
    usleep(20000);
    if (r.next.empty()) break;
    a.token = r.next;
  }
  stop = true;
  writer.join();
  EXPECT_GE(pages, 2);
  EXPECT_EQ(120u, originals.size());  // none skipped
  for (const auto& kv : seen) EXPECT_EQ(1, kv.second) << "record " << kv.first << " repeated";
}

TEST_F(AuditTest, PageTokenReusedWithOtherFiltersIsInvalidArgument) {
  for (int i = 0; i < 3; i++) ASSERT_TRUE(node_.Call("/test.Memory/Touch", "x", kAuditor).ok());
  node_.Flush();
  auto first = List(node_.ch, kAuditor, {"", "test.Memory", "", "", 1});
  ASSERT_FALSE(first.next.empty());
  EXPECT_EQ(grpc::StatusCode::OK,
            List(node_.ch, kAuditor, {"", "test.Memory", "", first.next, 1}).code);
  // A different page size is still the same request.
  EXPECT_EQ(grpc::StatusCode::OK,
            List(node_.ch, kAuditor, {"", "test.Memory", "", first.next, 7}).code);
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT,
            List(node_.ch, kAuditor, {"", "test.Other", "", first.next, 1}).code);
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT,
            List(node_.ch, kAuditor, {"", "test.Memory", "x", first.next, 1}).code);
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT,
            List(node_.ch, kAuditor, {"", "test.Memory", "", first.next, 1, 0, -1}).code);
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT,
            List(node_.ch, kAlice, {"", "test.Memory", "", first.next, 1}).code);
  for (const char* junk : {"garbage", "djE6MTox", "!!!!", "djE6eDp5OnF1dXg"}) {
    auto r = List(node_.ch, kAuditor, {"", "test.Memory", "", junk, 1});
    EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, r.code) << junk;
    EXPECT_NE(std::string::npos, r.message.find("page_token")) << r.message;
  }
}

TEST_F(AuditTest, NegativePageSizeIsInvalidArgumentAndLargeOnesAreCapped) {
  auto r = List(node_.ch, kAuditor, {"", "", "", "", -1});
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, r.code);
  EXPECT_NE(std::string::npos, r.message.find("page_size")) << r.message;
  Sql("INSERT INTO audit_log (time, tenant, principal, method, status_code, duration_us)"
      " SELECT now() - g * interval '1 ms', 't1', 'carol', '/test.Memory/Touch', 0, 1"
      " FROM generate_series(1, 1100) g");
  auto big = List(node_.ch, kAuditor, {"", "/test.Memory/Touch", "", "", 5000});
  ASSERT_EQ(grpc::StatusCode::OK, big.code) << big.message;
  EXPECT_EQ(1000u, big.recs.size());
  EXPECT_FALSE(big.next.empty());
  EXPECT_EQ(50u, List(node_.ch, kAuditor, {"", "/test.Memory/Touch", "", ""}).recs.size());
}

// ---- the writer ----

TEST_F(AuditTest, FullQueueDropsAndCountsWhilePostgresIsBlocked) {
  audit_options o = {};
  o.queue_capacity = 4;
  o.batch_max = 2;
  Node* small = NewNode(o);
  // Another session holds the table: the writer's COPY waits on the lock.
  PGconn* locker = PQconnectdb(db_.url().c_str());
  ASSERT_EQ(CONNECTION_OK, PQstatus(locker));
  PQclear(PQexec(locker, "BEGIN; LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE"));
  for (int i = 0; i < 20; i++)
    ASSERT_TRUE(small->Call("/test.Memory/Touch", "o", kAlice, "ovf-" + std::to_string(i)).ok());
  uint64_t dropped = audit_dropped(small->a);
  EXPECT_GT(dropped, 0u);
  EXPECT_LE(dropped, 20u - 4u);  // at least the queue's worth survives
  PQclear(PQexec(locker, "COMMIT"));
  PQfinish(locker);
  small->Flush();
  audit_stats s;
  audit_get_stats(small->a, &s);
  EXPECT_EQ(dropped, s.dropped);
  EXPECT_EQ(20u - dropped, s.written);
  EXPECT_EQ(static_cast<int>(20 - dropped), Count("request_id LIKE 'ovf-%'"));
}

TEST_F(AuditTest, AuditFreeFlushesPendingRecords) {
  Node* n = NewNode(audit_options{});
  PGconn* locker = PQconnectdb(db_.url().c_str());
  PQclear(PQexec(locker, "BEGIN; LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE"));
  for (int i = 0; i < 50; i++)
    ASSERT_TRUE(n->Call("/test.Memory/Touch", "f", kBob, "flush-" + std::to_string(i)).ok());
  // Released while audit_free is already waiting for the queue to drain.
  std::thread release([&] {
    usleep(500000);
    PQclear(PQexec(locker, "COMMIT"));
  });
  n->Stop();
  release.join();
  PQfinish(locker);
  EXPECT_EQ(50, Count("request_id LIKE 'flush-%'"));
}

TEST_F(AuditTest, AuditFreeGivesUpAfterItsFlushTimeout) {
  audit_options o = {};
  o.flush_timeout_ms = 300;
  Node* n = NewNode(o);
  PGconn* locker = PQconnectdb(db_.url().c_str());
  PQclear(PQexec(locker, "BEGIN; LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE"));
  for (int i = 0; i < 5; i++) ASSERT_TRUE(n->Call("/test.Other/Ping", "", kBob).ok());
  auto start = std::chrono::steady_clock::now();
  n->Stop();  // the writer sits in a lock wait: cancelled
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  PQclear(PQexec(locker, "COMMIT"));
  PQfinish(locker);
  EXPECT_LT(ms, 3000);
  EXPECT_EQ(0, Count("principal = 'bob' AND method = '/test.Other/Ping'"));
}

// ---- Audit.Watch ----

TEST_F(AuditTest, WatchReceivesLaterCallsFromEveryReplicaInItsTenantOnly) {
  Node* replica = NewNode(audit_options{});
  Watch w(node_.ch, kAuditor, "", "test.Memory", "");
  ASSERT_TRUE(node_.WaitWatchers(1));
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "other-tenant", kMallory, "w-t2").ok());
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "here", kAlice, "w-local").ok());
  ASSERT_TRUE(replica->Call("/test.Memory/Touch", "there", kBob, "w-replica").ok());
  std::set<std::string> got;
  Rec r;
  for (int i = 0; i < 2 && w.Next(&r, 10000); i++) {
    EXPECT_EQ("t1", r.tenant);
    EXPECT_EQ("/test.Memory/Touch", r.method);
    got.insert(r.request_id);
    if (r.request_id == "w-replica") {
      EXPECT_EQ("bob", r.principal);
      EXPECT_EQ(std::vector<std::string>{"there"}, r.targets);
    }
  }
  EXPECT_EQ((std::set<std::string>{"w-local", "w-replica"}), got);
  EXPECT_FALSE(w.Next(&r, 700)) << "unexpected " << r.request_id << " of " << r.tenant;
}

TEST_F(AuditTest, WatchAtOwnBreadthSeesOwnCallsAndHonoursTheFilter) {
  Watch own(node_.ch, kAlice, "", "", "");
  Watch by_target(node_.ch, kAuditor, "", "/test.Memory/Touch", "wanted");
  ASSERT_TRUE(node_.WaitWatchers(2));
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "wanted", kBob, "f-bob").ok());
  ASSERT_TRUE(node_.Call("/test.Memory/Touch", "other", kAlice, "f-alice").ok());
  ASSERT_TRUE(node_.Call("/test.Other/Ping", "", kAlice, "f-alice-ping").ok());
  Rec r;
  ASSERT_TRUE(own.Next(&r, 10000));
  EXPECT_EQ("f-alice", r.request_id);
  ASSERT_TRUE(own.Next(&r, 10000));
  EXPECT_EQ("f-alice-ping", r.request_id);
  EXPECT_FALSE(own.Next(&r, 500)) << r.request_id;
  ASSERT_TRUE(by_target.Next(&r, 10000));
  EXPECT_EQ("f-bob", r.request_id);
  EXPECT_FALSE(by_target.Next(&r, 500)) << r.request_id;
}

TEST_F(AuditTest, WatchRejectsBadFiltersAndOtherPrincipalsAtOwnBreadth) {
  Watch other(node_.ch, kAlice, "bob", "", "");
  Rec r;
  EXPECT_FALSE(other.Next(&r, 5000));
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED, other.Finish().error_code());
  Watch bad(node_.ch, kAuditor, "", "not a method", "");
  EXPECT_FALSE(bad.Next(&r, 5000));
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, bad.Finish().error_code());
  EXPECT_EQ(0u, node_.Watchers());
}

TEST_F(AuditTest, WatchEndsOnCancelAndIsItselfAudited) {
  {
    Watch w(node_.ch, kAuditor, "", "", "");
    ASSERT_TRUE(node_.WaitWatchers(1));
    w.Cancel();
    EXPECT_EQ(grpc::StatusCode::CANCELLED, w.Finish().error_code());
  }
  EXPECT_TRUE(node_.WaitWatchers(0));
  // The stream's record is queued when the cancel callback finishes it,
  // just after it left the watcher list: wait for the row itself.
  EXPECT_TRUE(WaitCount("method = '/memory.v1.Audit/Watch' AND principal = 'carol'", 1));
}

TEST_F(AuditTest, WatchEndsWithUnauthenticatedWhenTheTokenExpires) {
  Who brief = kAuditor;
  brief.exp_in_s = 1;
  Watch w(node_.ch, brief, "", "", "");
  ASSERT_TRUE(node_.WaitWatchers(1));
  Rec r;
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(w.Next(&r, 6000));
  EXPECT_TRUE(w.ended());
  auto st = w.Finish();
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, st.error_code()) << st.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(0u, node_.Watchers());
}

TEST_F(AuditTest, WatchDeliversEachRowOnceWhenBatchesInterleave) {
  Watch w(node_.ch, kAuditor, "", "", "");
  ASSERT_TRUE(node_.WaitWatchers(1));
  // Ids of one statement can bracket another statement's: "900100 900102"
  // must not deliver 900101 a second time.
  const char* cols = "(id, time, tenant, principal, method, status_code, duration_us, request_id)";
  Sql(std::string("INSERT INTO audit_log ") + cols +
      " VALUES (900101, now(), 't1', 'x', '/test.Memory/Touch', 0, 1, 'mid')");
  Sql(std::string("INSERT INTO audit_log ") + cols +
      " VALUES (900100, now(), 't1', 'x', '/test.Memory/Touch', 0, 1, 'lo'),"
      " (900102, now(), 't1', 'x', '/test.Memory/Touch', 0, 1, 'hi')");
  std::multiset<std::string> got;
  Rec r;
  while (w.Next(&r, 1500)) got.insert(r.request_id);
  EXPECT_EQ((std::multiset<std::string>{"hi", "lo", "mid"}), got);
}

TEST_F(AuditTest, SlowWatcherDoesNotHoldUpOthers) {
  Watch stalled(node_.ch, kAuditor, "", "/test.Memory/Touch", "");  // never reads
  Watch reader(node_.ch, kAuditor, "", "/test.Memory/Touch", "");
  ASSERT_TRUE(node_.WaitWatchers(2));
  const int kCalls = 1500;
  std::string pad(200, 'p');  // ~300 bytes a record: well past a flow-control window
  std::thread caller([&] {
    for (int i = 0; i < kCalls; i++) node_.Call("/test.Memory/Touch", pad, kBob);
  });
  int n = 0;
  Rec r;
  while (n < kCalls && reader.Next(&r, 10000)) n++;
  caller.join();
  EXPECT_EQ(kCalls, n);
}

int CheckLiveFlag(void* ctx, const principal* p, char* err, size_t errlen) {
  auto* revoked = static_cast<std::atomic<bool>*>(ctx);
  if (*revoked && strcmp(principal_sub(p), "carol") == 0) {
    snprintf(err, errlen, "token jti-carol was revoked");
    return -1;
  }
  return 0;
}

TEST_F(AuditTest, WatchEndsWithUnauthenticatedWhenCheckLiveFails) {
  std::atomic<bool> revoked{false};
  audit_service_options o = {};
  o.check_live = CheckLiveFlag;
  o.check_live_ctx = &revoked;
  Node* n = NewNode(audit_options{}, o);
  Watch carol(n->ch, kAuditor, "", "", "");
  Watch alice(n->ch, kAlice, "", "", "");
  ASSERT_TRUE(n->WaitWatchers(2));
  usleep(1200000);  // a check passes while the flag is down
  EXPECT_EQ(2u, n->Watchers());
  revoked = true;
  Rec r;
  EXPECT_FALSE(carol.Next(&r, 5000));
  EXPECT_TRUE(carol.ended());
  auto st = carol.Finish();
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("revoked")) << st.error_message();
  EXPECT_EQ(1u, n->Watchers());  // alice's stream lives on
}

TEST_F(AuditTest, ServerShutdownEndsWatchStreams) {
  Node* n = NewNode(audit_options{});
  Watch w(n->ch, kAuditor, "", "", "");
  ASSERT_TRUE(n->WaitWatchers(1));
  std::thread stop([&] { rpc_server_shutdown(n->srv, 200); });
  Rec r;
  EXPECT_FALSE(w.Next(&r, 5000));
  EXPECT_TRUE(w.ended());
  w.Finish();
  stop.join();
  EXPECT_EQ(0u, n->Watchers());
}

// ---- PostgreSQL going away ----

class AuditOutageTest : public AuditTest {
 protected:
  // Closes the test database to new connections and kills the open ones.
  void CutOff(bool cut) {
    PGconn* admin = PQconnectdb(getenv("MEMORYD_TEST_PG_URL"));
    ASSERT_EQ(CONNECTION_OK, PQstatus(admin));
    std::string sql =
        "ALTER DATABASE " + db_.name() + " ALLOW_CONNECTIONS " + (cut ? "false" : "true");
    PGresult* r = PQexec(admin, sql.c_str());
    ASSERT_EQ(PGRES_COMMAND_OK, PQresultStatus(r)) << PQresultErrorMessage(r);
    PQclear(r);
    if (cut) {
      PQclear(PQexec(admin, ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                             "datname = '" +
                             db_.name() + "'")
                                .c_str()));
    }
    PQfinish(admin);
  }
};

TEST_F(AuditOutageTest, ListIsUnavailableAndTheWriterAndWatchCatchUpAfterwards) {
  Watch w(node_.ch, kAuditor, "", "/test.Memory/Touch", "");
  ASSERT_TRUE(node_.WaitWatchers(1));
  CutOff(true);
  PQfinish(conn_);
  conn_ = nullptr;
  // Calls still succeed; their records wait in the queue.
  for (int i = 0; i < 5; i++)
    ASSERT_TRUE(
        node_.Call("/test.Memory/Touch", "during", kAlice, "out-" + std::to_string(i)).ok());
  auto r = List(node_.ch, kAuditor, {});
  EXPECT_EQ(grpc::StatusCode::UNAVAILABLE, r.code) << r.message;
  EXPECT_NE(std::string::npos, r.message.find("PostgreSQL")) << r.message;
  EXPECT_NE(0, audit_flush(node_.a, rpc_now_ms() + 300));
  CutOff(false);
  conn_ = PQconnectdb(db_.url().c_str());
  node_.Flush();
  EXPECT_EQ(5, Count("request_id LIKE 'out-%'"));
  EXPECT_EQ(0u, audit_dropped(node_.a));
  // The stream survived and got the rows (announced or caught up).
  std::set<std::string> got;
  Rec rec;
  while (got.size() < 5 && w.Next(&rec, 15000)) got.insert(rec.request_id);
  EXPECT_EQ(5u, got.size());
}

// ---- throughput (a figure, not a test: MEMORYD_AUDIT_BENCH=1) ----

TEST_F(AuditTest, WriterThroughput) {
  if (!getenv("MEMORYD_AUDIT_BENCH")) GTEST_SKIP() << "set MEMORYD_AUDIT_BENCH=1 to measure";
  const int kRows =
      atoi(getenv("MEMORYD_AUDIT_BENCH")) > 1 ? atoi(getenv("MEMORYD_AUDIT_BENCH")) : 50000;
  // Records pile up behind a table lock, then the writer drains them alone.
  PGconn* locker = PQconnectdb(db_.url().c_str());
  PQclear(PQexec(locker, "BEGIN; LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE"));
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; t++)
    clients.emplace_back([&, t] {
      for (int i = t; i < kRows; i += 4)
        node_.Call("/test.Memory/Touch", "ns:a:b/key-" + std::to_string(i) + ",ent-1", kAlice,
                   "bench-" + std::to_string(i));
    });
  for (auto& c : clients) c.join();
  audit_stats before;
  audit_get_stats(node_.a, &before);
  auto start = std::chrono::steady_clock::now();
  PQclear(PQexec(locker, "COMMIT"));
  node_.Flush();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  audit_stats after;
  audit_get_stats(node_.a, &after);
  uint64_t rows = after.written - before.written;
  printf("audit writer: %llu rows in %.3f s = %.0f rows/s (%llu COPY batches)\n",
         static_cast<unsigned long long>(rows), s, rows / s,
         static_cast<unsigned long long>(after.batches - before.batches));
  PQfinish(locker);
  EXPECT_EQ(static_cast<uint64_t>(kRows), after.written);
}

}  // namespace
