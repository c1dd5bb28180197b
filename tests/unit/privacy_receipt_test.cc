// privacy_receipt: Forget's receipt as JSON, as a signed JWS and back. A
// receipt survives the round trip exactly; any change to the signed form,
// another key, or a capability token in its place fails verification, and
// a receipt never verifies as a token; malformed payloads are refused
// naming what is wrong.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <stdlib.h>

#include <cstring>
#include <string>

extern "C" {
#include "memory/v1/common.pb-c.h"
#include "service/auth/jwks.h"
#include "service/auth/jws.h"
#include "service/auth/jwt.h"
#include "service/privacy/privacy_receipt.h"
}

namespace {

class PrivacyReceiptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, jwks_generate_ed25519(&key_));
    ASSERT_EQ(0, jwks_generate_ed25519(&other_));
    char* pub = nullptr;
    ASSERT_EQ(0, jwks_render_public(key_, "k1", &pub));
    std::string doc = std::string("{\"keys\":[") + pub + "]}";
    free(pub);
    char err[256];
    ASSERT_EQ(0, jwks_parse(doc.data(), doc.size(), &keys_, err, sizeof err)) << err;
    ASSERT_NE(nullptr, a_ = arena_create());
    r_.tenant = "acme";
    r_.subject_id = "customer-1138";
    r_.requested_by = "dpo";
    r_.request_id = "req-1";
    snprintf(r_.receipt_id, sizeof r_.receipt_id, "%s", "0b8f3c1e-7d0a-4c51-9f55-3a0c8d2e1f00");
    r_.complete_us = 1795680000123456;  // 2026-11-26T...Z, with microseconds
    for (int t = 1; t <= privacy_tiers(); t++) r_.counts[t] = t * 10;
  }
  void TearDown() override {
    arena_free(a_);
    jwks_free(keys_);
    EVP_PKEY_free(key_);
    EVP_PKEY_free(other_);
  }

  std::string Sign(EVP_PKEY* k, const char* kid = "k1") {
    char* jws = nullptr;
    char err[256];
    EXPECT_EQ(0, privacy_receipt_sign(k, kid, &r_, &jws, err, sizeof err)) << err;
    std::string s = jws ? jws : "";
    free(jws);
    return s;
  }

  // Verification's error text, or "" when it verifies into *out.
  std::string Verify(const std::string& jws, privacy_receipt* out) {
    char err[256] = "";
    const char* kid = nullptr;
    if (privacy_receipt_verify(keys_, jws.data(), jws.size(), a_, out, &kid, err, sizeof err) ==
        0) {
      EXPECT_STREQ("k1", kid);
      return "";
    }
    EXPECT_STRNE("", err);
    return err;
  }

  std::string Parse(const std::string& json) {
    privacy_receipt r;
    char err[256] = "";
    return privacy_receipt_parse(a_, json.data(), json.size(), &r, err, sizeof err) == 0 ? "" : err;
  }

  EVP_PKEY *key_ = nullptr, *other_ = nullptr;
  jwks* keys_ = nullptr;
  arena* a_ = nullptr;
  privacy_receipt r_ = {};
};

TEST_F(PrivacyReceiptTest, SignedReceiptVerifiesToTheSameReceipt) {
  privacy_receipt got;
  ASSERT_EQ("", Verify(Sign(key_), &got));
  EXPECT_STREQ(r_.receipt_id, got.receipt_id);
  EXPECT_STREQ("acme", got.tenant);
  EXPECT_STREQ("customer-1138", got.subject_id);
  EXPECT_EQ(nullptr, got.principal);
  EXPECT_STREQ("dpo", got.requested_by);
  EXPECT_STREQ("req-1", got.request_id);
  EXPECT_EQ(r_.complete_us, got.complete_us);
  EXPECT_FALSE(got.dry_run);
  for (int t = 1; t <= privacy_tiers(); t++) EXPECT_EQ(t * 10, got.counts[t]) << t;

  char* json = privacy_receipt_json(&r_);
  ASSERT_NE(nullptr, json);
  std::string s = json;
  free(json);
  EXPECT_NE(std::string::npos, s.find("\"complete_time\":\"2026-11-26T")) << s;
  EXPECT_NE(std::string::npos, s.find(".123456Z\"")) << s;
  EXPECT_NE(std::string::npos, s.find("\"counts\":{\"global\":10,\"episodic\":20,")) << s;
}

TEST_F(PrivacyReceiptTest, AnyChangedByteAnotherKeyOrAnotherTypFails) {
  std::string jws = Sign(key_);
  for (size_t i = 0; i < jws.size(); i += 7) {
    if (jws[i] == '.') continue;
    std::string bad = jws;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    privacy_receipt got;
    EXPECT_NE("", Verify(bad, &got)) << "byte " << i;
  }
  privacy_receipt got;
  EXPECT_NE(std::string::npos, Verify(Sign(other_), &got).find("signature")) << "other key";
  EXPECT_NE(std::string::npos, Verify(Sign(key_, "k9"), &got).find("unknown kid"));

  // A capability token signed by the same key is no receipt...
  char* tok = nullptr;
  char err[256];
  char* payload = privacy_receipt_json(&r_);
  ASSERT_EQ(JWT_OK, jwt_sign(key_, "k1", payload, &tok, err, sizeof err));
  EXPECT_NE(std::string::npos, Verify(tok, &got).find("typ")) << Verify(tok, &got);
  free(tok);
  free(payload);
  // ... and a receipt never verifies as a token.
  jwt_claims* claims = nullptr;
  EXPECT_EQ(JWT_EHEADER, jwt_verify(keys_, jws.data(), jws.size(), r_.complete_us / 1000000, 60,
                                    &claims, err, sizeof err));
  EXPECT_EQ(nullptr, claims);
}

TEST_F(PrivacyReceiptTest, MalformedPayloadsAreRefusedNamingWhatIsWrong) {
  char* json = privacy_receipt_json(&r_);
  ASSERT_NE(nullptr, json);
  const std::string good = json;
  free(json);
  EXPECT_EQ("", Parse(good));
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(std::string::npos, at) << from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_NE("", Parse("[]"));
  EXPECT_NE("", Parse("{"));
  EXPECT_NE(std::string::npos, Parse(replaced("\"tenant\"", "\"tenantx\"")).find("required"));
  EXPECT_NE(std::string::npos,
            Parse(replaced("\"subject_id\"", "\"other\"")).find("exactly one of principal"));
  EXPECT_NE(std::string::npos, Parse(replaced("\"tenant\":", "\"principal\":\"p\",\"tenant\":"))
                                   .find("exactly one of principal"));
  EXPECT_NE(std::string::npos, Parse(replaced("\"global\":10", "\"global\":-1")).find("global"));
  EXPECT_NE(std::string::npos,
            Parse(replaced("\"entries\":50", "\"entries\":\"50\"")).find("entries"));
  EXPECT_NE(std::string::npos, Parse(replaced(".123456Z", "Z")).find("complete_time"));
  EXPECT_NE(std::string::npos,
            Parse(replaced("\"dry_run\":false", "\"dry_run\":0")).find("dry_run"));
  // Duplicate members would let two readers see two receipts.
  EXPECT_NE("", Parse(replaced("\"tenant\":", "\"tenant\":\"evil\",\"tenant\":")));
}

// The scope is signed with the rest: who and which namespaces it reached,
// read back as written, and in words for `memoryd receipt verify`.
// The counts are named after memory.v1.Tier's values, every one of them:
// a tier added to the proto is counted without an edit to the receipt.
TEST_F(PrivacyReceiptTest, EveryTierOfTheEnumIsCountedUnderItsOwnName) {
  ASSERT_EQ(8, privacy_tiers());
  const char* want[] = {nullptr,   "global",     "episodic", "cache_l1", "cache_l2",
                        "entries", "blackboard", "working",  "session"};
  for (int t = 1; t <= privacy_tiers(); t++) EXPECT_STREQ(want[t], privacy_tier_name(t)) << t;
  EXPECT_EQ(nullptr, privacy_tier_name(0));
  EXPECT_EQ(nullptr, privacy_tier_name(privacy_tiers() + 1));
  char* json = privacy_receipt_json(&r_);
  ASSERT_NE(nullptr, json);
  std::string s = json;
  free(json);
  EXPECT_NE(std::string::npos, s.find("\"working\":70,\"session\":80}")) << s;
}

// A receipt issued before a tier existed has no count for it: it reads as
// 0, where a count of the wrong type is still refused.
TEST_F(PrivacyReceiptTest, AMissingCountReadsAsNone) {
  char* json = privacy_receipt_json(&r_);
  ASSERT_NE(nullptr, json);
  std::string s = json;
  free(json);
  size_t at = s.find(",\"session\":80");
  ASSERT_NE(std::string::npos, at) << s;
  s.erase(at, strlen(",\"session\":80"));
  privacy_receipt got;
  char err[256] = "";
  ASSERT_EQ(0, privacy_receipt_parse(a_, s.data(), s.size(), &got, err, sizeof err)) << err;
  EXPECT_EQ(0, got.counts[MEMORY__V1__TIER__TIER_SESSION]);
  EXPECT_EQ(70, got.counts[MEMORY__V1__TIER__TIER_WORKING]);
}

TEST_F(PrivacyReceiptTest, TheScopeIsSignedAndReadBack) {
  const char* ns[] = {"planner:*:*", "agent:x:*"};
  r_.has_scope = 1;
  r_.scope_owner = "alice";
  r_.ns = ns;
  r_.nns = 2;
  privacy_receipt got;
  ASSERT_EQ("", Verify(Sign(key_), &got));
  ASSERT_TRUE(got.has_scope);
  EXPECT_STREQ("alice", got.scope_owner);
  ASSERT_EQ(2u, got.nns);
  EXPECT_STREQ("planner:*:*", got.ns[0]);
  EXPECT_STREQ("agent:x:*", got.ns[1]);
  EXPECT_STREQ(
      "the records of principal alice only; in entries and working memory, namespaces "
      "planner:*:*, agent:x:*",
      privacy_receipt_scope_text(a_, &got));

  r_.scope_owner = nullptr;  // tenant-wide, in no namespace at all
  r_.nns = 0;
  ASSERT_EQ("", Verify(Sign(key_), &got));
  EXPECT_TRUE(got.has_scope);
  EXPECT_EQ(nullptr, got.scope_owner);
  EXPECT_EQ(0u, got.nns);
  EXPECT_STREQ(
      "every principal's records in tenant acme; in entries and working memory, namespaces none",
      privacy_receipt_scope_text(a_, &got));
  char* json = privacy_receipt_json(&r_);
  ASSERT_NE(nullptr, json);
  EXPECT_NE(std::string::npos,
            std::string(json).find("\"scope\":{\"records\":\"tenant\",\"namespaces\":[]}"))
      << json;
  free(json);

  // A receipt from before scopes parses, saying so.
  r_.has_scope = 0;
  ASSERT_EQ("", Verify(Sign(key_), &got));
  EXPECT_FALSE(got.has_scope);
  EXPECT_NE(std::string::npos,
            std::string(privacy_receipt_scope_text(a_, &got)).find("not stated"));
}

TEST_F(PrivacyReceiptTest, AMalformedScopeIsRefused) {
  char* json = privacy_receipt_json(&r_);
  ASSERT_NE(nullptr, json);
  std::string base = json;
  free(json);
  base.pop_back();  // the closing brace
  for (const char* scope :
       {R"("scope":1)", R"("scope":{"records":"principal","namespaces":[]})",
        R"("scope":{"records":"tenant","owner":"x","namespaces":[]})",
        R"("scope":{"records":"everyone","namespaces":[]})", R"("scope":{"records":"tenant"})",
        R"("scope":{"records":"tenant","namespaces":[1]})"})
    EXPECT_NE("", Parse(base + "," + scope + "}")) << scope;
  EXPECT_EQ("", Parse(base + R"(,"scope":{"records":"tenant","namespaces":["*:*:*"]}})"));
}

}  // namespace
