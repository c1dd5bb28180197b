// jwks: Ed25519 verification keys parsed from JWKS bytes; keys of other
// types are skipped and counted, anything ambiguous or malformed is refused
// with a message naming the problem.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include <string>

extern "C" {
#include "service/auth/jwks.h"
}

namespace {

// Public key bytes for test vector 1 of RFC 8032 §7.1, as a JWK x value.
const char kX1[] = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";

std::string Okp(const std::string& kid, const std::string& x) {
  return "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"" + kid + "\",\"x\":\"" + x + "\"}";
}

std::string RenderFresh(const std::string& kid) {
  EVP_PKEY* k = nullptr;
  if (jwks_generate_ed25519(&k) != 0) return "";
  char* json = nullptr;
  std::string out;
  if (jwks_render_public(k, kid.c_str(), &json) == 0) out = json;
  free(json);
  EVP_PKEY_free(k);
  return out;
}

class JwksTest : public ::testing::Test {
 protected:
  void TearDown() override { jwks_free(set_); }
  int Parse(const std::string& doc) {
    err_[0] = '\0';
    jwks_free(set_);
    set_ = nullptr;
    return jwks_parse(doc.data(), doc.size(), &set_, err_, sizeof err_);
  }
  std::string Err() const { return err_; }
  jwks* set_ = nullptr;
  char err_[512] = "";
};

TEST_F(JwksTest, TwoKeysAreEachFoundByTheirKid) {
  std::string a = RenderFresh("2026-01"), b = RenderFresh("2026-02");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(0, Parse("{\"keys\":[" + a + "," + b + "]}")) << Err();
  EXPECT_EQ(2u, jwks_count(set_));
  EVP_PKEY* ka = jwks_find(set_, "2026-01");
  EVP_PKEY* kb = jwks_find(set_, "2026-02");
  ASSERT_NE(nullptr, ka);
  ASSERT_NE(nullptr, kb);
  EXPECT_NE(ka, kb);
  EXPECT_EQ(EVP_PKEY_ED25519, EVP_PKEY_get_id(ka));
  EXPECT_EQ(nullptr, jwks_find(set_, "2026-03"));
}

TEST_F(JwksTest, KnownPublicKeyBytesAreLoadedUnchanged) {
  ASSERT_EQ(0, Parse("{\"keys\":[" + Okp("rfc8032", kX1) + "]}")) << Err();
  EVP_PKEY* k = jwks_find(set_, "rfc8032");
  ASSERT_NE(nullptr, k);
  unsigned char raw[32];
  size_t len = sizeof raw;
  ASSERT_EQ(1, EVP_PKEY_get_raw_public_key(k, raw, &len));
  ASSERT_EQ(32u, len);
  EXPECT_EQ(0xd7, raw[0]);
  EXPECT_EQ(0x1a, raw[31]);
}

TEST_F(JwksTest, RsaEcAndOtherCurvesAreSkippedAndCounted) {
  std::string doc =
      "{\"keys\":["
      "{\"kty\":\"RSA\",\"kid\":\"r\",\"n\":\"AQAB\",\"e\":\"AQAB\"},"
      "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"e\",\"x\":\"AA\",\"y\":\"AA\"},"
      "{\"kty\":\"OKP\",\"crv\":\"X25519\",\"kid\":\"x\",\"x\":\"AA\"}," +
      Okp("ed", kX1) + "]}";
  ASSERT_EQ(0, Parse(doc)) << Err();
  EXPECT_EQ(1u, jwks_count(set_));
  EXPECT_EQ(3u, jwks_skipped(set_));
  EXPECT_NE(nullptr, jwks_find(set_, "ed"));
  EXPECT_EQ(nullptr, jwks_find(set_, "r"));
  EXPECT_EQ(nullptr, jwks_find(set_, "e"));
}

TEST_F(JwksTest, OnlyForeignKeysIsRejectedAsNoUsableKey) {
  EXPECT_EQ(-1,
            Parse("{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}"));
  EXPECT_NE(std::string::npos, Err().find("no Ed25519 keys")) << Err();
  EXPECT_EQ(nullptr, set_);
}

TEST_F(JwksTest, DuplicateKidIsRejected) {
  std::string a = RenderFresh("same");
  EXPECT_EQ(-1, Parse("{\"keys\":[" + a + "," + Okp("same", kX1) + "]}"));
  EXPECT_NE(std::string::npos, Err().find("duplicate kid \"same\"")) << Err();
  EXPECT_EQ(nullptr, set_);
}

TEST_F(JwksTest, ShortXIsRejected) {
  // 31 bytes.
  EXPECT_EQ(-1,
            Parse("{\"keys\":[" + Okp("k", "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHUQ") + "]}"));
  EXPECT_NE(std::string::npos, Err().find("\"x\" is not base64url of 32 bytes")) << Err();
}

TEST_F(JwksTest, LongXIsRejected) {
  // 33 bytes.
  EXPECT_EQ(-1, Parse("{\"keys\":[" + Okp("k", std::string(kX1) + "AA") + "]}"));
  EXPECT_NE(std::string::npos, Err().find("\"x\" is not base64url of 32 bytes")) << Err();
}

TEST_F(JwksTest, PaddedXIsRejected) {
  EXPECT_EQ(-1, Parse("{\"keys\":[" + Okp("k", std::string(kX1) + "=") + "]}"));
  EXPECT_NE(std::string::npos, Err().find("\"x\"")) << Err();
}

TEST_F(JwksTest, MalformedJsonIsRejectedWithPosition) {
  EXPECT_EQ(-1, Parse("{\"keys\":[" + Okp("k", kX1)));
  EXPECT_NE(std::string::npos, Err().find("malformed JSON")) << Err();
  EXPECT_EQ(nullptr, set_);
}

TEST_F(JwksTest, DocumentWithoutKeysArrayIsRejected) {
  EXPECT_EQ(-1, Parse("{\"keys\":{}}"));
  EXPECT_NE(std::string::npos, Err().find("\"keys\" array")) << Err();
}

TEST_F(JwksTest, Ed25519KeyWithoutKidIsRejected) {
  EXPECT_EQ(-1, Parse(std::string("{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"") +
                      kX1 + "\"}]}"));
  EXPECT_NE(std::string::npos, Err().find("\"kid\"")) << Err();
}

TEST_F(JwksTest, PrivateKeyMaterialIsRejected) {
  std::string k = Okp("k", kX1);
  k.insert(k.size() - 1, ",\"d\":\"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A\"");
  EXPECT_EQ(-1, Parse("{\"keys\":[" + k + "]}"));
  EXPECT_NE(std::string::npos, Err().find("private part")) << Err();
}

TEST_F(JwksTest, KeyDeclaringAnotherAlgIsRejected) {
  std::string k = Okp("k", kX1);
  k.insert(k.size() - 1, ",\"alg\":\"HS256\"");
  EXPECT_EQ(-1, Parse("{\"keys\":[" + k + "]}"));
  EXPECT_NE(std::string::npos, Err().find("\"alg\" must be \"EdDSA\"")) << Err();
}

TEST_F(JwksTest, RenderedPublicKeyRoundTripsToTheSameKey) {
  EVP_PKEY* priv = nullptr;
  ASSERT_EQ(0, jwks_generate_ed25519(&priv));
  char* json = nullptr;
  ASSERT_EQ(0, jwks_render_public(priv, "rt", &json));
  std::string doc = std::string("{\"keys\":[") + json + "]}";
  free(json);
  EXPECT_EQ(std::string::npos, doc.find("\"d\""));
  ASSERT_EQ(0, Parse(doc)) << Err();
  EVP_PKEY* pub = jwks_find(set_, "rt");
  ASSERT_NE(nullptr, pub);
  EXPECT_EQ(1, EVP_PKEY_eq(priv, pub));
  EVP_PKEY_free(priv);
}

TEST_F(JwksTest, LoadFileReadsAndParses) {
  const char* dir = getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/jwks_test.json";
  FILE* f = fopen(path.c_str(), "wb");
  ASSERT_NE(nullptr, f);
  std::string doc = "{\"keys\":[" + Okp("file", kX1) + "]}";
  fwrite(doc.data(), 1, doc.size(), f);
  fclose(f);
  ASSERT_EQ(0, jwks_load_file(path.c_str(), &set_, err_, sizeof err_)) << Err();
  EXPECT_NE(nullptr, jwks_find(set_, "file"));
}

TEST_F(JwksTest, LoadFileNamesAMissingFile) {
  EXPECT_EQ(-1, jwks_load_file("/nonexistent/jwks.json", &set_, err_, sizeof err_));
  EXPECT_NE(std::string::npos, Err().find("/nonexistent/jwks.json")) << Err();
  EXPECT_EQ(nullptr, set_);
}

}  // namespace
