// Operating memoryd behind meshes and balancers, through the real binary:
// W3C trace context reaches the call's audit row and log lines (a trace
// starts when the client sent none); mutual TLS requires a client
// certificate from the configured CA, records its identity in the audit
// row and, under --tls-client-identity=sub, binds tokens to it; connections
// end at --max-connection-age while calls go on; a client that pings too
// often is sent GOAWAY.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.pb.h"
#include "memory/v1/audit.pb.h"
#include "memory/v1/entries.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using grpc::StatusCode;
using memory::v1::AuditListRequest;
using memory::v1::AuditListResponse;
using memory::v1::AuditRecord;
using testing_client::Result;
using testing_client::Unary;

const char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
const char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

std::string Tmp() {
  const char* t = getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

std::string ReadAll(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  std::string s;
  if (!f) return s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  fclose(f);
  return s;
}

bool IsTraceId(const std::string& s) {
  if (s.size() != 32 || s == std::string(32, '0')) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string WriteReq(const std::string& ns, const std::string& key) {
  memory::v1::EntriesWriteRequest w;
  w.set_namespace_(ns);
  w.set_key(key);
  w.set_value("v");
  return w.SerializeAsString();
}

std::string ReadReq(const std::string& ns, const std::string& key) {
  memory::v1::EntriesReadRequest r;
  r.set_namespace_(ns);
  r.set_key(key);
  return r.SerializeAsString();
}

// The audit records naming target, polled until want of them are there
// (reads are written by the audit queue's writer, a few ms later).
std::vector<AuditRecord> AuditOf(const std::shared_ptr<grpc::Channel>& ch, const std::string& token,
                                 const std::string& target, size_t want) {
  std::vector<AuditRecord> out;
  for (int i = 0; i < 100; i++) {
    AuditListRequest req;
    req.mutable_filter()->set_target_id(target);
    Result r = Unary(ch, "/memory.v1.Audit/List", req.SerializeAsString(), 5000,
                     {{"authorization", TestKeys::Bearer(token)}});
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    AuditListResponse resp;
    resp.ParseFromString(r.body);
    out.assign(resp.records().begin(), resp.records().end());
    if (out.size() >= want || !r.status.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return out;
}

const AuditRecord* Find(const std::vector<AuditRecord>& recs, const std::string& method) {
  for (const auto& r : recs)
    if (r.method() == method) return &r;
  return nullptr;
}

// Every value of "peer" in the log's call lines for method.
std::set<std::string> Peers(const std::string& log, const std::string& method) {
  std::set<std::string> peers;
  for (size_t at = 0; (at = log.find("\"method\":\"" + method + "\"", at)) != std::string::npos;
       at++) {
    size_t p = log.find("\"peer\":\"", at);
    size_t eol = log.find('\n', at);
    if (p == std::string::npos || p > eol) continue;
    p += 8;
    peers.insert(log.substr(p, log.find('"', p) - p));
  }
  return peers;
}

class MeshTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(db_.ok()) << db_.error(); }
  std::unique_ptr<MemorydProcess> Launch(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=1"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(p->Start()) << p->Log();
    return p;
  }
  PgTestDb db_;
};

// ---- trace context ----

TEST_F(MeshTest, TheClientsTraceReachesTheAuditRowAndTheLogAndOneStartsWithout) {
  auto m = Launch({"--log-level=debug"});
  auto ch = testing_client::Connect(m->port());
  std::string token = m->keys()->Mint(TestClaims());
  auto auth = [&](const std::string& tp) {
    std::map<std::string, std::string> md = {{"authorization", TestKeys::Bearer(token)}};
    if (!tp.empty()) md["traceparent"] = tp;
    return md;
  };
  ASSERT_TRUE(
      Unary(ch, "/memory.v1.Entries/Write", WriteReq("a:b:c", "traced"), 5000, auth(kTraceparent))
          .status.ok());
  ASSERT_TRUE(
      Unary(ch, "/memory.v1.Entries/Read", ReadReq("a:b:c", "traced"), 5000, auth("")).status.ok());
  // Upper case is not W3C's: the call starts its own trace.
  std::string upper = kTraceparent;
  for (char& c : upper) c = static_cast<char>(toupper(c));
  ASSERT_TRUE(Unary(ch, "/memory.v1.Entries/Read", ReadReq("a:b:c", "traced"), 5000, auth(upper))
                  .status.ok());

  auto recs = AuditOf(ch, token, "a:b:c/traced", 3);
  ASSERT_EQ(3u, recs.size());
  const AuditRecord* write = Find(recs, "/memory.v1.Entries/Write");
  ASSERT_NE(nullptr, write);
  EXPECT_EQ(kTraceId, write->trace_id());
  std::set<std::string> read_traces;
  for (const auto& r : recs) {
    if (r.method() != "/memory.v1.Entries/Read") continue;
    EXPECT_TRUE(IsTraceId(r.trace_id())) << r.trace_id();
    EXPECT_NE(kTraceId, r.trace_id());
    EXPECT_EQ("", r.client_identity());  // plaintext: no certificate
    read_traces.insert(r.trace_id());
  }
  EXPECT_EQ(2u, read_traces.size());  // each call its own trace

  // The call's log lines carry the same ids.
  std::vector<std::string> want = {std::string("\"trace_id\":\"") + kTraceId + "\""};
  for (const auto& t : read_traces) want.push_back("\"trace_id\":\"" + t + "\"");
  for (const auto& w : want)
    EXPECT_NE(std::string::npos, m->LogWith(w).find(w)) << w << "\n" << m->Log();
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

// ---- mutual TLS ----

// A CA, a server certificate for localhost, and client certificates named
// by a DNS subject alternative name, made by openssl in dir. rogue.* is
// signed by a CA the server does not trust.
bool MakePki(const std::string& dir) {
  std::string d = dir + "/";
  auto run = [](const std::string& cmd) { return system((cmd + " 2>/dev/null").c_str()) == 0; };
  auto ca = [&](const std::string& name) {
    return run(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        "-subj /CN=" +
        name + " -keyout " + d + name + ".key -out " + d + name + ".pem");
  };
  auto leaf = [&](const std::string& name, const std::string& cn, const std::string& san,
                  const std::string& by) {
    return run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" +
               cn + " -keyout " + d + name + ".key -out " + d + name + ".csr") &&
           run("printf 'subjectAltName=" + san + "\\n' > " + d + name + ".ext") &&
           run("openssl x509 -req -in " + d + name + ".csr -CA " + d + by + ".pem -CAkey " + d +
               by + ".key -CAcreateserial -days 1 -extfile " + d + name + ".ext -out " + d + name +
               ".pem");
  };
  return run("mkdir -p " + dir) && ca("ca") && ca("otherca") &&
         leaf("server", "localhost", "DNS:localhost", "ca") &&
         leaf("alice", "alice", "DNS:alice", "ca") &&
         leaf("rogue", "alice", "DNS:alice", "otherca");
}

std::shared_ptr<grpc::Channel> TlsChannel(int port, const std::string& dir,
                                          const std::string& client) {
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = ReadAll(dir + "/ca.pem");
  if (!client.empty()) {
    opts.pem_private_key = ReadAll(dir + "/" + client + ".key");
    opts.pem_cert_chain = ReadAll(dir + "/" + client + ".pem");
  }
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::SslCredentials(opts),
                                   args);
}

TEST_F(MeshTest, MutualTlsRequiresACertificateFromTheCaAndAuditsItsIdentity) {
  std::string dir = Tmp() + "/mtls";
  ASSERT_TRUE(MakePki(dir)) << "openssl could not make the test certificates";
  auto m = Launch({"--tls-cert=" + dir + "/server.pem", "--tls-key=" + dir + "/server.key",
                   "--tls-client-ca=" + dir + "/ca.pem"});
  EXPECT_NE(std::string::npos, m->Log().find("\"tls\":\"mutual\"")) << m->Log();
  std::string token = m->keys()->Mint(TestClaims());
  std::map<std::string, std::string> auth = {{"authorization", TestKeys::Bearer(token)}};

  // No certificate, or one from another CA: the handshake fails.
  for (const char* client : {"", "rogue"}) {
    Result r = Unary(TlsChannel(m->port(), dir, client), "/memory.v1.Entries/Write",
                     WriteReq("a:b:c", "tls"), 3000, auth);
    EXPECT_EQ(StatusCode::UNAVAILABLE, r.status.error_code()) << client;
  }
  auto ch = TlsChannel(m->port(), dir, "alice");
  Result w = Unary(ch, "/memory.v1.Entries/Write", WriteReq("a:b:c", "tls"), 5000, auth);
  ASSERT_TRUE(w.status.ok()) << w.status.error_message();
  auto recs = AuditOf(ch, token, "a:b:c/tls", 1);
  ASSERT_EQ(1u, recs.size());
  EXPECT_EQ("alice", recs[0].client_identity());
  EXPECT_EQ("alice", recs[0].principal());
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

TEST_F(MeshTest, UnderClientIdentitySubATokenIsAcceptedOnlyFromItsOwnClient) {
  std::string dir = Tmp() + "/mtls-sub";
  ASSERT_TRUE(MakePki(dir)) << "openssl could not make the test certificates";
  auto m = Launch({"--tls-cert=" + dir + "/server.pem", "--tls-key=" + dir + "/server.key",
                   "--tls-client-ca=" + dir + "/ca.pem", "--tls-client-identity=sub"});
  auto ch = TlsChannel(m->port(), dir, "alice");
  TestClaims bob;
  bob.sub = "bob";
  Result r = Unary(ch, "/memory.v1.Entries/Write", WriteReq("a:b:c", "bound"), 5000,
                   {{"authorization", TestKeys::Bearer(m->keys()->Mint(bob))}});
  EXPECT_EQ(StatusCode::UNAUTHENTICATED, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("\"bob\""))
      << r.status.error_message();
  EXPECT_NE(std::string::npos, r.status.error_message().find("client certificate"))
      << r.status.error_message();
  r = Unary(ch, "/memory.v1.Entries/Write", WriteReq("a:b:c", "bound"), 5000,
            {{"authorization", TestKeys::Bearer(m->keys()->Mint(TestClaims()))}});
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

TEST_F(MeshTest, MutualTlsFlagsThatCannotWorkStopStartUp) {
  std::string dir = Tmp() + "/mtls-flags";
  ASSERT_TRUE(MakePki(dir)) << "openssl could not make the test certificates";
  const std::string cert = "--tls-cert=" + dir + "/server.pem",
                    key = "--tls-key=" + dir + "/server.key";
  struct Case {
    std::vector<std::string> flags;
    std::string said;  // what the start-up error names
  };
  for (const Case& c : std::vector<Case>{
           {{cert, key, "--tls-client-ca=/nonexistent/ca.pem"}, "/nonexistent/ca.pem"},
           {{"--tls-client-ca=" + dir + "/ca.pem"}, "needs --tls-cert"},
           {{"--tls-client-identity=cn"}, "--tls-client-identity must be off or sub"},
           {{cert, key, "--tls-client-identity=sub"}, "needs --tls-client-ca"},
       }) {
    std::vector<std::string> args = {"--pg-url=" + db_.url()};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    MemorydProcess p(args);
    EXPECT_FALSE(p.Start()) << c.said;
    EXPECT_NE(std::string::npos, p.Log().find(c.said)) << p.Log();
  }
}

// ---- connections ----

TEST_F(MeshTest, ConnectionsEndAtTheirMaximumAgeAndCallsGoOnOverNewOnes) {
  auto m = Launch({"--log-level=debug", "--max-connection-age=1", "--max-connection-age-grace=1"});
  auto ch = testing_client::Connect(m->port());
  const char kCheck[] = "/grpc.health.v1.Health/Check";
  std::string req = grpc::health::v1::HealthCheckRequest().SerializeAsString();
  // Calls every 100 ms for 3.5 s: none fails, and they come over more than
  // one connection (gRPC's age has ±10% jitter and a grace of 1 s).
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3500);
  int calls = 0;
  while (std::chrono::steady_clock::now() < until) {
    Result r = Unary(ch, kCheck, req, 5000);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    calls++;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(calls, 10);
  std::set<std::string> peers;
  for (int i = 0; i < 100 && (peers = Peers(m->Log(), kCheck)).size() < 2; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(peers.size(), 2u) << m->Log();
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

TEST_F(MeshTest, AClientPingingTooOftenIsSentGoaway) {
  auto m = Launch({"--log-level=debug", "--keepalive-min-ping-interval=60"});
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 100);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  auto ch = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(m->port()),
                                      grpc::InsecureChannelCredentials(), args);
  const char kCheck[] = "/grpc.health.v1.Health/Check";
  std::string req = grpc::health::v1::HealthCheckRequest().SerializeAsString();
  ASSERT_TRUE(Unary(ch, kCheck, req, 5000).status.ok());
  ASSERT_EQ(GRPC_CHANNEL_READY, ch->GetState(false));
  // Idle, pinging every 100 ms: the server's limit is one a minute, so
  // after two strikes it sends GOAWAY and the channel leaves READY.
  bool left_ready = false;
  auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
  while (!left_ready && std::chrono::system_clock::now() < deadline) {
    ch->WaitForStateChange(GRPC_CHANNEL_READY, deadline);
    left_ready = ch->GetState(false) != GRPC_CHANNEL_READY;
  }
  EXPECT_TRUE(left_ready);
  // The client reconnects for its next call.
  EXPECT_TRUE(Unary(ch, kCheck, req, 5000).status.ok());
  // The call's log line follows its answer (and the log is read as it
  // comes): wait for it.
  std::set<std::string> peers;
  for (int i = 0; i < 100 && (peers = Peers(m->Log(), kCheck)).size() < 2; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(2u, peers.size()) << m->Log();
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

}  // namespace
