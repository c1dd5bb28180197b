// jwt: EdDSA-only capability-token verification, and the strict base64url
// it is built on. Every rejection is checked for its code and for a message
// that says what was wrong.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

extern "C" {
#include "service/auth/jwks.h"
#include "service/auth/jwt.h"
#include "service/core/b64url.h"
}

namespace {

// ---- b64url ---------------------------------------------------------------

std::string Enc(const std::string& in) {
  std::string out(b64url_encoded_len(in.size()) + 1, '\0');
  size_t n = b64url_encode(reinterpret_cast<const unsigned char*>(in.data()), in.size(), &out[0]);
  out.resize(n);
  return out;
}

// Returns false when the decoder rejects the input.
bool Dec(const std::string& in, std::string* out) {
  std::string buf(b64url_decoded_max(in.size()), '\0');
  size_t n = 0;
  if (b64url_decode(in.data(), in.size(), reinterpret_cast<unsigned char*>(&buf[0]), &n) != 0)
    return false;
  buf.resize(n);
  *out = buf;
  return true;
}

TEST(B64urlTest, Rfc4648VectorsEncodeWithoutPadding) {
  EXPECT_EQ("", Enc(""));
  EXPECT_EQ("Zg", Enc("f"));
  EXPECT_EQ("Zm8", Enc("fo"));
  EXPECT_EQ("Zm9v", Enc("foo"));
  EXPECT_EQ("Zm9vYg", Enc("foob"));
  EXPECT_EQ("Zm9vYmE", Enc("fooba"));
  EXPECT_EQ("Zm9vYmFy", Enc("foobar"));
}

TEST(B64urlTest, UrlAlphabetIsUsedForTheLastTwoSymbols) {
  EXPECT_EQ("-_8", Enc(std::string("\xfb\xff", 2)));
  std::string out;
  ASSERT_TRUE(Dec("-_8", &out));
  EXPECT_EQ(std::string("\xfb\xff", 2), out);
}

TEST(B64urlTest, EveryLengthAndByteValueRoundTrips) {
  std::string all;
  for (int i = 0; i < 256; i++) all.push_back(static_cast<char>(i));
  for (size_t len = 0; len <= all.size(); len++) {
    std::string in = all.substr(all.size() - len), out;
    ASSERT_TRUE(Dec(Enc(in), &out)) << len;
    ASSERT_EQ(in, out) << len;
  }
}

TEST(B64urlTest, PaddingIsRejected) {
  std::string out;
  EXPECT_FALSE(Dec("Zg==", &out));
  EXPECT_FALSE(Dec("Zm8=", &out));
  EXPECT_FALSE(Dec("Zg=", &out));
  EXPECT_TRUE(Dec("Zg", &out));
}

TEST(B64urlTest, StandardAlphabetAndOtherCharactersAreRejected) {
  std::string out;
  EXPECT_FALSE(Dec("+/8", &out));
  EXPECT_FALSE(Dec("Zm9v Yg", &out));
  EXPECT_FALSE(Dec("Zm9v\nYg", &out));
  EXPECT_FALSE(Dec(std::string("Zm\0v", 4), &out));
  EXPECT_FALSE(Dec("Zm9.", &out));
}

TEST(B64urlTest, LengthOneModFourIsRejected) {
  std::string out;
  EXPECT_FALSE(Dec("Z", &out));
  EXPECT_FALSE(Dec("Zm9vY", &out));
}

TEST(B64urlTest, NonCanonicalTrailingBitsAreRejected) {
  std::string out;
  ASSERT_TRUE(Dec("Zg", &out));    // 'g' = 100000: low 4 bits clear
  EXPECT_FALSE(Dec("Zh", &out));   // 'h' = 100001: would also decode to "f"
  ASSERT_TRUE(Dec("Zm8", &out));   // '8' = 111100: low 2 bits clear
  EXPECT_FALSE(Dec("Zm9", &out));  // '9' = 111101: would also decode to "fo"
}

// ---- jwt ------------------------------------------------------------------

const int64_t kNow = 1700000000;

std::string B64(const std::string& s) { return Enc(s); }

std::string B64(const unsigned char* p, size_t n) {
  return Enc(std::string(reinterpret_cast<const char*>(p), n));
}

// A claim set with every claim present; tests remove or change members.
struct Claims {
  std::vector<std::pair<std::string, std::string>> members = {
      {"iss", "\"memoryd-test\""},
      {"sub", "\"alice\""},
      {"tenant", "\"acme\""},
      {"scope", "\"global:read episodic:read:all\""},
      {"ns", "[\"proj/*\",\"shared\"]"},
      {"clr", "\"CONFIDENTIAL\""},
      {"lvl", "\"INTERNAL\""},
      {"exp", std::to_string(kNow + 3600)},
      {"nbf", std::to_string(kNow - 10)},
      {"iat", std::to_string(kNow - 10)},
      {"jti", "\"t-123\""},
      {"parent", "\"t-100\""},
  };
  Claims& Set(const std::string& k, const std::string& json) {
    for (auto& m : members)
      if (m.first == k) {
        m.second = json;
        return *this;
      }
    members.emplace_back(k, json);
    return *this;
  }
  Claims& Drop(const std::string& k) {
    for (size_t i = 0; i < members.size(); i++)
      if (members[i].first == k) members.erase(members.begin() + i);
    return *this;
  }
  std::string Json() const {
    std::string s = "{";
    for (size_t i = 0; i < members.size(); i++) {
      if (i) s += ",";
      s += "\"" + members[i].first + "\":" + members[i].second;
    }
    return s + "}";
  }
};

class JwtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, jwks_generate_ed25519(&key_));
    ASSERT_EQ(0, jwks_generate_ed25519(&other_));
    char* a = nullptr;
    char* b = nullptr;
    ASSERT_EQ(0, jwks_render_public(key_, "k1", &a));
    ASSERT_EQ(0, jwks_render_public(other_, "k2", &b));
    std::string doc = std::string("{\"keys\":[") + a + "," + b + "]}";
    free(a);
    free(b);
    char err[256];
    ASSERT_EQ(0, jwks_parse(doc.data(), doc.size(), &keys_, err, sizeof err)) << err;
  }
  void TearDown() override {
    jwt_claims_free(claims_);
    jwks_free(keys_);
    EVP_PKEY_free(key_);
    EVP_PKEY_free(other_);
  }

  std::string Sign(const std::string& payload, EVP_PKEY* k = nullptr,
                   const std::string& kid = "k1") {
    char* tok = nullptr;
    char err[256] = "";
    int rc = jwt_sign(k ? k : key_, kid.c_str(), payload.c_str(), &tok, err, sizeof err);
    EXPECT_EQ(JWT_OK, rc) << err;
    std::string s = tok ? tok : "";
    free(tok);
    return s;
  }

  // header.payload signed with Ed25519 under an arbitrary header.
  std::string SignRaw(const std::string& header, const std::string& payload, EVP_PKEY* k) {
    std::string input = B64(header) + "." + B64(payload);
    unsigned char sig[64];
    size_t siglen = sizeof sig;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EXPECT_EQ(1, EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, k));
    EXPECT_EQ(
        1, EVP_DigestSign(ctx, sig, &siglen, reinterpret_cast<const unsigned char*>(input.data()),
                          input.size()));
    EVP_MD_CTX_free(ctx);
    return input + "." + B64(sig, siglen);
  }

  int Verify(const std::string& tok, int skew = JWT_DEFAULT_SKEW_S, int64_t now = kNow) {
    err_[0] = '\0';
    jwt_claims_free(claims_);
    claims_ = nullptr;
    int rc = jwt_verify(keys_, tok.data(), tok.size(), now, skew, &claims_, err_, sizeof err_);
    if (rc != JWT_OK) {
      EXPECT_EQ(nullptr, claims_);
    }
    return rc;
  }
  bool ErrHas(const std::string& s) const { return std::string(err_).find(s) != std::string::npos; }

  EVP_PKEY* key_ = nullptr;
  EVP_PKEY* other_ = nullptr;
  jwks* keys_ = nullptr;
  jwt_claims* claims_ = nullptr;
  char err_[512] = "";
};

TEST_F(JwtTest, GoodTokenVerifiesAndReturnsEveryClaim) {
  ASSERT_EQ(JWT_OK, Verify(Sign(Claims().Json()))) << err_;
  ASSERT_NE(nullptr, claims_);
  EXPECT_STREQ("memoryd-test", claims_->iss);
  EXPECT_STREQ("alice", claims_->sub);
  EXPECT_STREQ("acme", claims_->tenant);
  EXPECT_STREQ("t-123", claims_->jti);
  EXPECT_STREQ("t-100", claims_->parent);
  ASSERT_EQ(2u, claims_->nscopes);
  EXPECT_STREQ("global:read", claims_->scopes[0]);
  EXPECT_STREQ("episodic:read:all", claims_->scopes[1]);
  ASSERT_EQ(2u, claims_->nns);
  EXPECT_STREQ("proj/*", claims_->ns[0]);
  EXPECT_STREQ("shared", claims_->ns[1]);
  EXPECT_EQ(JWT_LABEL_CONFIDENTIAL, claims_->clr);
  EXPECT_EQ(JWT_LABEL_INTERNAL, claims_->lvl);
  EXPECT_EQ(kNow + 3600, claims_->exp);
  EXPECT_EQ(kNow - 10, claims_->nbf);
  EXPECT_EQ(kNow - 10, claims_->iat);
  EXPECT_TRUE(claims_->has_nbf);
  EXPECT_TRUE(claims_->has_iat);
}

TEST_F(JwtTest, SecondKeyInTheSetVerifiesItsOwnTokens) {
  EXPECT_EQ(JWT_OK, Verify(Sign(Claims().Json(), other_, "k2"))) << err_;
}

TEST_F(JwtTest, MinimalTokenGetsDocumentedDefaults) {
  Claims c;
  c.Drop("iss").Drop("ns").Drop("clr").Drop("lvl").Drop("nbf").Drop("iat").Drop("parent");
  ASSERT_EQ(JWT_OK, Verify(Sign(c.Json()))) << err_;
  EXPECT_EQ(nullptr, claims_->iss);
  EXPECT_EQ(nullptr, claims_->parent);
  EXPECT_EQ(0u, claims_->nns);
  EXPECT_EQ(JWT_LABEL_PUBLIC, claims_->lvl);
  EXPECT_EQ(JWT_LABEL_PUBLIC, claims_->clr);
  EXPECT_FALSE(claims_->has_nbf);
  EXPECT_FALSE(claims_->has_iat);
}

TEST_F(JwtTest, ClrDefaultsToLvlWhenOnlyLvlIsGiven) {
  ASSERT_EQ(JWT_OK, Verify(Sign(Claims().Drop("clr").Set("lvl", "\"SECRET\"").Json()))) << err_;
  EXPECT_EQ(JWT_LABEL_SECRET, claims_->lvl);
  EXPECT_EQ(JWT_LABEL_SECRET, claims_->clr);
}

TEST_F(JwtTest, AlgNoneWithEmptySignatureIsRejected) {
  std::string tok = B64("{\"alg\":\"none\",\"kid\":\"k1\"}") + "." + B64(Claims().Json()) + ".";
  EXPECT_EQ(JWT_EHEADER, Verify(tok));
  EXPECT_TRUE(ErrHas("alg \"none\" not accepted")) << err_;
}

TEST_F(JwtTest, Hs256KeyedWithThePublicKeyIsRejected) {
  unsigned char pub[32];
  size_t publen = sizeof pub;
  ASSERT_EQ(1, EVP_PKEY_get_raw_public_key(key_, pub, &publen));
  std::string input =
      B64("{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"k1\"}") + "." + B64(Claims().Json());
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int maclen = 0;
  ASSERT_NE(nullptr,
            HMAC(EVP_sha256(), pub, static_cast<int>(publen),
                 reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &maclen));
  ASSERT_EQ(32u, maclen);
  EXPECT_EQ(JWT_EHEADER, Verify(input + "." + B64(mac, maclen)));
  EXPECT_TRUE(ErrHas("alg \"HS256\" not accepted")) << err_;
}

TEST_F(JwtTest, AlgMatchIsCaseSensitive) {
  std::string tok = SignRaw("{\"alg\":\"eddsa\",\"kid\":\"k1\"}", Claims().Json(), key_);
  EXPECT_EQ(JWT_EHEADER, Verify(tok));
  EXPECT_TRUE(ErrHas("only EdDSA")) << err_;
}

TEST_F(JwtTest, HeaderWithoutKidIsRejected) {
  std::string tok = SignRaw("{\"alg\":\"EdDSA\"}", Claims().Json(), key_);
  EXPECT_EQ(JWT_EHEADER, Verify(tok));
  EXPECT_TRUE(ErrHas("\"kid\"")) << err_;
}

TEST_F(JwtTest, TypOtherThanJwtIsRejected) {
  std::string tok =
      SignRaw("{\"alg\":\"EdDSA\",\"typ\":\"at+jwt\",\"kid\":\"k1\"}", Claims().Json(), key_);
  EXPECT_EQ(JWT_EHEADER, Verify(tok));
  EXPECT_TRUE(ErrHas("typ")) << err_;
}

TEST_F(JwtTest, HeaderWithCritIsRejected) {
  std::string tok = SignRaw("{\"alg\":\"EdDSA\",\"kid\":\"k1\",\"crit\":[\"b64\"],\"b64\":false}",
                            Claims().Json(), key_);
  EXPECT_EQ(JWT_EHEADER, Verify(tok));
  EXPECT_TRUE(ErrHas("crit")) << err_;
}

TEST_F(JwtTest, DuplicateAlgInHeaderIsRejected) {
  std::string tok =
      SignRaw("{\"alg\":\"none\",\"alg\":\"EdDSA\",\"kid\":\"k1\"}", Claims().Json(), key_);
  EXPECT_EQ(JWT_EMALFORMED, Verify(tok));
  EXPECT_TRUE(ErrHas("header is not valid JSON")) << err_;
}

TEST_F(JwtTest, TokenSignedByAnotherKeyUnderOurKidIsRejected) {
  EXPECT_EQ(JWT_ESIG, Verify(Sign(Claims().Json(), other_, "k1")));
  EXPECT_TRUE(ErrHas("signature does not verify")) << err_;
}

TEST_F(JwtTest, TamperedPayloadIsRejected) {
  std::string tok = Sign(Claims().Json());
  size_t d1 = tok.find('.'), d2 = tok.find('.', d1 + 1);
  std::string forged = Claims().Set("clr", "\"SECRET\"").Json();
  tok = tok.substr(0, d1 + 1) + B64(forged) + tok.substr(d2);
  EXPECT_EQ(JWT_ESIG, Verify(tok));
  EXPECT_TRUE(ErrHas("signature does not verify")) << err_;
}

TEST_F(JwtTest, TamperedSignatureIsRejected) {
  std::string tok = Sign(Claims().Json());
  size_t d2 = tok.rfind('.');
  tok[d2 + 1] = tok[d2 + 1] == 'A' ? 'B' : 'A';
  EXPECT_EQ(JWT_ESIG, Verify(tok));
  EXPECT_TRUE(ErrHas("signature does not verify")) << err_;
}

TEST_F(JwtTest, TruncatedSignatureIsRejected) {
  std::string tok = Sign(Claims().Json());
  tok.resize(tok.size() - 2);
  EXPECT_EQ(JWT_ESIG, Verify(tok));
  EXPECT_TRUE(ErrHas("not base64url of 64 bytes")) << err_;
}

TEST_F(JwtTest, UnknownKidIsRejected) {
  EXPECT_EQ(JWT_EKID, Verify(Sign(Claims().Json(), key_, "retired-2019")));
  EXPECT_TRUE(ErrHas("unknown kid \"retired-2019\"")) << err_;
}

TEST_F(JwtTest, ExpiredBeyondSkewIsRejected) {
  EXPECT_EQ(JWT_EEXPIRED, Verify(Sign(Claims().Set("exp", std::to_string(kNow - 61)).Json())));
  EXPECT_TRUE(ErrHas("expired")) << err_;
}

TEST_F(JwtTest, ExpiredWithinSkewIsAccepted) {
  EXPECT_EQ(JWT_OK, Verify(Sign(Claims().Set("exp", std::to_string(kNow - 59)).Json()))) << err_;
}

TEST_F(JwtTest, ExpiryUsesTheConfiguredSkew) {
  std::string tok = Sign(Claims().Set("exp", std::to_string(kNow - 5)).Json());
  EXPECT_EQ(JWT_EEXPIRED, Verify(tok, 0));
  EXPECT_EQ(JWT_OK, Verify(tok, 10)) << err_;
}

TEST_F(JwtTest, NotBeforeInTheFutureBeyondSkewIsRejected) {
  EXPECT_EQ(JWT_ENOTYET, Verify(Sign(Claims().Set("nbf", std::to_string(kNow + 61)).Json())));
  EXPECT_TRUE(ErrHas("not valid before")) << err_;
}

TEST_F(JwtTest, NotBeforeWithinSkewIsAccepted) {
  EXPECT_EQ(JWT_OK, Verify(Sign(Claims().Set("nbf", std::to_string(kNow + 59)).Json()))) << err_;
}

TEST_F(JwtTest, MissingSubIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Drop("sub").Json())));
  EXPECT_TRUE(ErrHas("missing required claim \"sub\"")) << err_;
}

TEST_F(JwtTest, MissingTenantIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Drop("tenant").Json())));
  EXPECT_TRUE(ErrHas("missing required claim \"tenant\"")) << err_;
}

TEST_F(JwtTest, MissingExpIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Drop("exp").Json())));
  EXPECT_TRUE(ErrHas("missing required claim \"exp\"")) << err_;
}

TEST_F(JwtTest, MissingJtiIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Drop("jti").Json())));
  EXPECT_TRUE(ErrHas("missing required claim \"jti\"")) << err_;
}

TEST_F(JwtTest, MissingScopeIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Drop("scope").Json())));
  EXPECT_TRUE(ErrHas("missing required claim \"scope\"")) << err_;
}

TEST_F(JwtTest, EmptySubIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Set("sub", "\"\"").Json())));
  EXPECT_TRUE(ErrHas("\"sub\" must be a non-empty string")) << err_;
}

TEST_F(JwtTest, NonIntegerExpIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Set("exp", "\"tomorrow\"").Json())));
  EXPECT_TRUE(ErrHas("\"exp\" must be a non-negative integer")) << err_;
}

TEST_F(JwtTest, ScopeWithStraySpaceIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Set("scope", "\"global:read  admin\"").Json())));
  EXPECT_TRUE(ErrHas("empty scope")) << err_;
}

TEST_F(JwtTest, TooManyScopesAreRejected) {
  std::string s;
  for (int i = 0; i <= JWT_MAX_SCOPES; i++) s += (i ? " s" : "s") + std::to_string(i);
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Set("scope", "\"" + s + "\"").Json())));
  EXPECT_TRUE(ErrHas("at most 64")) << err_;
}

TEST_F(JwtTest, TooManyNamespacesAreRejected) {
  std::string ns = "[";
  for (int i = 0; i <= JWT_MAX_NS; i++) ns += (i ? ",\"n" : "\"n") + std::to_string(i) + "\"";
  ns += "]";
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Set("ns", ns).Json())));
  EXPECT_TRUE(ErrHas("\"ns\" has 65 entries")) << err_;
}

TEST_F(JwtTest, NonStringNamespaceIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Set("ns", "[\"a\",7]").Json())));
  EXPECT_TRUE(ErrHas("\"ns\"[1]")) << err_;
}

TEST_F(JwtTest, UnknownLabelIsRejected) {
  EXPECT_EQ(JWT_ECLAIM, Verify(Sign(Claims().Set("clr", "\"TOP-SECRET\"").Json())));
  EXPECT_TRUE(ErrHas("\"clr\" must be one of")) << err_;
}

TEST_F(JwtTest, LvlAboveClrIsRejected) {
  EXPECT_EQ(JWT_ECLAIM,
            Verify(Sign(Claims().Set("lvl", "\"SECRET\"").Set("clr", "\"INTERNAL\"").Json())));
  EXPECT_TRUE(ErrHas("lvl (4) above clr (2)")) << err_;
}

TEST_F(JwtTest, InternalLvlWithPublicClrIsRejected) {
  EXPECT_EQ(JWT_ECLAIM,
            Verify(Sign(Claims().Set("lvl", "\"INTERNAL\"").Set("clr", "\"PUBLIC\"").Json())));
  EXPECT_TRUE(ErrHas("above clr")) << err_;
}

TEST_F(JwtTest, PayloadThatIsNotAnObjectIsRejected) {
  std::string tok = SignRaw("{\"alg\":\"EdDSA\",\"kid\":\"k1\"}", "[1,2]", key_);
  EXPECT_EQ(JWT_EMALFORMED, Verify(tok));
  EXPECT_TRUE(ErrHas("payload is not a JSON object")) << err_;
}

TEST_F(JwtTest, GarbageIsRejectedAsMalformed) {
  EXPECT_EQ(JWT_EMALFORMED, Verify("not a token at all"));
  EXPECT_TRUE(ErrHas("three dot-separated parts")) << err_;
  EXPECT_EQ(JWT_EMALFORMED, Verify("!!!.???.***"));
  EXPECT_TRUE(ErrHas("header is not valid base64url")) << err_;
}

TEST_F(JwtTest, EmptyTokenIsRejected) {
  EXPECT_EQ(JWT_EMALFORMED, Verify(""));
  EXPECT_TRUE(ErrHas("empty token")) << err_;
}

TEST_F(JwtTest, TokenWithOneDotIsRejected) {
  std::string tok = Sign(Claims().Json());
  tok.resize(tok.rfind('.'));
  EXPECT_EQ(JWT_EMALFORMED, Verify(tok));
  EXPECT_TRUE(ErrHas("exactly three")) << err_;
}

TEST_F(JwtTest, TokenWithFourPartsIsRejected) {
  EXPECT_EQ(JWT_EMALFORMED, Verify(Sign(Claims().Json()) + ".AAAA"));
  EXPECT_TRUE(ErrHas("exactly three")) << err_;
}

TEST_F(JwtTest, TruncatedHeaderIsRejected) {
  std::string tok = Sign(Claims().Json());
  EXPECT_EQ(JWT_EMALFORMED, Verify(tok.substr(5)));
  EXPECT_TRUE(ErrHas("header is not valid")) << err_;
}

TEST_F(JwtTest, PaddedPartsAreRejected) {
  std::string tok = Sign(Claims().Json());
  size_t d1 = tok.find('.');
  tok.insert(d1, "=");
  EXPECT_EQ(JWT_EMALFORMED, Verify(tok));
  EXPECT_TRUE(ErrHas("header is not valid base64url")) << err_;
}

TEST_F(JwtTest, OversizedTokenIsRejectedBeforeParsing) {
  Claims c;
  c.Set("pad", "\"" + std::string(JWT_MAX_TOKEN, 'x') + "\"");
  std::string tok = Sign(c.Json());
  ASSERT_GT(tok.size(), static_cast<size_t>(JWT_MAX_TOKEN));
  EXPECT_EQ(JWT_EMALFORMED, Verify(tok));
  EXPECT_TRUE(ErrHas("at most 8192")) << err_;
}

TEST_F(JwtTest, SignRefusesAPayloadThatIsNotAnObject) {
  char* tok = nullptr;
  EXPECT_EQ(JWT_EARG, jwt_sign(key_, "k1", "[]", &tok, err_, sizeof err_));
  EXPECT_EQ(nullptr, tok);
  EXPECT_TRUE(ErrHas("not a JSON object")) << err_;
}

TEST_F(JwtTest, SignRefusesAPublicOnlyKey) {
  char* tok = nullptr;
  EVP_PKEY* pub = jwks_find(keys_, "k1");
  ASSERT_NE(nullptr, pub);
  EXPECT_NE(JWT_OK, jwt_sign(pub, "k1", "{}", &tok, err_, sizeof err_));
  EXPECT_EQ(nullptr, tok);
  EXPECT_TRUE(ErrHas("signing failed")) << err_;
}

TEST_F(JwtTest, ErrorCodesHaveNames) {
  EXPECT_STREQ("JWT_ESIG", jwt_strerror(JWT_ESIG));
  EXPECT_STREQ("JWT_EEXPIRED", jwt_strerror(JWT_EEXPIRED));
}

}  // namespace
