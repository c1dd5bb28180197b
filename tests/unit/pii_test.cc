// pii: each detector's true positives (alone, in running text, at either
// end, inside JSON-ish text) and near misses that must not fire; redaction;
// the Struct walker with paths; hostile inputs finish quickly.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>

extern "C" {
#include "service/core/arena.h"
#include "service/pii/pii.h"
#include "service/pii/pii_struct.h"
}

namespace {

unsigned Kinds(const std::string& s) { return pii_scan(s.data(), s.size(), nullptr, 0, nullptr); }

std::string Redact(const std::string& s) {
  size_t need = pii_redact(s.data(), s.size(), nullptr, 0, nullptr);
  std::string out(need + 1, '\0');
  pii_redact(s.data(), s.size(), &out[0], out.size(), nullptr);
  out.resize(need);
  return out;
}

void ExpectFound(unsigned kind, const std::string& s) {
  EXPECT_EQ(kind, Kinds(s)) << "in: " << s;
  EXPECT_EQ(kind, Kinds("text " + s + " more")) << "in running text: " << s;
  EXPECT_EQ(kind, Kinds("{\"v\":\"" + s + "\"}")) << "in JSON: " << s;
}

void ExpectClean(const std::string& s) { EXPECT_EQ(0u, Kinds(s)) << "false positive in: " << s; }

TEST(PiiEmail, FindsAddresses) {
  ExpectFound(PII_EMAIL, "alice@example.com");
  ExpectFound(PII_EMAIL, "first.last+tag@mail.example.co.uk");
}

TEST(PiiEmail, NearMisses) {
  ExpectClean("user@localhost");
  ExpectClean("a@b.c");
  ExpectClean("foo@bar.123");
  ExpectClean("@example.com");
  ExpectClean("user@.com");
  ExpectClean("git@ is a prefix");
}

TEST(PiiPhone, FindsInternationalAndNorthAmerican) {
  ExpectFound(PII_PHONE, "+1 415 555 2671");
  ExpectFound(PII_PHONE, "+44 20 7946 0958");
  ExpectFound(PII_PHONE, "+4915112345678");
  ExpectFound(PII_PHONE, "(415) 555-2671");
  ExpectFound(PII_PHONE, "415-555-2671");
  ExpectFound(PII_PHONE, "415.555.2671");
}

TEST(PiiPhone, NearMisses) {
  ExpectClean("2024-01-15");
  ExpectClean("version 1.2.3.4");
  ExpectClean("123e4567-e89b-12d3-a456-426614174000");
  ExpectClean("order 12345678");
  ExpectClean("+1234");          // too short
  ExpectClean("415-555-26710");  // too long
  ExpectClean("415-555.2671");   // mixed separators
  ExpectClean("10.0.0.1");
}

TEST(PiiCard, FindsLuhnValidCardsOfKnownIssuers) {
  ExpectFound(PII_PAYMENT_CARD, "4111111111111111");
  ExpectFound(PII_PAYMENT_CARD, "4111 1111 1111 1111");
  ExpectFound(PII_PAYMENT_CARD, "5555-5555-5555-4444");
  ExpectFound(PII_PAYMENT_CARD, "378282246310005");
}

TEST(PiiCard, NearMisses) {
  ExpectClean("4111111111111112");         // Luhn fails
  ExpectClean("1234567812345670");         // Luhn ok, no issuer starts with 1
  ExpectClean("x4111111111111111");        // inside a word
  ExpectClean("41111111111111111111111");  // a longer number
  ExpectClean("order 4111 1111");
}

TEST(PiiNationalId, FindsValidSsns) { ExpectFound(PII_NATIONAL_ID, "123-45-6789"); }

TEST(PiiNationalId, NearMisses) {
  ExpectClean("000-12-3456");
  ExpectClean("666-12-3456");
  ExpectClean("900-12-3456");
  ExpectClean("123-00-6789");
  ExpectClean("123-45-0000");
  ExpectClean("123456789");  // the undashed form is not flagged
  ExpectClean("1123-45-6789");
}

TEST(PiiIban, FindsIbansWithValidChecksums) {
  ExpectFound(PII_IBAN, "DE89370400440532013000");
  ExpectFound(PII_IBAN, "DE89 3704 0044 0532 0130 00");
  ExpectFound(PII_IBAN, "GB82WEST12345698765432");
}

TEST(PiiIban, NearMisses) {
  ExpectClean("DE89370400440532013001");  // checksum fails
  ExpectClean("DE8937040044053201300");   // one short for Germany
  ExpectClean("ZZ89370400440532013000");  // no such country
}

TEST(PiiApiKey, FindsCloudKeys) {
  ExpectFound(PII_API_KEY, "AKIAIOSFODNN7EXAMPLE");
  ExpectFound(PII_API_KEY, "ghp_" + std::string(36, 'a'));
  ExpectFound(PII_API_KEY, "github_pat_11ABCDEFG0123456789_abcdefghijklmnop");
  ExpectFound(PII_API_KEY, "xoxb-123456789012-abcdefghij");
  ExpectFound(PII_API_KEY, "AIza" + std::string(35, 'B'));
  ExpectFound(PII_API_KEY, "sk_live_" + std::string(24, '9'));
  ExpectFound(PII_API_KEY, "sk-proj-" + std::string(40, 'x'));
}

TEST(PiiApiKey, NearMisses) {
  ExpectClean("AKIAIOSFODNN7EXAMPL");  // 15 after the prefix
  ExpectClean("ghp_short");
  ExpectClean("sk-learn is a library");
  ExpectClean("AIza" + std::string(20, 'B'));
  ExpectClean("xAKIAIOSFODNN7EXAMPLE");
}

TEST(PiiPrivateKey, FindsBlocksThroughTheirEndLine) {
  std::string block =
      "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----";
  ExpectFound(PII_PRIVATE_KEY, block);
  ExpectFound(PII_PRIVATE_KEY, "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n");
  ExpectFound(PII_PRIVATE_KEY, "-----BEGIN PRIVATE KEY-----\nMC4CAQA=\n-----END PRIVATE KEY-----");
  EXPECT_EQ("a [REDACTED:private_key] b", Redact("a " + block + " b"));
}

TEST(PiiPrivateKey, PublicKeysAndCertificatesAreNotSecrets) {
  ExpectClean("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----");
  ExpectClean("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----");
}

TEST(PiiBearer, FindsBearerHeadersAndJwts) {
  ExpectFound(PII_BEARER_TOKEN, "Bearer abcdefghijklmnopqrstuvwxyz012345");
  ExpectFound(PII_BEARER_TOKEN, "authorization: bearer abcdefghijklmnopqrst.uvw");
  ExpectFound(PII_BEARER_TOKEN,
              "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9");
}

TEST(PiiBearer, NearMisses) {
  ExpectClean("Bearer short");
  ExpectClean("the bearer of bad news");
  ExpectClean("eyJhbGciOiJIUzI1NiJ9");  // a header alone
}

TEST(PiiScan, HitsAreOrderedNonOverlappingAndCounted) {
  std::string s = "mail alice@example.com or call +1 415 555 2671, card 4111111111111111";
  pii_hit hits[8];
  size_t n = 0;
  unsigned kinds = pii_scan(s.data(), s.size(), hits, 8, &n);
  ASSERT_EQ(3u, n);
  EXPECT_EQ(PII_EMAIL | PII_PHONE | PII_PAYMENT_CARD, kinds);
  EXPECT_EQ(PII_EMAIL, hits[0].kind);
  EXPECT_EQ("alice@example.com", s.substr(hits[0].start, hits[0].len));
  EXPECT_EQ("+1 415 555 2671", s.substr(hits[1].start, hits[1].len));
  EXPECT_EQ("4111111111111111", s.substr(hits[2].start, hits[2].len));
  size_t only = 0;
  pii_scan(s.data(), s.size(), hits, 1, &only);
  EXPECT_EQ(3u, only);  // the total, even when fewer fit
}

TEST(PiiRedact, ReplacesEachMatchWithItsKind) {
  EXPECT_EQ("write to [REDACTED:email] now", Redact("write to bob@corp.example now"));
  EXPECT_EQ("[REDACTED:payment_card]/[REDACTED:national_id]",
            Redact("4111-1111-1111-1111/123-45-6789"));
  EXPECT_EQ("nothing here", Redact("nothing here"));
  unsigned kinds = 0;
  std::string s = "key AKIAIOSFODNN7EXAMPLE";
  pii_redact(s.data(), s.size(), nullptr, 0, &kinds);
  EXPECT_EQ(PII_API_KEY, kinds);
}

TEST(PiiNames, AreStable) {
  EXPECT_STREQ("email", pii_kind_name(PII_EMAIL));
  EXPECT_STREQ("bearer_token", pii_kind_name(PII_BEARER_TOKEN));
  const char* names[8];
  ASSERT_EQ(2u, pii_kind_names(PII_IBAN | PII_PHONE, names, 8));
  EXPECT_STREQ("phone", names[0]);
  EXPECT_STREQ("iban", names[1]);
}

// ---- Struct payloads ----

class PiiStructTest : public ::testing::Test {
 protected:
  void SetUp() override { a_ = arena_create(); }
  void TearDown() override { arena_free(a_); }

  Google__Protobuf__Value* Str(const char* s) {
    auto* v =
        static_cast<Google__Protobuf__Value*>(arena_zalloc(a_, sizeof(Google__Protobuf__Value)));
    google__protobuf__value__init(v);
    v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
    v->string_value = arena_strdup(a_, s);
    return v;
  }
  Google__Protobuf__Value* List(std::initializer_list<Google__Protobuf__Value*> items) {
    auto* l = static_cast<Google__Protobuf__ListValue*>(
        arena_zalloc(a_, sizeof(Google__Protobuf__ListValue)));
    google__protobuf__list_value__init(l);
    l->n_values = items.size();
    l->values = static_cast<Google__Protobuf__Value**>(
        arena_zalloc(a_, items.size() * sizeof(Google__Protobuf__Value*)));
    size_t i = 0;
    for (auto* v : items) l->values[i++] = v;
    auto* v =
        static_cast<Google__Protobuf__Value*>(arena_zalloc(a_, sizeof(Google__Protobuf__Value)));
    google__protobuf__value__init(v);
    v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_LIST_VALUE;
    v->list_value = l;
    return v;
  }
  Google__Protobuf__Struct* Obj(
      std::initializer_list<std::pair<const char*, Google__Protobuf__Value*>> fields) {
    auto* st =
        static_cast<Google__Protobuf__Struct*>(arena_zalloc(a_, sizeof(Google__Protobuf__Struct)));
    google__protobuf__struct__init(st);
    st->n_fields = fields.size();
    st->fields = static_cast<Google__Protobuf__Struct__FieldsEntry**>(
        arena_zalloc(a_, fields.size() * sizeof(void*)));
    size_t i = 0;
    for (auto& f : fields) {
      auto* e = static_cast<Google__Protobuf__Struct__FieldsEntry*>(
          arena_zalloc(a_, sizeof(Google__Protobuf__Struct__FieldsEntry)));
      google__protobuf__struct__fields_entry__init(e);
      e->key = arena_strdup(a_, f.first);
      e->value = f.second;
      st->fields[i++] = e;
    }
    return st;
  }
  Google__Protobuf__Value* ObjV(Google__Protobuf__Struct* st) {
    auto* v =
        static_cast<Google__Protobuf__Value*>(arena_zalloc(a_, sizeof(Google__Protobuf__Value)));
    google__protobuf__value__init(v);
    v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRUCT_VALUE;
    v->struct_value = st;
    return v;
  }
  arena* a_ = nullptr;
};

TEST_F(PiiStructTest, FindsKindsWithTheirPaths) {
  auto* st = Obj({{"name", Str("ok")},
                  {"contact", ObjV(Obj({{"emails", List({Str("x"), Str("y"), Str("c@d.org")})}}))},
                  {"card", Str("4111111111111111")}});
  pii_findings f;
  pii_findings_init(&f);
  ASSERT_EQ(0, pii_scan_struct(&f, "metadata", st));
  EXPECT_EQ(PII_EMAIL | PII_PAYMENT_CARD, f.kinds);
  ASSERT_EQ(2u, f.n);
  EXPECT_STREQ("metadata.contact.emails[2]", f.at[0].path);
  EXPECT_STREQ("metadata.card", f.at[1].path);
  char msg[256];
  pii_findings_format(&f, msg, sizeof msg);
  EXPECT_STREQ("email at metadata.contact.emails[2], payment_card at metadata.card", msg);
}

TEST_F(PiiStructTest, KeysAreScannedAndNotEchoed) {
  auto* st = Obj({{"alice@example.com", Str("v")}});
  pii_findings f;
  pii_findings_init(&f);
  ASSERT_EQ(0, pii_scan_struct(&f, "metadata", st));
  EXPECT_EQ(PII_EMAIL, f.kinds);
  char msg[256];
  pii_findings_format(&f, msg, sizeof msg);
  EXPECT_EQ(nullptr, strstr(msg, "alice")) << msg;
}

TEST_F(PiiStructTest, RedactsValuesAndKeysInPlace) {
  auto* st = Obj({{"note", Str("call 415-555-2671")}, {"bob@example.org", Str("x")}});
  ASSERT_EQ(0, pii_redact_struct(a_, st));
  EXPECT_STREQ("call [REDACTED:phone]", st->fields[0]->value->string_value);
  EXPECT_STREQ("[REDACTED:email]", st->fields[1]->key);
  pii_findings f;
  pii_findings_init(&f);
  pii_scan_struct(&f, "m", st);
  EXPECT_EQ(0u, f.kinds);
}

TEST_F(PiiStructTest, TooDeepIsAnError) {
  Google__Protobuf__Struct* st = Obj({{"leaf", Str("x")}});
  for (int i = 0; i < PII_MAX_DEPTH + 2; i++) st = Obj({{"n", ObjV(st)}});
  pii_findings f;
  pii_findings_init(&f);
  EXPECT_EQ(-1, pii_scan_struct(&f, "m", st));
}

TEST(PiiHostile, LargeAdversarialInputsFinishQuickly) {
  const size_t n = 1 << 20;
  const std::string inputs[] = {
      std::string(n, '1'),
      std::string(n, '@'),
      std::string(n, 'a'),
      [] {
        std::string s;
        while (s.size() < (1 << 20)) s += "-----BEGIN RSA PRIVATE KEY----- ";
        return s;
      }(),
      [] {
        std::string s;
        while (s.size() < (1 << 20)) s += "a@b.";
        return s;
      }(),
      [] {
        std::string s;
        while (s.size() < (1 << 20)) s += "4 ";
        return s;
      }(),
  };
  for (const auto& s : inputs) {
    auto t0 = std::chrono::steady_clock::now();
    Kinds(s);
    Redact(s);
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    EXPECT_LT(ms, 2000) << "input starting " << s.substr(0, 20);
  }
}

}  // namespace
