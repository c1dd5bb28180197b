// test_keys: key files and token minting for tests; see test_keys.h.
#include "tests/testing/test_keys.h"

#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <stdexcept>

extern "C" {
#include "service/auth/jwk_private.h"
#include "service/auth/jwks.h"
#include "service/auth/jwt.h"
#include "service/core/b64url.h"
}

namespace {

void WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path);
  fwrite(data.data(), 1, data.size(), f);
  fclose(f);
  chmod(path.c_str(), mode);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

std::string JsonArray(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); i++) out += (i ? "," : "") + JsonString(v[i]);
  return out + "]";
}

std::string B64(const std::string& s) {
  std::string out(b64url_encoded_len(s.size()) + 1, '\0');
  size_t n = b64url_encode(reinterpret_cast<const unsigned char*>(s.data()), s.size(), &out[0]);
  out.resize(n);
  return out;
}

std::string RandomId() {
  unsigned char b[16];
  RAND_bytes(b, sizeof b);
  char buf[33];
  for (int i = 0; i < 16; i++) snprintf(buf + 2 * i, 3, "%02x", b[i]);
  return buf;
}

std::string Sign(EVP_PKEY* key, const std::string& kid, const std::string& payload) {
  char* token = nullptr;
  char err[256];
  if (jwt_sign(key, kid.c_str(), payload.c_str(), &token, err, sizeof err) != JWT_OK)
    throw std::runtime_error(std::string("jwt_sign: ") + err);
  std::string out = token;
  free(token);
  return out;
}

EVP_PKEY* NewKey() {
  EVP_PKEY* k = nullptr;
  if (jwks_generate_ed25519(&k) != 0) throw std::runtime_error("keygen failed");
  return k;
}

std::string PublicJwk(EVP_PKEY* k, const std::string& kid) {
  char* json = nullptr;
  if (jwks_render_public(k, kid.c_str(), &json) != 0) throw std::runtime_error("render");
  std::string out = json;
  free(json);
  return out;
}

}  // namespace

TestKeys::TestKeys() : kid_("test-1") {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string base = std::string(tmp ? tmp : "/tmp") + "/keys-XXXXXX";
  std::vector<char> buf(base.begin(), base.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  dir_ = buf.data();
  jwks_path_ = dir_ + "/jwks.json";
  signing_path_ = dir_ + "/signing.jwk";
  key_ = NewKey();
  other_ = NewKey();
  std::string pub = PublicJwk(key_, kid_);
  size_t x = pub.find("\"x\":\"");
  public_x_ = pub.substr(x + 5, pub.find('"', x + 5) - (x + 5));
  public_jwks_.push_back(pub);
  WriteJwks();
  char* priv = nullptr;
  if (jwk_private_render(key_, kid_.c_str(), &priv) != 0) throw std::runtime_error("render");
  WriteFile(signing_path_, priv, 0600);
  free(priv);
}

TestKeys::~TestKeys() {
  EVP_PKEY_free(key_);
  EVP_PKEY_free(other_);
  EVP_PKEY_free(new_key_);
}

void TestKeys::WriteJwks() const {
  std::string doc = "{\"keys\":[";
  for (size_t i = 0; i < public_jwks_.size(); i++) doc += (i ? "," : "") + public_jwks_[i];
  doc += "]}";
  // Write-then-rename so a reloading server never reads half a file.
  std::string tmp = jwks_path_ + ".tmp";
  WriteFile(tmp, doc, 0644);
  rename(tmp.c_str(), jwks_path_.c_str());
}

std::string TestKeys::AddKey(const std::string& kid) {
  new_key_ = NewKey();
  new_kid_ = kid;
  public_jwks_.push_back(PublicJwk(new_key_, kid));
  WriteJwks();
  return kid;
}

void TestKeys::RemoveFirstKey() {
  public_jwks_.erase(public_jwks_.begin());
  WriteJwks();
}

std::string TestKeys::PayloadJson(const TestClaims& c) {
  int64_t now = static_cast<int64_t>(time(nullptr));
  std::string p = "{\"iss\":" + JsonString(c.iss) + ",\"sub\":" + JsonString(c.sub) +
                  ",\"tenant\":" + JsonString(c.tenant) + ",\"scope\":" + JsonString(c.scope) +
                  ",\"ns\":" + JsonArray(c.ns) + ",\"clr\":" + JsonString(c.clr) +
                  ",\"lvl\":" + JsonString(c.lvl) + ",\"iat\":" + std::to_string(now) +
                  ",\"exp\":" + std::to_string(now + c.exp_in_s) +
                  ",\"jti\":" + JsonString(c.jti.empty() ? RandomId() : c.jti);
  if (c.with_nbf) p += ",\"nbf\":" + std::to_string(now + c.nbf_in_s);
  if (!c.parent.empty()) p += ",\"parent\":" + JsonString(c.parent);
  if (!c.anc.empty()) p += ",\"anc\":" + JsonArray(c.anc);
  return p + "}";
}

std::string TestKeys::Mint(const TestClaims& c) const { return Sign(key_, kid_, PayloadJson(c)); }

std::string TestKeys::MintWithNewKey(const TestClaims& c) const {
  return Sign(new_key_, new_kid_, PayloadJson(c));
}

std::string TestKeys::MintForged(const TestClaims& c) const {
  return Sign(other_, kid_, PayloadJson(c));
}

std::string TestKeys::SignPayload(const std::string& payload, const std::string& kid) const {
  return Sign(key_, kid, payload);
}

std::string TestKeys::MintAlgNone(const TestClaims& c) {
  return B64("{\"alg\":\"none\",\"typ\":\"JWT\"}") + "." + B64(PayloadJson(c)) + ".";
}

std::string TestKeys::MintHs256WithPublicKey(const TestClaims& c) const {
  std::string signing_input = B64("{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"" + kid_ + "\"}") +
                              "." + B64(PayloadJson(c));
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), public_x_.data(), static_cast<int>(public_x_.size()),
       reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(), mac,
       &len);
  return signing_input + "." + B64(std::string(reinterpret_cast<char*>(mac), len));
}
