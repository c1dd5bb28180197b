// Privacy.Forget end to end: two real memoryd replicas on one PostgreSQL
// and Redis, with records of a data subject in every tier (the graph,
// tasks, episodic points, entries, the cache, a blackboard) and copies of
// them warm on the second replica (its L1 caches, its embedded index, the
// router's entry cache). After Forget no read path on either replica
// returns anything of the subject; a dry run counts exactly what the real
// run erases; the receipt verifies offline and fails when altered; a
// backend down part-way fails the call and a second call completes it;
// scopes, tenants and bad input; the Qdrant backend on its contract
// stand-in.
#include "tests/server/privacy_fixture.h"

namespace {

using namespace privacy_test;  // NOLINT: the fixture and its helpers
using namespace memory::v1;    // NOLINT: many message types
using grpc::StatusCode;

TEST_F(PrivacyTest, ForgetBySubjectIdReachesEveryTierOnEveryReplica) {
  Replica& a = Launch();
  Replica& b = Launch();
  const std::string tok = Token("alice", kEverything);
  const std::string subject = Unique("subj");
  Seed(a, tok, "x", subject);
  // Everything is readable, on b too, which now holds warm copies: its
  // entity and entry caches, its L1, its embedded index.
  for (Replica* r : {&a, &b}) {
    std::string before = ReadEverything(*r, tok, "x");
    EXPECT_NE(std::string::npos, before.find(subject)) << before;
    EXPECT_NE(std::string::npos, before.find("GetEntity: 0 ")) << before;
    EXPECT_NE(std::string::npos, before.find("cached x-one")) << before;
    EXPECT_NE(std::string::npos, before.find("x-one-item")) << before;
    EXPECT_EQ(2, PointCount(*r, tok));
  }

  // The dry run counts and changes nothing.
  ForgetReceipt dry = MustForget(a, tok, "", subject, true);
  EXPECT_TRUE(dry.dry_run());
  std::map<int, int64_t> want = {
      {TIER_GLOBAL, 4},  // x-one, two relationships, one task
      {TIER_EPISODIC, 1}, {TIER_CACHE_L1, 0},   {TIER_CACHE_L2, 1},
      {TIER_ENTRIES, 1},  {TIER_BLACKBOARD, 1}, {TIER_WORKING, 0},  // Seed keeps no documents or
      {TIER_SESSION, 0}};  // sessions (privacy_reach_test has them)
  EXPECT_EQ(want, Counts(dry));
  EXPECT_NE(std::string::npos, ReadEverything(b, tok, "x").find(subject));

  // A subscriber on b hears the erasure as a DELETE.
  auto sub = Subscribe(b, tok);
  std::string msg;
  BlackboardSubscribeResponse ev;
  ASSERT_TRUE(sub->Read(&msg, 10000));
  ASSERT_TRUE(ev.ParseFromString(msg));
  ASSERT_EQ(BLACKBOARD_EVENT_KIND_SNAPSHOT, ev.kind());

  ForgetReceipt done = MustForget(a, tok, "", subject);
  EXPECT_FALSE(done.dry_run());
  ASSERT_TRUE(sub->Read(&msg, 10000));
  ASSERT_TRUE(ev.ParseFromString(msg));
  EXPECT_EQ(BLACKBOARD_EVENT_KIND_DELETE, ev.kind()) << ev.DebugString();
  ASSERT_EQ(1, ev.items_size());
  EXPECT_EQ("x-one-item", ev.items(0).key());
  sub->Cancel();
  sub->Finish();
  EXPECT_EQ(want, Counts(done));
  EXPECT_EQ(subject, done.subject_id());
  EXPECT_EQ(tenant_, done.tenant());
  EXPECT_EQ("alice", done.requested_by());
  EXPECT_FALSE(done.receipt_id().empty());
  EXPECT_NE(dry.receipt_id(), done.receipt_id());

  for (Replica* r : {&a, &b}) {
    std::string after = ReadEverything(*r, tok, "x");
    EXPECT_EQ(std::string::npos, after.find(subject)) << after;
    EXPECT_EQ(std::string::npos, after.find("x-one")) << after;          // no id, key or value
    EXPECT_EQ(std::string::npos, after.find("likes")) << after;          // the tagged relationship
    EXPECT_NE(std::string::npos, after.find("GetEntity: 5 ")) << after;  // NOT_FOUND
    EXPECT_NE(std::string::npos, after.find("Entries.Read: 5 ")) << after;  // NOT_FOUND
    // What is not the subject's stays.
    EXPECT_NE(std::string::npos, after.find("x-keep2")) << after;
    EXPECT_NE(std::string::npos, after.find("x-keep-task")) << after;
    EXPECT_NE(std::string::npos, after.find("x-keep point")) << after;
    EXPECT_NE(std::string::npos, after.find("x-keep-entry")) << after;
    EXPECT_NE(std::string::npos, after.find("x-keep-item")) << after;
    EXPECT_EQ(1, PointCount(*r, tok));
  }

  // Idempotent: nothing is left to erase.
  ForgetReceipt again = MustForget(b, tok, "", subject);
  for (const auto& [tier, n] : Counts(again)) EXPECT_EQ(0, n) << tier;
}

TEST_F(PrivacyTest, TheReceiptVerifiesOfflineIsStoredAndFailsWhenAltered) {
  Replica& a = Launch();
  const std::string tok = Token("alice", kEverything);
  const std::string subject = Unique("subj");
  Seed(a, tok, "r", subject);
  MustForget(a, tok, "", subject, true);  // dry runs are not stored
  ForgetReceipt rec = MustForget(a, tok, "", subject);
  ASSERT_FALSE(rec.signed_receipt().empty());

  auto [rc, out] = VerifyReceipt(rec.signed_receipt());
  EXPECT_EQ(0, rc) << out;
  EXPECT_NE(std::string::npos, out.find("verification: OK")) << out;
  EXPECT_NE(std::string::npos, out.find(rec.receipt_id())) << out;
  EXPECT_NE(std::string::npos, out.find(subject)) << out;
  EXPECT_NE(std::string::npos, out.find("\"entries\": 1")) << out;

  // One byte changed anywhere: the payload, the header, the signature.
  const std::string& jws = rec.signed_receipt();
  for (size_t at : {jws.find('.') + 5, size_t{3}, jws.size() - 3}) {
    std::string bad = jws;
    bad[at] = bad[at] == 'A' ? 'B' : 'A';
    auto [brc, bout] = VerifyReceipt(bad);
    EXPECT_EQ(1, brc) << at << ": " << bout;
    EXPECT_NE(std::string::npos, bout.find("FAILED")) << bout;
  }
  // A capability token is no receipt.
  auto [trc, tout] = VerifyReceipt(tok);
  EXPECT_EQ(1, trc) << tout;

  // Stored: ListReceipts has the real run only, signature and all.
  PrivacyListReceiptsRequest lr;
  Result res = Call(a, "/memory.v1.Privacy/ListReceipts", lr, tok);
  ASSERT_TRUE(res.status.ok()) << res.status.error_message();
  PrivacyListReceiptsResponse list;
  ASSERT_TRUE(list.ParseFromString(res.body));
  ASSERT_EQ(1, list.receipts_size()) << list.DebugString();
  EXPECT_EQ(rec.receipt_id(), list.receipts(0).receipt_id());
  EXPECT_EQ(rec.signed_receipt(), list.receipts(0).signed_receipt());
  EXPECT_EQ(Counts(rec), Counts(list.receipts(0)));
  EXPECT_EQ(rec.complete_time().seconds(), list.receipts(0).complete_time().seconds());
  // Another tenant sees none of it.
  res =
      Call(a, "/memory.v1.Privacy/ListReceipts", lr, Token("alice", kEverything, Unique("other")));
  ASSERT_TRUE(res.status.ok()) << res.status.error_message();
  ASSERT_TRUE(list.ParseFromString(res.body));
  EXPECT_EQ(0, list.receipts_size());
}

TEST_F(PrivacyTest, ForgetByPrincipalErasesItsRecordsAndScopesBoundWhoMayAsk) {
  Replica& a = Launch();
  const std::string alice = Token("alice", kEverything);
  const std::string bob = Token("bob", kEverything);
  const std::string subject = Unique("subj");
  Seed(a, bob, "bob", subject);
  Seed(a, alice, "alice", subject);

  // With privacy:forget (own), alice may erase only herself.
  const std::string own = Token("alice", "privacy:forget");
  Result denied = Forget(a, own, "bob", "");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, denied.status.error_code());
  EXPECT_NE(std::string::npos, denied.status.error_message().find("privacy:forget:all"))
      << denied.status.error_message();
  EXPECT_NE(std::string::npos, ReadEverything(a, alice, "bob").find("bob-one"));
  // ... and by subject id only among her own records: bob's stay.
  ForgetReceipt mine = MustForget(a, own, "", subject);
  EXPECT_EQ(1, Counts(mine)[TIER_ENTRIES]);
  EXPECT_EQ(1, Counts(mine)[TIER_EPISODIC]);
  EXPECT_EQ(1, Counts(mine)[TIER_BLACKBOARD]);
  std::string after_own = ReadEverything(a, alice, "bob");
  EXPECT_NE(std::string::npos, after_own.find("bob-one-entry")) << after_own;
  EXPECT_EQ(std::string::npos, after_own.find("alice-one-entry")) << after_own;

  // privacy:forget:all erases every record bob owns, labels or not.
  ForgetReceipt gone = MustForget(a, alice, "bob", "");
  EXPECT_EQ("bob", gone.principal());
  EXPECT_EQ(3 + 3 + 2, Counts(gone)[TIER_GLOBAL]);  // entities, relationships, tasks
  EXPECT_EQ(2, Counts(gone)[TIER_EPISODIC]);
  EXPECT_EQ(2, Counts(gone)[TIER_ENTRIES]);
  EXPECT_EQ(2, Counts(gone)[TIER_BLACKBOARD]);
  EXPECT_EQ(1, Counts(gone)[TIER_CACHE_L2]);
  std::string after = ReadEverything(a, alice, "bob");
  EXPECT_EQ(std::string::npos, after.find("bob-")) << after;
  EXPECT_EQ(std::string::npos, after.find("owner: \"bob\"")) << after;
  EXPECT_NE(std::string::npos, after.find("alice-keep2")) << after;
  EXPECT_NE(std::string::npos, after.find("alice-keep-item")) << after;
}

TEST_F(PrivacyTest, AnotherTenantCannotEraseAndBadInputIsRefused) {
  Replica& a = Launch();
  const std::string tok = Token("alice", kEverything);
  const std::string subject = Unique("subj");
  Seed(a, tok, "t", subject);

  const std::string other = Token("alice", kEverything, Unique("other"));
  ForgetReceipt none = MustForget(a, other, "", subject);
  for (const auto& [tier, n] : Counts(none)) EXPECT_EQ(0, n) << tier;
  none = MustForget(a, other, "alice", "");
  for (const auto& [tier, n] : Counts(none)) EXPECT_EQ(0, n) << tier;
  std::string still = ReadEverything(a, tok, "t");
  EXPECT_NE(std::string::npos, still.find(subject)) << still;
  EXPECT_NE(std::string::npos, still.find("cached t-one")) << still;

  struct Case {
    std::string principal, subject_id, reason, want;
  };
  for (const Case& c : std::vector<Case>{{"", "", "", "subject: set principal or subject_id"},
                                         {std::string(257, 'p'), "", "", "principal"},
                                         {"", std::string(257, 's'), "", "subject_id"},
                                         {"", "bad\x01id", "", "subject_id"},
                                         {"", subject, std::string(1025, 'r'), "reason"}}) {
    PrivacyForgetRequest req;
    if (!c.principal.empty()) req.set_principal(c.principal);
    if (!c.subject_id.empty()) req.set_subject_id(c.subject_id);
    req.set_reason(c.reason);
    Result r = Call(a, "/memory.v1.Privacy/Forget", req, tok);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << c.want;
    EXPECT_NE(std::string::npos, r.status.error_message().find(c.want)) << r.status.error_message();
  }
  PrivacyForgetRequest empty;
  empty.set_subject_id("");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT,
            Call(a, "/memory.v1.Privacy/Forget", empty, tok).status.error_code());
  // No privacy scope at all.
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Forget(a, Token("alice", "global:*"), "", subject).status.error_code());
  // Nothing changed.
  EXPECT_NE(std::string::npos, ReadEverything(a, tok, "t").find(subject));
}

TEST_F(PrivacyTest, ABackendDownPartWayFailsTheCallAndASecondCallCompletesIt) {
  RedisServer redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  Replica& a = Launch({}, redis.url());
  const std::string tok = Token("alice", kEverything);
  const std::string subject = Unique("subj");
  Seed(a, tok, "d", subject);

  // A hung Redis: its tiers (sessions, blackboards, then the cache) fail,
  // the first of them ends the call; the PostgreSQL tiers, erased before
  // them, stay erased.
  ASSERT_TRUE(redis.Freeze());
  auto t0 = Clock::now();
  Result r = Forget(a, tok, "", subject);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_TRUE(r.status.error_code() == StatusCode::UNAVAILABLE ||
              r.status.error_code() == StatusCode::DEADLINE_EXCEEDED)
      << r.status.error_code() << ": " << r.status.error_message();
  EXPECT_NE(std::string::npos, r.status.error_message().find("session: "))
      << r.status.error_message();
  EXPECT_NE(std::string::npos, r.status.error_message().find("call it again"))
      << r.status.error_message();
  EXPECT_LT(ms, 20000);
  GetEntityRequest ge;
  ge.set_id("d-one");
  EXPECT_EQ(StatusCode::NOT_FOUND,
            Call(a, "/memory.v1.GlobalMemory/GetEntity", ge, tok).status.error_code());
  EntriesReadRequest er;
  er.set_namespace_("agent:wf:n1");
  er.set_key("d-one-entry");
  EXPECT_EQ(StatusCode::NOT_FOUND, Call(a, "/memory.v1.Entries/Read", er, tok).status.error_code());

  ASSERT_TRUE(redis.Thaw());
  for (int i = 0; i < 100; i++) {  // until the replica's Redis connections recover
    r = Forget(a, tok, "", subject);
    if (r.status.ok()) break;
    usleep(100000);
  }
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  PrivacyForgetResponse resp;
  ASSERT_TRUE(resp.ParseFromString(r.body));
  EXPECT_EQ(0, Counts(resp.receipt())[TIER_GLOBAL]);  // done by the first call
  EXPECT_EQ(0, Counts(resp.receipt())[TIER_ENTRIES]);
  EXPECT_EQ(1, Counts(resp.receipt())[TIER_BLACKBOARD]);  // done by this one
  EXPECT_EQ(1, Counts(resp.receipt())[TIER_CACHE_L2]);
  EXPECT_EQ(std::string::npos, ReadEverything(a, tok, "d").find(subject));
}

// Export streams every record of the subject from every tier, as JSON,
// with the same selection as Forget: the subject's own records and the
// relationships touching its entities; `:own` only the caller's; the read
// ceiling holds (export is a read); another tenant gets nothing.
TEST_F(PrivacyTest, ExportStreamsTheSubjectsRecordsFromEveryTierWithinTheDiode) {
  Replica& a = Launch();
  const std::string alice = Token("alice", kEverything + std::string(" privacy:export:all"));
  const std::string bob = Token("bob", kEverything);
  const std::string subject = Unique("subj");
  Seed(a, alice, "x", subject);
  Seed(a, bob, "y", subject);
  EntriesWriteRequest secret;
  secret.set_namespace_("agent:wf:n1");
  secret.set_key("x-secret-entry");
  secret.set_value("classified");
  *secret.mutable_metadata() = Json(R"({"subject_id":")" + subject + R"("})");
  secret.set_label(LABEL_SECRET);
  MustCall(a, "/memory.v1.Entries/Write", secret, alice);

  auto [all, st] = Export(a, alice, "", subject);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::vector<std::string> want;
  for (const std::string& t : std::vector<std::string>{"x", "y"})
    for (const std::string& n :
         {"blackboard_item board-" + tenant_ + "/" + t + "-one-item", "entity " + t + "-one",
          "entry agent:wf:n1/" + t + "-one-entry",
          "relationship " + t + "-keep2/knows/" + t + "-one",
          "relationship " + t + "-keep2/likes/" + t + "-keep3", "task " + t + "-one-task"})
      want.push_back(n);
  want.push_back("entry agent:wf:n1/x-secret-entry");
  want.push_back("point mem/1");
  want.push_back("point mem/3");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(want, Names(all));
  for (const auto& r : all) {
    EXPECT_NE(TIER_UNSPECIFIED, r.tier()) << r.id();
    EXPECT_EQ(tenant_, r.meta().tenant()) << r.id();
    std::string json;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(r.record(), &json).ok());
    if (r.kind() != "relationship" || r.id().find("likes") != std::string::npos) {
      EXPECT_NE(std::string::npos, json.find(subject)) << r.kind() << " " << json;
    }
    if (r.kind() == "entry" && r.id() == "agent:wf:n1/x-one-entry") {
      EXPECT_NE(std::string::npos, json.find("\"value\":\"hello x-one-entry\"")) << json;
      EXPECT_EQ(TIER_ENTRIES, r.tier());
    }
  }

  // :own: only the caller's records; a lower read ceiling hides the SECRET entry.
  auto [own, st2] =
      Export(a,
             Token("alice", "privacy:export global:read episodic:read entries:read blackboard:read",
                   "", "CONFIDENTIAL"),
             "", subject);
  ASSERT_TRUE(st2.ok()) << st2.error_message();
  for (const auto& n : Names(own)) EXPECT_EQ(std::string::npos, n.find("y-")) << n;
  EXPECT_EQ(7u, own.size());  // x's seven, without the SECRET entry
  for (const auto& r : own) EXPECT_EQ("alice", r.meta().owner());

  // By principal: another's needs :all.
  auto [denied, st3] = Export(a, Token("alice", "privacy:export"), "bob", "");
  EXPECT_EQ(grpc::StatusCode::PERMISSION_DENIED, st3.error_code()) << st3.error_message();
  EXPECT_TRUE(denied.empty());
  auto [bobs, st4] = Export(a, alice, "bob", "");
  ASSERT_TRUE(st4.ok()) << st4.error_message();
  EXPECT_EQ(3u + 3u + 2u + 2u + 2u + 2u, bobs.size());  // every record bob owns
  for (const auto& r : bobs) EXPECT_EQ("bob", r.meta().owner()) << r.kind() << " " << r.id();

  // Another tenant: nothing; bad input: refused.
  auto [none, st5] = Export(a, Token("alice", "privacy:export:all", Unique("other")), "", subject);
  ASSERT_TRUE(st5.ok()) << st5.error_message();
  EXPECT_TRUE(none.empty());
  auto [bad, st6] = Export(a, alice, "", "");
  EXPECT_EQ(grpc::StatusCode::INVALID_ARGUMENT, st6.error_code());
  EXPECT_NE(std::string::npos, st6.error_message().find("subject")) << st6.error_message();
}

// A large export through a small stream buffer: the export waits for the
// reader instead of failing or buffering more.
TEST_F(PrivacyTest, ALargeExportStreamsThroughASmallBuffer) {
  Replica& a = Launch({"--stream-buffer-bytes=4096"});
  const std::string tok = Token("alice", kEverything + std::string(" privacy:export:all"));
  const std::string subject = Unique("subj");
  const std::string big(1500, 'v');
  for (int i = 0; i < 300; i++) {
    EntriesWriteRequest w;
    w.set_namespace_("agent:wf:n1");
    w.set_key("k" + std::to_string(i));
    w.set_value(big + std::to_string(i));
    *w.mutable_metadata() = Json(R"({"subject_id":")" + subject + R"("})");
    MustCall(a, "/memory.v1.Entries/Write", w, tok);
  }
  auto [recs, st] = Export(a, tok, "", subject);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::set<std::string> ids;
  for (const auto& r : recs) EXPECT_EQ("entry", r.kind()) << r.kind() << " " << r.id();
  ASSERT_EQ(300u, recs.size());
  for (const auto& r : recs) ids.insert(r.id());
  EXPECT_EQ(300u, ids.size());  // each once, none lost to the buffer
}

// Retention: records made two days old (as if that time had passed) go at
// the next sweep when a rule covering them has run out, in batches, on one
// replica at a time (a test session holding the advisory lock holds every
// sweep back); fresh records and those no rule covers stay.
TEST_F(PrivacyTest, RetentionSweepErasesExactlyWhatIsPastItsPeriod) {
  const std::string tok_sub = "alice";
  {
    Replica& w = Launch({"--retention-sweep-ms=0"});
    const std::string tok = Token(tok_sub, kEverything);
    for (const auto& [key, value] :
         std::vector<std::pair<std::string, std::string>>{{"old-1", "one"},
                                                          {"old-2", "two"},
                                                          {"old-3", "three"},
                                                          {"fresh", "new"},
                                                          {"pii-fresh", "mail ada@example.com"}}) {
      EntriesWriteRequest e;
      e.set_namespace_("agent:wf:n1");
      e.set_key(key);
      e.set_value(value);
      MustCall(w, "/memory.v1.Entries/Write", e, tok);
    }
    for (const auto& [id, props] : std::vector<std::pair<std::string, std::string>>{
             {"plain-old", R"({"n":1})"}, {"pii-old", R"({"contact":"ada@example.com"})"}}) {
      PutEntityRequest e;
      e.set_id(id);
      e.set_type("person");
      *e.mutable_properties() = Json(props);
      MustCall(w, "/memory.v1.GlobalMemory/PutEntity", e, tok);
    }
    CreateCollectionRequest cc;
    cc.set_name("mem");
    cc.set_dims(2);
    cc.set_distance(DISTANCE_COSINE);
    MustCall(w, "/memory.v1.EpisodicMemory/CreateCollection", cc, tok);
    EpisodicMemoryUpsertRequest up;
    up.set_collection("mem");
    for (int i = 1; i <= 2; i++) {
      PointInput* p = up.add_points();
      p->mutable_id()->set_num(i);
      p->add_vector(1);
      p->add_vector(i);
      *p->mutable_payload() = Json(i == 1 ? R"({"mail":"ada@example.com"})" : R"({"n":2})");
    }
    MustCall(w, "/memory.v1.EpisodicMemory/Upsert", up, tok);
    EXPECT_EQ(0, w.proc->Stop(SIGTERM, 10000)) << w.proc->Log();
    stopped_.push_back(std::move(w.proc));  // it holds the keys every replica trusts
  }
  PgSession pg(db_.url());
  ASSERT_TRUE(pg.ok()) << pg.error();
  for (const char* sql : {"UPDATE entries SET updated_at = now() - interval '2 days' WHERE key NOT "
                          "IN ('fresh', 'pii-fresh')",
                          "UPDATE entities SET updated_at = now() - interval '2 days'",
                          "UPDATE episodic_points SET updated_at = now() - interval '2 days'"})
    pg.Value(sql);
  ASSERT_EQ("3", pg.Value("SELECT count(*) FROM entries WHERE updated_at < now() - "
                          "interval '1 day' AND pii_kinds = '{}'"));
  ASSERT_EQ("1", pg.Value("SELECT count(*) FROM entries WHERE pii_kinds <> '{}'"));
  // Every sweep waits while this session holds the lock.
  ASSERT_EQ("t", pg.Value("SELECT pg_try_advisory_lock(7881713864051454977)"));

  std::string policy = ::testing::TempDir() + "/retention-" + std::to_string(getpid()) + ".json";
  std::ofstream(policy) << R"({"rules": [{"after": "1d", "tier": "entries"},
                                         {"after": "1d", "pii_kind": "*"}]})";
  std::vector<std::string> flags = {"--retention=off", "--retention-pii=off",
                                    "--retention-policy=" + policy, "--retention-sweep-ms=200",
                                    "--retention-batch=2"};
  Replica& a = Launch(flags);
  Replica& b = Launch(flags);
  const std::string tok = Token(tok_sub, kEverything);
  auto entry_code = [&](const std::string& key) {
    EntriesReadRequest r;
    r.set_namespace_("agent:wf:n1");
    r.set_key(key);
    return Call(a, "/memory.v1.Entries/Read", r, tok).status.error_code();
  };
  auto entity_code = [&](const std::string& id) {
    GetEntityRequest g;
    g.set_id(id);
    return Call(b, "/memory.v1.GlobalMemory/GetEntity", g, tok).status.error_code();
  };
  usleep(1500 * 1000);  // several periods: no sweep gets the lock
  EXPECT_EQ(StatusCode::OK, entry_code("old-1"));
  EXPECT_EQ(StatusCode::OK, entity_code("pii-old"));
  ASSERT_EQ("t", pg.Value("SELECT pg_advisory_unlock(7881713864051454977)"));

  for (int i = 0;
       i < 200 && (entry_code("old-3") != StatusCode::NOT_FOUND ||
                   entity_code("pii-old") != StatusCode::NOT_FOUND || PointCount(b, tok) != 1);
       i++)
    usleep(100 * 1000);
  for (const char* key : {"old-1", "old-2", "old-3"})
    EXPECT_EQ(StatusCode::NOT_FOUND, entry_code(key)) << key;
  EXPECT_EQ(StatusCode::OK, entry_code("fresh"));  // younger than its rule
  EXPECT_EQ(StatusCode::OK, entry_code("pii-fresh"));
  EXPECT_EQ(StatusCode::NOT_FOUND, entity_code("pii-old"));  // PII: the 1d rule
  EXPECT_EQ(StatusCode::OK, entity_code("plain-old"));       // no rule covers it
  EXPECT_EQ(1, PointCount(a, tok));
  GetPointsRequest gp;
  gp.set_collection("mem");
  gp.add_ids()->set_num(2);
  GetPointsResponse left;
  ASSERT_TRUE(left.ParseFromString(Call(a, "/memory.v1.EpisodicMemory/GetPoints", gp, tok).body));
  EXPECT_EQ(1, left.points_size());  // the point without PII

  std::string logs = a.proc->Log() + b.proc->Log();
  EXPECT_NE(std::string::npos, logs.find("\"rule\":\"entries: 1d\"")) << logs;
  EXPECT_NE(std::string::npos, logs.find("\"rule\":\"every tier, pii *: 1d\"")) << logs;
  EXPECT_NE(std::string::npos, logs.find("retention: erased records past their period"));
  unlink(policy.c_str());
}

// The Qdrant backend: the subject's points go through a delete by filter
// that the contract stand-in checks against Qdrant's published API.
class PrivacyQdrantTest : public PrivacyTest {
 protected:
  void SetUp() override {
    PrivacyTest::SetUp();
    ASSERT_TRUE(qdrant_.Start()) << qdrant_.Log();
  }
  QdrantStandin qdrant_;
};

TEST_F(PrivacyQdrantTest, ForgetDeletesTheSubjectsPointsFromQdrant) {
  Replica& a = Launch({"--qdrant-url=" + qdrant_.url()});
  const std::string tok = Token("alice", kEverything);
  const std::string subject = Unique("subj");
  Seed(a, tok, "q", subject);
  EXPECT_EQ(2, PointCount(a, tok));
  EXPECT_EQ(1, Counts(MustForget(a, tok, "", subject, true))[TIER_EPISODIC]);
  EXPECT_EQ(2, PointCount(a, tok));
  EXPECT_EQ(1, Counts(MustForget(a, tok, "", subject))[TIER_EPISODIC]);
  EXPECT_EQ(1, PointCount(a, tok));
  std::string after = ReadEverything(a, tok, "q");
  EXPECT_EQ(std::string::npos, after.find(subject)) << after;
  EXPECT_NE(std::string::npos, after.find("q-keep point")) << after;
  EXPECT_EQ("[]", qdrant_.Violations());
}

}  // namespace
