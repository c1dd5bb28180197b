// config: defaults < MEMORYD_* environment < command-line flags; bad values
// are rejected with a message naming the flag and its variable; --help
// documents every option.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "service/core/config.h"
#include "service/core/log.h"
}

extern char** environ;

namespace {

const char kPgFlag[] = "--pg-url=postgresql://memoryd@127.0.0.1:5432/memoryd";

// Every flag and its variable, as the service documents them.
const std::vector<std::pair<std::string, std::string>> kOptions = {
    {"listen", "MEMORYD_LISTEN"},
    {"metrics-listen", "MEMORYD_METRICS_LISTEN"},
    {"workers", "MEMORYD_WORKERS"},
    {"pg-url", "MEMORYD_PG_URL"},
    {"pg-pool-size", "MEMORYD_PG_POOL_SIZE"},
    {"pg-connect-timeout", "MEMORYD_PG_CONNECT_TIMEOUT"},
    {"pg-queue-max", "MEMORYD_PG_QUEUE_MAX"},
    {"task-threads", "MEMORYD_TASK_THREADS"},
    {"task-queue-max", "MEMORYD_TASK_QUEUE_MAX"},
    {"default-deadline-ms", "MEMORYD_DEFAULT_DEADLINE_MS"},
    {"redis-url", "MEMORYD_REDIS_URL"},
    {"qdrant-url", "MEMORYD_QDRANT_URL"},
    {"qdrant-api-key", "MEMORYD_QDRANT_API_KEY"},
    {"qdrant-timeout-ms", "MEMORYD_QDRANT_TIMEOUT_MS"},
    {"qdrant-collection-prefix", "MEMORYD_QDRANT_COLLECTION_PREFIX"},
    {"tls-cert", "MEMORYD_TLS_CERT"},
    {"tls-key", "MEMORYD_TLS_KEY"},
    {"tls-client-ca", "MEMORYD_TLS_CLIENT_CA"},
    {"tls-client-identity", "MEMORYD_TLS_CLIENT_IDENTITY"},
    {"log-level", "MEMORYD_LOG_LEVEL"},
    {"max-message-bytes", "MEMORYD_MAX_MESSAGE_BYTES"},
    {"keepalive-time", "MEMORYD_KEEPALIVE_TIME"},
    {"keepalive-timeout", "MEMORYD_KEEPALIVE_TIMEOUT"},
    {"keepalive-min-ping-interval", "MEMORYD_KEEPALIVE_MIN_PING_INTERVAL"},
    {"max-connection-age", "MEMORYD_MAX_CONNECTION_AGE"},
    {"max-connection-age-grace", "MEMORYD_MAX_CONNECTION_AGE_GRACE"},
    {"shutdown-grace", "MEMORYD_SHUTDOWN_GRACE"},
    {"max-call-memory", "MEMORYD_MAX_CALL_MEMORY"},
    {"stream-buffer-bytes", "MEMORYD_STREAM_BUFFER_BYTES"},
    {"max-streams", "MEMORYD_MAX_STREAMS"},
    {"max-streams-per-tenant", "MEMORYD_MAX_STREAMS_PER_TENANT"},
    {"max-streams-per-principal", "MEMORYD_MAX_STREAMS_PER_PRINCIPAL"},
    {"max-health-watchers", "MEMORYD_MAX_HEALTH_WATCHERS"},
    {"health-interval-ms", "MEMORYD_HEALTH_INTERVAL_MS"},
    {"reflection", "MEMORYD_REFLECTION"},
    {"migrate", "MEMORYD_MIGRATE"},
    {"jwks", "MEMORYD_JWKS"},
    {"signing-key", "MEMORYD_SIGNING_KEY"},
    {"token-issuer", "MEMORYD_TOKEN_ISSUER"},
    {"token-skew", "MEMORYD_TOKEN_SKEW"},
    {"token-cache-size", "MEMORYD_TOKEN_CACHE_SIZE"},
    {"revocation-poll-ms", "MEMORYD_REVOCATION_POLL_MS"},
    {"jwks-reload-ms", "MEMORYD_JWKS_RELOAD_MS"},
    {"pii-policy", "MEMORYD_PII_POLICY"},
    {"traverse-max-depth", "MEMORYD_TRAVERSE_MAX_DEPTH"},
    {"router-default-deadline-ms", "MEMORYD_ROUTER_DEFAULT_DEADLINE_MS"},
    {"cache-l1-max-entries", "MEMORYD_CACHE_L1_MAX_ENTRIES"},
    {"cache-l1-max-bytes", "MEMORYD_CACHE_L1_MAX_BYTES"},
    {"text-language", "MEMORYD_TEXT_LANGUAGE"},
    {"episodic-index-max-mb", "MEMORYD_EPISODIC_INDEX_MAX_MB"},
    {"blackboard-log-entries", "MEMORYD_BLACKBOARD_LOG_ENTRIES"},
    {"blackboard-log-bytes", "MEMORYD_BLACKBOARD_LOG_BYTES"},
    {"blackboard-redis-grace-ms", "MEMORYD_BLACKBOARD_REDIS_GRACE_MS"},
    {"session-grace-ms", "MEMORYD_SESSION_GRACE_MS"},
    {"session-sweep-ms", "MEMORYD_SESSION_SWEEP_MS"},
    {"embedder-url", "MEMORYD_EMBEDDER_URL"},
    {"embedder-model", "MEMORYD_EMBEDDER_MODEL"},
    {"embedder-api-key", "MEMORYD_EMBEDDER_API_KEY"},
    {"embedder-timeout-ms", "MEMORYD_EMBEDDER_TIMEOUT_MS"},
    {"embedder-batch", "MEMORYD_EMBEDDER_BATCH"},
    {"cache-l1-ttl-ms", "MEMORYD_CACHE_L1_TTL_MS"},
    {"quota-boards-per-tenant", "MEMORYD_QUOTA_BOARDS_PER_TENANT"},
    {"quota-boards-per-principal", "MEMORYD_QUOTA_BOARDS_PER_PRINCIPAL"},
    {"quota-board-mib-per-tenant", "MEMORYD_QUOTA_BOARD_MIB_PER_TENANT"},
    {"quota-board-mib-per-principal", "MEMORYD_QUOTA_BOARD_MIB_PER_PRINCIPAL"},
    {"quota-sessions-per-tenant", "MEMORYD_QUOTA_SESSIONS_PER_TENANT"},
    {"quota-sessions-per-principal", "MEMORYD_QUOTA_SESSIONS_PER_PRINCIPAL"},
    {"quota-session-mib-per-tenant", "MEMORYD_QUOTA_SESSION_MIB_PER_TENANT"},
    {"quota-session-mib-per-principal", "MEMORYD_QUOTA_SESSION_MIB_PER_PRINCIPAL"},
    {"retention", "MEMORYD_RETENTION"},
    {"retention-pii", "MEMORYD_RETENTION_PII"},
    {"retention-policy", "MEMORYD_RETENTION_POLICY"},
    {"retention-sweep-ms", "MEMORYD_RETENTION_SWEEP_MS"},
    {"retention-batch", "MEMORYD_RETENTION_BATCH"},
    {"audit-retention", "MEMORYD_AUDIT_RETENTION"},
    {"audit-max-mib", "MEMORYD_AUDIT_MAX_MIB"},
    {"export-threads", "MEMORYD_EXPORT_THREADS"},
    {"export-max-per-principal", "MEMORYD_EXPORT_MAX_PER_PRINCIPAL"},
    {"cache-entities", "MEMORYD_CACHE_ENTITIES"},
    {"open-health", "MEMORYD_OPEN_HEALTH"},
};

std::string ReadAll(FILE* f) {
  fflush(f);
  rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

class ConfigTest : public ::testing::Test {
 protected:
  // Removes every MEMORYD_* variable so the host environment cannot leak in;
  // TearDown puts the originals back.
  void SetUp() override {
    std::vector<std::string> names;
    for (char** e = environ; *e; e++) {
      if (strncmp(*e, "MEMORYD_", 8) != 0) continue;
      const char* eq = strchr(*e, '=');
      if (!eq) continue;
      names.emplace_back(*e, eq - *e);
      saved_.emplace_back(names.back(), eq + 1);
    }
    for (const auto& n : names) unsetenv(n.c_str());
    out_ = tmpfile();
    ASSERT_NE(nullptr, out_);
  }

  void TearDown() override {
    config_free(&c_);
    std::vector<std::string> names;
    for (char** e = environ; *e; e++) {
      if (strncmp(*e, "MEMORYD_", 8) != 0) continue;
      const char* eq = strchr(*e, '=');
      if (eq) names.emplace_back(*e, eq - *e);
    }
    for (const auto& n : names) unsetenv(n.c_str());
    for (const auto& kv : saved_) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    if (out_) fclose(out_);
  }

  // Runs config_load on "memoryd" followed by args; err_ holds the message.
  // A --jwks flag is added unless the arguments or the environment give one
  // (or with_jwks is false), since the service refuses to start without.
  int Load(std::vector<std::string> args, bool with_jwks = true) {
    config_free(&c_);
    bool has_jwks = getenv("MEMORYD_JWKS") != nullptr;
    for (const auto& a : args) has_jwks = has_jwks || a.rfind("--jwks", 0) == 0;
    if (with_jwks && !has_jwks) args.insert(args.begin(), "--jwks=/etc/memoryd/jwks.json");
    args.insert(args.begin(), "memoryd");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    err_[0] = '\0';
    return config_load(&c_, static_cast<int>(args.size()), argv.data(), out_, err_, sizeof err_);
  }

  std::string Err() const { return err_; }

  config c_{};
  char err_[512] = "";
  FILE* out_ = nullptr;
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(ConfigTest, DefaultsApplyWhenNoEnvironmentOrFlags) {
  ASSERT_EQ(0, Load({kPgFlag})) << Err();
  EXPECT_STREQ("127.0.0.1:50051", c_.listen);
  EXPECT_EQ(0, c_.workers);
  EXPECT_STREQ("postgresql://memoryd@127.0.0.1:5432/memoryd", c_.pg_url);
  EXPECT_EQ(8, c_.pg_pool_size);
  EXPECT_EQ(5, c_.pg_connect_timeout_s);
  EXPECT_STREQ("", c_.redis_url);
  EXPECT_STREQ("", c_.qdrant_url);
  EXPECT_STREQ("", c_.qdrant_api_key);
  EXPECT_STREQ("", c_.tls_cert);
  EXPECT_STREQ("", c_.tls_key);
  EXPECT_STREQ("info", c_.log_level);
  EXPECT_EQ(4194304, c_.max_message_bytes);
  EXPECT_EQ(60, c_.keepalive_time_s);
  EXPECT_EQ(20, c_.keepalive_timeout_s);
  EXPECT_EQ(10, c_.shutdown_grace_s);
  EXPECT_EQ(1000, c_.health_interval_ms);
  EXPECT_EQ(1, c_.reflection);
  EXPECT_EQ(1, c_.migrate);
}

TEST_F(ConfigTest, EnvironmentVariablesOverrideDefaults) {
  setenv("MEMORYD_LISTEN", "0.0.0.0:6000", 1);
  setenv("MEMORYD_WORKERS", "4", 1);
  setenv("MEMORYD_PG_URL", "postgresql://env@127.0.0.1/envdb", 1);
  setenv("MEMORYD_REDIS_URL", "redis://127.0.0.1:6380/2", 1);
  setenv("MEMORYD_LOG_LEVEL", "debug", 1);
  setenv("MEMORYD_HEALTH_INTERVAL_MS", "250", 1);
  setenv("MEMORYD_REFLECTION", "false", 1);
  setenv("MEMORYD_MIGRATE", "off", 1);
  ASSERT_EQ(0, Load({})) << Err();
  EXPECT_STREQ("0.0.0.0:6000", c_.listen);
  EXPECT_EQ(4, c_.workers);
  EXPECT_STREQ("postgresql://env@127.0.0.1/envdb", c_.pg_url);
  EXPECT_STREQ("redis://127.0.0.1:6380/2", c_.redis_url);
  EXPECT_STREQ("debug", c_.log_level);
  EXPECT_EQ(250, c_.health_interval_ms);
  EXPECT_EQ(0, c_.reflection);
  EXPECT_EQ(0, c_.migrate);
  EXPECT_EQ(8, c_.pg_pool_size);  // untouched options keep their defaults
}

TEST_F(ConfigTest, FlagsOverrideEnvironmentVariables) {
  setenv("MEMORYD_LISTEN", "0.0.0.0:6000", 1);
  setenv("MEMORYD_WORKERS", "4", 1);
  setenv("MEMORYD_PG_URL", "postgresql://env@127.0.0.1/envdb", 1);
  setenv("MEMORYD_REFLECTION", "false", 1);
  ASSERT_EQ(0, Load({"--listen=127.0.0.1:7000", "--workers=7",
                     "--pg-url=postgresql://flag@127.0.0.1/flagdb", "--reflection"}))
      << Err();
  EXPECT_STREQ("127.0.0.1:7000", c_.listen);
  EXPECT_EQ(7, c_.workers);
  EXPECT_STREQ("postgresql://flag@127.0.0.1/flagdb", c_.pg_url);
  EXPECT_EQ(1, c_.reflection);
}

TEST_F(ConfigTest, FlagValueMayFollowAsSeparateArgument) {
  ASSERT_EQ(0, Load({"--workers", "12", "--listen", "[::]:7001", "--pg-url",
                     "postgresql://sep@127.0.0.1/db", "--log-level", "warn"}))
      << Err();
  EXPECT_EQ(12, c_.workers);
  EXPECT_STREQ("[::]:7001", c_.listen);
  EXPECT_STREQ("postgresql://sep@127.0.0.1/db", c_.pg_url);
  EXPECT_STREQ("warn", c_.log_level);
}

TEST_F(ConfigTest, FlagValueAfterEqualsKeepsFurtherEqualsSigns) {
  ASSERT_EQ(0, Load({"--pg-url=postgresql://u@127.0.0.1/db?sslmode=disable&application_name=x",
                     "--qdrant-api-key=abc=="}))
      << Err();
  EXPECT_STREQ("postgresql://u@127.0.0.1/db?sslmode=disable&application_name=x", c_.pg_url);
  EXPECT_STREQ("abc==", c_.qdrant_api_key);
}

TEST_F(ConfigTest, LaterFlagWinsOverEarlierOne) {
  ASSERT_EQ(0, Load({kPgFlag, "--workers=3", "--workers", "5"})) << Err();
  EXPECT_EQ(5, c_.workers);
}

TEST_F(ConfigTest, NoPrefixDisablesBooleanFlags) {
  ASSERT_EQ(0, Load({kPgFlag, "--no-reflection", "--no-migrate"})) << Err();
  EXPECT_EQ(0, c_.reflection);
  EXPECT_EQ(0, c_.migrate);
}

TEST_F(ConfigTest, BooleanFlagAcceptsExplicitFalseAndTrue) {
  ASSERT_EQ(0, Load({kPgFlag, "--reflection=false", "--migrate=0"})) << Err();
  EXPECT_EQ(0, c_.reflection);
  EXPECT_EQ(0, c_.migrate);
  setenv("MEMORYD_REFLECTION", "no", 1);
  ASSERT_EQ(0, Load({kPgFlag, "--reflection=TRUE", "--migrate=yes"})) << Err();
  EXPECT_EQ(1, c_.reflection);
  EXPECT_EQ(1, c_.migrate);
}

TEST_F(ConfigTest, BareBooleanFlagDoesNotSwallowNextArgument) {
  // "--reflection false" must not silently leave reflection on: the stray
  // "false" is an error.
  EXPECT_EQ(-1, Load({kPgFlag, "--reflection", "false"}));
  EXPECT_NE(std::string::npos, Err().find("false")) << Err();
}

TEST_F(ConfigTest, BadBooleanValueIsRejectedNamingFlagAndVariable) {
  EXPECT_EQ(-1, Load({kPgFlag, "--reflection=maybe"}));
  EXPECT_NE(std::string::npos, Err().find("--reflection")) << Err();
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_REFLECTION")) << Err();
  EXPECT_NE(std::string::npos, Err().find("maybe")) << Err();
}

TEST_F(ConfigTest, NonNumericIntegerIsRejectedNamingFlagAndVariable) {
  EXPECT_EQ(-1, Load({kPgFlag, "--workers=abc"}));
  EXPECT_NE(std::string::npos, Err().find("--workers")) << Err();
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_WORKERS")) << Err();
  EXPECT_NE(std::string::npos, Err().find("abc")) << Err();
}

TEST_F(ConfigTest, IntegerWithTrailingGarbageOrEmptyIsRejected) {
  EXPECT_EQ(-1, Load({kPgFlag, "--workers=4x"}));
  EXPECT_NE(std::string::npos, Err().find("--workers")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--workers="}));
  EXPECT_NE(std::string::npos, Err().find("--workers")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--keepalive-time=1.5"}));
  EXPECT_NE(std::string::npos, Err().find("--keepalive-time")) << Err();
}

TEST_F(ConfigTest, OutOfRangeIntegerIsRejectedNamingFlagAndVariable) {
  EXPECT_EQ(-1, Load({kPgFlag, "--workers=1025"}));
  EXPECT_NE(std::string::npos, Err().find("--workers")) << Err();
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_WORKERS")) << Err();

  EXPECT_EQ(-1, Load({kPgFlag, "--pg-pool-size=0"}));
  EXPECT_NE(std::string::npos, Err().find("--pg-pool-size")) << Err();
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_PG_POOL_SIZE")) << Err();

  EXPECT_EQ(-1, Load({kPgFlag, "--shutdown-grace=-1"}));
  EXPECT_NE(std::string::npos, Err().find("--shutdown-grace")) << Err();

  // Beyond int (and long on some platforms) must not wrap into range.
  EXPECT_EQ(-1, Load({kPgFlag, "--max-message-bytes=4294967296"}));
  EXPECT_NE(std::string::npos, Err().find("--max-message-bytes")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--max-message-bytes=99999999999999999999999"}));
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_MAX_MESSAGE_BYTES")) << Err();

  // Traversal depth is bounded: 0 would disable Traverse, beyond 10 invites runaway CTEs.
  EXPECT_EQ(-1, Load({kPgFlag, "--traverse-max-depth=0"}));
  EXPECT_NE(std::string::npos, Err().find("--traverse-max-depth")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--traverse-max-depth=11"}));
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_TRAVERSE_MAX_DEPTH")) << Err();

  EXPECT_EQ(-1, Load({kPgFlag, "--qdrant-timeout-ms=99"}));
  EXPECT_NE(std::string::npos, Err().find("--qdrant-timeout-ms")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--qdrant-url=localhost:6333"}));
  EXPECT_NE(std::string::npos, Err().find("http://")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--qdrant-collection-prefix=a/b"}));
  EXPECT_NE(std::string::npos, Err().find("--qdrant-collection-prefix")) << Err();

  // An embedder needs a scheme and a model; without a URL the model is unused.
  EXPECT_EQ(-1, Load({kPgFlag, "--embedder-url=localhost:11434/v1", "--embedder-model=m"}));
  EXPECT_NE(std::string::npos, Err().find("--embedder-url")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--embedder-url=http://127.0.0.1:11434/v1"}));
  EXPECT_NE(std::string::npos, Err().find("--embedder-model")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--embedder-batch=0"}));
  EXPECT_NE(std::string::npos, Err().find("--embedder-batch")) << Err();
}

TEST_F(ConfigTest, IntegerBoundsAreInclusive) {
  ASSERT_EQ(0, Load({kPgFlag, "--workers=1024", "--pg-pool-size=1", "--max-message-bytes=1024",
                     "--health-interval-ms=50", "--traverse-max-depth=1"}))
      << Err();
  EXPECT_EQ(1, c_.traverse_max_depth);
  EXPECT_EQ(1024, c_.workers);
  EXPECT_EQ(1, c_.pg_pool_size);
  EXPECT_EQ(1024, c_.max_message_bytes);
  EXPECT_EQ(50, c_.health_interval_ms);
}

TEST_F(ConfigTest, BadIntegerInEnvironmentIsRejectedNamingVariable) {
  setenv("MEMORYD_PG_POOL_SIZE", "lots", 1);
  EXPECT_EQ(-1, Load({kPgFlag}));
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_PG_POOL_SIZE")) << Err();
  EXPECT_NE(std::string::npos, Err().find("--pg-pool-size")) << Err();
  EXPECT_NE(std::string::npos, Err().find("environment")) << Err();
}

TEST_F(ConfigTest, UnknownFlagIsRejected) {
  EXPECT_EQ(-1, Load({kPgFlag, "--bogus=1"}));
  EXPECT_NE(std::string::npos, Err().find("--bogus")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--listenx=127.0.0.1:1"}));
  EXPECT_NE(std::string::npos, Err().find("--listenx")) << Err();
}

TEST_F(ConfigTest, NoPrefixOnNonBooleanFlagIsRejected) {
  EXPECT_EQ(-1, Load({kPgFlag, "--no-listen"}));
  EXPECT_NE(std::string::npos, Err().find("--no-listen")) << Err();
}

TEST_F(ConfigTest, PositionalArgumentIsRejected) {
  EXPECT_EQ(-1, Load({kPgFlag, "serve"}));
  EXPECT_NE(std::string::npos, Err().find("serve")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "-workers=3"}));
}

TEST_F(ConfigTest, FlagMissingItsValueAtEndIsRejected) {
  EXPECT_EQ(-1, Load({kPgFlag, "--listen"}));
  EXPECT_NE(std::string::npos, Err().find("--listen")) << Err();
}

TEST_F(ConfigTest, MissingPgUrlIsRejectedMentioningItsVariable) {
  EXPECT_EQ(-1, Load({}));
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_PG_URL")) << Err();
  EXPECT_NE(std::string::npos, Err().find("--pg-url")) << Err();
  setenv("MEMORYD_PG_URL", "", 1);
  EXPECT_EQ(-1, Load({}));
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_PG_URL")) << Err();
}

TEST_F(ConfigTest, TlsCertWithoutKeyIsRejected) {
  EXPECT_EQ(-1, Load({kPgFlag, "--tls-cert=/etc/memoryd/cert.pem"}));
  EXPECT_NE(std::string::npos, Err().find("--tls-key")) << Err();
}

TEST_F(ConfigTest, TlsKeyWithoutCertIsRejected) {
  setenv("MEMORYD_TLS_KEY", "/etc/memoryd/key.pem", 1);
  EXPECT_EQ(-1, Load({kPgFlag}));
  EXPECT_NE(std::string::npos, Err().find("--tls-cert")) << Err();
}

TEST_F(ConfigTest, TlsCertAndKeyTogetherAreAccepted) {
  ASSERT_EQ(0, Load({kPgFlag, "--tls-cert=/c.pem", "--tls-key=/k.pem"})) << Err();
  EXPECT_STREQ("/c.pem", c_.tls_cert);
  EXPECT_STREQ("/k.pem", c_.tls_key);
}

TEST_F(ConfigTest, EveryLogLevelNameIsAccepted) {
  for (const char* lvl : {"debug", "info", "warn", "error"}) {
    ASSERT_EQ(0, Load({kPgFlag, std::string("--log-level=") + lvl})) << lvl << ": " << Err();
    EXPECT_STREQ(lvl, c_.log_level);
  }
}

TEST_F(ConfigTest, BadLogLevelIsRejected) {
  for (const char* lvl : {"verbose", "INFO", "", "warning"}) {
    EXPECT_EQ(-1, Load({kPgFlag, std::string("--log-level=") + lvl})) << lvl;
    EXPECT_NE(std::string::npos, Err().find("--log-level")) << Err();
    EXPECT_NE(std::string::npos, Err().find("MEMORYD_LOG_LEVEL")) << Err();
  }
}

TEST_F(ConfigTest, ListenWithoutPortIsRejected) {
  EXPECT_EQ(-1, Load({kPgFlag, "--listen=localhost"}));
  EXPECT_NE(std::string::npos, Err().find("--listen")) << Err();
  EXPECT_EQ(-1, Load({kPgFlag, "--listen="}));
}

TEST_F(ConfigTest, FailedLoadLeavesConfigFreed) {
  ASSERT_EQ(-1, Load({kPgFlag, "--workers=abc"}));
  EXPECT_EQ(nullptr, c_.listen);
  EXPECT_EQ(nullptr, c_.pg_url);
  EXPECT_EQ(nullptr, c_.log_level);
  config_free(&c_);  // freeing again is allowed
}

TEST_F(ConfigTest, FreeAcceptsZeroedConfig) {
  config zero{};
  config_free(&zero);
  EXPECT_EQ(nullptr, zero.listen);
}

TEST_F(ConfigTest, HelpReturnsExitOkAndDocumentsEveryFlag) {
  // No --pg-url: help must work before the service is configured.
  ASSERT_EQ(CONFIG_EXIT_OK, Load({"--help"})) << Err();
  std::string help = ReadAll(out_);
  for (const auto& o : kOptions) {
    EXPECT_NE(std::string::npos, help.find("--" + o.first + " ")) << o.first << "\n" << help;
    EXPECT_NE(std::string::npos, help.find(o.second)) << o.second << "\n" << help;
  }
  EXPECT_NE(std::string::npos, help.find("127.0.0.1:50051")) << help;  // defaults shown
  EXPECT_NE(std::string::npos, help.find("--help")) << help;
  EXPECT_NE(std::string::npos, help.find("--version")) << help;
}

TEST_F(ConfigTest, ShortHelpFlagAlsoPrintsHelp) {
  ASSERT_EQ(CONFIG_EXIT_OK, Load({"-h"}));
  EXPECT_NE(std::string::npos, ReadAll(out_).find("MEMORYD_PG_URL"));
}

TEST_F(ConfigTest, HelpWorksDespiteABadEnvironmentValue) {
  setenv("MEMORYD_WORKERS", "many", 1);
  EXPECT_EQ(CONFIG_EXIT_OK, Load({"--help"})) << Err();
  EXPECT_NE(std::string::npos, ReadAll(out_).find("MEMORYD_WORKERS"));
}

TEST_F(ConfigTest, HelpStopsParsingBeforeLaterBadFlags) {
  ASSERT_EQ(CONFIG_EXIT_OK, Load({"--help", "--bogus"})) << Err();
}

TEST_F(ConfigTest, VersionReturnsExitOkAndPrintsVersion) {
  ASSERT_EQ(CONFIG_EXIT_OK, Load({"--version"}));
  std::string v = ReadAll(out_);
  EXPECT_EQ(0u, v.rfind("memoryd ", 0)) << v;
  EXPECT_EQ('\n', v.back()) << v;
}

TEST_F(ConfigTest, ConfigLogMasksSecrets) {
  ASSERT_EQ(0, Load({"--pg-url=postgresql://u:pgsecret@127.0.0.1/db",
                     "--redis-url=redis://:redissecret@127.0.0.1:6379/0",
                     "--qdrant-api-key=qdrantsecret", "--listen=127.0.0.1:7777"}))
      << Err();
  FILE* logf = tmpfile();
  ASSERT_NE(nullptr, logf);
  log_level saved = log_get_level();
  log_set_level(LOG_DEBUG);
  log_set_fd(fileno(logf));
  config_log(&c_);
  log_set_fd(2);
  log_set_level(saved);
  std::string logged = ReadAll(logf);
  fclose(logf);
  EXPECT_EQ(std::string::npos, logged.find("pgsecret")) << logged;
  EXPECT_EQ(std::string::npos, logged.find("redissecret")) << logged;
  EXPECT_EQ(std::string::npos, logged.find("qdrantsecret")) << logged;
  EXPECT_NE(std::string::npos, logged.find("127.0.0.1:7777")) << logged;
  EXPECT_NE(std::string::npos, logged.find("(set)")) << logged;
  // One line per option.
  size_t lines = 0;
  for (char ch : logged) lines += ch == '\n';
  EXPECT_EQ(kOptions.size(), lines) << logged;
}

}  // namespace

TEST_F(ConfigTest, MissingJwksIsRejectedWithHowToFixIt) {
  ASSERT_EQ(-1, Load({kPgFlag}, false));
  EXPECT_NE(std::string::npos, Err().find("--jwks")) << Err();
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_JWKS")) << Err();
  EXPECT_NE(std::string::npos, Err().find("memoryd token keygen")) << Err();
}

TEST_F(ConfigTest, TokenSettingsHaveSaneDefaults) {
  ASSERT_EQ(0, Load({kPgFlag})) << Err();
  EXPECT_STREQ("/etc/memoryd/jwks.json", c_.jwks);
  EXPECT_STREQ("", c_.signing_key);
  EXPECT_STREQ("memoryd", c_.token_issuer);
  EXPECT_EQ(60, c_.token_skew_s);
  EXPECT_EQ(1, c_.open_health);
  ASSERT_EQ(0, Load({kPgFlag, "--open-health=false", "--token-skew=5"})) << Err();
  EXPECT_EQ(0, c_.open_health);
  EXPECT_EQ(5, c_.token_skew_s);
}

TEST_F(ConfigTest, PiiPolicyIsRejectByDefaultAndValidated) {
  ASSERT_EQ(0, Load({kPgFlag})) << Err();
  EXPECT_STREQ("reject", c_.pii_policy);
  ASSERT_EQ(0, Load({kPgFlag, "--pii-policy=redact"})) << Err();
  EXPECT_STREQ("redact", c_.pii_policy);
  ASSERT_EQ(-1, Load({kPgFlag, "--pii-policy=allow"}));
  EXPECT_NE(std::string::npos, Err().find("MEMORYD_PII_POLICY")) << Err();
}

TEST_F(ConfigTest, QuotasOnBoardsAndSessionsHaveBoundedDefaults) {
  ASSERT_EQ(0, Load({kPgFlag})) << Err();
  EXPECT_EQ(10000, c_.quota_boards_per_tenant);
  EXPECT_EQ(1000, c_.quota_boards_per_principal);
  EXPECT_EQ(1024, c_.quota_board_mib_per_tenant);
  EXPECT_EQ(256, c_.quota_board_mib_per_principal);
  EXPECT_EQ(10000, c_.quota_sessions_per_tenant);
  EXPECT_EQ(1000, c_.quota_sessions_per_principal);
  EXPECT_EQ(1024, c_.quota_session_mib_per_tenant);
  EXPECT_EQ(256, c_.quota_session_mib_per_principal);
  // 0 lifts a quota; a negative one is refused, naming the flag.
  ASSERT_EQ(0, Load({kPgFlag, "--quota-boards-per-tenant=0"})) << Err();
  EXPECT_EQ(0, c_.quota_boards_per_tenant);
  ASSERT_EQ(-1, Load({kPgFlag, "--quota-session-mib-per-principal=-1"}));
  EXPECT_NE(std::string::npos, Err().find("--quota-session-mib-per-principal")) << Err();
}

TEST_F(ConfigTest, BackendQueueAndDefaultDeadlineHaveBoundedDefaults) {
  ASSERT_EQ(0, Load({kPgFlag})) << Err();
  EXPECT_EQ(1024, c_.pg_queue_max);
  EXPECT_EQ(30000, c_.default_deadline_ms);
  ASSERT_EQ(-1, Load({kPgFlag, "--default-deadline-ms=0"}));
  EXPECT_NE(std::string::npos, Err().find("--default-deadline-ms")) << Err();
  ASSERT_EQ(0, Load({kPgFlag, "--pg-queue-max=0"})) << Err();
  EXPECT_EQ(0, c_.pg_queue_max);
  // The task pool: bounded by default, and never empty.
  ASSERT_EQ(0, Load({kPgFlag})) << Err();
  EXPECT_EQ(16, c_.task_threads);
  EXPECT_EQ(1024, c_.task_queue_max);
  ASSERT_EQ(-1, Load({kPgFlag, "--task-threads=0"}));
  EXPECT_NE(std::string::npos, Err().find("--task-threads")) << Err();
  ASSERT_EQ(-1, Load({kPgFlag, "--task-queue-max=0"}));
  EXPECT_NE(std::string::npos, Err().find("--task-queue-max")) << Err();
}
