// The Entries tier in-process against a real PostgreSQL (entries_fixture.h):
// Search, injection strings, List pages (under concurrent inserts, sizes,
// tokens bound to caller and filters, the answer's byte budget) and Stats.
#include "tests/integration/entries_fixture.h"

namespace entries_testing {
namespace {

// ---- search ----

TEST_F(EntriesTest, SearchMatchesTermCaseInsensitivelyInKeyOrTextValue) {
  Put("s:x:y", "greeting", "Hello World");
  Put("s:x:y", "HELLO-key", "nothing here");
  Put("s:x:y", "umlaut", "Grüße aus MÜNCHEN");
  Put("s:x:y", "binary", std::string("hello\xff\xfe", 7));  // not UTF-8: key only
  EXPECT_EQ(Sorted({"greeting", "HELLO-key"}), Sorted(SearchTerm("hello")));
  EXPECT_EQ(std::vector<std::string>{"umlaut"}, SearchTerm("münchen"));
  EXPECT_EQ(std::vector<std::string>{"binary"}, SearchTerm("BINA"));
  EXPECT_EQ(4u, SearchTerm("").size());
}

TEST_F(EntriesTest, SearchFiltersByTagsContentTypeCreatorAndTime) {
  EntriesWriteRequest a = W("s:x:y", "a", "1");
  a.add_tags("red");
  a.add_tags("big");
  a.set_content_type("text/plain");
  MustWrite(a);
  EntriesWriteRequest b = W("s:x:y", "b", "2");
  b.add_tags("red");
  b.set_content_type("application/json");
  MustWrite(b, Who().Sub("bob"));
  Who all = Who().Scope("entries:read:all entries:write");
  EntriesSearchRequest s;
  s.add_tags("red");
  EXPECT_EQ(2u, SearchKeys(s, all).size());
  s.add_tags("big");
  EXPECT_EQ(std::vector<std::string>{"a"}, SearchKeys(s, all));
  s.Clear();
  s.set_content_type("application/json");
  EXPECT_EQ(std::vector<std::string>{"b"}, SearchKeys(s, all));
  s.Clear();
  s.set_created_by("bob");
  EXPECT_EQ(std::vector<std::string>{"b"}, SearchKeys(s, all));
  s.Clear();
  // Most recently updated first; limit.
  EXPECT_EQ((std::vector<std::string>{"b", "a"}), SearchKeys(s, all));
  s.set_limit(1);
  EXPECT_EQ(std::vector<std::string>{"b"}, SearchKeys(s, all));
  s.Clear();
  s.mutable_time_range()->mutable_start_time()->set_seconds(time(nullptr) + 3600);
  EXPECT_TRUE(SearchKeys(s, all).empty());
  s.Clear();
  s.mutable_time_range()->mutable_end_time()->set_seconds(time(nullptr) + 3600);
  s.mutable_time_range()->mutable_start_time()->set_seconds(time(nullptr) - 3600);
  EXPECT_EQ(2u, SearchKeys(s, all).size());
  // Values only when asked for.
  s.Clear();
  EntriesSearchResponse resp;
  ASSERT_TRUE(Call(kSearch, s, &resp, all).ok());
  for (const auto& e : resp.entries()) {
    EXPECT_TRUE(e.value().empty());
    EXPECT_EQ(1, e.size_bytes());
  }
  s.set_with_values(true);
  ASSERT_TRUE(Call(kSearch, s, &resp, all).ok());
  for (const auto& e : resp.entries()) EXPECT_FALSE(e.value().empty());
}

// ---- injection strings ----

TEST_F(EntriesTest, InjectionStringsAreStoredAndMatchedLiterally) {
  const std::vector<std::string> keys = {
      "'; DROP TABLE entries; --", "%", "_", "\\", "a%b", "a_b", "axb", "plain"};
  for (const auto& k : keys) Put("inj:x:y", k, "value " + k);
  for (const auto& k : keys) {
    EntriesReadResponse rr;
    ASSERT_TRUE(Read("inj:x:y", k, &rr).ok()) << k;
    EXPECT_EQ("value " + k, rr.entry().value());
  }
  EXPECT_EQ(static_cast<int64_t>(keys.size()), RowCount());  // the table is still there
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/%"}, ListAll("", "%"));
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/_"}, ListAll("", "_"));
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/\\"}, ListAll("", "\\"));
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/a%b"}, ListAll("", "a%*"));
  EXPECT_EQ(std::vector<std::string>{"inj:x:y/a_b"}, ListAll("", "a_*"));
  EXPECT_EQ(Sorted({"a%b", "%"}), Sorted(SearchTerm("%")));
  EXPECT_EQ(Sorted({"a_b", "_"}), Sorted(SearchTerm("_")));
  EXPECT_EQ(std::vector<std::string>{"\\"}, SearchTerm("\\"));
  EXPECT_EQ(std::vector<std::string>{"'; DROP TABLE entries; --"}, SearchTerm("'; drop"));
  // Injection in a namespace pattern is a bad pattern, not SQL.
  EntriesListRequest l;
  l.set_namespace_pattern("inj:x:y' OR '1'='1");
  ExpectInvalid(kList, l, "namespace_pattern");
  // Tags and metadata carry them as data too.
  EntriesWriteRequest w = W("inj:x:y", "tagged", "v");
  w.add_tags("'); DELETE FROM entries; --");
  w.add_tags("{\"a\",\"b\"}");
  (*w.mutable_metadata()->mutable_fields())["q"].set_string_value("'||pg_sleep(5)||'");
  MustWrite(w);
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("inj:x:y", "tagged", &rr).ok());
  ASSERT_EQ(2, rr.entry().tags_size());
  EXPECT_EQ("'); DELETE FROM entries; --", rr.entry().tags(0));
  EXPECT_EQ("{\"a\",\"b\"}", rr.entry().tags(1));
  EXPECT_EQ("'||pg_sleep(5)||'", rr.entry().metadata().fields().at("q").string_value());
  EntriesSearchRequest s;
  s.add_tags("{\"a\",\"b\"}");
  EXPECT_EQ(std::vector<std::string>{"tagged"}, SearchKeys(s));
}

// ---- pagination ----

TEST_F(EntriesTest, PagesCoverEveryEntryOnceUnderConcurrentInserts) {
  char key[32];
  std::vector<std::string> want;
  for (int i = 0; i < 120; i++) {
    snprintf(key, sizeof key, "k%03d", i * 2);  // even numbers; inserts take odd ones
    Put(i % 2 ? "pg:a:b" : "pg:a:c", key, "v");
    want.push_back(std::string(i % 2 ? "pg:a:b/" : "pg:a:c/") + key);
  }
  std::sort(want.begin(), want.end());
  std::atomic<bool> stop{false};
  std::atomic<int> inserted{0};
  std::thread writer([&] {
    for (int i = 0; !stop && i < 120; i++) {
      char k[32];
      snprintf(k, sizeof k, "k%03d", i * 2 + 1);
      EntriesWriteResponse out;
      if (Call(kWrite, W(i % 2 ? "pg:a:b" : "pg:a:c", k, "new"), &out).ok()) inserted++;
    }
  });
  std::vector<std::string> got;
  EntriesListRequest req;
  req.set_page_size(7);
  for (int guard = 0; guard < 500; guard++) {
    EntriesListResponse resp;
    ASSERT_TRUE(Call(kList, req, &resp).ok());
    EXPECT_LE(resp.entries_size(), 7);
    for (const auto& e : resp.entries()) got.push_back(e.namespace_() + "/" + e.key());
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  writer.join();
  EXPECT_GT(inserted.load(), 0);
  // Ordered, no repeats, and every entry that existed throughout is there.
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(got.size(), std::set<std::string>(got.begin(), got.end()).size());
  std::set<std::string> gs(got.begin(), got.end());
  for (const auto& w : want) EXPECT_TRUE(gs.count(w)) << "skipped " << w;
}

TEST_F(EntriesTest, PageSizeDefaultsTo50AndCapsAt1000) {
  for (int i = 0; i < 60; i++) Put("ps:x:y", "k" + std::to_string(1000 + i), "v");
  EntriesListRequest req;
  EntriesListResponse resp;
  ASSERT_TRUE(Call(kList, req, &resp).ok());
  EXPECT_EQ(50, resp.entries_size());
  EXPECT_FALSE(resp.next_page_token().empty());
  req.set_page_size(100000);
  ASSERT_TRUE(Call(kList, req, &resp).ok());
  EXPECT_EQ(60, resp.entries_size());
  EXPECT_TRUE(resp.next_page_token().empty());
  // Without with_values, sizes but no values; with it, values.
  EXPECT_TRUE(resp.entries(0).value().empty());
  EXPECT_EQ(1, resp.entries(0).size_bytes());
  req.set_with_values(true);
  ASSERT_TRUE(Call(kList, req, &resp).ok());
  EXPECT_EQ("v", resp.entries(0).value());
}

TEST_F(EntriesTest, PageTokensAreBoundToCallerAndFilters) {
  for (int i = 0; i < 5; i++) Put("pt:x:y", "k" + std::to_string(i), "v");
  Put("pt:x:y", "bob's", "v", Who().Sub("bob"));
  EntriesListRequest req;
  req.set_namespace_pattern("pt:*:*");
  req.set_page_size(2);
  EntriesListResponse resp;
  ASSERT_TRUE(Call(kList, req, &resp).ok());
  ASSERT_FALSE(resp.next_page_token().empty());
  std::string tok = resp.next_page_token();
  EntriesListRequest other = req;
  other.set_page_token(tok);
  other.set_namespace_pattern("pt:x:*");
  ExpectInvalid(kList, other, "page_token");
  other = req;
  other.set_page_token(tok);
  other.set_key_pattern("k*");
  ExpectInvalid(kList, other, "page_token");
  other = req;
  other.set_page_token(tok);
  ExpectInvalid(kList, other, "page_token", Who().Sub("bob"));
  // Tampering with one character breaks the seal.
  other = req;
  std::string bent = tok;
  bent[bent.size() / 2] = bent[bent.size() / 2] == 'A' ? 'B' : 'A';
  other.set_page_token(bent);
  ExpectInvalid(kList, other, "page_token");
  // The same request continues; page size may change.
  other = req;
  other.set_page_token(tok);
  other.set_page_size(10);
  ASSERT_TRUE(Call(kList, other, &resp).ok());
  EXPECT_EQ(3, resp.entries_size());
  EXPECT_EQ("k2", resp.entries(0).key());
}

TEST_F(EntriesTest, ListStopsEarlyWhenValuesExceedTheResponseBudget) {
  TierOptions o;
  o.max_response_bytes = 3000;
  RestartWith(o);
  for (int i = 0; i < 5; i++) Put("bud:x:y", "k" + std::to_string(i), std::string(1000, 'a' + i));
  EntriesListRequest req;
  req.set_with_values(true);
  std::vector<std::string> got;
  for (int guard = 0; guard < 10; guard++) {
    EntriesListResponse resp;
    ASSERT_TRUE(Call(kList, req, &resp).ok());
    EXPECT_LE(resp.entries_size(), 3);
    for (const auto& e : resp.entries()) {
      EXPECT_EQ(1000u, e.value().size());
      got.push_back(e.key());
    }
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  EXPECT_EQ((std::vector<std::string>{"k0", "k1", "k2", "k3", "k4"}), got);
}

TEST_F(EntriesTest, ListPagesStayUnderTheMessageLimitWithLargeMetadata) {
  EntriesWriteRequest w = W("md:x:y", "", "v");
  (*w.mutable_metadata()->mutable_fields())["blob"].set_string_value(std::string(60000, 'm'));
  for (int i = 0; i < 80; i++) {
    w.set_key("k" + std::to_string(100 + i));
    MustWrite(w);
  }
  // 80 x 60 KB would not fit in one 4 MiB message: the server cuts pages.
  EXPECT_EQ(80u, ListAll("", "", Who(), 1000).size());
}

// ---- stats ----

TEST_F(EntriesTest, StatsCountsVisibleEntriesUnderAPattern) {
  Put("st:a:x", "1", "12345");
  Put("st:a:x", "2", "123");
  Put("st:b:x", "1", "1");
  Put("zz:a:x", "1", "1");
  auto s = Stats("st:*:*");
  EXPECT_EQ(3, s.entry_count());
  EXPECT_EQ(2, s.namespace_count());
  EXPECT_EQ(9, s.value_bytes());
  EXPECT_EQ(9, s.stored_bytes());
  EXPECT_EQ(0, s.compressed_count());
  EXPECT_EQ(4, Stats().entry_count());
  EXPECT_EQ(0, Stats("none:*:*").entry_count());
}

}  // namespace
}  // namespace entries_testing
