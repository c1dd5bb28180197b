// principal: scope breadth (`:own` default, `:all`, `<tier>:*`, exact
// scopes), namespace globs, the final read filter and write-label stamping.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "service/auth/principal.h"
#include "service/auth/token_cache.h"
}

namespace {

char** StrArray(const std::vector<std::string>& v) {
  char** out = static_cast<char**>(calloc(v.size() + 1, sizeof(char*)));
  for (size_t i = 0; i < v.size(); i++) out[i] = strdup(v[i].c_str());
  return out;
}

// A principal for tenant t1 / alice with these scopes and ns globs.
principal* Make(const std::vector<std::string>& scopes, const std::vector<std::string>& ns = {},
                jwt_label clr = JWT_LABEL_CONFIDENTIAL, jwt_label lvl = JWT_LABEL_INTERNAL) {
  jwt_claims* c = static_cast<jwt_claims*>(calloc(1, sizeof(jwt_claims)));
  c->sub = strdup("alice");
  c->tenant = strdup("t1");
  c->jti = strdup("j1");
  c->scopes = StrArray(scopes);
  c->nscopes = scopes.size();
  c->ns = ns.empty() ? nullptr : StrArray(ns);
  c->nns = ns.size();
  c->clr = clr;
  c->lvl = lvl;
  c->exp = 4102444800;
  return principal_create(c);
}

struct Unref {
  void operator()(principal* p) const { principal_unref(p); }
};
using Ptr = std::unique_ptr<principal, Unref>;

TEST(PrincipalScope, PlainScopeMeansOwnBreadth) {
  Ptr p(Make({"entries:read"}));
  EXPECT_EQ(PRINCIPAL_OWN, principal_scope(p.get(), "entries:read"));
  EXPECT_EQ(PRINCIPAL_DENY, principal_scope(p.get(), "entries:write"));
  EXPECT_EQ(PRINCIPAL_DENY, principal_scope(p.get(), "global:read"));
}

TEST(PrincipalScope, AllBreadthIsReportedAndRequiredWhenAsked) {
  Ptr own(Make({"episodic:write:own"}));
  Ptr all(Make({"episodic:write:all"}));
  EXPECT_EQ(PRINCIPAL_OWN, principal_scope(own.get(), "episodic:write"));
  EXPECT_EQ(PRINCIPAL_ALL, principal_scope(all.get(), "episodic:write"));
  EXPECT_EQ(PRINCIPAL_DENY, principal_scope(own.get(), "episodic:write:all"));
  EXPECT_EQ(PRINCIPAL_ALL, principal_scope(all.get(), "episodic:write:all"));
}

TEST(PrincipalScope, TierWildcardGrantsEveryScopeOfThatTierAtAll) {
  Ptr p(Make({"cache:*"}));
  EXPECT_EQ(PRINCIPAL_ALL, principal_scope(p.get(), "cache:read"));
  EXPECT_EQ(PRINCIPAL_ALL, principal_scope(p.get(), "cache:write:all"));
  EXPECT_EQ(PRINCIPAL_DENY, principal_scope(p.get(), "cachex:read"));
  EXPECT_EQ(PRINCIPAL_DENY, principal_scope(p.get(), "entries:read"));
}

TEST(PrincipalScope, TierPrefixMustMatchWholly) {
  Ptr p(Make({"entries:readx", "entriesx:read"}));
  EXPECT_EQ(PRINCIPAL_DENY, principal_scope(p.get(), "entries:read"));
}

TEST(PrincipalScope, AdminIsExactAndImpliesNothingElse) {
  Ptr p(Make({"admin"}));
  EXPECT_EQ(PRINCIPAL_OWN, principal_scope(p.get(), "admin"));
  EXPECT_TRUE(principal_has(p.get(), "admin"));
  EXPECT_EQ(PRINCIPAL_DENY, principal_scope(p.get(), "entries:read"));
  Ptr q(Make({"entries:read"}));
  EXPECT_EQ(PRINCIPAL_DENY, principal_scope(q.get(), "admin"));
}

TEST(PrincipalScope, EmptyNeededScopeMeansAnyValidToken) {
  Ptr p(Make({"entries:read"}));
  EXPECT_EQ(PRINCIPAL_OWN, principal_scope(p.get(), ""));
}

TEST(PrincipalNamespaces, GlobsAllowAndNoClaimAllowsNothing) {
  Ptr p(Make({"entries:read"}, {"planner:*:*", "shared:kb:doc-*"}));
  EXPECT_TRUE(principal_ns_allows(p.get(), "planner:build:step1"));
  EXPECT_TRUE(principal_ns_allows(p.get(), "shared:kb:doc-7"));
  EXPECT_FALSE(principal_ns_allows(p.get(), "shared:kb:img-7"));
  EXPECT_FALSE(principal_ns_allows(p.get(), "plannerx:build:step1"));
  Ptr none(Make({"entries:read"}));
  EXPECT_FALSE(principal_ns_allows(none.get(), "planner:build:step1"));
}

TEST(PrincipalReadFilter, TenantOwnerAndLabelAreAllChecked) {
  Ptr p(Make({"entries:read"}));  // clr CONFIDENTIAL
  EXPECT_TRUE(principal_may_read(p.get(), PRINCIPAL_OWN, "t1", "alice", 3));
  EXPECT_FALSE(principal_may_read(p.get(), PRINCIPAL_OWN, "t2", "alice", 1));
  EXPECT_FALSE(principal_may_read(p.get(), PRINCIPAL_OWN, "t1", "bob", 1));
  EXPECT_TRUE(principal_may_read(p.get(), PRINCIPAL_ALL, "t1", "bob", 1));
  EXPECT_FALSE(principal_may_read(p.get(), PRINCIPAL_ALL, "t1", "bob", 4));
  EXPECT_FALSE(principal_may_read(p.get(), PRINCIPAL_DENY, "t1", "alice", 1));
  EXPECT_FALSE(principal_may_read(p.get(), PRINCIPAL_ALL, "t1", "bob", 0));
}

TEST(PrincipalWriteDiode, LabelIsMaxOfRequestedFloorAndExisting) {
  Ptr p(Make({"entries:write"}, {}, JWT_LABEL_SECRET, JWT_LABEL_SECRET));
  EXPECT_EQ(4, principal_stamp_label(p.get(), 1, 0));  // SECRET token asks PUBLIC
  Ptr q(Make({"entries:write"}, {}, JWT_LABEL_SECRET, JWT_LABEL_INTERNAL));
  EXPECT_EQ(2, principal_stamp_label(q.get(), 0, 0));
  EXPECT_EQ(3, principal_stamp_label(q.get(), 3, 0));
  EXPECT_EQ(4, principal_stamp_label(q.get(), 1, 4));  // never lowered
}

TEST(TokenCache, HitReturnsTheSamePrincipalUntilValidUntil) {
  token_cache* tc = token_cache_create(64);
  Ptr p(Make({"entries:read"}));
  const char tok[] = "header.payload.signature";
  token_cache_put(tc, tok, strlen(tok), p.get(), 1000);
  principal* hit = token_cache_get(tc, tok, strlen(tok), 999);
  EXPECT_EQ(p.get(), hit);
  principal_unref(hit);
  EXPECT_EQ(nullptr, token_cache_get(tc, tok, strlen(tok) - 1, 999));  // a prefix is not it
  EXPECT_EQ(nullptr, token_cache_get(tc, tok, strlen(tok), 1000));     // expired: dropped
  EXPECT_EQ(0u, token_cache_count(tc));
  token_cache_free(tc);
}

TEST(TokenCache, BoundedByEvictingTheOldest) {
  token_cache* tc = token_cache_create(16);  // one per shard
  Ptr p(Make({"entries:read"}));
  for (int i = 0; i < 500; i++) {
    std::string t = "token-" + std::to_string(i);
    token_cache_put(tc, t.data(), t.size(), p.get(), 1000);
  }
  EXPECT_LE(token_cache_count(tc), 16u);
  std::string last = "token-499";
  principal* hit = token_cache_get(tc, last.data(), last.size(), 1);
  EXPECT_EQ(p.get(), hit);
  principal_unref(hit);
  token_cache_free(tc);
}

}  // namespace
