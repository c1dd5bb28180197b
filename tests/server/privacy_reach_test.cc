// How far Privacy.Forget and Export reach (issue 30): change streams that
// resume from before an erasure, ... Each test fails on a memoryd that
// leaves the gap open. Same two-replica fixture as privacy_test.cc.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "memory/v1/session.pb.h"
#include "memory/v1/working_memory.pb.h"
#include "tests/server/privacy_fixture.h"

namespace {

using namespace privacy_test;  // NOLINT: the fixture and its helpers
using namespace memory::v1;    // NOLINT: many message types
using grpc::StatusCode;

class PrivacyReachTest : public PrivacyTest {
 protected:
  // Posts value under key on the test's board; the answer.
  BlackboardPostResponse Post(const Replica& r, const std::string& tok, const std::string& key,
                              const std::string& json) {
    BlackboardPostRequest p;
    p.set_task_id("board-" + tenant_);
    p.set_key(key);
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, p.mutable_value()).ok());
    Result res = Call(r, "/memory.v1.Blackboard/Post", p, tok);
    EXPECT_TRUE(res.status.ok()) << res.status.error_message();
    BlackboardPostResponse resp;
    EXPECT_TRUE(resp.ParseFromString(res.body));
    return resp;
  }

  // A new session on r: its id ("" when Start failed, which it says).
  std::string StartSession(const Replica& r, const std::string& tok, bool durable) {
    SessionStartRequest start;
    start.set_durable(durable);
    Result started = Call(r, "/memory.v1.Session/Start", start, tok);
    EXPECT_TRUE(started.status.ok()) << started.status.error_message();
    SessionStartResponse sr;
    return started.status.ok() && sr.ParseFromString(started.body) ? sr.session().session_id() : "";
  }

  // Every message a Subscribe resuming after `after` of board_id on r
  // sends within a moment, as text: what a client reconnecting then sees.
  std::string Resume(const Replica& r, const std::string& tok, int64_t after,
                     const std::string& board_id) {
    BlackboardSubscribeRequest req;
    req.set_task_id("board-" + tenant_);
    req.set_after_version(after);
    req.set_board_id(board_id);
    testing_client::Stream s(r.ch, "/memory.v1.Blackboard/Subscribe", 30000,
                             {{"authorization", TestKeys::Bearer(tok)}});
    EXPECT_TRUE(s.Write(req.SerializeAsString()));
    EXPECT_TRUE(s.WritesDone());
    std::string out, msg;
    BlackboardSubscribeResponse ev;
    // The replay (or snapshot) comes at once; 0.8 s of quiet ends it.
    while (s.Read(&msg, out.empty() ? 10000 : 800) && ev.ParseFromString(msg))
      out += BlackboardEventKind_Name(ev.kind()) + " " + ev.DebugString() + "\n";
    s.Cancel();
    s.Finish();
    return out;
  }
};

// A stream resuming from before the erasure, on either replica, never
// hears the erased value again (by subject id and by principal), while
// what the erasure left is still resumable.
TEST_F(PrivacyReachTest, AResumedChangeStreamNeverReplaysAnErasedValue) {
  Replica& a = Launch();
  Replica& b = Launch();
  const std::string tok = Token("alice", kEverything);
  const std::string bob = Token("bob", "blackboard:*");
  const std::string subject = Unique("cust");
  BlackboardPostResponse first =
      Post(a, tok, "kx", R"({"subject_id":")" + subject + R"(","note":"secret-one"})");
  const std::string board = first.board_id();
  const int64_t v1 = first.meta().version();
  // An older value of a key that later stops naming the subject is the
  // subject's too; bob's item is erased by principal below.
  Post(a, tok, "ky", R"({"subject_id":")" + subject + R"(","note":"secret-two"})");
  Post(a, tok, "ky", R"({"note":"plain now"})");
  Post(a, bob, "kb", R"({"note":"secret-bob"})");
  Post(a, tok, "keep", R"({"note":"kept"})");
  std::string before = Resume(b, tok, v1, board);
  ASSERT_NE(std::string::npos, before.find("secret-two")) << before;  // the log replays

  ForgetReceipt done = MustForget(a, tok, "", subject);
  EXPECT_EQ(1, Counts(done)[TIER_BLACKBOARD]);
  EXPECT_EQ(1, Counts(MustForget(a, tok, "bob", ""))[TIER_BLACKBOARD]);
  for (Replica* r : {&a, &b}) {
    for (int64_t after : {int64_t{0}, v1, v1 + 2, v1 + 3}) {
      std::string seen = Resume(*r, tok, after, board);
      SCOPED_TRACE("resume after " + std::to_string(after) + ": " + seen);
      EXPECT_EQ(std::string::npos, seen.find("secret")) << seen;
      EXPECT_EQ(std::string::npos, seen.find(subject)) << seen;
      EXPECT_NE(std::string::npos, seen.find("kept")) << seen;  // a snapshot of what stays
    }
  }
  // After the erasure the log resumes as before: a change made now is
  // replayed to a stream that resumes just before it.
  BlackboardPostResponse later = Post(b, tok, "after", R"({"note":"new"})");
  std::string tail = Resume(a, tok, later.meta().version() - 1, board);
  EXPECT_EQ(0u, tail.find("BLACKBOARD_EVENT_KIND_PUT")) << tail;
  EXPECT_NE(std::string::npos, tail.find("new")) << tail;
}

// The sweeper finds every tenant a rule reaches: one whose only records
// are working documents, another whose only records are a durable
// session's, both holding PII past --retention-pii, are swept like any.
TEST_F(PrivacyReachTest, RetentionSweepsTenantsThatKeepOnlyDocumentsOrSessions) {
  const std::string t_doc = Unique("doc-only"), t_sess = Unique("sess-only");
  WorkingMemoryAppendRequest doc;
  doc.mutable_memory()->set_node("agent:wf:n1");
  doc.mutable_memory()->set_scope(WORKING_MEMORY_SCOPE_GLOBAL);
  doc.set_path("/contact");
  doc.set_text("write to ada@example.com");
  std::string session_id;
  {
    Replica& w = Launch({"--retention-sweep-ms=0"});
    MustCall(w, "/memory.v1.WorkingMemory/Append", doc,
             Token("alice", "working:* pii:write", t_doc));
    session_id = StartSession(w, Token("alice", "session:* pii:write", t_sess), true);
    ASSERT_FALSE(session_id.empty());
    SessionSetRequest set;
    set.set_session_id(session_id);
    set.set_key("contact");
    set.set_value("call ada@example.com");
    MustCall(w, "/memory.v1.Session/Set", set, Token("alice", "session:* pii:write", t_sess));
    EXPECT_EQ(0, w.proc->Stop(SIGTERM, 10000)) << w.proc->Log();
    stopped_.push_back(std::move(w.proc));  // it holds the keys every replica trusts
  }
  PgSession pg(db_.url());
  ASSERT_TRUE(pg.ok()) << pg.error();
  pg.Value("UPDATE working_memory SET updated_at = now() - interval '2 days'");
  pg.Value("UPDATE session_records SET updated_at = now() - interval '2 days'");
  const std::string docs = "SELECT count(*) FROM working_memory WHERE tenant = '" + t_doc + "'";
  const std::string recs = "SELECT count(*) FROM session_records WHERE tenant = '" + t_sess + "'";
  ASSERT_EQ("1", pg.Value(docs));
  ASSERT_EQ("1", pg.Value(recs));
  // No other table holds a record of either tenant.
  for (const char* table : {"entries", "entities", "tasks", "episodic_collections"})
    ASSERT_EQ("0", pg.Value(std::string("SELECT count(*) FROM ") + table + " WHERE tenant IN ('" +
                            t_doc + "', '" + t_sess + "')"));

  Replica& a = Launch({"--retention=off", "--retention-pii=1d", "--retention-sweep-ms=200"});
  for (int i = 0; i < 200 && (pg.Value(docs) != "0" || pg.Value(recs) != "0"); i++)
    usleep(100 * 1000);
  EXPECT_EQ("0", pg.Value(docs));
  EXPECT_EQ("0", pg.Value(recs));
  WorkingMemoryReadRequest read;
  *read.mutable_memory() = doc.memory();
  read.set_path("/contact");
  EXPECT_EQ(StatusCode::NOT_FOUND,
            Call(a, "/memory.v1.WorkingMemory/Read", read, Token("alice", "working:*", t_doc))
                .status.error_code());
}

// A receipt says how far its erasure reached, signed: one principal's
// records or the tenant's, and the namespaces of the namespaced tiers;
// `memoryd receipt verify` prints it in words.
TEST_F(PrivacyReachTest, AReceiptStatesHowFarItsErasureReached) {
  Replica& a = Launch();
  const std::string subject = Unique("subj");
  Seed(a, Token("alice", kEverything), "x", subject);
  ForgetReceipt own = MustForget(a, Token("alice", "privacy:forget"), "", subject);
  EXPECT_EQ("alice", own.scope().owner());
  ASSERT_EQ(1, own.scope().namespaces_size());
  EXPECT_EQ("agent:*:*", own.scope().namespaces(0));
  auto [rc, out] = VerifyReceipt(own.signed_receipt());
  EXPECT_EQ(0, rc) << out;
  EXPECT_NE(std::string::npos, out.find("\"owner\": \"alice\"")) << out;
  EXPECT_NE(std::string::npos,
            out.find("scope: the records of principal alice only; in entries and working "
                     "memory, namespaces agent:*:*"))
      << out;

  ForgetReceipt all =
      MustForget(a, Token("alice", "privacy:forget:all", "", "SECRET", {"*:*:*"}), "", subject);
  EXPECT_EQ("", all.scope().owner());
  ASSERT_EQ(1, all.scope().namespaces_size());
  EXPECT_EQ("*:*:*", all.scope().namespaces(0));
  std::tie(rc, out) = VerifyReceipt(all.signed_receipt());
  EXPECT_EQ(0, rc) << out;
  EXPECT_NE(std::string::npos, out.find("scope: every principal's records in tenant " + tenant_))
      << out;
  // Stored receipts carry it too.
  PrivacyListReceiptsRequest lr;
  PrivacyListReceiptsResponse listed;
  ASSERT_TRUE(listed.ParseFromString(
      Call(a, "/memory.v1.Privacy/ListReceipts", lr, Token("alice", kEverything)).body));
  ASSERT_EQ(2, listed.receipts_size());
  EXPECT_EQ("", listed.receipts(0).scope().owner());  // newest first
  EXPECT_EQ("alice", listed.receipts(1).scope().owner());
}

// A token confined to some namespaces exports and erases only there in the
// namespaced tiers; Export also needs each tier's read scope, and names
// the tiers it left out in its trailing metadata.
TEST_F(PrivacyReachTest, ExportAndForgetStayInTheTokensNamespacesAndReadScopes) {
  Replica& a = Launch();
  const std::string wide =
      Token("alice", "entries:* working:* session:* blackboard:*", "", "SECRET", {"*:*:*"});
  for (const char* ns : {"agent:wf:n1", "planner:wf:n1"}) {
    EntriesWriteRequest w;
    w.set_namespace_(ns);
    w.set_key("e");
    w.set_value("value in " + std::string(ns));
    MustCall(a, "/memory.v1.Entries/Write", w, wide);
    WorkingMemoryAppendRequest d;
    d.mutable_memory()->set_node(ns);
    d.mutable_memory()->set_scope(WORKING_MEMORY_SCOPE_GLOBAL);
    d.set_path("/doc");
    d.set_text("doc in " + std::string(ns));
    MustCall(a, "/memory.v1.WorkingMemory/Append", d, wide);
  }
  BlackboardPostRequest p;
  p.set_task_id("board-" + tenant_);
  p.set_key("item");
  p.mutable_value()->set_string_value("posted");
  MustCall(a, "/memory.v1.Blackboard/Post", p, wide);
  const std::string session_id = StartSession(a, wide, true);
  ASSERT_FALSE(session_id.empty());
  SessionSetRequest set;
  set.set_session_id(session_id);
  set.set_key("k");
  set.set_value("session value");
  MustCall(a, "/memory.v1.Session/Set", set, wide);

  const std::vector<std::string> planner = {"planner:*:*"};
  std::string skipped;
  auto [recs, st] =
      Export(a, Token("alice", "privacy:export entries:read working:read", "", "SECRET", planner),
             "alice", "", &skipped);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(
      (std::vector<std::string>{"entry planner:wf:n1/e", "working_document planner:wf:n1/doc"}),
      Names(recs));
  EXPECT_EQ("global,episodic,session,blackboard", skipped);
  // With the read scopes of sessions and boards, their records come too.
  std::tie(recs, st) = Export(a,
                              Token("alice",
                                    "privacy:export entries:read working:read session:read "
                                    "blackboard:read global:read episodic:read",
                                    "", "SECRET", planner),
                              "alice", "", &skipped);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(4u, recs.size());
  EXPECT_EQ("", skipped);
  std::vector<std::string> names = Names(recs);
  EXPECT_EQ(1,
            std::count(names.begin(), names.end(), "blackboard_item board-" + tenant_ + "/item"));
  EXPECT_EQ(1, std::count(names.begin(), names.end(), "session_record " + session_id + "/k"));

  ForgetReceipt done =
      MustForget(a, Token("alice", "privacy:forget", "", "SECRET", planner), "alice", "");
  EXPECT_EQ(1, Counts(done)[TIER_ENTRIES]);
  EXPECT_EQ(1, Counts(done)[TIER_WORKING]);
  EXPECT_EQ(
      std::vector<std::string>{"planner:*:*"},
      std::vector<std::string>(done.scope().namespaces().begin(), done.scope().namespaces().end()));
  for (const char* ns : {"agent:wf:n1", "planner:wf:n1"}) {
    EntriesReadRequest r;
    r.set_namespace_(ns);
    r.set_key("e");
    WorkingMemoryReadRequest d;
    d.mutable_memory()->set_node(ns);
    d.mutable_memory()->set_scope(WORKING_MEMORY_SCOPE_GLOBAL);
    d.set_path("/doc");
    StatusCode want = std::string(ns) == "agent:wf:n1" ? StatusCode::OK : StatusCode::NOT_FOUND;
    EXPECT_EQ(want, Call(a, "/memory.v1.Entries/Read", r, wide).status.error_code()) << ns;
    EXPECT_EQ(want, Call(a, "/memory.v1.WorkingMemory/Read", d, wide).status.error_code()) << ns;
  }
}

// One rule for "a record of subject S" in every tier: session values and
// working documents whose content is a JSON object naming S are the
// subject's, in a plain session (Redis only) and a durable one (Redis and
// PostgreSQL); Export hands them over and Forget erases them, on every
// replica, leaving the rest.
TEST_F(PrivacyReachTest, SessionsAndWorkingDocumentsOfASubjectAreExportedAndErased) {
  Replica& a = Launch();
  Replica& b = Launch();
  const std::string tok =
      Token("alice", "session:* working:* privacy:forget:all privacy:export:all", "", "SECRET");
  const std::string subject = Unique("subj");
  const std::string names = R"({"subject_id":")" + subject + R"(","note":"x"})";
  std::map<bool, std::string> sid;  // durable? -> session id
  for (bool durable : {false, true}) {
    sid[durable] = StartSession(a, tok, durable);
    ASSERT_FALSE(sid[durable].empty());
    for (const auto& [key, value] :
         std::vector<std::pair<std::string, std::string>>{{"theirs", names}, {"other", "{}"}}) {
      SessionSetRequest set;
      set.set_session_id(sid[durable]);
      set.set_key(key);
      set.set_value(value);
      MustCall(a, "/memory.v1.Session/Set", set, tok);
    }
  }
  for (const auto& [path, content] :
       std::vector<std::pair<std::string, std::string>>{{"/theirs", names}, {"/other", "plain"}}) {
    WorkingMemoryAppendRequest d;
    d.mutable_memory()->set_node("agent:wf:n1");
    d.mutable_memory()->set_scope(WORKING_MEMORY_SCOPE_GLOBAL);
    d.set_path(path);
    d.set_text(content);
    MustCall(a, "/memory.v1.WorkingMemory/Append", d, tok);
  }

  std::string skipped;
  auto [recs, st] = Export(b, tok, "", subject, &skipped);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::vector<std::string> want = {"session_record " + sid[false] + "/theirs",
                                   "session_record " + sid[true] + "/theirs",
                                   "working_document agent:wf:n1/theirs"};
  std::sort(want.begin(), want.end());  // as Names sorts (the session ids are random)
  EXPECT_EQ(want, Names(recs));

  ForgetReceipt dry = MustForget(b, tok, "", subject, true);
  EXPECT_EQ(2, Counts(dry)[TIER_SESSION]);
  EXPECT_EQ(1, Counts(dry)[TIER_WORKING]);
  ForgetReceipt done = MustForget(b, tok, "", subject);
  EXPECT_EQ(2, Counts(done)[TIER_SESSION]);
  EXPECT_EQ(1, Counts(done)[TIER_WORKING]);
  for (Replica* r : {&a, &b}) {
    for (bool durable : {false, true}) {
      for (const char* key : {"theirs", "other"}) {
        SessionGetRequest g;
        g.set_session_id(sid[durable]);
        g.set_key(key);
        EXPECT_EQ(std::string(key) == "theirs" ? StatusCode::NOT_FOUND : StatusCode::OK,
                  Call(*r, "/memory.v1.Session/Get", g, tok).status.error_code())
            << key << (durable ? " durable" : " plain");
      }
    }
    for (const char* path : {"/theirs", "/other"}) {
      WorkingMemoryReadRequest rd;
      rd.mutable_memory()->set_node("agent:wf:n1");
      rd.mutable_memory()->set_scope(WORKING_MEMORY_SCOPE_GLOBAL);
      rd.set_path(path);
      EXPECT_EQ(std::string(path) == "/theirs" ? StatusCode::NOT_FOUND : StatusCode::OK,
                Call(*r, "/memory.v1.WorkingMemory/Read", rd, tok).status.error_code())
          << path;
    }
  }
  PgSession pg(db_.url());
  ASSERT_TRUE(pg.ok()) << pg.error();
  EXPECT_EQ("1", pg.Value("SELECT count(*) FROM session_records"));  // the durable "other"
  std::tie(recs, st) = Export(a, tok, "", subject);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(recs.empty()) << Names(recs)[0];
  EXPECT_EQ(0, Counts(MustForget(a, tok, "", subject))[TIER_SESSION]);
}

// Exports whose readers never read hold no thread another call needs:
// with 16 of them open (8 principals, 2 each, the most each may have),
// Forget, ListReceipts and an episodic search still answer at once; a
// third export of one principal is RESOURCE_EXHAUSTED naming its flag.
TEST_F(PrivacyReachTest, IdleExportReadersHoldNoThreadOthersNeed) {
  Replica& a = Launch({"--stream-buffer-bytes=4096", "--task-threads=4"});
  const std::string writer = Token("w", "entries:* episodic:*", "", "SECRET", {"*:*:*"});
  const std::string subject = Unique("subj");
  // 32 MiB an export: more than flow control and socket buffers take in.
  for (int i = 0; i < 32; i++) {
    EntriesWriteRequest w;
    w.set_namespace_("agent:wf:n1");
    w.set_key("k" + std::to_string(i));
    w.set_value(std::string(1024 * 1024 - 64, 'a' + i % 26));
    *w.mutable_metadata() = Json(R"({"subject_id":")" + subject + R"("})");
    MustCall(a, "/memory.v1.Entries/Write", w, writer);
  }
  CreateCollectionRequest cc;
  cc.set_name("mem");
  cc.set_dims(2);
  cc.set_distance(DISTANCE_COSINE);
  MustCall(a, "/memory.v1.EpisodicMemory/CreateCollection", cc, writer);

  std::vector<std::unique_ptr<testing_client::Stream>> idle;
  auto open_export = [&](const std::string& who) {
    PrivacyExportRequest req;
    req.set_subject_id(subject);
    auto s = std::make_unique<testing_client::Stream>(
        a.ch, "/memory.v1.Privacy/Export", 60000,
        std::map<std::string, std::string>{
            {"authorization", TestKeys::Bearer(Token(who, "privacy:export:all entries:read:all", "",
                                                     "SECRET", {"*:*:*"}))}});
    EXPECT_TRUE(s->Write(req.SerializeAsString()));
    EXPECT_TRUE(s->WritesDone());
    return s;
  };
  for (int p = 0; p < 8; p++)
    for (int k = 0; k < 2; k++) idle.push_back(open_export("reader-" + std::to_string(p)));
  // Let every export fill its stream and wait for its reader.
  usleep(1500 * 1000);

  auto over = open_export("reader-0");
  std::string msg;
  while (over->Read(&msg, 5000)) {
  }
  grpc::Status refused = over->Finish();
  EXPECT_EQ(StatusCode::RESOURCE_EXHAUSTED, refused.error_code()) << refused.error_message();
  EXPECT_NE(std::string::npos, refused.error_message().find("--export-max-per-principal"))
      << refused.error_message();

  const std::string admin = Token("admin", "privacy:forget:all privacy:read:all episodic:read");
  auto t0 = Clock::now();
  ForgetReceipt r = MustForget(a, admin, "", Unique("nobody"));
  int64_t forget_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  t0 = Clock::now();
  PrivacyListReceiptsRequest lr;
  Result listed = Call(a, "/memory.v1.Privacy/ListReceipts", lr, admin, 5000);
  EpisodicMemorySearchRequest es;
  es.set_collection("mem");
  es.add_vector(1);
  es.add_vector(0);
  Result searched = Call(a, "/memory.v1.EpisodicMemory/Search", es, writer, 5000);
  int64_t others_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::printf(
      "privacy: with 16 idle export readers, Forget took %lld ms; ListReceipts and an "
      "episodic Search %lld ms\n",
      static_cast<long long>(forget_ms), static_cast<long long>(others_ms));
  EXPECT_FALSE(r.receipt_id().empty());
  EXPECT_TRUE(listed.status.ok()) << listed.status.error_message();
  EXPECT_TRUE(searched.status.ok()) << searched.status.error_message();
  EXPECT_LT(forget_ms, 5000) << "Forget waited behind the exports";
  EXPECT_LT(others_ms, 5000);
  for (auto& s : idle) s->Cancel();
  for (auto& s : idle) s->Finish();
}

}  // namespace
