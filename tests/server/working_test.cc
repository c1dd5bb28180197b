// WorkingMemory end to end: the real memoryd binary, real tokens, real
// PostgreSQL. The five commands and Render through gRPC; path
// normalization and refusals; the two scopes and both fallbacks of Render
// with the budget exactly at, under and over the limit; replacement
// counts; the read diode (tenant, owner, label, ns claim) on every method;
// the write diode, the PII policy and the audit row on every write; bad
// input refused with nothing changed; the per-memory document bound; and
// Privacy.Forget reaching the documents.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "memory/v1/audit.pb.h"
#include "memory/v1/privacy.pb.h"
#include "memory/v1/working_memory.pb.h"
#include "tests/testing/grpc_client.h"
#include "tests/testing/memoryd_process.h"
#include "tests/testing/pg_testdb.h"
#include "tests/testing/test_keys.h"

namespace {

using namespace memory::v1;  // NOLINT: many message types
using grpc::StatusCode;
using testing_client::Result;
using testing_client::Unary;

const char kNode[] = "planner:trip:draft";
const char kRW[] = "working:read working:write";

WorkingMemoryAddress Global(const std::string& node = kNode) {
  WorkingMemoryAddress a;
  a.set_node(node);
  a.set_scope(WORKING_MEMORY_SCOPE_GLOBAL);
  return a;
}

WorkingMemoryAddress Thread(const std::string& thread, const std::string& node = kNode) {
  WorkingMemoryAddress a;
  a.set_node(node);
  a.set_scope(WORKING_MEMORY_SCOPE_PER_THREAD);
  a.set_thread_id(thread);
  return a;
}

class WorkingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    m_ = std::make_unique<MemorydProcess>(
        std::vector<std::string>{"--pg-url=" + db_.url(), "--shutdown-grace=1"});
    ASSERT_TRUE(m_->Start()) << m_->Log();
    ch_ = testing_client::Connect(m_->port());
    alice_ = Token("t1", "alice", kRW);
  }

  std::string Token(const std::string& tenant, const std::string& sub, const std::string& scope,
                    const std::string& clr = "SECRET", const std::string& lvl = "PUBLIC",
                    std::vector<std::string> ns = {"*:*:*"}) {
    TestClaims c;
    c.tenant = tenant;
    c.sub = sub;
    c.scope = scope;
    c.clr = clr;
    c.lvl = lvl;
    c.ns = ns;
    return m_->keys()->Mint(c);
  }

  Result Call(const std::string& method, const google::protobuf::Message& req,
              const std::string& token) {
    return Unary(ch_, "/memory.v1.WorkingMemory/" + method, req.SerializeAsString(), 10000,
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

  Result Append(const std::string& tok, const WorkingMemoryAddress& m, const std::string& path,
                const std::string& text, Label label = LABEL_UNSPECIFIED) {
    WorkingMemoryAppendRequest req;
    *req.mutable_memory() = m;
    req.set_path(path);
    req.set_text(text);
    req.set_label(label);
    return Call("Append", req, tok);
  }

  WorkingMemoryAppendResponse MustAppend(const std::string& tok, const WorkingMemoryAddress& m,
                                         const std::string& path, const std::string& text,
                                         Label label = LABEL_UNSPECIFIED) {
    Result r = Append(tok, m, path, text, label);
    EXPECT_TRUE(r.status.ok()) << path << ": " << r.status.error_message();
    WorkingMemoryAppendResponse resp;
    resp.ParseFromString(r.body);
    return resp;
  }

  Result Read(const std::string& tok, const WorkingMemoryAddress& m, const std::string& path) {
    WorkingMemoryReadRequest req;
    *req.mutable_memory() = m;
    req.set_path(path);
    return Call("Read", req, tok);
  }

  // The document's content, or "<CODE>" when the read fails.
  std::string Content(const std::string& tok, const WorkingMemoryAddress& m,
                      const std::string& path) {
    Result r = Read(tok, m, path);
    if (!r.status.ok()) return "<" + std::to_string(r.status.error_code()) + ">";
    WorkingMemoryReadResponse resp;
    resp.ParseFromString(r.body);
    return resp.document().content();
  }

  Result Update(const std::string& tok, const WorkingMemoryAddress& m, const std::string& path,
                const std::string& old_text, const std::string& new_text, int max = 0) {
    WorkingMemoryUpdateRequest req;
    *req.mutable_memory() = m;
    req.set_path(path);
    req.set_old_text(old_text);
    req.set_new_text(new_text);
    req.set_max_replacements(max);
    return Call("Update", req, tok);
  }

  Result Delete(const std::string& tok, const WorkingMemoryAddress& m, const std::string& path,
                bool recursive = false) {
    WorkingMemoryDeleteDocumentRequest req;
    *req.mutable_memory() = m;
    req.set_path(path);
    req.set_recursive(recursive);
    return Call("DeleteDocument", req, tok);
  }

  // Every path List returns under dir, following page tokens.
  std::vector<std::string> Paths(const std::string& tok, const WorkingMemoryAddress& m,
                                 const std::string& dir = "", int page_size = 0) {
    std::vector<std::string> out;
    WorkingMemoryListRequest req;
    *req.mutable_memory() = m;
    req.set_path(dir);
    req.set_page_size(page_size);
    for (int pages = 0; pages < 100; pages++) {
      WorkingMemoryListResponse resp = Must<WorkingMemoryListResponse>("List", req, tok);
      for (const auto& d : resp.documents()) {
        EXPECT_TRUE(d.content().empty()) << "List returned content for " << d.path();
        out.push_back(d.path());
      }
      if (resp.next_page_token().empty()) break;
      req.set_page_token(resp.next_page_token());
    }
    return out;
  }

  WorkingMemoryRenderResponse Render(const std::string& tok, const WorkingMemoryAddress& m,
                                     int max_chars = 0,
                                     WorkingMemoryContent content = WORKING_MEMORY_CONTENT_FULL) {
    WorkingMemoryRenderRequest req;
    *req.mutable_memory() = m;
    req.set_max_chars(max_chars);
    req.set_content(content);
    return Must<WorkingMemoryRenderResponse>("Render", req, tok);
  }

  // The rows of working_memory, straight from PostgreSQL: "node|thread|path=content".
  std::set<std::string> Rows() {
    PgSession s(db_.url());
    EXPECT_TRUE(s.ok()) << s.error();
    PGresult* r = PQexec(s.conn(),
                         "SELECT node || '|' || thread || '|' || path || '=' || content"
                         " FROM working_memory");
    std::set<std::string> rows;
    for (int i = 0; i < PQntuples(r); i++) rows.insert(PQgetvalue(r, i, 0));
    PQclear(r);
    return rows;
  }

  PgTestDb db_;
  std::unique_ptr<MemorydProcess> m_;
  std::shared_ptr<grpc::Channel> ch_;
  std::string alice_;
};

// ---------------------------------------------------------------- commands

TEST_F(WorkingTest, AppendCreatesThenGrowsAndReadReturnsTheNormalizedPath) {
  WorkingMemoryAppendResponse first = MustAppend(alice_, Global(), "notes//plan/", "day 1\n");
  EXPECT_TRUE(first.created());
  EXPECT_EQ(1, first.meta().version());
  EXPECT_EQ("alice", first.meta().owner());
  EXPECT_EQ(6, first.chars());
  WorkingMemoryAppendResponse second = MustAppend(alice_, Global(), "/notes/plan", "día 2 ✓\n");
  EXPECT_FALSE(second.created());
  EXPECT_EQ(2, second.meta().version());
  EXPECT_EQ(14, second.chars());  // characters, not bytes

  Result r = Read(alice_, Global(), "/notes///plan");
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  WorkingMemoryReadResponse resp;
  resp.ParseFromString(r.body);
  EXPECT_EQ("/notes/plan", resp.document().path());
  EXPECT_EQ("day 1\ndía 2 ✓\n", resp.document().content());
  EXPECT_EQ(14, resp.document().chars());
  EXPECT_EQ(2, resp.document().meta().version());

  // Appending nothing to an existing document writes no new version.
  EXPECT_EQ(2, MustAppend(alice_, Global(), "/notes/plan", "").meta().version());
  // Appending nothing to an absent one creates it empty.
  WorkingMemoryAppendResponse empty = MustAppend(alice_, Global(), "/empty", "");
  EXPECT_TRUE(empty.created());
  EXPECT_EQ("", Content(alice_, Global(), "/empty"));
}

TEST_F(WorkingTest, UpdateReportsReplacementCounts) {
  MustAppend(alice_, Global(), "/todo", "milk, eggs, milk, bread, milk");
  Result all = Update(alice_, Global(), "/todo", "milk", "oat milk");
  ASSERT_TRUE(all.status.ok()) << all.status.error_message();
  WorkingMemoryUpdateResponse a;
  a.ParseFromString(all.body);
  EXPECT_EQ(3, a.replacement_count());
  EXPECT_EQ(2, a.meta().version());
  EXPECT_EQ("oat milk, eggs, oat milk, bread, oat milk", Content(alice_, Global(), "/todo"));
  EXPECT_EQ(41, a.chars());

  Result first = Update(alice_, Global(), "/todo", "oat ", "", 1);
  WorkingMemoryUpdateResponse f;
  f.ParseFromString(first.body);
  EXPECT_EQ(1, f.replacement_count());
  EXPECT_EQ("milk, eggs, oat milk, bread, oat milk", Content(alice_, Global(), "/todo"));

  // None found: no change, no new version.
  Result none = Update(alice_, Global(), "/todo", "caviar", "x");
  ASSERT_TRUE(none.status.ok()) << none.status.error_message();
  WorkingMemoryUpdateResponse n;
  n.ParseFromString(none.body);
  EXPECT_EQ(0, n.replacement_count());
  EXPECT_EQ(3, n.meta().version());

  // Multi-byte text is matched by whole characters.
  MustAppend(alice_, Global(), "/jp", "日本語と日本");
  Result jp = Update(alice_, Global(), "/jp", "日本", "にほん");
  WorkingMemoryUpdateResponse j;
  j.ParseFromString(jp.body);
  EXPECT_EQ(2, j.replacement_count());
  EXPECT_EQ("にほん語とにほん", Content(alice_, Global(), "/jp"));

  EXPECT_EQ(StatusCode::NOT_FOUND,
            Update(alice_, Global(), "/absent", "a", "b").status.error_code());
}

TEST_F(WorkingTest, ListPagesInPathOrderUnderADirectory) {
  for (const char* p : {"/b/2", "/a", "/b/1", "/b/1/x", "/b c", "/c"})
    MustAppend(alice_, Global(), p, "x");
  EXPECT_EQ((std::vector<std::string>{"/a", "/b c", "/b/1", "/b/1/x", "/b/2", "/c"}),
            Paths(alice_, Global()));
  EXPECT_EQ((std::vector<std::string>{"/a", "/b c", "/b/1", "/b/1/x", "/b/2", "/c"}),
            Paths(alice_, Global(), "/", 2));
  EXPECT_EQ((std::vector<std::string>{"/b/1", "/b/1/x", "/b/2"}), Paths(alice_, Global(), "/b"));
  EXPECT_EQ((std::vector<std::string>{"/b/1", "/b/1/x"}), Paths(alice_, Global(), "b//1/", 1));
  EXPECT_TRUE(Paths(alice_, Global(), "/nothing").empty());

  // A page token is bound to its request: another directory refuses it.
  WorkingMemoryListRequest req;
  *req.mutable_memory() = Global();
  req.set_page_size(1);
  WorkingMemoryListResponse page = Must<WorkingMemoryListResponse>("List", req, alice_);
  ASSERT_FALSE(page.next_page_token().empty());
  req.set_path("/b");
  req.set_page_token(page.next_page_token());
  Result r = Call("List", req, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("page_token"));
}

TEST_F(WorkingTest, DeleteOneOrADirectoryWithCounts) {
  for (const char* p : {"/a", "/a/1", "/a/2/x", "/ab", "/b"}) MustAppend(alice_, Global(), p, "x");
  Result one = Delete(alice_, Global(), "/a/1");
  ASSERT_TRUE(one.status.ok()) << one.status.error_message();
  WorkingMemoryDeleteDocumentResponse d;
  d.ParseFromString(one.body);
  EXPECT_EQ(1, d.deleted_count());
  EXPECT_EQ(StatusCode::NOT_FOUND, Read(alice_, Global(), "/a/1").status.error_code());
  EXPECT_EQ(StatusCode::NOT_FOUND, Delete(alice_, Global(), "/a/1").status.error_code());

  // "/a" recursive: "/a" and "/a/2/x", not "/ab".
  Result dir = Delete(alice_, Global(), "/a", true);
  ASSERT_TRUE(dir.status.ok()) << dir.status.error_message();
  d.ParseFromString(dir.body);
  EXPECT_EQ(2, d.deleted_count());
  EXPECT_EQ((std::vector<std::string>{"/ab", "/b"}), Paths(alice_, Global()));

  // The root only with recursive; then everything.
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Delete(alice_, Global(), "/").status.error_code());
  Result all = Delete(alice_, Global(), "/", true);
  d.ParseFromString(all.body);
  EXPECT_EQ(2, d.deleted_count());
  EXPECT_TRUE(Rows().empty());
}

TEST_F(WorkingTest, CompareAndSet) {
  WorkingMemoryAppendRequest req;
  *req.mutable_memory() = Global();
  req.set_path("/cas");
  req.set_text("a");
  req.set_expected_version(0);  // create only
  ASSERT_TRUE(Call("Append", req, alice_).status.ok());
  EXPECT_EQ(StatusCode::ABORTED, Call("Append", req, alice_).status.error_code());
  req.set_expected_version(1);
  ASSERT_TRUE(Call("Append", req, alice_).status.ok());
  EXPECT_EQ("aa", Content(alice_, Global(), "/cas"));

  WorkingMemoryDeleteDocumentRequest del;
  *del.mutable_memory() = Global();
  del.set_path("/cas");
  del.set_expected_version(1);
  EXPECT_EQ(StatusCode::ABORTED, Call("DeleteDocument", del, alice_).status.error_code());
  del.set_recursive(true);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("DeleteDocument", del, alice_).status.error_code());
  del.set_recursive(false);
  del.set_expected_version(2);
  EXPECT_TRUE(Call("DeleteDocument", del, alice_).status.ok());
}

// ---------------------------------------------------------------- scopes

TEST_F(WorkingTest, GlobalAndThreadMemoriesAreSeparate) {
  MustAppend(alice_, Global(), "/n", "global");
  MustAppend(alice_, Thread("t1"), "/n", "thread 1");
  MustAppend(alice_, Thread("t2"), "/n", "thread 2");
  EXPECT_EQ("global", Content(alice_, Global(), "/n"));
  EXPECT_EQ("thread 1", Content(alice_, Thread("t1"), "/n"));
  EXPECT_EQ("thread 2", Content(alice_, Thread("t2"), "/n"));
  EXPECT_EQ("<5>", Content(alice_, Thread("t3"), "/n"));  // NOT_FOUND
  // Another node's memories are others again.
  EXPECT_EQ("<5>", Content(alice_, Global("planner:trip:other"), "/n"));
  EXPECT_EQ((std::set<std::string>{std::string(kNode) + "||/n=global",
                                   std::string(kNode) + "|t1|/n=thread 1",
                                   std::string(kNode) + "|t2|/n=thread 2"}),
            Rows());
}

TEST_F(WorkingTest, BadAddressesAndPathsAreRefusedAndChangeNothing) {
  MustAppend(alice_, Global(), "/keep", "x");
  std::set<std::string> before = Rows();

  WorkingMemoryAddress no_thread = Thread("");
  WorkingMemoryAddress thread_on_global = Global();
  thread_on_global.set_thread_id("t1");
  WorkingMemoryAddress bad_scope = Global();
  bad_scope.set_scope(static_cast<WorkingMemoryScope>(7));
  WorkingMemoryAddress bad_node = Global("not a namespace");
  WorkingMemoryAddress control_thread = Thread("t\x01");
  const std::pair<WorkingMemoryAddress, const char*> addrs[] = {
      {no_thread, "memory.thread_id"},      {thread_on_global, "memory.thread_id"},
      {bad_scope, "memory.scope"},          {bad_node, "memory.node"},
      {control_thread, "memory.thread_id"}, {WorkingMemoryAddress(), "memory.node"},
  };
  for (const auto& a : addrs) {
    Result r = Append(alice_, a.first, "/x", "y");
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << a.second;
    EXPECT_NE(std::string::npos, r.status.error_message().find(a.second))
        << r.status.error_message();
  }
  WorkingMemoryAppendRequest no_memory;
  no_memory.set_path("/x");
  Result nm = Call("Append", no_memory, alice_);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, nm.status.error_code());
  EXPECT_NE(std::string::npos, nm.status.error_message().find("memory: required"));

  for (const char* p : {"/a/../keep", "/$x", "/a.b", "/", "", "/ x", "/a/./b",
                        "/'; DROP TABLE working_memory; --"}) {
    Result r = Append(alice_, Global(), p, "y");
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << p;
    EXPECT_EQ(0u, r.status.error_message().find("path: ")) << r.status.error_message();
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Read(alice_, Global(), p).status.error_code()) << p;
  }
  EXPECT_EQ(before, Rows());
}

TEST_F(WorkingTest, OtherBadInputIsRefusedAndChangesNothing) {
  MustAppend(alice_, Global(), "/doc", "hello");
  std::set<std::string> before = Rows();
  // Over the document's size, in characters: 262145 'é' are 524290 bytes.
  std::string big;
  for (int i = 0; i < 262145; i++) big += "é";
  Result r = Append(alice_, Global(), "/big", big);
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("text")) << r.status.error_message();
  // At the limit it goes in; one more character appended is FAILED_PRECONDITION.
  big.resize(big.size() - 2);
  ASSERT_TRUE(Append(alice_, Global(), "/big", big).status.ok());
  r = Append(alice_, Global(), "/big", "!");
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("262144"));
  // A replacement that would grow it too.
  r = Update(alice_, Global(), "/doc", "l", std::string(200000, 'x'));
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, r.status.error_code()) << r.status.error_message();
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT,
            Update(alice_, Global(), "/doc", "", "x").status.error_code());
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT,
            Update(alice_, Global(), "/doc", "l", "x", -1).status.error_code());
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT,
            Append(alice_, Global(), "/doc", "x", static_cast<Label>(9)).status.error_code());
  WorkingMemoryRenderRequest render;
  *render.mutable_memory() = Global();
  for (int max : {-1, 500001}) {
    render.set_max_chars(max);
    Result rr = Call("Render", render, alice_);
    EXPECT_EQ(StatusCode::INVALID_ARGUMENT, rr.status.error_code()) << max;
    EXPECT_NE(std::string::npos, rr.status.error_message().find("max_chars"));
  }
  render.set_max_chars(0);
  render.set_content(static_cast<WorkingMemoryContent>(5));
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, Call("Render", render, alice_).status.error_code());

  // Malformed protobuf bytes.
  Result garbage = Unary(ch_, "/memory.v1.WorkingMemory/Append", std::string("\x0a\xff\xff", 3),
                         5000, {{"authorization", TestKeys::Bearer(alice_)}});
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, garbage.status.error_code());

  std::set<std::string> after;  // all but "/big", which went in at its limit
  for (const auto& row : Rows())
    if (row.find("|/big=") == std::string::npos) after.insert(row);
  EXPECT_EQ(before, after);
  EXPECT_EQ("hello", Content(alice_, Global(), "/doc"));
}

// ---------------------------------------------------------------- Render

TEST_F(WorkingTest, RenderFullAtUnderAndOverTheBudget) {
  MustAppend(alice_, Global(), "/a", "ünïcödé\n");
  MustAppend(alice_, Global(), "/b/c", "日本");
  // "/a" ends with a line break (none added), "/b/c" does not (one added).
  const std::string full = "## /a\nünïcödé\n\n## /b/c\n日本\n";
  const int64_t exact = 26;  // characters; 34 bytes
  ASSERT_EQ(34u, full.size());

  WorkingMemoryRenderResponse at = Render(alice_, Global(), static_cast<int>(exact));
  EXPECT_EQ(full, at.text());
  EXPECT_EQ(WORKING_MEMORY_CONTENT_FULL, at.content());
  EXPECT_EQ(WORKING_MEMORY_SCOPE_GLOBAL, at.scope());
  EXPECT_FALSE(at.tree_fallback());
  EXPECT_FALSE(at.global_fallback());
  EXPECT_EQ(exact, at.chars());
  EXPECT_EQ(2, at.document_count());

  WorkingMemoryRenderResponse under = Render(alice_, Global());  // 4000
  EXPECT_EQ(full, under.text());

  WorkingMemoryRenderResponse over = Render(alice_, Global(), static_cast<int>(exact - 1));
  EXPECT_EQ("a\nb/\n  c\n", over.text());
  EXPECT_EQ(WORKING_MEMORY_CONTENT_TREE, over.content());
  EXPECT_TRUE(over.tree_fallback());
  EXPECT_FALSE(over.truncated());

  WorkingMemoryRenderResponse tree = Render(alice_, Global(), 0, WORKING_MEMORY_CONTENT_TREE);
  EXPECT_EQ("a\nb/\n  c\n", tree.text());
  EXPECT_FALSE(tree.tree_fallback());

  // The tree cut at a line: "a\nb/\n  c\n  d\n  e\n" is 17 characters; in
  // 14 go "a\nb/\n" and "… 3 more\n".
  MustAppend(alice_, Global(), "/b/d", "");
  MustAppend(alice_, Global(), "/b/e", "");
  EXPECT_EQ("a\nb/\n  c\n  d\n  e\n",
            Render(alice_, Global(), 17, WORKING_MEMORY_CONTENT_TREE).text());
  WorkingMemoryRenderResponse cut = Render(alice_, Global(), 14, WORKING_MEMORY_CONTENT_TREE);
  EXPECT_EQ("a\nb/\n… 3 more\n", cut.text());
  EXPECT_TRUE(cut.truncated());
  EXPECT_EQ(3, cut.omitted_count());
  EXPECT_EQ(14, cut.chars());
  EXPECT_EQ(4, cut.document_count());
}

TEST_F(WorkingTest, RenderFallsBackToGlobalWhenTheThreadShowsNothing) {
  MustAppend(alice_, Global(), "/shared", "for every thread");
  WorkingMemoryRenderResponse empty_thread = Render(alice_, Thread("t1"));
  EXPECT_TRUE(empty_thread.global_fallback());
  EXPECT_EQ(WORKING_MEMORY_SCOPE_GLOBAL, empty_thread.scope());
  EXPECT_EQ("## /shared\nfor every thread\n", empty_thread.text());

  MustAppend(alice_, Thread("t1"), "/mine", "only t1");
  WorkingMemoryRenderResponse own = Render(alice_, Thread("t1"));
  EXPECT_FALSE(own.global_fallback());
  EXPECT_EQ(WORKING_MEMORY_SCOPE_PER_THREAD, own.scope());
  EXPECT_EQ("## /mine\nonly t1\n", own.text());

  // Both fallbacks at once: the thread is empty, the global FULL too long.
  WorkingMemoryRenderResponse both = Render(alice_, Thread("t2"), 10);
  EXPECT_TRUE(both.global_fallback());
  EXPECT_TRUE(both.tree_fallback());
  EXPECT_EQ("shared\n", both.text());

  // A thread whose only document the caller may not see counts as empty
  // for that caller.
  std::string bob = Token("t1", "bob", kRW);
  MustAppend(bob, Thread("t3"), "/bobs", "hidden from alice");
  WorkingMemoryRenderResponse hidden = Render(alice_, Thread("t3"));
  EXPECT_TRUE(hidden.global_fallback());
  EXPECT_EQ("## /shared\nfor every thread\n", hidden.text());
  // An empty global memory renders as "".
  WorkingMemoryRenderResponse nothing = Render(alice_, Thread("t9", "planner:trip:none"));
  EXPECT_EQ("", nothing.text());
  EXPECT_EQ(0, nothing.document_count());
}

// ---------------------------------------------------------------- diodes

TEST_F(WorkingTest, TheReadDiodeHoldsOnEveryMethod) {
  MustAppend(alice_, Global(), "/public", "p");
  MustAppend(alice_, Global(), "/secret", "s", LABEL_SECRET);
  MustAppend(alice_, Thread("t1"), "/public", "tp");

  struct Reader {
    std::string name, token;
    std::set<std::string> sees;  // of the global memory
  };
  std::vector<Reader> readers = {
      {"other tenant", Token("t2", "alice", kRW), {}},
      {"other owner", Token("t1", "bob", kRW), {}},
      {"other owner, :all", Token("t1", "bob", "working:read:all"), {"/public", "/secret"}},
      {"clr INTERNAL, :all", Token("t1", "bob", "working:read:all", "INTERNAL"), {"/public"}},
      {"alice herself", alice_, {"/public", "/secret"}},
  };
  for (const Reader& r : readers) {
    SCOPED_TRACE(r.name);
    std::vector<std::string> listed = Paths(r.token, Global());
    EXPECT_EQ(r.sees, std::set<std::string>(listed.begin(), listed.end()));
    for (const char* p : {"/public", "/secret"})
      EXPECT_EQ(r.sees.count(p) ? StatusCode::OK : StatusCode::NOT_FOUND,
                Read(r.token, Global(), p).status.error_code())
          << p;
    WorkingMemoryRenderResponse full = Render(r.token, Global());
    EXPECT_EQ(static_cast<int64_t>(r.sees.size()), full.document_count());
    EXPECT_EQ(r.sees.count("/secret") != 0, full.text().find("/secret") != std::string::npos);
    // The thread: visible exactly when the global memory's /public is.
    WorkingMemoryRenderResponse thread = Render(r.token, Thread("t1"));
    if (r.sees.count("/public"))
      EXPECT_EQ("## /public\ntp\n", thread.text());
    else
      EXPECT_EQ("", thread.text());
  }

  // The ns claim: a node outside it is PERMISSION_DENIED on every method.
  std::string narrow = Token("t1", "alice", kRW, "SECRET", "PUBLIC", {"other:*:*"});
  WorkingMemoryRenderRequest render;
  *render.mutable_memory() = Global();
  WorkingMemoryListRequest list;
  *list.mutable_memory() = Global();
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Read(narrow, Global(), "/public").status.error_code());
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Call("List", list, narrow).status.error_code());
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Call("Render", render, narrow).status.error_code());
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Append(narrow, Global(), "/x", "y").status.error_code());
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Update(narrow, Global(), "/public", "p", "q").status.error_code());
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Delete(narrow, Global(), "/public").status.error_code());
  // Without the scope.
  std::string no_scope = Token("t1", "alice", "entries:read");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Call("Render", render, no_scope).status.error_code());
  std::string read_only = Token("t1", "alice", "working:read");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Append(read_only, Global(), "/x", "y").status.error_code());
}

TEST_F(WorkingTest, TheWriteDiodeStampsLabelsAndGuardsOthersDocuments) {
  MustAppend(alice_, Global(), "/alice", "a");
  // A document the writer cannot even read is absent to Update.
  std::string stranger = Token("t1", "bob", kRW);
  Result hidden = Update(stranger, Global(), "/alice", "a", "b");
  EXPECT_EQ(StatusCode::NOT_FOUND, hidden.status.error_code()) << hidden.status.error_message();
  std::string bob = Token("t1", "bob", "working:read:all working:write");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Append(bob, Global(), "/alice", "b").status.error_code());
  EXPECT_EQ(StatusCode::PERMISSION_DENIED,
            Update(bob, Global(), "/alice", "a", "b").status.error_code());
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Delete(bob, Global(), "/alice").status.error_code());
  // All or nothing: bob's own document under "/" stays when the recursive
  // delete meets alice's.
  MustAppend(bob, Global(), "/bob", "b");
  EXPECT_EQ(StatusCode::PERMISSION_DENIED, Delete(bob, Global(), "/", true).status.error_code());
  EXPECT_EQ(2u, Rows().size());
  // With write:all he may.
  std::string admin = Token("t1", "bob", "working:read:all working:write:all");
  EXPECT_TRUE(Update(admin, Global(), "/alice", "a", "b").status.ok());
  EXPECT_EQ("alice", [&] {
    WorkingMemoryReadResponse r;
    r.ParseFromString(Read(alice_, Global(), "/alice").body);
    return r.document().meta().owner();
  }());

  // No write-down: a CONFIDENTIAL writer's documents are CONFIDENTIAL, and
  // a label never goes down on an existing document.
  std::string conf = Token("t1", "carol", kRW, "SECRET", "CONFIDENTIAL");
  EXPECT_EQ(LABEL_CONFIDENTIAL, MustAppend(conf, Global(), "/c", "x").meta().label());
  EXPECT_EQ(LABEL_SECRET, MustAppend(conf, Global(), "/c", "y", LABEL_SECRET).meta().label());
  EXPECT_EQ(LABEL_SECRET, MustAppend(conf, Global(), "/c", "z", LABEL_PUBLIC).meta().label());
}

TEST_F(WorkingTest, PiiIsRefusedNamingTheKindAndAllowedWithPiiWrite) {
  MustAppend(alice_, Global(), "/contact", "call me ");
  Result r = Append(alice_, Global(), "/contact", "at ada@example.com");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("email")) << r.status.error_message();
  r = Update(alice_, Global(), "/contact", "call me", "card 4111 1111 1111 1111");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code());
  EXPECT_NE(std::string::npos, r.status.error_message().find("payment_card"));
  EXPECT_EQ("call me ", Content(alice_, Global(), "/contact"));
  // A path can hold digits that look like a national id: refused too.
  r = Append(alice_, Global(), "/ssn 078-05-1120", "x");
  EXPECT_EQ(StatusCode::INVALID_ARGUMENT, r.status.error_code()) << r.status.error_message();

  std::string pii = Token("t1", "alice", std::string(kRW) + " pii:write");
  WorkingMemoryAppendResponse ok = MustAppend(pii, Global(), "/contact", "at ada@example.com");
  ASSERT_EQ(1, ok.meta().pii_kinds_size());
  EXPECT_EQ("email", ok.meta().pii_kinds(0));
}

// The policy judges what a caller adds, never what others stored: a
// caller without pii:write appends to and updates a document whose owner
// stored PII with pii:write; that PII is neither refused nor redacted, the
// document keeps its pii_kinds, and the caller's own PII is refused (or,
// under redact, redacted) as ever.
TEST_F(WorkingTest, ThePolicyJudgesWhatTheCallerAddsNotWhatOthersStored) {
  for (const char* policy : {"reject", "redact"}) {
    SCOPED_TRACE(policy);
    if (std::string(policy) == "redact") {  // the same database, the other policy
      ASSERT_EQ(0, m_->Stop(SIGTERM, 10000)) << m_->Log();
      m_ = std::make_unique<MemorydProcess>(std::vector<std::string>{
          "--pg-url=" + db_.url(), "--shutdown-grace=1", "--pii-policy=redact"});
      ASSERT_TRUE(m_->Start()) << m_->Log();
      ch_ = testing_client::Connect(m_->port());
    }
    const std::string path = std::string("/") + policy;
    std::string owner = Token("t1", "alice", std::string(kRW) + " pii:write");
    std::string bob = Token("t1", "bob", "working:read:all working:write:all");
    MustAppend(owner, Global(), path, "mail ada@example.com");
    WorkingMemoryAppendResponse a = MustAppend(bob, Global(), path, " ok");
    ASSERT_EQ(1, a.meta().pii_kinds_size());
    EXPECT_EQ("email", a.meta().pii_kinds(0));
    ASSERT_TRUE(Update(bob, Global(), path, "ok", "fine").status.ok());
    EXPECT_EQ("mail ada@example.com fine", Content(bob, Global(), path));

    Result added = Append(bob, Global(), path, " and bob@example.com");
    Result put = Update(bob, Global(), path, "fine", "card 4111 1111 1111 1111");
    if (std::string(policy) == "reject") {
      EXPECT_EQ(StatusCode::INVALID_ARGUMENT, added.status.error_code());
      EXPECT_NE(std::string::npos, added.status.error_message().find("email at text"))
          << added.status.error_message();
      EXPECT_EQ(StatusCode::INVALID_ARGUMENT, put.status.error_code());
      EXPECT_NE(std::string::npos, put.status.error_message().find("payment_card at new_text"))
          << put.status.error_message();
      EXPECT_EQ("mail ada@example.com fine", Content(bob, Global(), path));
    } else {
      EXPECT_TRUE(added.status.ok()) << added.status.error_message();
      EXPECT_TRUE(put.status.ok()) << put.status.error_message();
      EXPECT_EQ("mail ada@example.com card [REDACTED:payment_card] and [REDACTED:email]",
                Content(bob, Global(), path));
    }
    // PII split across writes is still the writer's: judged where it forms.
    const std::string seam = path + "-seam";
    MustAppend(bob, Global(), seam, "write to ada");
    Result joined = Append(bob, Global(), seam, "@example.com please");
    if (std::string(policy) == "reject") {
      EXPECT_EQ(StatusCode::INVALID_ARGUMENT, joined.status.error_code());
      EXPECT_NE(std::string::npos, joined.status.error_message().find("email at text"))
          << joined.status.error_message();
      EXPECT_EQ("write to ada", Content(bob, Global(), seam));
    } else {
      EXPECT_TRUE(joined.status.ok()) << joined.status.error_message();
      EXPECT_EQ("write to [REDACTED:email] please", Content(bob, Global(), seam));
    }
    WorkingMemoryReadRequest rd;
    *rd.mutable_memory() = Global();
    rd.set_path(path);
    WorkingMemoryReadResponse doc = Must<WorkingMemoryReadResponse>("Read", rd, bob);
    ASSERT_EQ(1, doc.document().meta().pii_kinds_size());  // the owner's email still counts
    EXPECT_EQ("email", doc.document().meta().pii_kinds(0));
  }
}

TEST_F(WorkingTest, EveryWriteIsAuditedWithItsDocument) {
  MustAppend(alice_, Thread("t1"), "/audited", "x");
  ASSERT_TRUE(Update(alice_, Thread("t1"), "/audited", "x", "y").status.ok());
  ASSERT_TRUE(Delete(alice_, Thread("t1"), "/audited").status.ok());
  std::string auditor = Token("t1", "auditor", "audit:read:all");
  AuditListRequest req;
  req.mutable_filter()->set_target_id(std::string(kNode) + "@t1/audited");
  Result r = Unary(ch_, "/memory.v1.Audit/List", req.SerializeAsString(), 10000,
                   {{"authorization", TestKeys::Bearer(auditor)}});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  AuditListResponse resp;
  resp.ParseFromString(r.body);
  std::multiset<std::string> methods;
  for (const auto& rec : resp.records()) methods.insert(rec.method());
  EXPECT_EQ(1u, methods.count("/memory.v1.WorkingMemory/Append"));
  EXPECT_EQ(1u, methods.count("/memory.v1.WorkingMemory/Update"));
  EXPECT_EQ(1u, methods.count("/memory.v1.WorkingMemory/DeleteDocument"));
}

// ---------------------------------------------------------------- bounds, erasure

TEST_F(WorkingTest, AMemoryHoldsAtMostTenThousandDocuments) {
  // 9999 documents straight into PostgreSQL, then two through the API.
  PgSession s(db_.url());
  ASSERT_TRUE(s.ok()) << s.error();
  std::string fill =
      "INSERT INTO working_memory (tenant, node, thread, path, owner, label, content, chars,"
      " version, created_at, updated_at) SELECT 't1', '" +
      std::string(kNode) +
      "', '', '/d' || i, 'alice', 1, 'x', 1, 1, now(), now() FROM generate_series(1, 9999) i";
  PGresult* res = PQexec(s.conn(), fill.c_str());
  ASSERT_EQ(PGRES_COMMAND_OK, PQresultStatus(res)) << PQerrorMessage(s.conn());
  PQclear(res);
  ASSERT_TRUE(Append(alice_, Global(), "/last", "x").status.ok());
  Result full = Append(alice_, Global(), "/one more", "x");
  EXPECT_EQ(StatusCode::FAILED_PRECONDITION, full.status.error_code());
  EXPECT_NE(std::string::npos, full.status.error_message().find("10000 documents"))
      << full.status.error_message();
  // An existing document still grows; another memory is not full.
  EXPECT_TRUE(Append(alice_, Global(), "/last", "y").status.ok());
  EXPECT_TRUE(Append(alice_, Thread("t1"), "/one more", "x").status.ok());
  // Render of the full memory still answers, as a cut tree.
  WorkingMemoryRenderResponse r = Render(alice_, Global());
  EXPECT_EQ(10000, r.document_count());
  EXPECT_TRUE(r.tree_fallback());
  EXPECT_TRUE(r.truncated());
}

TEST_F(WorkingTest, ExportAndForgetReachAPrincipalsDocuments) {
  MustAppend(alice_, Global(), "/a", "x");
  MustAppend(alice_, Thread("t1"), "/b", "y");
  std::string bob = Token("t1", "bob", kRW);
  MustAppend(bob, Global(), "/bob", "z");
  std::string admin =
      Token("t1", "admin", "privacy:forget:all privacy:export:all working:read:all");

  // Export first: both of alice's documents, with their memory and content.
  PrivacyExportRequest ex;
  ex.set_principal("alice");
  testing_client::Stream stream(ch_, "/memory.v1.Privacy/Export", 30000,
                                {{"authorization", TestKeys::Bearer(admin)}});
  ASSERT_TRUE(stream.Write(ex.SerializeAsString()));
  ASSERT_TRUE(stream.WritesDone());
  std::map<std::string, std::string> exported;  // id -> content
  std::string msg;
  while (stream.Read(&msg)) {
    PrivacyExportResponse rec;
    ASSERT_TRUE(rec.ParseFromString(msg));
    if (rec.tier() != TIER_WORKING) continue;
    EXPECT_EQ("working_document", rec.kind());
    EXPECT_EQ("alice", rec.meta().owner());
    exported[rec.id()] = rec.record().fields().at("content").string_value();
  }
  ASSERT_TRUE(stream.Finish().ok());
  EXPECT_EQ((std::map<std::string, std::string>{{std::string(kNode) + "/a", "x"},
                                                {std::string(kNode) + "@t1/b", "y"}}),
            exported);

  PrivacyForgetRequest req;
  req.set_principal("alice");
  req.set_reason("test");
  Result r = Unary(ch_, "/memory.v1.Privacy/Forget", req.SerializeAsString(), 30000,
                   {{"authorization", TestKeys::Bearer(admin)}});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  PrivacyForgetResponse resp;
  resp.ParseFromString(r.body);
  int64_t working = -1;
  for (const auto& c : resp.receipt().counts())
    if (c.tier() == TIER_WORKING) working = c.erased_count();
  EXPECT_EQ(2, working);
  EXPECT_EQ((std::set<std::string>{std::string(kNode) + "||/bob=z"}), Rows());
}

}  // namespace
