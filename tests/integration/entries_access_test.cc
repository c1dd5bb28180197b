// The Entries tier in-process against a real PostgreSQL (entries_fixture.h):
// Who may see and change what: namespaces and the ns claim, tenants, the
// read and write diodes, compare-and-set, concurrent writers, delete and
// expiry.
#include "tests/integration/entries_fixture.h"

namespace entries_testing {
namespace {

// ---- namespaces and tenants ----

TEST_F(EntriesTest, NamespaceOutsideTheNsClaimIsPermissionDenied) {
  Who planner = Who().Ns({"planner:*:*"});
  Put("planner:x:y", "k", "v", planner);
  Put("coder:x:y", "k", "v");  // written by a wide token
  EntriesWriteResponse w;
  grpc::Status st = Call(kWrite, W("coder:x:y", "k2", "v"), &w, planner);
  EXPECT_EQ(Code::PERMISSION_DENIED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("coder:x:y")) << st.error_message();
  EntriesReadResponse rr;
  st = Read("coder:x:y", "k", &rr, planner);
  EXPECT_EQ(Code::PERMISSION_DENIED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("coder:x:y")) << st.error_message();
  EntriesDeleteEntryRequest d;
  d.set_namespace_("coder:x:y");
  d.set_key("k");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kDelete, d, &dr, planner).error_code());
  // List, Search and Stats only look inside the token's globs.
  EXPECT_EQ(std::vector<std::string>{"planner:x:y/k"}, ListAll("*:*:*", "*", planner));
  EXPECT_EQ(std::vector<std::string>{"k"}, SearchTerm("k", planner));
  EXPECT_EQ(1, Stats("", planner).entry_count());
  EXPECT_EQ(2, Stats("").entry_count());
  // No ns claim at all: nothing.
  Who none = Who().Ns({});
  EXPECT_TRUE(ListAll("", "", none).empty());
  EXPECT_TRUE(SearchTerm("k", none).empty());
  EXPECT_EQ(0, Stats("", none).entry_count());
  EXPECT_EQ(Code::PERMISSION_DENIED, Read("planner:x:y", "k", &rr, none).error_code());
}

TEST_F(EntriesTest, GlobStarStaysInsideOneSegment) {
  Put("ab:c:d", "k", "v");
  Put("a:bc:d", "k", "v");
  EXPECT_EQ(std::vector<std::string>{"ab:c:d/k"}, ListAll("a*:c:d", "*"));
  EXPECT_EQ(std::vector<std::string>{"a:bc:d/k"}, ListAll("a:*c:*", "*"));
  Who narrow = Who().Ns({"a*:c:*"});
  EXPECT_EQ(std::vector<std::string>{"ab:c:d/k"}, ListAll("", "", narrow));
  // `_` and `.` in globs and patterns are literal, not LIKE wildcards.
  Put("u_v:x:y", "k", "v");
  Put("uzv:x:y", "k", "v");
  Put("u.v:x:y", "k", "v");
  EXPECT_EQ(std::vector<std::string>{"u_v:x:y/k"}, ListAll("", "", Who().Ns({"u_v:*:*"})));
  EXPECT_EQ(std::vector<std::string>{"u_v:x:y/k"}, ListAll("u_*:*:*", ""));
  EXPECT_EQ(1, Stats("", Who().Ns({"u_v:x:y"})).entry_count());
}

TEST_F(EntriesTest, TenantsNeverSeeEachOther) {
  Who a = Who().Tenant("tenant-a").Scope("entries:read:all entries:write:all");
  Who b = Who().Tenant("tenant-b").Scope("entries:read:all entries:write:all");
  Put("shared:ns:x", "secret", "a's data", a);
  Put("shared:ns:x", "other", "a's other", a);
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("shared:ns:x", "secret", &rr, b).error_code());
  EXPECT_TRUE(ListAll("", "", b).empty());
  EXPECT_TRUE(SearchTerm("secret", b).empty());
  EXPECT_EQ(0, Stats("", b).entry_count());
  // b writing the same key creates b's own entry; a's is untouched.
  auto wr = Put("shared:ns:x", "secret", "b's data", b);
  EXPECT_TRUE(wr.created());
  EXPECT_EQ("tenant-b", wr.meta().tenant());
  ASSERT_TRUE(Read("shared:ns:x", "secret", &rr, a).ok());
  EXPECT_EQ("a's data", rr.entry().value());
  EXPECT_EQ(1, Stats("", b).entry_count());
  // b deleting does not touch a's.
  EntriesDeleteEntryRequest d;
  d.set_namespace_("shared:ns:x");
  d.set_key("other");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::NOT_FOUND, Call(kDelete, d, &dr, b).error_code());
  EXPECT_EQ(3, RowCount());
  // A page token of tenant a is refused for tenant b.
  EntriesListRequest l;
  l.set_page_size(1);
  EntriesListResponse lr;
  ASSERT_TRUE(Call(kList, l, &lr, a).ok());
  ASSERT_FALSE(lr.next_page_token().empty());
  l.set_page_token(lr.next_page_token());
  ExpectInvalid(kList, l, "page_token", b);
}

// ---- read diode ----

TEST_F(EntriesTest, OwnReadBreadthSeesOnlyOwnEntries) {
  Who alice;
  Who bob = Who().Sub("bob");
  Put("team:x:y", "alice-1", "a", alice);
  Put("team:x:y", "bob-1", "b", bob);
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("team:x:y", "alice-1", &rr, bob).error_code());
  EXPECT_EQ(std::vector<std::string>{"team:x:y/bob-1"}, ListAll("", "", bob));
  EXPECT_EQ(std::vector<std::string>{"bob-1"}, SearchTerm("-1", bob));
  EXPECT_EQ(1, Stats("", bob).entry_count());
  // created_by another principal with :own breadth finds nothing.
  EntriesSearchRequest s;
  s.set_created_by("alice");
  EXPECT_TRUE(SearchKeys(s, bob).empty());

  Who bob_all = Who().Sub("bob").Scope("entries:read:all entries:write");
  ASSERT_TRUE(Read("team:x:y", "alice-1", &rr, bob_all).ok());
  EXPECT_EQ("alice", rr.entry().meta().owner());
  EXPECT_EQ(2u, ListAll("", "", bob_all).size());
  EXPECT_EQ(2, Stats("", bob_all).entry_count());
  EXPECT_EQ(std::vector<std::string>{"alice-1"}, SearchKeys(s, bob_all));
}

TEST_F(EntriesTest, ConfidentialIsInvisibleToInternalClearance) {
  EntriesWriteRequest w = W("lab:x:y", "conf", "classified findings");
  w.set_label(memory::v1::LABEL_CONFIDENTIAL);
  EXPECT_EQ(memory::v1::LABEL_CONFIDENTIAL, MustWrite(w).meta().label());
  Put("lab:x:y", "open", "classified? no");
  Who internal = Who().Clr(2);
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("lab:x:y", "conf", &rr, internal).error_code());
  EXPECT_EQ(std::vector<std::string>{"lab:x:y/open"}, ListAll("", "", internal));
  EXPECT_EQ(std::vector<std::string>{"open"}, SearchTerm("classified", internal));
  auto s = Stats("", internal);
  EXPECT_EQ(1, s.entry_count());
  EXPECT_EQ(14, s.value_bytes());
  // Nor may it overwrite or delete what it cannot read.
  EntriesWriteResponse ignored;
  EXPECT_EQ(Code::PERMISSION_DENIED,
            Call(kWrite, W("lab:x:y", "conf", "overwrite"), &ignored, internal).error_code());
  EntriesDeleteEntryRequest d;
  d.set_namespace_("lab:x:y");
  d.set_key("conf");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kDelete, d, &dr, internal).error_code());
  ASSERT_TRUE(Read("lab:x:y", "conf", &rr).ok());
  EXPECT_EQ("classified findings", rr.entry().value());
}

// ---- write diode ----

TEST_F(EntriesTest, SecretFloorStampsPublicWriteAsSecret) {
  Who secret = Who().Lvl(4).Clr(4);
  EntriesWriteRequest w = W("ops:x:y", "k", "v");
  w.set_label(memory::v1::LABEL_PUBLIC);
  EXPECT_EQ(memory::v1::LABEL_SECRET, MustWrite(w, secret).meta().label());
  EXPECT_EQ(1, Count("SELECT count(*) FROM entries WHERE label = 4"));
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("ops:x:y", "k", &rr, Who().Clr(3)).error_code());
}

TEST_F(EntriesTest, ExistingLabelIsNeverLowered) {
  EntriesWriteRequest w = W("ops:x:y", "k", "v1");
  w.set_label(memory::v1::LABEL_CONFIDENTIAL);
  MustWrite(w);
  w.set_value("v2");
  w.set_label(memory::v1::LABEL_PUBLIC);
  auto r = MustWrite(w);
  EXPECT_EQ(memory::v1::LABEL_CONFIDENTIAL, r.meta().label());
  EXPECT_EQ(2, r.meta().version());
}

TEST_F(EntriesTest, ModifyingAnotherOwnersEntryNeedsWriteAll) {
  Put("team:x:y", "doc", "alice's");
  Who bob = Who().Sub("bob").Scope("entries:read:all entries:write");
  EntriesWriteResponse w;
  grpc::Status st = Call(kWrite, W("team:x:y", "doc", "bob's"), &w, bob);
  EXPECT_EQ(Code::PERMISSION_DENIED, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("entries:write:all")) << st.error_message();
  EntriesDeleteEntryRequest d;
  d.set_namespace_("team:x:y");
  d.set_key("doc");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kDelete, d, &dr, bob).error_code());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("team:x:y", "doc", &rr).ok());
  EXPECT_EQ("alice's", rr.entry().value());
  EXPECT_EQ(1, rr.entry().meta().version());

  Who bob_all = Who().Sub("bob").Scope("entries:read:all entries:write:all");
  auto wr = MustWrite(W("team:x:y", "doc", "bob's edit"), bob_all);
  EXPECT_EQ("alice", wr.meta().owner());  // an update never changes the owner
  EXPECT_EQ(2, wr.meta().version());
  EXPECT_TRUE(Call(kDelete, d, &dr, bob_all).ok());
  EXPECT_EQ(0, RowCount());
}

// ---- compare-and-set ----

TEST_F(EntriesTest, ExpectedVersionIsCompareAndSet) {
  EntriesWriteRequest w = W("cas:x:y", "k", "v1");
  w.set_expected_version(0);
  EXPECT_TRUE(MustWrite(w).created());
  EntriesWriteResponse out;
  grpc::Status st = Call(kWrite, w, &out);
  EXPECT_EQ(Code::ABORTED, st.error_code()) << st.error_message();
  w.set_expected_version(1);
  w.set_value("v2");
  EXPECT_EQ(2, MustWrite(w).meta().version());
  EXPECT_EQ(Code::ABORTED, Call(kWrite, w, &out).error_code());  // still 1: stale
  w.set_expected_version(7);
  w.set_key("absent");
  EXPECT_EQ(Code::ABORTED, Call(kWrite, w, &out).error_code());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("cas:x:y", "k", &rr).ok());
  EXPECT_EQ("v2", rr.entry().value());
  EXPECT_EQ(Code::NOT_FOUND, Read("cas:x:y", "absent", &rr).error_code());

  EntriesDeleteEntryRequest d;
  d.set_namespace_("cas:x:y");
  d.set_key("k");
  d.set_expected_version(1);
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::ABORTED, Call(kDelete, d, &dr).error_code());
  d.set_expected_version(2);
  EXPECT_TRUE(Call(kDelete, d, &dr).ok());
  EXPECT_EQ(0, RowCount());
}

TEST_F(EntriesTest, ConcurrentCreatesWithExpectedVersionZeroHaveOneWinner) {
  std::atomic<int> ok{0}, aborted{0}, other{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; i++)
    ts.emplace_back([&, i] {
      EntriesWriteRequest w = W("race:x:y", "k", "writer " + std::to_string(i));
      w.set_expected_version(0);
      EntriesWriteResponse out;
      grpc::Status st = Call(kWrite, w, &out);
      if (st.ok())
        ok++;
      else if (st.error_code() == Code::ABORTED)
        aborted++;
      else
        other++;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(1, ok.load());
  EXPECT_EQ(7, aborted.load());
  EXPECT_EQ(0, other.load());
}

TEST_F(EntriesTest, ConcurrentUnconditionalWritesAllSucceedAndCountVersions) {
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; i++)
    ts.emplace_back([&, i] {
      EntriesWriteResponse out;
      if (Call(kWrite, W("race:x:y", "k", "w" + std::to_string(i)), &out).ok()) ok++;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(8, ok.load());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("race:x:y", "k", &rr).ok());
  EXPECT_EQ(8, rr.entry().meta().version());
}

// ---- delete ----

TEST_F(EntriesTest, DeleteRemovesAndThenIsNotFound) {
  Put("d:x:y", "k", "v");
  EntriesDeleteEntryRequest d;
  d.set_namespace_("d:x:y");
  d.set_key("k");
  EntriesDeleteEntryResponse dr;
  EXPECT_TRUE(Call(kDelete, d, &dr).ok());
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("d:x:y", "k", &rr).error_code());
  EXPECT_EQ(Code::NOT_FOUND, Call(kDelete, d, &dr).error_code());
}

// ---- expiry ----

TEST_F(EntriesTest, ExpiredEntriesAreGoneForEveryReader) {
  EntriesWriteRequest w = W("tmp:x:y", "short", "soon gone");
  w.mutable_ttl()->set_seconds(1);
  auto wr = MustWrite(w);
  ASSERT_TRUE(wr.meta().has_expire_time());
  EXPECT_GE(wr.meta().expire_time().seconds(), time(nullptr));
  EntriesWriteRequest w2 = W("tmp:x:y", "long", "stays");
  w2.mutable_expire_time()->set_seconds(time(nullptr) + 3600);
  MustWrite(w2);
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("tmp:x:y", "short", &rr).ok());
  EXPECT_TRUE(rr.entry().meta().has_expire_time());
  EXPECT_EQ(2, Stats().entry_count());

  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  EXPECT_EQ(Code::NOT_FOUND, Read("tmp:x:y", "short", &rr).error_code());
  EXPECT_EQ(std::vector<std::string>{"tmp:x:y/long"}, ListAll("", ""));
  EXPECT_EQ(std::vector<std::string>{"long"}, SearchTerm("s"));
  EXPECT_EQ(1, Stats().entry_count());
  EntriesDeleteEntryRequest d;
  d.set_namespace_("tmp:x:y");
  d.set_key("short");
  EntriesDeleteEntryResponse dr;
  EXPECT_EQ(Code::NOT_FOUND, Call(kDelete, d, &dr).error_code());
  // Writing it again creates a new entry (version 1), even under CAS 0,
  // and even for another owner.
  EntriesWriteRequest again = W("tmp:x:y", "short", "back");
  again.set_expected_version(0);
  auto ar = MustWrite(again, Who().Sub("carol"));
  EXPECT_TRUE(ar.created());
  EXPECT_EQ(1, ar.meta().version());
  EXPECT_EQ("carol", ar.meta().owner());
  EXPECT_FALSE(ar.meta().has_expire_time());
}

}  // namespace
}  // namespace entries_testing
