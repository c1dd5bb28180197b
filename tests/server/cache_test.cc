// The cache tier end to end: real memoryd processes, real Redis (the one
// `make test` starts, and a private one the restart test kills). Levels
// (L1, L2, promotion), TTLs in both, the L1 byte bound, tenant / owner /
// label isolation, bad input, two replicas invalidating each other (with
// the propagation delay measured), Redis killed and restarted under load,
// and GlobalMemory.GetEntity through the cache-aside L1.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "grpc/health/v1/health.pb.h"
#include "memory/v1/access.pb.h"
#include "memory/v1/cache.pb.h"
#include "memory/v1/global_memory.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_server.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Unary;
using Clock = std::chrono::steady_clock;

// Tenants unique to this run: the shared Redis outlives test runs.
std::string Tenant(const std::string& name) {
  static const std::string run =
      std::to_string(getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count());
  return name + "-" + run;
}

struct Replica {
  std::unique_ptr<MemorydProcess> proc;
  std::shared_ptr<grpc::Channel> ch;
};

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
  }

  // A memoryd on redis_url (the shared Redis by default). Every replica
  // trusts the first one's keys, so one token works on all.
  Replica Launch(std::vector<std::string> extra = {}, std::string redis_url = "",
                 std::string pg_url = "") {
    std::vector<std::string> args = {
        "--pg-url=" + (pg_url.empty() ? db_.url() : pg_url), "--shutdown-grace=1",
        "--health-interval-ms=100",
        "--redis-url=" + (redis_url.empty() ? TestRedisUrl() : redis_url)};
    if (keys_) {
      args.push_back("--jwks=" + keys_->jwks_path());
    }
    args.insert(args.end(), extra.begin(), extra.end());
    Replica r;
    r.proc = std::make_unique<MemorydProcess>(args);
    EXPECT_TRUE(r.proc->Start()) << r.proc->Log();
    if (!keys_) keys_ = r.proc->keys();
    r.ch = testing_client::Connect(r.proc->port());
    return r;
  }

  std::string Token(const std::string& tenant, const std::string& sub, const std::string& scope,
                    const std::string& clr = "SECRET", const std::string& lvl = "PUBLIC") {
    TestClaims c;
    c.tenant = tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = clr;
    c.lvl = lvl;
    return keys_->Mint(c);
  }

  static Result Call(const Replica& r, const std::string& method,
                     const google::protobuf::Message& req, const std::string& token,
                     int timeout_ms = 5000) {
    return Unary(r.ch, method, req.SerializeAsString(), timeout_ms,
                 {{"authorization", TestKeys::Bearer(token)}});
  }

  static Result Set(const Replica& r, const std::string& tok, const std::string& key,
                    const std::string& value, int64_t ttl_ms = 60000,
                    Label label = LABEL_UNSPECIFIED) {
    CacheSetRequest req;
    req.set_key(key);
    req.set_value(value);
    req.mutable_ttl()->set_seconds(ttl_ms / 1000);
    req.mutable_ttl()->set_nanos(static_cast<int32_t>(ttl_ms % 1000) * 1000000);
    req.set_label(label);
    return Call(r, "/memory.v1.Cache/Set", req, tok);
  }

  static void MustSet(const Replica& r, const std::string& tok, const std::string& key,
                      const std::string& value, int64_t ttl_ms = 60000,
                      Label label = LABEL_UNSPECIFIED) {
    Result res = Set(r, tok, key, value, ttl_ms, label);
    ASSERT_TRUE(res.status.ok()) << key << ": " << res.status.error_message();
  }

  static CacheItem Get(const Replica& r, const std::string& tok, const std::string& key,
                       int timeout_ms = 5000) {
    CacheGetRequest req;
    req.set_key(key);
    Result res = Call(r, "/memory.v1.Cache/Get", req, tok, timeout_ms);
    EXPECT_TRUE(res.status.ok()) << key << ": " << res.status.error_message();
    CacheGetResponse resp;
    resp.ParseFromString(res.body);
    return resp.item();
  }

  // The lookup of key on r once r has filled its L1 from L2. The Set's own
  // invalidation may reach r just after that fill and drop it once (a
  // refill then sticks), so one more round trip via L2 is allowed.
  static CacheLookup LookupAfterFill(const Replica& r, const std::string& tok,
                                     const std::string& key) {
    CacheLookup lookup = Get(r, tok, key).lookup();
    if (lookup == CACHE_LOOKUP_HIT_L2) lookup = Get(r, tok, key).lookup();
    return lookup;
  }

  static Result Delete(const Replica& r, const std::string& tok, const std::string& key) {
    CacheDeleteKeyRequest req;
    req.set_key(key);
    return Call(r, "/memory.v1.Cache/DeleteKey", req, tok);
  }

  static int Health(const Replica& r, const std::string& service) {
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    Result res = Unary(r.ch, "/grpc.health.v1.Health/Check", req.SerializeAsString(), 2000);
    grpc::health::v1::HealthCheckResponse resp;
    return res.status.ok() && resp.ParseFromString(res.body) ? resp.status() : -1;
  }

  // Polls until pred holds or timeout_ms passes; true if it held.
  template <typename Pred>
  static bool Eventually(Pred pred, int timeout_ms) {
    auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return pred();
  }

  PgTestDb db_;
  TestKeys* keys_ = nullptr;  // owned by the first replica
};

// Set and DeleteKey are writes: each is answered only once its audit row
// is stored in PostgreSQL, so memoryd killed the moment the answer arrives
// leaves the row behind (through the audit queue, which waits up to 10 ms
// to batch, it died with the process).
TEST_F(CacheTest, SetAndDeleteAreAuditedBeforeTheyAreAnswered) {
  PgSession db(db_.url());
  ASSERT_TRUE(db.ok()) << db.error();
  std::vector<Replica> killed;  // the first owns the keys the others trust
  Replica r = Launch();
  std::string tok = Token(Tenant("audited"), "alice", "cache:read cache:write");
  auto killed_after = [&](const std::string& method, const google::protobuf::Message& req,
                          const std::string& rid) {
    Result res = Unary(r.ch, method, req.SerializeAsString(), 5000,
                       {{"authorization", TestKeys::Bearer(tok)}, {"x-request-id", rid}});
    kill(r.proc->pid(), SIGKILL);
    r.proc->Wait(5000);
    EXPECT_TRUE(res.status.ok()) << method << ": " << res.status.error_message();
    killed.push_back(std::move(r));
    r = Launch();
    return db.Value(
        "SELECT count(*) || '|' || min(target_ids::text) FROM audit_log WHERE "
        "status_code = 0 AND request_id = '" +
        rid + "'");
  };
  CacheSetRequest set;
  set.set_key("k1");
  set.set_value("v");
  set.mutable_ttl()->set_seconds(60);
  EXPECT_EQ("1|{cache:k1}", killed_after("/memory.v1.Cache/Set", set, "w-set"));
  memory::v1::CacheDeleteKeyRequest del;
  del.set_key("k1");
  EXPECT_EQ("1|{cache:k1}", killed_after("/memory.v1.Cache/DeleteKey", del, "w-delete"));
}

TEST_F(CacheTest, SetGetAnswersFromL1ThenL2PromotesAndDeleteRemoves) {
  Replica a = Launch(), b = Launch();
  std::string t = Tenant("levels"), tok = Token(t, "alice", "cache:read cache:write");
  std::string value("bytes\0\xff\x01 binary-safe", 21);
  CacheSetRequest sreq;
  sreq.set_key("k1");
  sreq.set_value(value);
  sreq.mutable_ttl()->set_seconds(60);
  Result res = Call(a, "/memory.v1.Cache/Set", sreq, tok);
  ASSERT_TRUE(res.status.ok()) << res.status.error_message();
  CacheSetResponse sresp;
  ASSERT_TRUE(sresp.ParseFromString(res.body));
  EXPECT_EQ("alice", sresp.meta().owner());
  EXPECT_EQ(t, sresp.meta().tenant());
  EXPECT_EQ(LABEL_PUBLIC, sresp.meta().label());
  EXPECT_NEAR(60, sresp.meta().expire_time().seconds() - sresp.meta().create_time().seconds(), 1);

  CacheItem it = Get(a, tok, "k1");
  EXPECT_EQ(CACHE_LOOKUP_HIT_L1, it.lookup());
  EXPECT_EQ(value, it.value());
  EXPECT_EQ("alice", it.meta().owner());
  it = Get(b, tok, "k1");  // b never saw it: Redis answers, b keeps it
  EXPECT_EQ(CACHE_LOOKUP_HIT_L2, it.lookup());
  EXPECT_EQ(value, it.value());
  EXPECT_EQ(sresp.meta().expire_time().seconds(), it.meta().expire_time().seconds());
  EXPECT_EQ(CACHE_LOOKUP_HIT_L1, LookupAfterFill(b, tok, "k1"));
  it = Get(b, tok, "k1");
  EXPECT_EQ(CACHE_LOOKUP_HIT_L1, it.lookup());
  EXPECT_EQ(value, it.value());

  {
    CacheMultiGetRequest mreq;
    mreq.add_keys("k1");
    mreq.add_keys("nope");
    mreq.add_keys("k1");
    Result mr = Call(a, "/memory.v1.Cache/MultiGet", mreq, tok);
    ASSERT_TRUE(mr.status.ok()) << mr.status.error_message();
    CacheMultiGetResponse mresp;
    ASSERT_TRUE(mresp.ParseFromString(mr.body));
    ASSERT_EQ(3, mresp.items_size());
    EXPECT_EQ("k1", mresp.items(0).key());
    EXPECT_EQ(value, mresp.items(0).value());
    EXPECT_EQ(CACHE_LOOKUP_MISS, mresp.items(1).lookup());
    EXPECT_EQ("nope", mresp.items(1).key());
    EXPECT_FALSE(mresp.items(1).has_meta());
    EXPECT_EQ(value, mresp.items(2).value());
  }

  res = Delete(a, tok, "k1");
  ASSERT_TRUE(res.status.ok()) << res.status.error_message();
  CacheDeleteKeyResponse dresp;
  dresp.ParseFromString(res.body);
  EXPECT_TRUE(dresp.deleted());
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(a, tok, "k1").lookup());
  EXPECT_TRUE(Eventually([&] { return Get(b, tok, "k1").lookup() == CACHE_LOOKUP_MISS; }, 2000));
  res = Delete(a, tok, "k1");
  dresp.ParseFromString(res.body);
  EXPECT_FALSE(dresp.deleted());
}

TEST_F(CacheTest, TtlExpiresInL2AndL1) {
  Replica a = Launch({"--cache-l1-ttl-ms=300"}), b = Launch();
  std::string tok = Token(Tenant("ttl"), "alice", "cache:read cache:write");
  MustSet(a, tok, "short", "s", 1000);
  MustSet(a, tok, "long", "l", 60000);
  EXPECT_EQ(CACHE_LOOKUP_HIT_L2, Get(b, tok, "short").lookup());  // b: L1 from L2
  EXPECT_EQ(CACHE_LOOKUP_HIT_L1, LookupAfterFill(b, tok, "short"));
  EXPECT_EQ(CACHE_LOOKUP_HIT_L1, Get(a, tok, "long").lookup());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  // The entry's own TTL ended in both levels on both replicas.
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(a, tok, "short").lookup());
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(b, tok, "short").lookup());
  // a's L1 keeps nothing beyond 300 ms; Redis still has "long".
  CacheItem it = Get(a, tok, "long");
  EXPECT_EQ(CACHE_LOOKUP_HIT_L2, it.lookup());
  EXPECT_EQ("l", it.value());
}

TEST_F(CacheTest, L1StaysUnderItsByteBoundEvictingTheOldest) {
  // 1000 entries -> 8 shards of 8 KiB each.
  Replica a = Launch({"--cache-l1-max-bytes=65536"});
  std::string tok = Token(Tenant("bytes"), "alice", "cache:read cache:write");
  const int kKeys = 64;
  for (int i = 0; i < kKeys; i++)
    MustSet(a, tok, "k" + std::to_string(i), std::string(4000, static_cast<char>('a' + i % 26)));
  int l1 = 0, l2 = 0;
  for (int i = 0; i < kKeys; i++) {
    CacheItem it = Get(a, tok, "k" + std::to_string(i));
    EXPECT_EQ(std::string(4000, static_cast<char>('a' + i % 26)), it.value()) << i;
    if (it.lookup() == CACHE_LOOKUP_HIT_L1) l1++;
    if (it.lookup() == CACHE_LOOKUP_HIT_L2) l2++;
  }
  EXPECT_EQ(kKeys, l1 + l2);
  EXPECT_LE(l1, 16);  // 64 KiB hold at most 16 values of 4 KB
  EXPECT_GE(l2, kKeys - 16);
}

// A replica reads back what it just wrote while invalidations of other
// keys stream in: an L1 put dropped for an invalidation of its shard must
// not leave the slot's older copy behind (it did: the value written was
// stored in Redis, the old one served from L1 until it expired).
TEST_F(CacheTest, ASetIsReadBackOnItsReplicaWhileOtherKeysAreInvalidated) {
  Replica a = Launch(), b = Launch();
  std::string t = Tenant("churn");
  std::string tok = Token(t, "alice", "cache:read cache:write");
  std::atomic<bool> stop{false};
  std::thread churn([&] {  // b changes other keys: each change invalidates on a
    for (int i = 0; !stop; i++) Set(b, tok, "other-" + std::to_string(i % 64), "x");
  });
  int stale = 0;
  for (int i = 0; i < 300; i++) {
    std::string key = "mine-" + std::to_string(i % 8);
    Get(a, tok, key);  // a holds the previous value (or its absence) in L1
    MustSet(a, tok, key, "v" + std::to_string(i));
    if (Get(a, tok, key).value() != "v" + std::to_string(i)) stale++;
  }
  stop = true;
  churn.join();
  EXPECT_EQ(0, stale);
}

TEST_F(CacheTest, TenantsOwnersAndLabelsAreIsolated) {
  Replica a = Launch();
  std::string t1 = Tenant("iso1"), t2 = Tenant("iso2");
  std::string alice = Token(t1, "alice", "cache:read cache:write");
  std::string bob = Token(t1, "bob", "cache:read cache:write");
  std::string bob_t2 = Token(t2, "bob", "cache:read cache:write:all");
  std::string carol_all = Token(t1, "carol", "cache:read cache:write:all");
  std::string dave_public = Token(t1, "dave", "cache:read cache:write:all", "PUBLIC");

  MustSet(a, alice, "k", "alice's");
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(a, bob, "k").lookup());     // another owner's slot
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(a, bob_t2, "k").lookup());  // another tenant
  MustSet(a, carol_all, "shared", "for t1", 60000, LABEL_PUBLIC);
  CacheItem it = Get(a, bob, "shared");  // the tenant's shared slot
  EXPECT_EQ("for t1", it.value());
  EXPECT_EQ("carol", it.meta().owner());
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(a, bob_t2, "shared").lookup());
  // A private value takes precedence over the shared one for its owner.
  MustSet(a, bob, "shared", "bob's own");
  EXPECT_EQ("bob's own", Get(a, bob, "shared").value());
  EXPECT_EQ("for t1", Get(a, alice, "shared").value());

  // Labels: a SECRET shared value is invisible to a PUBLIC-cleared reader,
  // who may neither replace nor delete it.
  MustSet(a, carol_all, "secret", "s3cr3t", 60000, LABEL_SECRET);
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(a, dave_public, "secret").lookup());
  Result res = Set(a, dave_public, "secret", "overwritten");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, res.status.error_code());
  EXPECT_NE(std::string::npos, res.status.error_message().find("clearance"));
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Delete(a, dave_public, "secret").status.error_code());
  it = Get(a, carol_all, "secret");
  EXPECT_EQ("s3cr3t", it.value());
  EXPECT_EQ(LABEL_SECRET, it.meta().label());
  // A write never lowers a label (max(requested, floor, existing)): a
  // writer cleared for SECRET with a PUBLIC floor replaces the value, which
  // stays SECRET in L1 and in Redis, so the PUBLIC reader still cannot read
  // it on this replica or another.
  std::string frank = Token(t1, "frank", "cache:read cache:write:all", "SECRET", "PUBLIC");
  res = Set(a, frank, "secret", "rewritten", 60000, LABEL_PUBLIC);
  ASSERT_TRUE(res.status.ok()) << res.status.error_message();
  CacheSetResponse written;
  ASSERT_TRUE(written.ParseFromString(res.body));
  EXPECT_EQ(LABEL_SECRET, written.meta().label());
  Replica b = Launch();
  for (Replica* r : {&a, &b}) {
    EXPECT_EQ(CACHE_LOOKUP_MISS, Get(*r, dave_public, "secret").lookup());
    it = Get(*r, carol_all, "secret");
    EXPECT_EQ("rewritten", it.value());
    EXPECT_EQ(LABEL_SECRET, it.meta().label());
  }
  // The write diode stamps at least the writer's floor.
  std::string conf_writer = Token(t1, "erin", "cache:read cache:write", "SECRET", "CONFIDENTIAL");
  MustSet(a, conf_writer, "floor", "x", 60000, LABEL_PUBLIC);
  EXPECT_EQ(LABEL_CONFIDENTIAL, Get(a, conf_writer, "floor").meta().label());
}

TEST_F(CacheTest, BadInputIsRefusedNamingTheFieldAndChangesNothing) {
  Replica a = Launch();
  std::string t = Tenant("bad"), tok = Token(t, "alice", "cache:read cache:write");
  struct Case {
    std::string key, value;
    int64_t ttl_ms;
    int label;
    bool has_ttl;
    const char* field;
  } cases[] = {
      {"", "v", 60000, 0, true, "key"},
      {std::string(513, 'k'), "v", 60000, 0, true, "key"},
      {"bad\x01key", "v", 60000, 0, true, "key"},
      {"bad\xff\xfekey", "v", 60000, 0, true, "key"},
      {"big", std::string(1024 * 1024 + 1, 'v'), 60000, 0, true, "value"},
      {"k", "v", 0, 0, false, "ttl"},
      {"k", "v", 999, 0, true, "ttl: 0s + 999000000ns; must be 1 s to 3600 s"},
      {"k", "v", 3600001, 0, true, "ttl: 3600s + 1000000ns; must be 1 s to 3600 s"},
      {"k", "v", 7200000, 0, true, "ttl: 7200s; must be 1 s to 3600 s"},
      {"k", "v", 60000, 9, true, "label"},
      {"k", "mail me at jane.doe@example.com", 60000, 0, true, "PII"},
  };
  for (const auto& c : cases) {
    CacheSetRequest req;
    req.set_key(c.key);
    req.set_value(c.value);
    if (c.has_ttl) {
      req.mutable_ttl()->set_seconds(c.ttl_ms / 1000);
      req.mutable_ttl()->set_nanos(static_cast<int32_t>(c.ttl_ms % 1000) * 1000000);
    }
    req.set_label(static_cast<Label>(c.label));
    Result res = Call(a, "/memory.v1.Cache/Set", req, tok, 10000);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, res.status.error_code()) << c.field;
    EXPECT_NE(std::string::npos, res.status.error_message().find(c.field))
        << c.field << ": " << res.status.error_message();
  }
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(a, tok, "k").lookup());  // nothing was written
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(a, tok, "big").lookup());
  // Injection-looking keys are just keys.
  for (std::string k : {"'; FLUSHALL; --", "*", "memoryd:c:1:x:s:k", "a b c", "ünï ☃"}) {
    MustSet(a, tok, k, "literal " + k);
    EXPECT_EQ("literal " + k, Get(a, tok, k).value()) << k;
  }

  CacheMultiGetRequest none;
  Result res = Call(a, "/memory.v1.Cache/MultiGet", none, tok);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, res.status.error_code());
  EXPECT_NE(std::string::npos, res.status.error_message().find("keys"));
  CacheMultiGetRequest many;
  for (int i = 0; i < 1001; i++) many.add_keys("k" + std::to_string(i));
  res = Call(a, "/memory.v1.Cache/MultiGet", many, tok);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, res.status.error_code());
  CacheMultiGetRequest one_bad;
  one_bad.add_keys("fine");
  one_bad.add_keys("");
  res = Call(a, "/memory.v1.Cache/MultiGet", one_bad, tok);
  EXPECT_NE(std::string::npos, res.status.error_message().find("keys[1]"))
      << res.status.error_message();

  // Tokens: none, and one without the scope.
  CacheGetRequest g;
  g.set_key("k");
  res = Unary(a.ch, "/memory.v1.Cache/Get", g.SerializeAsString(), 5000);
  EXPECT_EQ(StatusCode::UNAUTHENTICATED, res.status.error_code());
  res = Call(a, "/memory.v1.Cache/Set", g, Token(t, "alice", "cache:read"));
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, res.status.error_code());
}

TEST_F(CacheTest, TwoReplicasNeverServeAStaleL1PastThePropagationDelay) {
  Replica a = Launch(), b = Launch();
  std::string tok = Token(Tenant("repl"), "alice", "cache:read cache:write");
  std::vector<double> delays_ms;
  for (int i = 0; i < 20; i++) {
    std::string key = "k" + std::to_string(i);
    MustSet(a, tok, key, "v1");
    // b holds it in L1 (a promotion racing the invalidation of a's own Set
    // is dropped on purpose, so this may take a second Get).
    ASSERT_TRUE(Eventually([&] { return Get(b, tok, key).lookup() == CACHE_LOOKUP_HIT_L1; }, 2000));
    if (i % 2 == 0) {
      ASSERT_TRUE(Delete(a, tok, key).status.ok());
    } else {
      MustSet(a, tok, key, "v2");
    }
    auto t0 = Clock::now();
    bool seen = Eventually(
        [&] {
          CacheItem it = Get(b, tok, key);
          return i % 2 == 0 ? it.lookup() == CACHE_LOOKUP_MISS : it.value() == "v2";
        },
        2000);
    ASSERT_TRUE(seen) << key << ": b still serves the old value after 2 s";
    delays_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(delays_ms.begin(), delays_ms.end());
  printf(
      "invalidation propagation (write on A returned -> B answers the new state), 20 keys: "
      "median %.2f ms, max %.2f ms (includes a Get round trip)\n",
      delays_ms[delays_ms.size() / 2], delays_ms.back());
  EXPECT_LT(delays_ms.back(), 500.0);
}

TEST_F(CacheTest, RedisKilledAndRestartedDegradesCacheOnlyThenRecovers) {
  RedisServer redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  Replica a = Launch({"--cache-entities"}, redis.url());
  std::string t = Tenant("fault");
  std::string tok = Token(t, "alice", "cache:read cache:write global:read global:write");
  MustSet(a, tok, "warm", "in L1");
  ASSERT_EQ(1, Health(a, "memory.v1.Cache.L2"));  // 1 = SERVING, 2 = NOT_SERVING

  ASSERT_TRUE(redis.Stop()) << redis.error();
  ASSERT_TRUE(Eventually([&] { return Health(a, "memory.v1.Cache.L2") == 2; }, 3000))
      << "health does not report the cache degraded";
  EXPECT_EQ(1, Health(a, "memory.v1.Cache"));
  EXPECT_EQ(1, Health(a, ""));
  // Cache calls answer within their deadline, from L1 or as misses.
  auto t0 = Clock::now();
  CacheItem it = Get(a, tok, "warm", 1000);
  EXPECT_EQ(CACHE_LOOKUP_HIT_L1, it.lookup());
  EXPECT_EQ("in L1", it.value());
  EXPECT_EQ(CACHE_LOOKUP_MISS, Get(a, tok, "cold", 1000).lookup());
  // A Set that reached L1 alone succeeds but carries no consistency token
  // (common.proto): Redis, which a read with one would ask, lacks it.
  Result during = Set(a, tok, "during", "L1 only", 60000, LABEL_UNSPECIFIED);
  ASSERT_TRUE(during.status.ok()) << during.status.error_message();
  EXPECT_EQ(0u, during.trailers.count("memoryd-consistency"));
  EXPECT_EQ("L1 only", Get(a, tok, "during", 1000).value());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 4.0);
  // Calls of other tiers do not notice.
  for (int i = 0; i < 20; i++) {
    PutEntityRequest p;
    p.set_id("e" + std::to_string(i));
    p.set_type("t");
    p.set_name("n");
    Result r = Call(a, "/memory.v1.GlobalMemory/PutEntity", p, tok);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    GetEntityRequest g;
    g.set_id(p.id());
    r = Call(a, "/memory.v1.GlobalMemory/GetEntity", g, tok);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }

  ASSERT_TRUE(redis.Start()) << redis.error();
  ASSERT_TRUE(Eventually([&] { return Health(a, "memory.v1.Cache.L2") == 1; }, 10000))
      << "L2 did not come back";
  // L2 works again without restarting memoryd: a value set now reaches
  // another replica through Redis.
  Result after = Set(a, tok, "after", "back in Redis", 60000, LABEL_UNSPECIFIED);
  ASSERT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(1u, after.trailers.count("memoryd-consistency"));
  Replica b = Launch({}, redis.url());
  it = Get(b, tok, "after");
  EXPECT_EQ(CACHE_LOOKUP_HIT_L2, it.lookup());
  EXPECT_EQ("back in Redis", it.value());
  // a dropped its L1 when it re-subscribed (it may have missed invalidations).
  EXPECT_NE(CACHE_LOOKUP_HIT_L1, Get(a, tok, "warm").lookup());
}

TEST_F(CacheTest, GetEntityThroughTheCacheIsInvalidatedOnEveryReplicaAndKeepsTheDiode) {
  Replica a = Launch({"--cache-entities"}), b = Launch({"--cache-entities"});
  std::string t = Tenant("entities");
  std::string alice = Token(t, "alice", "global:read global:write");
  std::string bob = Token(t, "bob", "global:read");
  std::string all_public = Token(t, "root", "global:read:all", "PUBLIC");
  PutEntityRequest p;
  p.set_id("e1");
  p.set_type("person");
  p.set_name("first");
  p.set_label(LABEL_CONFIDENTIAL);
  ASSERT_TRUE(Call(a, "/memory.v1.GlobalMemory/PutEntity", p, alice).status.ok());
  GetEntityRequest g;
  g.set_id("e1");
  auto name_on = [&](const Replica& r, const std::string& tok) {
    Result res = Call(r, "/memory.v1.GlobalMemory/GetEntity", g, tok);
    if (!res.status.ok()) return "status " + std::to_string(res.status.error_code());
    GetEntityResponse resp;
    resp.ParseFromString(res.body);
    return resp.entity().name();
  };
  EXPECT_EQ("first", name_on(b, alice));
  EXPECT_EQ("first", name_on(b, alice));  // now from b's L1
  // The cached copy still goes through the read diode.
  EXPECT_EQ("status 5", name_on(b, bob));         // another owner: NOT_FOUND
  EXPECT_EQ("status 5", name_on(b, all_public));  // CONFIDENTIAL above PUBLIC
  p.set_name("second");
  ASSERT_TRUE(Call(a, "/memory.v1.GlobalMemory/PutEntity", p, alice).status.ok());
  EXPECT_TRUE(Eventually([&] { return name_on(b, alice) == "second"; }, 2000));
  DeleteEntityRequest d;
  d.set_id("e1");
  ASSERT_TRUE(Call(a, "/memory.v1.GlobalMemory/DeleteEntity", d, alice).status.ok());
  EXPECT_TRUE(Eventually([&] { return name_on(b, alice) == "status 5"; }, 2000));
}

// With PostgreSQL frozen (SIGSTOP: connections accepted, nothing
// answered), what needs no PostgreSQL keeps answering on the one worker:
// Health/Check, Access.WhoAmI (authenticated; its audit row waits in the
// queue) and Cache.Get from L1, while GetEntity calls wait on the server
// and end by their deadline. After SIGCONT PostgreSQL answers again
// without a restart.
TEST_F(CacheTest, FrozenPostgresLeavesHealthWhoAmIAndL1HitsAnswering) {
  PgServer pg;
  ASSERT_TRUE(pg.ok()) << pg.error();
  Replica a = Launch({"--workers=1", "--pg-connect-timeout=1"}, "", pg.url());
  std::string tok = Token(Tenant("frozen"), "alice", "cache:read cache:write global:read");
  MustSet(a, tok, "warm", "in L1");
  ASSERT_EQ(CACHE_LOOKUP_HIT_L1, Get(a, tok, "warm").lookup());
  GetEntityRequest g;
  g.set_id("e");
  ASSERT_EQ(grpc::StatusCode::NOT_FOUND,
            Call(a, "/memory.v1.GlobalMemory/GetEntity", g, tok).status.error_code());
  ASSERT_TRUE(pg.Freeze()) << pg.error();
  const int kDeadlineMs = 1500;
  std::vector<Result> held(3);
  std::vector<std::thread> ts;
  for (size_t i = 0; i < held.size(); i++)
    ts.emplace_back(
        [&, i] { held[i] = Call(a, "/memory.v1.GlobalMemory/GetEntity", g, tok, kDeadlineMs); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<int64_t> health_ms, whoami_ms, l1_ms;
  CacheGetRequest warm;
  warm.set_key("warm");
  for (int i = 0; i < 10; i++) {
    Result h = Unary(a.ch, "/grpc.health.v1.Health/Check", "", 2000);
    EXPECT_TRUE(h.status.ok()) << h.status.error_message();
    health_ms.push_back(h.elapsed.count());
    Result w = Call(a, "/memory.v1.Access/WhoAmI", memory::v1::AccessWhoAmIRequest(), tok, 2000);
    EXPECT_TRUE(w.status.ok()) << w.status.error_message();
    whoami_ms.push_back(w.elapsed.count());
    Result c = Call(a, "/memory.v1.Cache/Get", warm, tok, 2000);
    CacheGetResponse resp;
    EXPECT_TRUE(c.status.ok() && resp.ParseFromString(c.body)) << c.status.error_message();
    EXPECT_EQ(CACHE_LOOKUP_HIT_L1, resp.item().lookup());
    l1_ms.push_back(c.elapsed.count());
  }
  for (auto& t : ts) t.join();
  for (size_t i = 0; i < held.size(); i++) {
    EXPECT_EQ(grpc::StatusCode::DEADLINE_EXCEEDED, held[i].status.error_code())
        << held[i].status.error_message();
    EXPECT_LT(held[i].elapsed.count(), kDeadlineMs + 300) << "ended well past its deadline";
  }
  // Within 100 ms each (the median; every one within 500 ms, a margin for
  // a loaded machine).
  for (auto* v : {&health_ms, &whoami_ms, &l1_ms}) {
    std::sort(v->begin(), v->end());
    EXPECT_LE((*v)[v->size() / 2], 100);
    EXPECT_LE(v->back(), 500);
  }
  printf("frozen PostgreSQL: Health/Check max %lld ms, WhoAmI max %lld ms, L1 hit max %lld ms\n",
         (long long)health_ms.back(), (long long)whoami_ms.back(), (long long)l1_ms.back());
  ASSERT_TRUE(pg.Thaw()) << pg.error();
  EXPECT_TRUE(Eventually(
      [&] {
        return Call(a, "/memory.v1.GlobalMemory/GetEntity", g, tok).status.error_code() ==
               grpc::StatusCode::NOT_FOUND;
      },
      10000))
      << a.proc->Log();
}

// A hung Redis (SIGSTOP) costs a Cache.Get at most the L2 lookup's bound
// (1 s), not the call's deadline: it answers from L1 (here a miss) and
// the one worker stays free; after SIGCONT L2 answers again.
TEST_F(CacheTest, HungRedisCostsALookupItsBoundThenRecovers) {
  RedisServer redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  Replica a = Launch({"--workers=1"}, redis.url()), b = Launch({}, redis.url());
  std::string tok = Token(Tenant("hung"), "alice", "cache:read cache:write");
  MustSet(b, tok, "k", "from b");  // in Redis; not in a's L1
  ASSERT_TRUE(redis.Freeze()) << redis.error();
  CacheGetRequest req;
  req.set_key("k");
  Result r = Call(a, "/memory.v1.Cache/Get", req, tok, 5000);
  Result h = Unary(a.ch, "/grpc.health.v1.Health/Check", "", 2000);
  // A Set too: Redis does not answer its script within the bound, so the
  // value is kept in this replica's L1 alone.
  auto set_at = Clock::now();
  MustSet(a, tok, "during", "in a's L1");
  auto set_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - set_at);
  CacheItem during = Get(a, tok, "during");
  ASSERT_TRUE(redis.Thaw()) << redis.error();
  EXPECT_LT(set_ms.count(), 2500) << "the write was not bounded";
  EXPECT_EQ(CACHE_LOOKUP_HIT_L1, during.lookup());
  EXPECT_EQ("in a's L1", during.value());
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  CacheGetResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_EQ(CACHE_LOOKUP_MISS, resp.item().lookup());
  EXPECT_GE(r.elapsed.count(), 900);
  EXPECT_LT(r.elapsed.count(), 2500) << "the lookup was not bounded";
  EXPECT_TRUE(h.status.ok()) << h.status.error_message();
  EXPECT_TRUE(Eventually(
      [&] {
        Result g = Call(a, "/memory.v1.Cache/Get", req, tok, 2000);
        CacheGetResponse gr;
        return g.status.ok() && gr.ParseFromString(g.body) &&
               gr.item().lookup() == CACHE_LOOKUP_HIT_L2 && gr.item().value() == "from b";
      },
      10000))
      << a.proc->Log();
}

}  // namespace
