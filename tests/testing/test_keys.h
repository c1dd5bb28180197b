// test_keys: signing keys and tokens for tests. Generates Ed25519 keys,
// writes the JWKS file memoryd verifies with (and a private JWK it can sign
// Attenuate tokens with) into a fresh directory, and mints tokens with any
// claims, including invalid ones (alg none, HS256, expired, ...).
#ifndef MEMORYD_TESTS_TESTING_TEST_KEYS_H
#define MEMORYD_TESTS_TESTING_TEST_KEYS_H

#include <openssl/evp.h>

#include <cstdint>
#include <string>
#include <vector>

// Claims of a test token. Defaults make a valid token for tenant "t1",
// principal "alice", valid for an hour, PUBLIC..SECRET.
struct TestClaims {
  std::string iss = "test";
  std::string sub = "alice";
  std::string tenant = "t1";
  std::string scope = "entries:* audit:read:all access:attenuate";
  std::vector<std::string> ns = {"*:*:*"};
  std::string clr = "SECRET";
  std::string lvl = "PUBLIC";
  int64_t exp_in_s = 3600;  // relative to now
  bool with_nbf = false;
  int64_t nbf_in_s = 0;
  std::string jti;  // empty: a fresh random id
  std::string parent;
  std::vector<std::string> anc;
};

class TestKeys {
 public:
  // Creates a key pair with kid "test-1" and writes dir/jwks.json and
  // dir/signing.jwk under $TEST_TMPDIR (or /tmp).
  TestKeys();
  ~TestKeys();
  TestKeys(const TestKeys&) = delete;
  TestKeys& operator=(const TestKeys&) = delete;

  const std::string& jwks_path() const { return jwks_path_; }
  const std::string& signing_key_path() const { return signing_path_; }
  const std::string& kid() const { return kid_; }

  // Adds a second key to the JWKS file (rotation); later Mint calls with
  // use_new_key sign with it.
  std::string AddKey(const std::string& kid);
  // Removes the first key from the JWKS file (retiring it after AddKey):
  // tokens Mint signs are no longer verifiable.
  void RemoveFirstKey();

  // A signed EdDSA token with these claims (kid = the first key).
  std::string Mint(const TestClaims& c) const;
  // Signs with the key added by AddKey.
  std::string MintWithNewKey(const TestClaims& c) const;
  // The payload JSON Mint would sign.
  static std::string PayloadJson(const TestClaims& c);
  // A token signed by a key memoryd does not know, under our kid.
  std::string MintForged(const TestClaims& c) const;
  // header.payload. with an empty signature, alg none.
  static std::string MintAlgNone(const TestClaims& c);
  // HS256 with the public key (its JWK x string) as the HMAC secret: the
  // classic algorithm-confusion attack.
  std::string MintHs256WithPublicKey(const TestClaims& c) const;
  // Signs arbitrary payload JSON with our key under kid.
  std::string SignPayload(const std::string& payload_json, const std::string& kid) const;

  // "authorization" metadata value for a token.
  static std::string Bearer(const std::string& token) { return "Bearer " + token; }

 private:
  std::string dir_, jwks_path_, signing_path_, kid_, public_x_;
  EVP_PKEY* key_ = nullptr;
  EVP_PKEY* other_ = nullptr;  // never published
  EVP_PKEY* new_key_ = nullptr;
  std::string new_kid_;
  std::vector<std::string> public_jwks_;
  void WriteJwks() const;
};

#endif
