// The Entries tier in-process against a real PostgreSQL (entries_fixture.h):
// The PII policy on every write path, and the edits: Append, Replace,
// PurgeExpired.
#include "tests/integration/entries_fixture.h"

namespace entries_testing {
namespace {

// ---- PII ----

struct PiiCase {
  const char* kind;
  std::string text;
};

std::vector<PiiCase> PiiCases() {
  return {
      {"email", "contact jane.doe@example.com please"},
      {"phone", "call +1 415 555 2671 today"},
      {"payment_card", "card 4111 1111 1111 1111 exp"},
      {"national_id", "ssn 123-45-6789 on file"},
      {"iban", "pay to DE89 3704 0044 0532 0130 00 now"},
      {"api_key", "key sk_live_4eC39HqLyjWDarjtT1zdp7dc here"},
      {"private_key",
       "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
       "-----END PRIVATE KEY-----\n"},
      {"bearer_token", "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123"},
  };
}

TEST_F(EntriesTest, EachPiiKindInAValueIsRejectedByNameAndNothingIsStored) {
  for (const auto& c : PiiCases()) {
    EntriesWriteResponse out;
    grpc::Status st = Call(kWrite, W("pii:x:y", std::string("k-") + c.kind, c.text), &out);
    EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code()) << c.kind << ": " << st.error_message();
    EXPECT_NE(std::string::npos, st.error_message().find(c.kind))
        << c.kind << ": " << st.error_message();
    EXPECT_NE(std::string::npos, st.error_message().find("value"))
        << c.kind << ": " << st.error_message();
  }
  EXPECT_EQ(0, RowCount());
}

TEST_F(EntriesTest, PiiInKeyTagsAndMetadataIsRejectedWithItsPath) {
  EntriesWriteResponse out;
  grpc::Status st = Call(kWrite, W("pii:x:y", "bob@example.com", "v"), &out);
  EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("key")) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("email")) << st.error_message();

  EntriesWriteRequest w = W("pii:x:y", "k", "clean");
  w.add_tags("fine");
  w.add_tags("ssn 123-45-6789");
  st = Call(kWrite, w, &out);
  EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("tags[1]")) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("national_id")) << st.error_message();

  w = W("pii:x:y", "k", "clean");
  auto* f = w.mutable_metadata()->mutable_fields();
  auto* b = (*f)["a"].mutable_struct_value()->mutable_fields();
  auto* l = (*b)["b"].mutable_list_value();
  l->add_values()->set_string_value("x");
  l->add_values()->set_string_value("y");
  l->add_values()->set_string_value("mail me: eve@example.org");
  st = Call(kWrite, w, &out);
  EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code());
  EXPECT_NE(std::string::npos, st.error_message().find("metadata.a.b[2]")) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("email")) << st.error_message();
  EXPECT_EQ(0, RowCount());
}

TEST_F(EntriesTest, PiiWriteScopeStoresAsIsAndListsKinds) {
  Who priv = Who().Scope("entries:read entries:write pii:write");
  EntriesWriteRequest w = W("pii:x:y", "k", "jane.doe@example.com 123-45-6789");
  auto wr = MustWrite(w, priv);
  std::set<std::string> kinds(wr.meta().pii_kinds().begin(), wr.meta().pii_kinds().end());
  EXPECT_TRUE(kinds.count("email"));
  EXPECT_TRUE(kinds.count("national_id"));
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("pii:x:y", "k", &rr, priv).ok());
  EXPECT_EQ("jane.doe@example.com 123-45-6789", rr.entry().value());
  EXPECT_EQ(wr.meta().pii_kinds_size(), rr.entry().meta().pii_kinds_size());
  // Clean writes carry no kinds.
  EXPECT_EQ(0, Put("pii:x:y", "clean", "nothing personal").meta().pii_kinds_size());
}

TEST_F(EntriesTest, RedactPolicyStoresRedactedValues) {
  TierOptions o;
  o.pii = PII_POLICY_REDACT;
  RestartWith(o);
  EntriesWriteRequest w = W("pii:x:y", "k", "write to jane.doe@example.com soon");
  w.add_tags("owner jane.doe@example.com");
  (*w.mutable_metadata()->mutable_fields())["who"].set_string_value("call +1 415 555 2671");
  auto wr = MustWrite(w);
  EXPECT_EQ(0, wr.meta().pii_kinds_size());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("pii:x:y", "k", &rr).ok());
  EXPECT_EQ(std::string::npos, rr.entry().value().find("jane.doe@example.com"))
      << rr.entry().value();
  EXPECT_NE(std::string::npos, rr.entry().value().find("write to ")) << rr.entry().value();
  ASSERT_EQ(1, rr.entry().tags_size());
  EXPECT_EQ(std::string::npos, rr.entry().tags(0).find("jane.doe@")) << rr.entry().tags(0);
  std::string who = rr.entry().metadata().fields().at("who").string_value();
  EXPECT_EQ(std::string::npos, who.find("555 2671")) << who;
  EXPECT_EQ(0, Count("SELECT count(*) FROM entries WHERE search_text LIKE '%jane.doe%'"));
}

// ---- Append / Replace / PurgeExpired ----

TEST_F(EntriesTest, AppendAddsBytesAndKeepsEverythingElse) {
  EntriesWriteRequest w = W("ap:x:y", "log", "abc");
  w.add_tags("t");
  w.set_content_type("text/plain");
  w.set_label(memory::v1::LABEL_INTERNAL);
  (*w.mutable_metadata()->mutable_fields())["m"].set_number_value(1);
  MustWrite(w);
  EntriesAppendRequest a;
  a.set_namespace_("ap:x:y");
  a.set_key("log");
  a.set_value("def");
  EntriesAppendResponse ar;
  ASSERT_TRUE(Call(kAppend, a, &ar).ok());
  EXPECT_EQ(6, ar.size_bytes());
  EXPECT_EQ(2, ar.meta().version());
  EXPECT_EQ(memory::v1::LABEL_INTERNAL, ar.meta().label());
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("ap:x:y", "log", &rr).ok());
  EXPECT_EQ("abcdef", rr.entry().value());
  EXPECT_EQ("text/plain", rr.entry().content_type());
  EXPECT_EQ(1, rr.entry().tags_size());
  EXPECT_EQ(1, rr.entry().metadata().fields().at("m").number_value());
  // Empty appends only bump the version; growing past 1 KiB compresses.
  a.set_value("");
  ASSERT_TRUE(Call(kAppend, a, &ar).ok());
  EXPECT_EQ(3, ar.meta().version());
  a.set_value(std::string(3000, 'z'));
  ASSERT_TRUE(Call(kAppend, a, &ar).ok());
  EXPECT_EQ(3006, ar.size_bytes());
  ASSERT_TRUE(Read("ap:x:y", "log", &rr).ok());
  EXPECT_EQ("abcdef" + std::string(3000, 'z'), rr.entry().value());
  EXPECT_EQ(1, Stats().compressed_count());
  // SearchText follows the value.
  EXPECT_EQ(std::vector<std::string>{"log"}, SearchTerm("defzzz"));
  // CAS, missing entries and the size limit.
  a.set_value("x");
  a.set_expected_version(1);
  EXPECT_EQ(Code::ABORTED, Call(kAppend, a, &ar).error_code());
  a.set_expected_version(4);
  EXPECT_TRUE(Call(kAppend, a, &ar).ok());
  a.clear_expected_version();
  a.set_value(std::string(1024 * 1024, 'q'));
  grpc::Status st = Call(kAppend, a, &ar);
  EXPECT_EQ(Code::FAILED_PRECONDITION, st.error_code()) << st.error_message();
  a.set_key("missing");
  a.set_value("x");
  EXPECT_EQ(Code::NOT_FOUND, Call(kAppend, a, &ar).error_code());
  a.set_key("log");
  EXPECT_EQ(
      Code::PERMISSION_DENIED,
      Call(kAppend, a, &ar, Who().Sub("bob").Scope("entries:read:all entries:write")).error_code());
  a.set_namespace_("bad");
  ExpectInvalid(kAppend, a, "namespace");
  ASSERT_TRUE(Read("ap:x:y", "log", &rr).ok());
  EXPECT_EQ(5, rr.entry().meta().version());
}

TEST_F(EntriesTest, AppendIsScannedForPiiAsAWhole) {
  Put("ap:x:y", "k", "contact: jane.doe@exa");
  EntriesAppendRequest a;
  a.set_namespace_("ap:x:y");
  a.set_key("k");
  a.set_value("mple.com");
  EntriesAppendResponse ar;
  grpc::Status st = Call(kAppend, a, &ar);
  EXPECT_EQ(Code::INVALID_ARGUMENT, st.error_code()) << st.error_message();
  EXPECT_NE(std::string::npos, st.error_message().find("email")) << st.error_message();
  EntriesReadResponse rr;
  ASSERT_TRUE(Read("ap:x:y", "k", &rr).ok());
  EXPECT_EQ("contact: jane.doe@exa", rr.entry().value());
  EXPECT_EQ(1, rr.entry().meta().version());
  Who priv = Who().Scope("entries:read entries:write pii:write");
  ASSERT_TRUE(Call(kAppend, a, &ar, priv).ok());
  ASSERT_EQ(1, ar.meta().pii_kinds_size());
  EXPECT_EQ("email", ar.meta().pii_kinds(0));
}

TEST_F(EntriesTest, ReplaceRewritesOccurrencesAndCountsThem) {
  Put("rp:x:y", "k", "a-b-a-b-a");
  EntriesReplaceRequest r;
  r.set_namespace_("rp:x:y");
  r.set_key("k");
  r.set_find("a");
  r.set_replacement("xy");
  r.set_max_replacements(2);
  EntriesReplaceResponse rr;
  ASSERT_TRUE(Call(kReplace, r, &rr).ok());
  EXPECT_EQ(2, rr.replacement_count());
  EXPECT_EQ(2, rr.meta().version());
  EntriesReadResponse got;
  ASSERT_TRUE(Read("rp:x:y", "k", &got).ok());
  EXPECT_EQ("xy-b-xy-b-a", got.entry().value());
  r.set_find("-");
  r.set_replacement("");
  r.set_max_replacements(0);
  ASSERT_TRUE(Call(kReplace, r, &rr).ok());
  EXPECT_EQ(4, rr.replacement_count());
  ASSERT_TRUE(Read("rp:x:y", "k", &got).ok());
  EXPECT_EQ("xybxyba", got.entry().value());
  // Overlaps are not double-counted: "aaa" holds one "aa".
  Put("rp:x:y", "o", "aaa");
  r.set_key("o");
  r.set_find("aa");
  r.set_replacement("b");
  ASSERT_TRUE(Call(kReplace, r, &rr).ok());
  EXPECT_EQ(1, rr.replacement_count());
  ASSERT_TRUE(Read("rp:x:y", "o", &got).ok());
  EXPECT_EQ("ba", got.entry().value());
  // No occurrence: nothing written, version unchanged.
  r.set_find("zzz");
  ASSERT_TRUE(Call(kReplace, r, &rr).ok());
  EXPECT_EQ(0, rr.replacement_count());
  EXPECT_EQ(2, rr.meta().version());
  // Bad requests and the size limit.
  r.set_find("");
  ExpectInvalid(kReplace, r, "find");
  r.set_find(std::string(64 * 1024 + 1, 'f'));
  ExpectInvalid(kReplace, r, "find");
  r.set_find("b");
  r.set_max_replacements(-1);
  ExpectInvalid(kReplace, r, "max_replacements");
  r.set_max_replacements(0);
  r.set_replacement(std::string(1024 * 1024, 'r'));
  grpc::Status st = Call(kReplace, r, &rr);
  EXPECT_EQ(Code::FAILED_PRECONDITION, st.error_code()) << st.error_message();
  r.set_key("missing");
  r.set_replacement("c");
  EXPECT_EQ(Code::NOT_FOUND, Call(kReplace, r, &rr).error_code());
}

TEST_F(EntriesTest, PurgeExpiredRemovesOnlyTheTenantsExpiredEntries) {
  auto expiring = [&](const std::string& key, const Who& who) {
    EntriesWriteRequest w = W("pu:x:y", key, "v");
    w.mutable_ttl()->set_nanos(300000000);
    MustWrite(w, who);
  };
  expiring("a1", Who());
  expiring("b1", Who().Sub("bob"));
  expiring("other-tenant", Who().Tenant("t2"));
  Put("pu:x:y", "keeps", "v");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EntriesPurgeExpiredRequest p;
  EntriesPurgeExpiredResponse pr;
  EXPECT_EQ(Code::PERMISSION_DENIED, Call(kPurge, p, &pr).error_code());  // needs admin
  Who admin = Who().Scope("admin");
  p.set_namespace_pattern("zz:*:*");
  ASSERT_TRUE(Call(kPurge, p, &pr, admin).ok());
  EXPECT_EQ(0, pr.purged_count());
  p.set_namespace_pattern("");
  ASSERT_TRUE(Call(kPurge, p, &pr, admin).ok());
  EXPECT_EQ(2, pr.purged_count());
  EXPECT_EQ(2, RowCount());  // t1's live entry and t2's expired one
  p.set_namespace_pattern("a:b");
  ExpectInvalid(kPurge, p, "namespace_pattern", admin);
}

}  // namespace
}  // namespace entries_testing
