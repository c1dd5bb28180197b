// page_token: the sealed keyset cursors of every List/Query method. Pure
// (no servers). The cursor here is what Entries.List seals: a namespace
// and a key, bound to the method, the caller and the request's filters.
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "service/core/arena.h"
#include "service/pb/page_token.h"
}

namespace {

const char kDomain[] = "/memory.v1.Entries/List";

TEST(PageToken, RoundTripsAndRefusesOtherBindings) {
  arena* a = arena_create();
  const char* bind[] = {"t1", "alice", "a:*:*", "*"};
  const char* fields[] = {"a:b:c", "key with spaces/and:colons"};
  char* tok = page_token_encode(a, kDomain, bind, 4, fields, 2);
  ASSERT_NE(nullptr, tok);
  const char* cur[2] = {nullptr, nullptr};
  ASSERT_EQ(0, page_token_decode(a, kDomain, bind, 4, tok, cur, 2));
  EXPECT_STREQ("a:b:c", cur[0]);
  EXPECT_STREQ("key with spaces/and:colons", cur[1]);
  const char* other[][4] = {{"t2", "alice", "a:*:*", "*"},
                            {"t1", "bob", "a:*:*", "*"},
                            {"t1", "alice", "a:b:*", "*"},
                            {"t1", "alice", "a:*:*", "k*"}};
  for (const auto& o : other) EXPECT_EQ(-1, page_token_decode(a, kDomain, o, 4, tok, cur, 2));
  // Another method's token, or another cursor shape, is refused too.
  EXPECT_EQ(-1, page_token_decode(a, "/memory.v1.Entries/Search", bind, 4, tok, cur, 2));
  EXPECT_EQ(-1, page_token_decode(a, kDomain, bind, 4, tok, cur, 1));
  // Every truncation and every single-character change is refused.
  std::string t(tok);
  for (size_t n = 0; n < t.size(); n++)
    EXPECT_EQ(-1, page_token_decode(a, kDomain, bind, 4, t.substr(0, n).c_str(), cur, 2)) << n;
  for (size_t i = 0; i < t.size(); i++) {
    std::string bent = t;
    bent[i] = bent[i] == 'x' ? 'y' : 'x';
    EXPECT_EQ(-1, page_token_decode(a, kDomain, bind, 4, bent.c_str(), cur, 2)) << i;
  }
  EXPECT_EQ(-1, page_token_decode(a, kDomain, bind, 4, std::string(5000, 'A').c_str(), cur, 2));
  arena_free(a);
}

// The seal is a MAC under the process's key: a token made under one key
// does not open under another (another deployment), and opens again under
// its own.
TEST(PageToken, TheSealIsKeyed) {
  arena* a = arena_create();
  unsigned char k1[PAGE_TOKEN_KEY_LEN], k2[PAGE_TOKEN_KEY_LEN];
  for (int i = 0; i < PAGE_TOKEN_KEY_LEN; i++) {
    k1[i] = static_cast<unsigned char>(i);
    k2[i] = static_cast<unsigned char>(i ^ 0x5a);
  }
  const char* bind[] = {"t1", "alice", "a:*:*", "*"};
  const char* fields[] = {"a:b:c", "k"};
  const char* cur[2] = {nullptr, nullptr};
  page_token_set_key(k1);
  char* tok = page_token_encode(a, kDomain, bind, 4, fields, 2);
  ASSERT_NE(nullptr, tok);
  page_token_set_key(k2);
  EXPECT_EQ(-1, page_token_decode(a, kDomain, bind, 4, tok, cur, 2));
  page_token_set_key(k1);
  EXPECT_EQ(0, page_token_decode(a, kDomain, bind, 4, tok, cur, 2));
  EXPECT_STREQ("k", cur[1]);
  arena_free(a);
}

}  // namespace
