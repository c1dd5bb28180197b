// jwk_private: memoryd's signing key as a private JWK round-trips and signs
// tokens the public JWKS verifies; malformed or mismatched keys are refused
// with a reason. jwt_claims_render + the `anc` claim round-trip too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
#include "service/auth/jwk_private.h"
#include "service/auth/jwks.h"
#include "service/auth/jwt.h"
}

namespace {

struct Key {
  EVP_PKEY* k = nullptr;
  Key() { EXPECT_EQ(0, jwks_generate_ed25519(&k)); }
  ~Key() { EVP_PKEY_free(k); }
  std::string Private(const char* kid) const {
    char* j = nullptr;
    EXPECT_EQ(0, jwk_private_render(k, kid, &j));
    std::string s = j ? j : "";
    free(j);
    return s;
  }
  jwks* Public(const char* kid) const {
    char* j = nullptr;
    EXPECT_EQ(0, jwks_render_public(k, kid, &j));
    std::string doc = std::string("{\"keys\":[") + j + "]}";
    free(j);
    jwks* set = nullptr;
    char err[256];
    EXPECT_EQ(0, jwks_parse(doc.data(), doc.size(), &set, err, sizeof err)) << err;
    return set;
  }
};

std::string ParseErr(const std::string& json) {
  EVP_PKEY* key = nullptr;
  char* kid = nullptr;
  char err[256] = "";
  int rc = jwk_private_parse(json.data(), json.size(), &key, &kid, err, sizeof err);
  EVP_PKEY_free(key);
  free(kid);
  return rc == 0 ? "" : err;
}

TEST(JwkPrivate, RoundTripsAndSignsWhatThePublicSetVerifies) {
  Key k;
  std::string priv = k.Private("k1");
  EVP_PKEY* loaded = nullptr;
  char* kid = nullptr;
  char err[256];
  ASSERT_EQ(0, jwk_private_parse(priv.data(), priv.size(), &loaded, &kid, err, sizeof err)) << err;
  EXPECT_STREQ("k1", kid);
  char* token = nullptr;
  ASSERT_EQ(JWT_OK, jwt_sign(loaded, kid,
                             "{\"sub\":\"a\",\"tenant\":\"t\",\"jti\":\"j\",\"scope\":\"x\","
                             "\"exp\":4102444800}",
                             &token, err, sizeof err));
  jwks* set = k.Public("k1");
  jwt_claims* c = nullptr;
  EXPECT_EQ(JWT_OK, jwt_verify(set, token, strlen(token), 1700000000, 0, &c, err, sizeof err))
      << err;
  jwt_claims_free(c);
  jwks_free(set);
  free(token);
  free(kid);
  EVP_PKEY_free(loaded);
}

TEST(JwkPrivate, RejectsMalformedKeysWithAReason) {
  Key a, b;
  std::string pa = a.Private("k1"), pb = b.Private("k1");
  // d of one key with x of another.
  size_t dpos = pa.find("\"d\":\""), dpos_b = pb.find("\"d\":\"");
  std::string mixed = pa.substr(0, dpos) + pb.substr(dpos_b, 49) + pa.substr(dpos + 49);
  EXPECT_NE(std::string::npos, ParseErr(mixed).find("does not belong")) << ParseErr(mixed);
  std::string no_d = pa.substr(0, dpos) + pa.substr(dpos + 50);  // with its comma
  EXPECT_NE(std::string::npos, ParseErr(no_d).find("\"d\"")) << ParseErr(no_d);
  EXPECT_NE("", ParseErr("{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"x\"}"));
  EXPECT_NE("", ParseErr("not json"));
  std::string no_kid = pa;
  no_kid.replace(no_kid.find("\"kid\":\"k1\""), 10, "\"kid\":\"\"");
  EXPECT_NE(std::string::npos, ParseErr(no_kid).find("kid")) << ParseErr(no_kid);
}

TEST(JwtClaimsRender, RoundTripsEveryClaimIncludingAncestors) {
  Key k;
  char scope0[] = "entries:read", scope1[] = "admin", ns0[] = "a:*:*", anc0[] = "root",
       anc1[] = "mid";
  char* scopes[] = {scope0, scope1};
  char* ns[] = {ns0};
  char* anc[] = {anc0, anc1};
  jwt_claims c;
  memset(&c, 0, sizeof c);
  c.iss = const_cast<char*>("memoryd");
  c.sub = const_cast<char*>("alice");
  c.tenant = const_cast<char*>("t1");
  c.jti = const_cast<char*>("leaf");
  c.parent = anc1;
  c.scopes = scopes;
  c.nscopes = 2;
  c.ns = ns;
  c.nns = 1;
  c.anc = anc;
  c.nanc = 2;
  c.clr = JWT_LABEL_CONFIDENTIAL;
  c.lvl = JWT_LABEL_INTERNAL;
  c.exp = 4102444800;
  c.iat = 1700000000;
  c.has_iat = 1;
  char* payload = nullptr;
  ASSERT_EQ(0, jwt_claims_render(&c, &payload));
  char* token = nullptr;
  char err[256];
  ASSERT_EQ(JWT_OK, jwt_sign(k.k, "k1", payload, &token, err, sizeof err));
  jwks* set = k.Public("k1");
  jwt_claims* out = nullptr;
  ASSERT_EQ(JWT_OK, jwt_verify(set, token, strlen(token), 1700000000, 0, &out, err, sizeof err))
      << err;
  EXPECT_STREQ("alice", out->sub);
  EXPECT_STREQ("mid", out->parent);
  ASSERT_EQ(2u, out->nanc);
  EXPECT_STREQ("root", out->anc[0]);
  EXPECT_EQ(JWT_LABEL_CONFIDENTIAL, out->clr);
  EXPECT_EQ(JWT_LABEL_INTERNAL, out->lvl);
  ASSERT_EQ(2u, out->nscopes);
  EXPECT_STREQ("admin", out->scopes[1]);
  jwt_claims_free(out);
  jwks_free(set);
  free(token);
  free(payload);
}

TEST(JwtAnc, MustEndWithTheParent) {
  Key k;
  jwks* set = k.Public("k1");
  const char* bad[] = {
      "{\"sub\":\"a\",\"tenant\":\"t\",\"jti\":\"j\",\"scope\":\"x\",\"exp\":4102444800,"
      "\"anc\":[\"r\"]}",  // no parent
      "{\"sub\":\"a\",\"tenant\":\"t\",\"jti\":\"j\",\"scope\":\"x\",\"exp\":4102444800,"
      "\"parent\":\"p\",\"anc\":[\"r\",\"q\"]}",  // last is not the parent
      "{\"sub\":\"a\",\"tenant\":\"t\",\"jti\":\"j\",\"scope\":\"x\",\"exp\":4102444800,"
      "\"parent\":\"p\",\"anc\":[]}",
      "{\"sub\":\"a\",\"tenant\":\"t\",\"jti\":\"j\",\"scope\":\"x\",\"exp\":4102444800,"
      "\"parent\":\"p\",\"anc\":[\"\",\"p\"]}",
  };
  for (const char* p : bad) {
    char* token = nullptr;
    char err[256];
    ASSERT_EQ(JWT_OK, jwt_sign(k.k, "k1", p, &token, err, sizeof err));
    jwt_claims* out = nullptr;
    EXPECT_EQ(JWT_ECLAIM,
              jwt_verify(set, token, strlen(token), 1700000000, 0, &out, err, sizeof err))
        << p;
    EXPECT_EQ(nullptr, out);
    free(token);
  }
  jwks_free(set);
}

}  // namespace
