// The real memoryd binary against real PostgreSQL and Redis: health,
// unknown and unimplemented methods, bad input, start-up errors and
// graceful shutdown.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "grpc/health/v1/health.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/ports.h"

namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using testing_client::Unary;

const char kCheck[] = "/grpc.health.v1.Health/Check";

std::string CheckReq(const std::string& service) {
  HealthCheckRequest r;
  r.set_service(service);
  return r.SerializeAsString();
}

int HealthStatus(const std::shared_ptr<grpc::Channel>& ch, const std::string& service) {
  auto r = Unary(ch, kCheck, CheckReq(service));
  if (!r.status.ok()) return -r.status.error_code();
  HealthCheckResponse resp;
  return resp.ParseFromString(r.body) ? resp.status() : -100;
}

class MemorydTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(db_.ok()) << db_.error(); }
  std::unique_ptr<MemorydProcess> Launch(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=2",
                                     "--health-interval-ms=100"};
    if (!TestRedisUrl().empty()) args.push_back("--redis-url=" + TestRedisUrl());
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(p->Start()) << p->Log();
    return p;
  }
  PgTestDb db_;
};

TEST_F(MemorydTest, HealthCheckIsServingOverallAndPerService) {
  auto m = Launch();
  auto ch = testing_client::Connect(m->port());
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, ""));
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, "memory.v1.GlobalMemory"));
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, "memory.v1.Cache"));
  EXPECT_EQ(-grpc::StatusCode::NOT_FOUND, HealthStatus(ch, "no.such.Service"));
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

TEST_F(MemorydTest, ServiceNeedingAnUnreachableBackendIsNotServing) {
  auto m = Launch({"--redis-url=redis://127.0.0.1:" + std::to_string(ClosedPort())});
  auto ch = testing_client::Connect(m->port());
  EXPECT_EQ(HealthCheckResponse::NOT_SERVING, HealthStatus(ch, "memory.v1.Blackboard"));
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, "memory.v1.Cache"));
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, ""));
  EXPECT_NE(std::string::npos, m->Log().find("redis unreachable at start-up")) << m->Log();
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000));
}

// Runs one statement on the server at MEMORYD_TEST_PG_URL.
bool AdminExec(const std::string& sql) {
  PGconn* c = PQconnectdb(getenv("MEMORYD_TEST_PG_URL"));
  bool ok = PQstatus(c) == CONNECTION_OK;
  if (ok) {
    PGresult* r = PQexec(c, sql.c_str());
    ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
  }
  PQfinish(c);
  return ok;
}

// Polls Health.Check(service) until it reports want or timeout_ms passes.
bool WaitForHealth(const std::shared_ptr<grpc::Channel>& ch, const std::string& service, int want,
                   int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (HealthStatus(ch, service) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// With every backend up every service of the API serves (each has its
// tier now; a service without one would stay NOT_SERVING).
TEST_F(MemorydTest, EveryServiceServesWithEveryBackendUp) {
  ASSERT_FALSE(TestRedisUrl().empty()) << "needs the Redis that make test starts";
  auto m = Launch();
  auto ch = testing_client::Connect(m->port());
  // Every backend is up: the services that need PostgreSQL and Redis serve.
  EXPECT_TRUE(WaitForHealth(ch, "memory.v1.Cache.L2", HealthCheckResponse::SERVING, 10000));
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, "memory.v1.Entries"));
  EXPECT_TRUE(WaitForHealth(ch, "memory.v1.Blackboard", HealthCheckResponse::SERVING, 10000));
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, "memory.v1.Router"));
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, "memory.v1.Privacy"));
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, "memory.v1.WorkingMemory"));
  EXPECT_TRUE(WaitForHealth(ch, "memory.v1.Session", HealthCheckResponse::SERVING, 10000));
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

TEST_F(MemorydTest, PostgresLossTurnsHealthNotServingAndRecoveryServingAgain) {
  auto m = Launch();
  auto ch = testing_client::Connect(m->port());
  ASSERT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, ""));
  // Dropping the database kills memoryd's connections and makes reconnects
  // fail, as an outage would; memoryd itself keeps running.
  ASSERT_TRUE(AdminExec("DROP DATABASE " + db_.name() + " WITH (FORCE)"));
  EXPECT_TRUE(WaitForHealth(ch, "", HealthCheckResponse::NOT_SERVING, 5000));
  EXPECT_EQ(HealthCheckResponse::NOT_SERVING, HealthStatus(ch, "memory.v1.GlobalMemory"));
  EXPECT_EQ(HealthCheckResponse::NOT_SERVING, HealthStatus(ch, "memory.v1.WorkingMemory"));
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, "memory.v1.Cache"));
  ASSERT_TRUE(AdminExec("CREATE DATABASE " + db_.name()));
  // Backoff tops out at 1 s between attempts.
  EXPECT_TRUE(WaitForHealth(ch, "", HealthCheckResponse::SERVING, 10000));
  EXPECT_NE(std::string::npos, m->Log().find("postgres is down")) << m->Log();
  EXPECT_NE(std::string::npos, m->Log().find("postgres is back")) << m->Log();
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

TEST_F(MemorydTest, UnknownMethodIsUnimplementedPromptly) {
  auto m = Launch();
  auto ch = testing_client::Connect(m->port());
  auto r = Unary(ch, "/memory.v1.Nope/Nothing", "", 10000);
  EXPECT_EQ(grpc::StatusCode::UNIMPLEMENTED, r.status.error_code());
  EXPECT_EQ("unknown method /memory.v1.Nope/Nothing", r.status.error_message());
  EXPECT_LT(r.elapsed.count(), 1000);
}

// A method of a served service that the API does not have is UNIMPLEMENTED
// at once, naming it; one the API has asks for a token first.
TEST_F(MemorydTest, UnknownMethodOfAnApiServiceIsUnimplementedAndAKnownOneAsksForAToken) {
  auto m = Launch();
  auto ch = testing_client::Connect(m->port());
  auto r = Unary(ch, "/memory.v1.Privacy/Nope", "", 10000);
  EXPECT_EQ(grpc::StatusCode::UNIMPLEMENTED, r.status.error_code());
  EXPECT_EQ("unknown method /memory.v1.Privacy/Nope", r.status.error_message());
  EXPECT_LT(r.elapsed.count(), 1000);
  r = Unary(ch, "/memory.v1.Privacy/Forget", "", 10000);
  EXPECT_EQ(grpc::StatusCode::UNAUTHENTICATED, r.status.error_code()) << r.status.error_message();
}

TEST_F(MemorydTest, GarbageRequestBodyIsInvalidArgument) {
  auto m = Launch();
  auto ch = testing_client::Connect(m->port());
  auto r = Unary(ch, kCheck, std::string("\x0a\xff\xff\xff\xff\x0f", 6));
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("not a valid"));
  // The server is unharmed.
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(ch, ""));
}

// A call whose client goes away, or whose deadline passes, before its
// request message arrives is logged as what it is (CANCELLED,
// DEADLINE_EXCEEDED), not as a request without a message; a client that
// half-closes without sending one is the INVALID_ARGUMENT case.
TEST_F(MemorydTest, CallsEndedBeforeTheirRequestAreLoggedAsCancelledOrDeadline) {
  auto m = Launch();
  auto ch = testing_client::Connect(m->port());
  auto line_for = [&](const std::string& status) {
    for (int i = 0; i < 200; i++) {
      std::string log = m->Log();
      size_t at = log.find("\"status\":\"" + status + "\"");
      if (at != std::string::npos) {
        size_t begin = log.rfind('\n', at);
        size_t end = log.find('\n', at);
        return log.substr(begin == std::string::npos ? 0 : begin + 1,
                          end == std::string::npos ? std::string::npos : end - begin - 1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::string();
  };
  {
    testing_client::Stream s(ch, kCheck, 30000);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // headers out, no message
    s.Cancel();
    EXPECT_EQ(grpc::StatusCode::CANCELLED, s.Finish().error_code());
  }
  std::string cancelled = line_for("CANCELLED");
  EXPECT_NE(std::string::npos, cancelled.find("cancelled the call before its request arrived"))
      << m->Log();
  {
    testing_client::Stream s(ch, kCheck, 300);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    EXPECT_EQ(grpc::StatusCode::DEADLINE_EXCEEDED, s.Finish().error_code());
  }
  std::string late = line_for("DEADLINE_EXCEEDED");
  EXPECT_NE(std::string::npos, late.find("deadline passed before the request arrived")) << m->Log();
  {
    testing_client::Stream s(ch, kCheck, 5000);
    ASSERT_TRUE(s.WritesDone());
    EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, s.Finish().error_code());
  }
  EXPECT_NE(std::string::npos, line_for("INVALID_ARGUMENT").find("request message is missing"));
}

TEST_F(MemorydTest, OversizeMessageIsRejected) {
  auto m = Launch({"--max-message-bytes=4096"});
  auto ch = testing_client::Connect(m->port());
  auto r = Unary(ch, kCheck, CheckReq(std::string(8192, 'x')));
  EXPECT_EQ(grpc::StatusCode::RESOURCE_EXHAUSTED, r.status.error_code());
}

TEST_F(MemorydTest, SigtermDrainsWatchStreamsAndExitsZero) {
  auto m = Launch();
  auto ch = testing_client::Connect(m->port());
  testing_client::Stream watch(ch, "/grpc.health.v1.Health/Watch", 30000);
  ASSERT_TRUE(watch.Write(CheckReq("")));
  ASSERT_TRUE(watch.WritesDone());
  std::string msg;
  ASSERT_TRUE(watch.Read(&msg));
  HealthCheckResponse first;
  ASSERT_TRUE(first.ParseFromString(msg));
  EXPECT_EQ(HealthCheckResponse::SERVING, first.status());

  auto start = std::chrono::steady_clock::now();
  kill(m->pid(), SIGTERM);
  // Watchers hear NOT_SERVING as soon as shutdown starts...
  ASSERT_TRUE(watch.Read(&msg, 5000));
  HealthCheckResponse second;
  ASSERT_TRUE(second.ParseFromString(msg));
  EXPECT_EQ(HealthCheckResponse::NOT_SERVING, second.status());
  // ...and the process exits 0 once the grace period (2 s) ends the stream.
  EXPECT_EQ(0, m->Wait(15000)) << m->Log();
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_FALSE(watch.Read(&msg, 2000));
  EXPECT_NE(std::string::npos, m->Log().find("\"msg\":\"memoryd stopped\""));
}

// Writes a self-signed certificate for "localhost" into dir with the
// openssl command line tool; returns false if it could not.
bool MakeCert(const std::string& dir) {
  std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost "
      "-keyout " +
      dir + "/key.pem -out " + dir + "/cert.pem 2>/dev/null";
  return system(cmd.c_str()) == 0;
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

TEST_F(MemorydTest, TlsServesTlsClientsOnly) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/tls";
  ASSERT_EQ(0, system(("mkdir -p " + dir).c_str()));
  ASSERT_TRUE(MakeCert(dir)) << "openssl could not make a test certificate";
  auto m = Launch({"--tls-cert=" + dir + "/cert.pem", "--tls-key=" + dir + "/key.pem"});
  EXPECT_NE(std::string::npos, m->Log().find("\"tls\":\"on\""));

  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = ReadAll(dir + "/cert.pem");
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto tls = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(m->port()),
                                       grpc::SslCredentials(opts), args);
  EXPECT_EQ(HealthCheckResponse::SERVING, HealthStatus(tls, ""));

  auto plain = testing_client::Connect(m->port());
  auto r = Unary(plain, kCheck, CheckReq(""), 2000);
  EXPECT_EQ(grpc::StatusCode::UNAVAILABLE, r.status.error_code());
  EXPECT_EQ(0, m->Stop(SIGTERM, 10000)) << m->Log();
}

TEST_F(MemorydTest, MissingTlsFileIsAClearStartupError) {
  MemorydProcess m({"--pg-url=" + db_.url(), "--tls-cert=/nonexistent/cert.pem",
                    "--tls-key=/nonexistent/key.pem"});
  EXPECT_FALSE(m.Start(10000));
  EXPECT_EQ(1, m.Wait(10000));
  EXPECT_NE(std::string::npos, m.Log().find("cannot read /nonexistent/cert.pem")) << m.Log();
}

TEST_F(MemorydTest, SigintAlsoShutsDownCleanly) {
  auto m = Launch();
  EXPECT_EQ(0, m->Stop(SIGINT, 10000)) << m->Log();
}

TEST_F(MemorydTest, PortInUseIsAClearStartupError) {
  auto first = Launch();
  MemorydProcess second({"--pg-url=" + db_.url()});
  // Start() uses port 0; ask for the first one's port explicitly instead.
  MemorydProcess clash(
      {"--pg-url=" + db_.url(), "--listen=127.0.0.1:" + std::to_string(first->port())});
  EXPECT_FALSE(clash.Start(10000));
  EXPECT_NE(0, clash.Wait(10000));
  EXPECT_NE(std::string::npos,
            clash.Log().find("cannot listen on 127.0.0.1:" + std::to_string(first->port())))
      << clash.Log();
}

TEST_F(MemorydTest, UnreachablePostgresIsAClearStartupError) {
  MemorydProcess m(
      {"--pg-url=postgresql://memoryd@127.0.0.1:" + std::to_string(ClosedPort()) + "/memoryd",
       "--pg-connect-timeout=2"});
  EXPECT_FALSE(m.Start(10000));
  EXPECT_EQ(1, m.Wait(10000));
  EXPECT_NE(std::string::npos, m.Log().find("PostgreSQL unavailable")) << m.Log();
}

TEST_F(MemorydTest, BadFlagValueExitsWithUsageError) {
  MemorydProcess m({"--pg-url=" + db_.url(), "--workers=lots"});
  EXPECT_FALSE(m.Start(10000));
  EXPECT_EQ(2, m.Wait(10000));
  EXPECT_NE(std::string::npos, m.Log().find("--workers (MEMORYD_WORKERS)")) << m.Log();
}

// The number after "key": in the "schema ready" log line, or -1.
int SchemaReadyField(const std::string& log, const std::string& key) {
  size_t at = log.find("\"msg\":\"schema ready\"");
  if (at == std::string::npos) return -1;
  size_t k = log.find("\"" + key + "\":", at);
  return k == std::string::npos ? -1 : atoi(log.c_str() + k + key.size() + 3);
}

TEST_F(MemorydTest, StartupAppliesMigrationsAndSecondStartIsIdempotent) {
  {
    auto m = Launch();
    // A fresh database gets every migration, up to the latest version.
    EXPECT_GT(SchemaReadyField(m->Log(), "applied"), 0) << m->Log();
    EXPECT_EQ(SchemaReadyField(m->Log(), "version"), SchemaReadyField(m->Log(), "applied"))
        << m->Log();
    EXPECT_EQ(0, m->Stop(SIGTERM, 10000));
  }
  auto again = Launch();
  EXPECT_NE(std::string::npos, again->Log().find("\"msg\":\"schema ready\",\"applied\":0"))
      << again->Log();
  EXPECT_EQ(0, again->Stop(SIGTERM, 10000));
}

}  // namespace
