// The Prometheus listener of the real binary (--metrics-listen): calls are
// counted by method and status code with their latency, paths nobody
// registered share the label "other", the gauges are there, the whole
// exposition passes `promtool check metrics` (Debian's prometheus), and
// without the flag nothing listens.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "grpc/health/v1/health.pb.h"
#include "memory/v1/cache.pb.h"
#include "memory/v1/entries.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using grpc::StatusCode;

// Scrapes until series reaches at least min (a background thread's figure:
// the audit writer, the retention sweeper); the last exposition.
std::string ScrapeUntil(int port, const std::string& series, double min) {
  std::string text;
  for (int i = 0; i < 200; i++) {
    text = ScrapeMetrics(port);
    if (MetricSample(text, series) >= min) break;
    usleep(50000);
  }
  return text;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
  }
  PgTestDb db_;
};

TEST_F(MetricsTest, CallsAreCountedAndTheExpositionPassesPromtool) {
  MemorydProcess m({"--pg-url=" + db_.url(), "--redis-url=" + TestRedisUrl(),
                    "--metrics-listen=127.0.0.1:0", "--retention-sweep-ms=300"});
  ASSERT_TRUE(m.Start()) << m.Log();
  int port = MetricsPortFromLog(m.Log());
  ASSERT_GT(port, 0) << m.Log();
  auto ch = testing_client::Connect(m.port());
  for (int i = 0; i < 3; i++)
    ASSERT_TRUE(testing_client::Unary(ch, "/grpc.health.v1.Health/Check",
                                      grpc::health::v1::HealthCheckRequest().SerializeAsString())
                    .status.ok());
  memory::v1::EntriesReadRequest read;
  read.set_namespace_("a:b:c");
  read.set_key("k");
  EXPECT_EQ(StatusCode::UNAUTHENTICATED,
            testing_client::Unary(ch, "/memory.v1.Entries/Read", read.SerializeAsString())
                .status.error_code());
  // A Cache.Set, then two Gets answered from L1; their audit rows.
  TestClaims claims;
  claims.scope = "cache:read cache:write";
  std::map<std::string, std::string> auth = {
      {"authorization", TestKeys::Bearer(m.keys()->Mint(claims))}};
  memory::v1::CacheSetRequest set;
  set.set_key("k");
  set.set_value("v");
  set.mutable_ttl()->set_seconds(600);
  auto setr =
      testing_client::Unary(ch, "/memory.v1.Cache/Set", set.SerializeAsString(), 5000, auth);
  ASSERT_TRUE(setr.status.ok()) << setr.status.error_message();
  memory::v1::CacheGetRequest get;
  get.set_key("k");
  for (int i = 0; i < 2; i++)
    ASSERT_TRUE(
        testing_client::Unary(ch, "/memory.v1.Cache/Get", get.SerializeAsString(), 5000, auth)
            .status.ok());
  // A write carrying an e-mail address is refused (the default PII policy).
  memory::v1::CacheSetRequest pii = set;
  pii.set_key("pii");
  pii.set_value("write to someone@example.com");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT,
            testing_client::Unary(ch, "/memory.v1.Cache/Set", pii.SerializeAsString(), 5000, auth)
                .status.error_code());
  // A token without cache:write is refused for its scope.
  TestClaims reader;
  reader.scope = "cache:read";
  std::map<std::string, std::string> read_auth = {
      {"authorization", TestKeys::Bearer(m.keys()->Mint(reader))}};
  EXPECT_EQ(
      StatusCode::PERMISSION_DENIED,
      testing_client::Unary(ch, "/memory.v1.Cache/Set", set.SerializeAsString(), 5000, read_auth)
          .status.error_code());
  for (const char* path : {"/no.Such/Method", "/made.up/Path"})
    EXPECT_EQ(StatusCode::UNIMPLEMENTED, testing_client::Unary(ch, path, "").status.error_code());

  std::string response = HttpExchange(port, "GET /metrics HTTP/1.0\r\n\r\n");
  ASSERT_EQ(0u, response.rfind("HTTP/1.1 200", 0)) << response;
  EXPECT_NE(std::string::npos, response.find("text/plain; version=0.0.4")) << response;
  std::string text = HttpBody(response);
  // A call is in flight until the server has released it, which may come
  // a moment after its client heard the status.
  for (int i = 0; i < 100 && MetricSample(text, "memoryd_calls_in_flight") != 0; i++) {
    usleep(20000);
    text = ScrapeMetrics(port);
  }
  EXPECT_EQ(3, MetricSample(text,
                            "memoryd_calls_total{method=\"/grpc.health.v1.Health/Check\","
                            "code=\"OK\"}"))
      << text;
  EXPECT_EQ(1, MetricSample(text,
                            "memoryd_calls_total{method=\"/memory.v1.Entries/Read\","
                            "code=\"UNAUTHENTICATED\"}"))
      << text;
  // Paths nobody registered share one label value: a client cannot grow
  // the label set.
  EXPECT_EQ(2, MetricSample(text, "memoryd_calls_total{method=\"other\",code=\"UNIMPLEMENTED\"}"))
      << text;
  EXPECT_EQ(std::string::npos, text.find("no.Such")) << text;
  EXPECT_EQ(3, MetricSample(text,
                            "memoryd_call_duration_seconds_count{method=\"/grpc.health.v1."
                            "Health/Check\"}"))
      << text;
  EXPECT_EQ(3, MetricSample(text,
                            "memoryd_call_duration_seconds_bucket{method=\"/grpc.health.v1."
                            "Health/Check\",le=\"+Inf\"}"))
      << text;
  EXPECT_GT(MetricSample(text,
                         "memoryd_call_duration_seconds_sum{method=\"/grpc.health.v1."
                         "Health/Check\"}"),
            0)
      << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_calls_in_flight")) << text;
  EXPECT_GE(MetricSample(text, "memoryd_cache_lookups_total{level=\"l1\",result=\"hit\"}"), 2)
      << text;
  EXPECT_GE(MetricSample(text, "memoryd_cache_l1_entries"), 1) << text;
  EXPECT_EQ(65536, MetricSample(text, "memoryd_audit_queue_capacity")) << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_audit_rows_total{outcome=\"dropped\"}")) << text;
  // The two Gets' rows go through the audit queue (Cache.Set stores its
  // own row before it answers) and are written within a few batches; the
  // call without a token is counted, not audited.
  for (int i = 0;
       i < 100 && MetricSample(text, "memoryd_audit_rows_total{outcome=\"written\"}") < 2; i++) {
    usleep(50000);
    text = ScrapeMetrics(port);
  }
  EXPECT_GE(MetricSample(text, "memoryd_audit_rows_total{outcome=\"written\"}"), 2) << text;
  EXPECT_GE(MetricSample(text, "memoryd_audit_unaudited_calls_total"), 1) << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_streams_open")) << text;

  // The backends: PostgreSQL's two pools and Redis's connection answered
  // requests, and their gauges say what is configured and open.
  const std::string pg_loop = "backend=\"postgres\",pool=\"loop\"";
  const std::string pg_blocking = "backend=\"postgres\",pool=\"blocking\"";
  const std::string redis = "backend=\"redis\",pool=\"loop\"";
  EXPECT_GE(MetricSample(text, "memoryd_backend_requests_total{" + pg_loop + ",outcome=\"ok\"}"), 1)
      << text;
  EXPECT_GE(
      MetricSample(text, "memoryd_backend_requests_total{" + pg_blocking + ",outcome=\"ok\"}"), 1)
      << text;
  EXPECT_GE(MetricSample(text, "memoryd_backend_requests_total{" + redis + ",outcome=\"ok\"}"), 1)
      << text;
  EXPECT_EQ(0, MetricSample(
                   text, "memoryd_backend_requests_total{" + pg_loop + ",outcome=\"unavailable\"}"))
      << text;
  EXPECT_EQ(8, MetricSample(text, "memoryd_backend_pool_size{" + pg_loop + "}")) << text;
  EXPECT_GE(MetricSample(text, "memoryd_backend_pool_open{" + pg_loop + "}"), 1) << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_backend_pool_waiting{" + pg_loop + "}")) << text;
  EXPECT_EQ(1, MetricSample(text, "memoryd_backend_pool_open{" + redis + "}")) << text;
  EXPECT_GE(MetricSample(text, "memoryd_backend_wait_seconds_count{" + pg_loop + "}"), 1) << text;
  EXPECT_GE(MetricSample(text, "memoryd_backend_request_duration_seconds_count{" + redis + "}"), 1)
      << text;
  // Redis's level of the cache was asked (the Set's key was in L1, so
  // hits there are not certain; the series is).
  EXPECT_GE(MetricSample(text, "memoryd_cache_lookups_total{level=\"l2\",result=\"miss\"}"), 0)
      << text;
  // Tokens: the writer's token verified once, then found in the cache;
  // the refusals by reason.
  EXPECT_GE(MetricSample(text, "memoryd_token_cache_lookups_total{result=\"hit\"}"), 3) << text;
  EXPECT_EQ(2, MetricSample(text, "memoryd_token_cache_lookups_total{result=\"miss\"}")) << text;
  EXPECT_EQ(2, MetricSample(text, "memoryd_token_cache_entries")) << text;
  EXPECT_EQ(1, MetricSample(text, "memoryd_auth_refusals_total{reason=\"missing\"}")) << text;
  EXPECT_EQ(1, MetricSample(text, "memoryd_auth_refusals_total{reason=\"scope\"}")) << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_auth_refusals_total{reason=\"revoked\"}")) << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_revoked_tokens")) << text;
  EXPECT_EQ(1, MetricSample(text, "memoryd_pii_writes_total{action=\"rejected\",kind=\"email\"}"))
      << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_pii_writes_total{action=\"redacted\",kind=\"email\"}"))
      << text;
  // The embedded vector index holds nothing yet.
  EXPECT_EQ(0, MetricSample(text, "memoryd_episodic_index_points")) << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_episodic_index_collections")) << text;
  // The retention sweeper runs every 300 ms here.
  text = ScrapeUntil(port, "memoryd_retention_sweeps_total{outcome=\"complete\"}", 1);
  EXPECT_GE(MetricSample(text, "memoryd_retention_sweeps_total{outcome=\"complete\"}"), 1) << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_retention_erased_total{tier=\"episodic\"}")) << text;
  // The sweep keeps the audit trail: its size and day partitions (8 made
  // ahead at least), nothing dropped from a trail a day old.
  EXPECT_GT(MetricSample(text, "memoryd_audit_trail_bytes"), 0) << text;
  EXPECT_GE(MetricSample(text, "memoryd_audit_trail_partitions"), 8) << text;
  EXPECT_EQ(0, MetricSample(text, "memoryd_audit_partitions_dropped_total{reason=\"retention\"}"))
      << text;

  // promtool (Debian's prometheus package) lints the exposition.
  std::string file = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                     "/metrics-" + std::to_string(getpid()) + ".txt";
  std::ofstream(file) << text;
  std::string out_file = file + ".promtool";
  int rc = std::system(("promtool check metrics < " + file + " > " + out_file + " 2>&1").c_str());
  std::ifstream in(out_file);
  std::string promtool((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(0, rc) << "promtool check metrics:\n" << promtool << "\n" << text;

  // Anything but GET /metrics is refused.
  EXPECT_EQ(0u, HttpExchange(port, "GET /other HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 404", 0));
  EXPECT_EQ(0u, HttpExchange(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
                    .rfind("HTTP/1.1 405", 0));
  EXPECT_EQ(0, m.Stop(SIGTERM, 10000)) << m.Log();
}

TEST_F(MetricsTest, WithoutTheFlagNothingListens) {
  MemorydProcess m({"--pg-url=" + db_.url()});
  ASSERT_TRUE(m.Start()) << m.Log();
  EXPECT_EQ(std::string::npos, m.Log().find("metrics serving"));
  EXPECT_EQ(0, m.Stop(SIGTERM, 10000)) << m.Log();
}

TEST_F(MetricsTest, ABadListenAddressStopsStartUp) {
  MemorydProcess m({"--pg-url=" + db_.url(), "--metrics-listen=no-port"});
  EXPECT_FALSE(m.Start());
  EXPECT_NE(std::string::npos, m.Log().find("--metrics-listen: no-port is not host:port"))
      << m.Log();
}

}  // namespace
