// Session end to end: the real memoryd binary, real tokens, the Redis and
// PostgreSQL `make test` runs. Start, Set, Get, List and End; the life of a
// session (used: extended; unused: EXPIRED, readable, not writable; past
// its grace: gone); durable sessions written through to PostgreSQL and read
// back from it once Redis lost them; closing a durable session applies the
// PII policy (dropped under reject, redacted under redact); the read diode
// (tenant, owner, label) on every method; the bounds; bad input refused
// with nothing changed; the audit rows; Privacy.Forget reaching both stores.
// Each test works in a tenant of its own: the Redis is shared.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "google/protobuf/util/time_util.h"
#include "memory/v1/audit.pb.h"
#include "memory/v1/privacy.pb.h"
#include "memory/v1/session.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using google::protobuf::util::TimeUtil;
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Unary;

const char kRW[] = "session:read session:write";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SleepUntilMs(int64_t when_ms) {
  int64_t d = when_ms - NowMs();
  if (d > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d));
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    ASSERT_FALSE(TestRedisUrl().empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
    tenant_ = "st-" + std::to_string(getpid()) + "-" + std::to_string(NowMs());
  }

  void Up(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--pg-url=" + db_.url(), "--redis-url=" + TestRedisUrl(),
                                     "--shutdown-grace=1"};
    args.insert(args.end(), extra.begin(), extra.end());
    m_ = std::make_unique<MemorydProcess>(args);
    ASSERT_TRUE(m_->Start()) << m_->Log();
    ch_ = testing_client::Connect(m_->port());
    alice_ = Token("alice", kRW);
  }

  std::string Token(const std::string& sub, const std::string& scope,
                    const std::string& clr = "SECRET", const std::string& lvl = "PUBLIC",
                    const std::string& tenant = "") {
    TestClaims c;
    c.tenant = tenant.empty() ? tenant_ : tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = clr;
    c.lvl = lvl;
    return m_->keys()->Mint(c);
  }

  Result Call(const std::string& method, const google::protobuf::Message& req,
              const std::string& token) {
    return Unary(ch_, "/memory.v1.Session/" + method, req.SerializeAsString(), 10000,
                 {{"authorization", TestKeys::Bearer(token)}});
  }

  template <typename Resp>
  Resp Must(const std::string& method, const google::protobuf::Message& req,
            const std::string& token) {
    Result r = Call(method, req, token);
    EXPECT_TRUE(r.status.ok()) << method << ": " << r.status.error_message();
    Resp resp;
    EXPECT_TRUE(resp.ParseFromString(r.body));
    return resp;
  }

  SessionInfo Start(const std::string& tok, int duration_ms = 0, bool durable = false) {
    SessionStartRequest req;
    if (duration_ms) *req.mutable_duration() = TimeUtil::MillisecondsToDuration(duration_ms);
    req.set_durable(durable);
    return Must<SessionStartResponse>("Start", req, tok).session();
  }

  Result Set(const std::string& tok, const std::string& id, const std::string& key,
             const std::string& value, Label label = LABEL_UNSPECIFIED) {
    SessionSetRequest req;
    req.set_session_id(id);
    req.set_key(key);
    req.set_value(value);
    req.set_label(label);
    return Call("Set", req, tok);
  }

  Result Get(const std::string& tok, const std::string& id, const std::string& key) {
    SessionGetRequest req;
    req.set_session_id(id);
    req.set_key(key);
    return Call("Get", req, tok);
  }

  // The value, or "<CODE>".
  std::string Value(const std::string& tok, const std::string& id, const std::string& key) {
    Result r = Get(tok, id, key);
    if (!r.status.ok()) return "<" + std::to_string(r.status.error_code()) + ">";
    SessionGetResponse resp;
    resp.ParseFromString(r.body);
    return resp.record().value();
  }

  Result List(const std::string& tok, const std::string& id, bool values = true) {
    SessionListRequest req;
    req.set_session_id(id);
    req.set_with_values(values);
    return Call("List", req, tok);
  }

  std::map<std::string, std::string> Records(const std::string& tok, const std::string& id) {
    Result r = List(tok, id);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    SessionListResponse resp;
    resp.ParseFromString(r.body);
    std::map<std::string, std::string> out;
    for (const auto& rec : resp.records()) out[rec.key()] = rec.value();
    return out;
  }

  Result End(const std::string& tok, const std::string& id) {
    SessionEndRequest req;
    req.set_session_id(id);
    return Call("End", req, tok);
  }

  std::string Pg(const std::string& sql) {
    PgSession s(db_.url());
    EXPECT_TRUE(s.ok()) << s.error();
    return s.Value(sql);
  }

  // Redis's copy of a session gone, as when Redis lost its data.
  void DropFromRedis(const std::string& id) {
    std::string key =
        "memoryd:session:" + std::to_string(tenant_.size()) + ":" + tenant_ + ":" + id;
    std::string cmd = "redis-cli -u '" + TestRedisUrl() + "' DEL '" + key + "' >/dev/null";
    ASSERT_EQ(0, system(cmd.c_str())) << cmd;
  }

  PgTestDb db_;
  std::string tenant_;
  std::unique_ptr<MemorydProcess> m_;
  std::shared_ptr<grpc::Channel> ch_;
  std::string alice_;
};

TEST_F(SessionTest, StartSetGetListEnd) {
  Up();
  SessionInfo s = Start(alice_);
  EXPECT_EQ(36u, s.session_id().size());
  EXPECT_EQ("alice", s.owner());
  EXPECT_EQ(SESSION_STATE_ACTIVE, s.state());
  EXPECT_EQ(30 * 60, s.duration().seconds());  // the default
  EXPECT_FALSE(s.durable());
  EXPECT_EQ(3600 * 1000, TimeUtil::DurationToMilliseconds(s.purge_time() - s.expire_time()));

  Result r = Set(alice_, s.session_id(), "goal", "book a trip");
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  SessionSetResponse set;
  set.ParseFromString(r.body);
  EXPECT_EQ(1, set.meta().version());
  EXPECT_EQ(LABEL_PUBLIC, set.meta().label());
  ASSERT_TRUE(Set(alice_, s.session_id(), "goal", "book a train").status.ok());
  ASSERT_TRUE(Set(alice_, s.session_id(), "bytes", std::string("\0\xff", 2)).status.ok());

  r = Get(alice_, s.session_id(), "goal");
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  SessionGetResponse got;
  got.ParseFromString(r.body);
  EXPECT_EQ("book a train", got.record().value());
  EXPECT_EQ(2, got.record().meta().version());
  EXPECT_EQ(12, got.record().size_bytes());
  EXPECT_EQ(StatusCode::NOT_FOUND, Get(alice_, s.session_id(), "nope").status.error_code());

  EXPECT_EQ((std::map<std::string, std::string>{{"bytes", std::string("\0\xff", 2)},
                                                {"goal", "book a train"}}),
            Records(alice_, s.session_id()));
  SessionListResponse keys_only;
  keys_only.ParseFromString(List(alice_, s.session_id(), false).body);
  ASSERT_EQ(2, keys_only.records_size());
  for (const auto& rec : keys_only.records()) {
    EXPECT_TRUE(rec.value().empty());
    EXPECT_GT(rec.size_bytes(), 0);
  }

  r = End(alice_, s.session_id());
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  SessionEndResponse ended;
  ended.ParseFromString(r.body);
  EXPECT_EQ(SESSION_STATE_ENDED, ended.session().state());
  EXPECT_EQ(2, ended.record_count());
  // Ended: readable for the grace, not writable.
  EXPECT_EQ("book a train", Value(alice_, s.session_id(), "goal"));
  r = Set(alice_, s.session_id(), "goal", "x");
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("ended"));
  EXPECT_EQ(StatusCode::NOT_FOUND,
            Get(alice_, "00000000-0000-0000-0000-000000000000", "goal").status.error_code());
}

TEST_F(SessionTest, UseExtendsTheSessionThenItExpiresThenItIsGone) {
  Up({"--session-grace-ms=1500"});
  SessionInfo s = Start(alice_, 2000);
  int64_t first_expire = TimeUtil::TimestampToMilliseconds(s.expire_time());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  ASSERT_TRUE(Set(alice_, s.session_id(), "k", "v").status.ok());
  SessionGetResponse used;
  used.ParseFromString(Get(alice_, s.session_id(), "k").body);
  int64_t expire = TimeUtil::TimestampToMilliseconds(used.session().expire_time());
  EXPECT_GE(expire - first_expire, 600);  // moved on by the use
  EXPECT_EQ(SESSION_STATE_ACTIVE, used.session().state());
  EXPECT_EQ(1500, TimeUtil::TimestampToMilliseconds(used.session().purge_time()) - expire);

  // Unused past its expiry: EXPIRED, readable, not writable; reading does
  // not extend it.
  SleepUntilMs(expire + 300);
  Result r = Get(alice_, s.session_id(), "k");
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  SessionGetResponse late;
  late.ParseFromString(r.body);
  EXPECT_EQ(SESSION_STATE_EXPIRED, late.session().state());
  EXPECT_EQ(expire, TimeUtil::TimestampToMilliseconds(late.session().expire_time()));
  r = Set(alice_, s.session_id(), "k", "w");
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("expired"));

  // Ending an EXPIRED session does not lengthen it.
  r = End(alice_, s.session_id());
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  SessionEndResponse ended;
  ended.ParseFromString(r.body);
  EXPECT_EQ(SESSION_STATE_ENDED, ended.session().state());
  EXPECT_EQ(expire, TimeUtil::TimestampToMilliseconds(ended.session().expire_time()));

  // Past the grace: gone.
  SleepUntilMs(expire + 1500 + 300);
  EXPECT_EQ(StatusCode::NOT_FOUND, Get(alice_, s.session_id(), "k").status.error_code());
  EXPECT_EQ(StatusCode::NOT_FOUND, List(alice_, s.session_id()).status.error_code());
}

TEST_F(SessionTest, ADurableSessionIsReadFromPostgresOnceRedisLostIt) {
  Up();
  SessionInfo s = Start(alice_, 0, true);
  EXPECT_TRUE(s.durable());
  ASSERT_TRUE(Set(alice_, s.session_id(), "a", "one").status.ok());
  ASSERT_TRUE(Set(alice_, s.session_id(), "b", "two").status.ok());
  ASSERT_TRUE(Set(alice_, s.session_id(), "a", "uno").status.ok());
  EXPECT_EQ("2",
            Pg("SELECT count(*) FROM session_records WHERE session_id = '" + s.session_id() + "'"));
  EXPECT_EQ("uno", Pg("SELECT convert_from(value, 'UTF8') FROM session_records WHERE key = 'a'"));
  DropFromRedis(s.session_id());
  // Every acknowledged write is there.
  EXPECT_EQ((std::map<std::string, std::string>{{"a", "uno"}, {"b", "two"}}),
            Records(alice_, s.session_id()));
  SessionGetResponse got;
  got.ParseFromString(Get(alice_, s.session_id(), "a").body);
  EXPECT_EQ(2, got.record().meta().version());
  EXPECT_TRUE(got.session().durable());
  // Another principal does not see it there either.
  EXPECT_EQ(StatusCode::NOT_FOUND, Get(Token("bob", kRW), s.session_id(), "a").status.error_code());
  // A plain session Redis lost is gone.
  SessionInfo plain = Start(alice_);
  ASSERT_TRUE(Set(alice_, plain.session_id(), "a", "x").status.ok());
  DropFromRedis(plain.session_id());
  EXPECT_EQ(StatusCode::NOT_FOUND, Get(alice_, plain.session_id(), "a").status.error_code());
}

// A durable session past its grace is closed: records with PII dropped
// (--pii-policy=reject) or redacted (redact), the others kept. The tests
// wait on PostgreSQL: a read through the API would extend the session.
TEST_F(SessionTest, ClosingADurableSessionDropsItsPiiUnderReject) {
  Up({"--session-grace-ms=0", "--session-sweep-ms=200"});
  std::string pii = Token("alice", std::string(kRW) + " pii:write");
  SessionInfo s = Start(pii, 1000, true);
  ASSERT_TRUE(Set(pii, s.session_id(), "contact", "mail ada@example.com").status.ok());
  ASSERT_TRUE(Set(pii, s.session_id(), "plan", "train at 9").status.ok());
  std::string closed;
  for (int i = 0; i < 100 && closed != "t"; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    closed = Pg("SELECT closed_at IS NOT NULL FROM sessions WHERE id = '" + s.session_id() + "'");
  }
  ASSERT_EQ("t", closed) << m_->Log();
  EXPECT_EQ((std::map<std::string, std::string>{{"plan", "train at 9"}}),
            Records(alice_, s.session_id()));
  SessionListResponse l;
  l.ParseFromString(List(alice_, s.session_id()).body);
  EXPECT_EQ(SESSION_STATE_CLOSED, l.session().state());
  EXPECT_NE(std::string::npos, m_->Log().find("closed durable sessions")) << m_->Log();
  // Closed: not writable.
  EXPECT_EQ(StatusCode::NOT_FOUND, Set(pii, s.session_id(), "x", "y").status.error_code());
}

TEST_F(SessionTest, ClosingADurableSessionRedactsItsPiiUnderRedact) {
  Up({"--session-grace-ms=0", "--session-sweep-ms=200", "--pii-policy=redact"});
  std::string pii = Token("alice", std::string(kRW) + " pii:write");
  SessionInfo s = Start(pii, 1000, true);
  ASSERT_TRUE(Set(pii, s.session_id(), "contact", "mail ada@example.com").status.ok());
  SessionGetResponse before;
  before.ParseFromString(Get(pii, s.session_id(), "contact").body);
  ASSERT_EQ(1, before.record().meta().pii_kinds_size());
  std::string closed;
  for (int i = 0; i < 100 && closed != "t"; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    closed = Pg("SELECT closed_at IS NOT NULL FROM sessions WHERE id = '" + s.session_id() + "'");
  }
  ASSERT_EQ("t", closed) << m_->Log();
  EXPECT_EQ("mail [REDACTED:email]", Value(alice_, s.session_id(), "contact"));
  SessionGetResponse after;
  after.ParseFromString(Get(alice_, s.session_id(), "contact").body);
  EXPECT_EQ(0, after.record().meta().pii_kinds_size());
  EXPECT_EQ(SESSION_STATE_CLOSED, after.session().state());
}

TEST_F(SessionTest, PastItsPurgeADurableSessionShowsNoPiiEvenBeforeTheSweeper) {
  Up({"--session-grace-ms=0", "--session-sweep-ms=0"});  // this replica never sweeps
  std::string pii = Token("alice", std::string(kRW) + " pii:write");
  SessionInfo s = Start(pii, 1000, true);
  ASSERT_TRUE(Set(pii, s.session_id(), "contact", "mail ada@example.com").status.ok());
  ASSERT_TRUE(Set(pii, s.session_id(), "plan", "train at 9").status.ok());
  SleepUntilMs(TimeUtil::TimestampToMilliseconds(s.purge_time()) + 1500);
  EXPECT_EQ("f", Pg("SELECT closed_at IS NOT NULL FROM sessions"));
  EXPECT_EQ("2", Pg("SELECT count(*) FROM session_records"));
  EXPECT_EQ((std::map<std::string, std::string>{{"plan", "train at 9"}}),
            Records(alice_, s.session_id()));
  EXPECT_EQ("<5>", Value(alice_, s.session_id(), "contact"));
}

TEST_F(SessionTest, TheReadDiodeHoldsOnEveryMethod) {
  Up();
  SessionInfo s = Start(alice_);
  ASSERT_TRUE(Set(alice_, s.session_id(), "open", "o").status.ok());
  ASSERT_TRUE(Set(alice_, s.session_id(), "secret", "s", LABEL_SECRET).status.ok());
  const std::string id = s.session_id();

  for (const std::string& tok :
       {Token("bob", kRW), Token("alice", kRW, "SECRET", "PUBLIC", tenant_ + "-other")}) {
    EXPECT_EQ(StatusCode::NOT_FOUND, Get(tok, id, "open").status.error_code());
    EXPECT_EQ(StatusCode::NOT_FOUND, List(tok, id).status.error_code());
    EXPECT_EQ(StatusCode::NOT_FOUND, Set(tok, id, "open", "x").status.error_code());
    EXPECT_EQ(StatusCode::NOT_FOUND, End(tok, id).status.error_code());
  }
  // :all reads another's session, up to its ceiling.
  std::string all_internal = Token("bob", "session:read:all", "INTERNAL");
  EXPECT_EQ("o", Value(all_internal, id, "open"));
  EXPECT_EQ("<5>", Value(all_internal, id, "secret"));
  EXPECT_EQ((std::map<std::string, std::string>{{"open", "o"}}), Records(all_internal, id));
  std::string all_secret = Token("bob", "session:read:all");
  EXPECT_EQ(2u, Records(all_secret, id).size());
  // Writing over a record above one's ceiling is refused; a label never
  // goes down.
  std::string writer = Token("alice", kRW, "INTERNAL");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Set(writer, id, "secret", "x").status.error_code());
  EXPECT_EQ("s", Value(alice_, id, "secret"));
  SessionSetResponse up;
  up.ParseFromString(Set(alice_, id, "secret", "s2", LABEL_PUBLIC).body);
  EXPECT_EQ(LABEL_SECRET, up.meta().label());
  std::string floor = Token("alice", kRW, "SECRET", "CONFIDENTIAL");
  up.ParseFromString(Set(floor, id, "new", "n").body);
  EXPECT_EQ(LABEL_CONFIDENTIAL, up.meta().label());
  // Without the scope.
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Set(Token("alice", "session:read"), id, "x", "y").status.error_code());
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Get(Token("alice", "entries:read"), id, "open").status.error_code());
}

TEST_F(SessionTest, BadInputIsRefusedAndChangesNothing) {
  Up();
  SessionInfo s = Start(alice_);
  ASSERT_TRUE(Set(alice_, s.session_id(), "k", "v").status.ok());
  struct Case {
    Result r;
    std::string field;
  };
  SessionStartRequest too_long;
  too_long.mutable_duration()->set_seconds(8 * 24 * 3600);
  SessionStartRequest too_short;
  too_short.mutable_duration()->set_nanos(500000000);
  std::vector<Case> cases = {
      {Set(alice_, s.session_id(), "", "v"), "key"},
      {Set(alice_, s.session_id(), "k\x01", "v"), "key"},
      {Set(alice_, s.session_id(), "k", std::string(256 * 1024 + 1, 'x')), "value"},
      {Set(alice_, s.session_id(), "k", "v", static_cast<Label>(9)), "label"},
      {Set(alice_, s.session_id(), "k", "mail ada@example.com"), "email"},
      {Set(alice_, "", "k", "v"), "session_id"},
      {Get(alice_, s.session_id(), std::string(257, 'k')), "key"},
      {Call("Start", too_long, alice_), "duration"},
      {Call("Start", too_short, alice_), "duration"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, c.r.status.error_code()) << c.field;
    EXPECT_NE(std::string::npos, c.r.status.error_message().find(c.field))
        << c.r.status.error_message();
  }
  EXPECT_EQ((std::map<std::string, std::string>{{"k", "v"}}), Records(alice_, s.session_id()));
}

TEST_F(SessionTest, BoundsOnValuesAndSessions) {
  Up();
  SessionInfo s = Start(alice_);
  std::string big(256 * 1024, 'x');
  for (int i = 0; i < 8; i++)
    ASSERT_TRUE(Set(alice_, s.session_id(), "k" + std::to_string(i), big).status.ok()) << i;
  Result r = Set(alice_, s.session_id(), "k8", big);  // 2 MiB reached
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("2 MiB"));
  // Replacing a value within the bound goes.
  EXPECT_TRUE(Set(alice_, s.session_id(), "k0", "small").status.ok());
  EXPECT_TRUE(Set(alice_, s.session_id(), "k8", "fits now").status.ok());

  // 1000 sessions open at once per principal; another principal is not
  // held to alice's.
  for (int i = 1; i < 1000; i++) {
    SessionStartRequest req;
    ASSERT_TRUE(Call("Start", req, alice_).status.ok()) << i;
  }
  SessionStartRequest req;
  Result more = Call("Start", req, alice_);
  EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, more.status.error_code());
  EXPECT_NE(std::string::npos, more.status.error_message().find("1000 sessions"));
  EXPECT_TRUE(Call("Start", req, Token("bob", kRW)).status.ok());
}

TEST_F(SessionTest, WritesAreAuditedAndForgetReachesBothStores) {
  Up();
  SessionInfo plain = Start(alice_);
  SessionInfo durable = Start(alice_, 0, true);
  ASSERT_TRUE(Set(alice_, plain.session_id(), "a", "1").status.ok());
  ASSERT_TRUE(Set(alice_, durable.session_id(), "b", "2").status.ok());
  ASSERT_TRUE(Set(alice_, durable.session_id(), "c", "3").status.ok());
  // bob writes into alice's session (write:all): his record is his.
  std::string bob = Token("bob", "session:read:all session:write:all");
  ASSERT_TRUE(Set(bob, plain.session_id(), "bobs", "x").status.ok());
  SessionInfo bobs = Start(bob);
  ASSERT_TRUE(Set(bob, bobs.session_id(), "mine", "y").status.ok());

  std::string auditor = Token("auditor", "audit:read:all");
  AuditListRequest areq;
  areq.mutable_filter()->set_target_id("session:" + durable.session_id() + "/b");
  Result ar = Unary(ch_, "/memory.v1.Audit/List", areq.SerializeAsString(), 10000,
                    {{"authorization", TestKeys::Bearer(auditor)}});
  ASSERT_TRUE(ar.status.ok()) << ar.status.error_message();
  AuditListResponse audit;
  audit.ParseFromString(ar.body);
  ASSERT_EQ(1, audit.records_size());
  EXPECT_EQ("/memory.v1.Session/Set", audit.records(0).method());

  // A subject id matches only records whose value is a JSON object naming
  // it: none here, so alice's own erasure by subject id leaves her
  // sessions be (privacy_reach_test erases records that do name one).
  PrivacyForgetRequest own;
  own.set_subject_id("subject-1");
  own.set_reason("test");
  Result mine = Unary(ch_, "/memory.v1.Privacy/Forget", own.SerializeAsString(), 30000,
                      {{"authorization", TestKeys::Bearer(Token("alice", "privacy:forget"))}});
  ASSERT_TRUE(mine.status.ok()) << mine.status.error_message();
  EXPECT_EQ((std::map<std::string, std::string>{{"a", "1"}, {"bobs", "x"}}),
            Records(alice_, plain.session_id()));
  EXPECT_EQ("2", Pg("SELECT count(*) FROM session_records"));

  std::string admin = Token("admin", "privacy:forget:all");
  PrivacyForgetRequest req;
  req.set_principal("bob");
  req.set_reason("test");
  Result r = Unary(ch_, "/memory.v1.Privacy/Forget", req.SerializeAsString(), 30000,
                   {{"authorization", TestKeys::Bearer(admin)}});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  PrivacyForgetResponse resp;
  resp.ParseFromString(r.body);
  int64_t erased = -1;
  for (const auto& c : resp.receipt().counts())
    if (c.tier() == TIER_SESSION) erased = c.erased_count();
  EXPECT_EQ(2, erased);  // his record in alice's session, his own session's record
  EXPECT_EQ((std::map<std::string, std::string>{{"a", "1"}}), Records(alice_, plain.session_id()));
  EXPECT_EQ(StatusCode::NOT_FOUND, List(bob, bobs.session_id()).status.error_code());

  req.set_principal("alice");
  r = Unary(ch_, "/memory.v1.Privacy/Forget", req.SerializeAsString(), 30000,
            {{"authorization", TestKeys::Bearer(admin)}});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  resp.ParseFromString(r.body);
  for (const auto& c : resp.receipt().counts())
    if (c.tier() == TIER_SESSION) erased = c.erased_count();
  EXPECT_EQ(3, erased);  // one in Redis, two durable ones counted in PostgreSQL
  EXPECT_EQ(StatusCode::NOT_FOUND, List(alice_, plain.session_id()).status.error_code());
  EXPECT_EQ(StatusCode::NOT_FOUND, List(alice_, durable.session_id()).status.error_code());
  EXPECT_EQ("0", Pg("SELECT count(*) FROM session_records"));
  EXPECT_EQ("0", Pg("SELECT count(*) FROM sessions"));
}

}  // namespace
