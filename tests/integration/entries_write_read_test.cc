// The Entries tier in-process against a real PostgreSQL (entries_fixture.h):
// Write and Read round trips (values, content types, versions, binary and
// large values, compression) and the validation of every method's fields.
#include "tests/integration/entries_fixture.h"

namespace entries_testing {
namespace {

// ---- Write / Read ----

TEST_F(EntriesTest, WriteThenReadRoundTripsEverything) {
  EntriesWriteRequest w = W("planner:build:step1", "plan", "first draft");
  w.set_content_type("text/plain");
  w.add_tags("draft");
  w.add_tags("v1");
  w.add_tags("draft");  // duplicate, dropped
  auto* f = w.mutable_metadata()->mutable_fields();
  (*f)["pi"].set_number_value(3.141592653589793);
  (*f)["tiny"].set_number_value(5e-324);
  (*f)["big"].set_number_value(1e300);
  (*f)["int"].set_number_value(42);
  (*f)["neg"].set_number_value(-0.1);
  (*f)["name"].set_string_value("Zoë ☃ 𝄞 \"quoted\" \\ back");
  (*f)["none"].set_null_value(google::protobuf::NULL_VALUE);
  (*f)["yes"].set_bool_value(true);
  (*f)["no"].set_bool_value(false);
  auto* list = (*f)["list"].mutable_list_value();
  list->add_values()->set_number_value(1);
  list->add_values()->set_string_value("two");
  auto* inner = list->add_values()->mutable_struct_value()->mutable_fields();
  (*inner)["deep"].mutable_list_value()->add_values()->set_bool_value(false);
  (*f)["empty"].mutable_struct_value();

  EntriesWriteResponse wr = MustWrite(w);
  EXPECT_TRUE(wr.created());
  EXPECT_EQ(1, wr.meta().version());
  EXPECT_EQ("t1", wr.meta().tenant());
  EXPECT_EQ("alice", wr.meta().owner());
  EXPECT_EQ(memory::v1::LABEL_PUBLIC, wr.meta().label());
  EXPECT_FALSE(wr.meta().has_expire_time());
  EXPECT_GT(wr.meta().create_time().seconds(), 1600000000);

  EntriesReadResponse rr;
  ASSERT_TRUE(Read("planner:build:step1", "plan", &rr).ok());
  const auto& e = rr.entry();
  EXPECT_EQ("planner:build:step1", e.namespace_());
  EXPECT_EQ("plan", e.key());
  EXPECT_EQ("first draft", e.value());
  EXPECT_EQ("text/plain", e.content_type());
  EXPECT_EQ(11, e.size_bytes());
  ASSERT_EQ(2, e.tags_size());
  EXPECT_EQ("draft", e.tags(0));
  EXPECT_EQ("v1", e.tags(1));
  EXPECT_EQ(wr.meta().SerializeAsString(), e.meta().SerializeAsString());
  // The Struct comes back equal, field for field (map order aside).
  EXPECT_EQ(w.metadata().fields_size(), e.metadata().fields_size());
  for (const auto& kv : w.metadata().fields()) {
    auto it = e.metadata().fields().find(kv.first);
    ASSERT_NE(it, e.metadata().fields().end()) << kv.first;
    EXPECT_EQ(kv.second.SerializeAsString(), it->second.SerializeAsString()) << kv.first;
  }
}

TEST_F(EntriesTest, EmptyContentTypeBecomesOctetStream) {
  Put("a:b:c", "k", "v");
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("a:b:c", "k", &rr).ok());
  EXPECT_EQ("application/octet-stream", rr.entry().content_type());
  EXPECT_EQ(0, rr.entry().metadata().fields_size());
}

TEST_F(EntriesTest, ReplaceBumpsVersionKeepsOwnerAndCreateTime) {
  auto first = Put("a:b:c", "k", "one");
  usleep(20000);
  EntriesWriteRequest w = W("a:b:c", "k", "two");
  w.add_tags("t");
  auto second = MustWrite(w);
  EXPECT_FALSE(second.created());
  EXPECT_EQ(2, second.meta().version());
  EXPECT_EQ(first.meta().create_time().SerializeAsString(),
            second.meta().create_time().SerializeAsString());
  auto ns = [](const google::protobuf::Timestamp& t) {
    return t.seconds() * 1000000000LL + t.nanos();
  };
  EXPECT_GT(ns(second.meta().update_time()), ns(first.meta().update_time()));
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("a:b:c", "k", &rr).ok());
  EXPECT_EQ("two", rr.entry().value());
  EXPECT_EQ(1, rr.entry().tags_size());
  EXPECT_EQ(1, RowCount());
}

TEST_F(EntriesTest, ReadOfMissingEntryIsNotFound) {
  EntriesReadResponse rr;
  EXPECT_EQ(Code::NOT_FOUND, Read("a:b:c", "nope", &rr).error_code());
}

TEST_F(EntriesTest, BinaryAndMaximalValuesRoundTrip) {
  std::string bin("\x00\xff\x01\x80 zero", 10);
  Put("a:b:c", "bin", bin);
  std::string max(1024 * 1024, 'x');
  for (size_t i = 0; i < max.size(); i += 7) max[i] = static_cast<char>(i * 31);
  Put("a:b:c", "max", max);
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("a:b:c", "bin", &rr).ok());
  EXPECT_EQ(bin, rr.entry().value());
  ASSERT_TRUE(Read("a:b:c", "max", &rr).ok());
  EXPECT_EQ(max, rr.entry().value());
  EXPECT_EQ(1024 * 1024, rr.entry().size_bytes());
}

TEST_F(EntriesTest, LargeValuesAreStoredCompressedTransparently) {
  std::string v;
  for (int i = 0; v.size() < 2048; i++) v += "line " + std::to_string(i) + " of a log\n";
  v.resize(2048);
  Put("a:b:c", "big", v);
  Put("a:b:c", "small", "tiny");
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("a:b:c", "big", &rr).ok());
  EXPECT_EQ(v, rr.entry().value());
  EXPECT_EQ(2048, rr.entry().size_bytes());
  auto s = Stats();
  EXPECT_EQ(2, s.entry_count());
  EXPECT_EQ(2048 + 4, s.value_bytes());
  EXPECT_LT(s.stored_bytes(), s.value_bytes());
  EXPECT_EQ(1, s.compressed_count());
  EXPECT_EQ(1, Count("SELECT count(*) FROM entries WHERE key = 'big' AND compressed"
                     " AND octet_length(value) < 2048"));
}

// ---- validation ----

TEST_F(EntriesTest, WriteRejectsEveryBadFieldNamingItAndStoresNothing) {
  auto bad = [&](EntriesWriteRequest w, const std::string& field) {
    ExpectInvalid(kWrite, w, field);
  };
  bad(W("", "k", "v"), "namespace");
  bad(W("a:b", "k", "v"), "namespace");
  bad(W("a:b:c:d", "k", "v"), "namespace");
  bad(W("a:b c:d", "k", "v"), "namespace");
  bad(W("a::c", "k", "v"), "namespace");
  bad(W("a:*:c", "k", "v"), "namespace");
  bad(W(std::string(65, 'a') + ":b:c", "k", "v"), "namespace");
  bad(W("a:b:c", "", "v"), "key");
  bad(W("a:b:c", "k*", "v"), "key");
  bad(W("a:b:c", "k\ttab", "v"), "key");
  bad(W("a:b:c", std::string(513, 'k'), "v"), "key");
  bad(W("a:b:c", "bad\xff utf8", "v"), "key");
  bad(W("a:b:c", "k", std::string(1024 * 1024 + 1, 'v')), "value");
  {
    auto w = W("a:b:c", "k", "v");
    w.set_content_type(std::string(129, 'c'));
    bad(w, "content_type");
    w.set_content_type("text/\x01plain");
    bad(w, "content_type");
  }
  {
    auto w = W("a:b:c", "k", "v");
    for (int i = 0; i < 33; i++) w.add_tags("t" + std::to_string(i));
    bad(w, "tags");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.add_tags("");
    bad(w, "tags[0]");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.add_tags("ok");
    w.add_tags(std::string(65, 't'));
    bad(w, "tags[1]");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.add_tags("new\nline");
    bad(w, "tags[0]");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.set_label(static_cast<memory::v1::Label>(9));
    bad(w, "label");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.mutable_expire_time()->set_seconds(time(nullptr) - 10);
    bad(w, "expire_time");
    w.mutable_expire_time()->set_seconds(time(nullptr) + 60);
    w.mutable_expire_time()->set_nanos(-1);
    bad(w, "expire_time");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.mutable_ttl()->set_seconds(0);
    bad(w, "ttl");
    w.mutable_ttl()->set_seconds(-5);
    bad(w, "ttl");
    w.mutable_ttl()->set_seconds(315576000000LL);  // 10000 years
    bad(w, "ttl");
  }
  {
    auto w = W("a:b:c", "k", "v");
    w.set_expected_version(-1);
    bad(w, "expected_version");
  }
  {
    auto w = W("a:b:c", "k", "v");
    (*w.mutable_metadata()->mutable_fields())["x"]
        .mutable_list_value()
        ->add_values()
        ->set_number_value(std::nan(""));
    bad(w, "metadata.x[0]");
  }
  {
    auto w = W("a:b:c", "k", "v");
    (*w.mutable_metadata()->mutable_fields())["blob"].set_string_value(std::string(70 * 1024, 'm'));
    bad(w, "metadata");
  }
  EXPECT_EQ(0, RowCount());
}

TEST_F(EntriesTest, ReadAndDeleteRejectBadNamespaceAndKey) {
  EntriesReadRequest r;
  r.set_namespace_("a:b");
  r.set_key("k");
  ExpectInvalid(kRead, r, "namespace");
  r.set_namespace_("a:b:c");
  r.set_key("");
  ExpectInvalid(kRead, r, "key");
  r.set_key("a*");
  ExpectInvalid(kRead, r, "key");
  EntriesDeleteEntryRequest d;
  d.set_namespace_("x");
  d.set_key("k");
  ExpectInvalid(kDelete, d, "namespace");
  d.set_namespace_("a:b:c");
  d.set_key("");
  ExpectInvalid(kDelete, d, "key");
  d.set_key("k");
  d.set_expected_version(-3);
  ExpectInvalid(kDelete, d, "expected_version");
}

TEST_F(EntriesTest, ListSearchStatsRejectBadFields) {
  EntriesListRequest l;
  l.set_namespace_pattern("a:b");
  ExpectInvalid(kList, l, "namespace_pattern");
  l.set_namespace_pattern("a:b:c:d");
  ExpectInvalid(kList, l, "namespace_pattern");
  l.set_namespace_pattern("a:%:c");
  ExpectInvalid(kList, l, "namespace_pattern");
  l.set_namespace_pattern("");
  l.set_key_pattern("bad\x01");
  ExpectInvalid(kList, l, "key_pattern");
  l.set_key_pattern("");
  l.set_page_size(-1);
  ExpectInvalid(kList, l, "page_size");
  l.set_page_size(0);
  l.set_page_token("garbage!");
  ExpectInvalid(kList, l, "page_token");
  l.set_page_token("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
  ExpectInvalid(kList, l, "page_token");

  EntriesSearchRequest s;
  s.set_namespace_pattern("::");
  ExpectInvalid(kSearch, s, "namespace_pattern");
  s.Clear();
  s.set_term(std::string(257, 't'));
  ExpectInvalid(kSearch, s, "term");
  s.set_term("bad \xff utf8");
  ExpectInvalid(kSearch, s, "term");
  s.Clear();
  for (int i = 0; i < 33; i++) s.add_tags("t" + std::to_string(i));
  ExpectInvalid(kSearch, s, "tags");
  s.Clear();
  s.add_tags("");
  ExpectInvalid(kSearch, s, "tags[0]");
  s.Clear();
  s.set_content_type(std::string(200, 'c'));
  ExpectInvalid(kSearch, s, "content_type");
  s.Clear();
  s.set_created_by("bob\x02");
  ExpectInvalid(kSearch, s, "created_by");
  s.Clear();
  s.mutable_time_range()->mutable_start_time()->set_nanos(-5);
  ExpectInvalid(kSearch, s, "time_range.start_time");
  s.Clear();
  s.mutable_time_range()->mutable_end_time()->set_seconds(300000000000LL);
  ExpectInvalid(kSearch, s, "time_range.end_time");
  s.Clear();
  s.mutable_time_range()->mutable_start_time()->set_seconds(2000);
  s.mutable_time_range()->mutable_end_time()->set_seconds(1000);
  ExpectInvalid(kSearch, s, "time_range");
  s.Clear();
  s.set_limit(-1);
  ExpectInvalid(kSearch, s, "limit");
  s.set_limit(1001);
  ExpectInvalid(kSearch, s, "limit");

  EntriesStatsRequest st;
  st.set_namespace_pattern("a:b:c:d");
  ExpectInvalid(kStats, st, "namespace_pattern");
}

TEST_F(EntriesTest, ScopesAreCheckedPerMethod) {
  Who reader = Who().Scope("entries:read");
  EntriesWriteResponse ignored;
  EXPECT_EQ(Code::PERMISSION_DENIED,
            Call(kWrite, W("a:b:c", "k", "v"), &ignored, reader).error_code());
  EXPECT_EQ(0, RowCount());
  EntriesReadResponse rr;
  EXPECT_EQ(Code::PERMISSION_DENIED,
            Read("a:b:c", "k", &rr, Who().Scope("entries:write")).error_code());
}

}  // namespace
}  // namespace entries_testing
