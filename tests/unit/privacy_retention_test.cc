// privacy_retention: the retention policy from the flags and the policy
// file. The defaults are two rules (every record 730 days, records with PII
// 180 days); "off" drops one; file rules come after them; every malformed
// rule is refused naming the rule and the member, unknown members too.
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "memory/v1/common.pb-c.h"
#include "service/privacy/privacy_retention.h"
}

namespace {

struct Built {
  int rc;
  retention_policy p;
  std::string err;
};

// The tiers a rule may name, as memoryd's table declares them.
const retention_tier kTiers[] = {{"global", MEMORY__V1__TIER__TIER_GLOBAL},
                                 {"episodic", MEMORY__V1__TIER__TIER_EPISODIC},
                                 {"entries", MEMORY__V1__TIER__TIER_ENTRIES},
                                 {"working", MEMORY__V1__TIER__TIER_WORKING},
                                 {"session", MEMORY__V1__TIER__TIER_SESSION}};

Built Build(const char* def, const char* pii, const char* file = nullptr) {
  Built b{};
  char err[256] = "";
  b.rc = retention_policy_build(def, pii, file, file ? strlen(file) : 0, kTiers,
                                sizeof kTiers / sizeof kTiers[0], &b.p, err, sizeof err);
  b.err = err;
  return b;
}

std::string Text(const retention_rule& r) {
  char buf[160];
  retention_rule_text(&r, buf, sizeof buf);
  return buf;
}

TEST(RetentionPolicyTest, TheFlagsGiveTwoRulesAndOffDropsOne) {
  Built b = Build("730d", "180d");
  ASSERT_EQ(0, b.rc) << b.err;
  ASSERT_EQ(2u, b.p.n);
  EXPECT_EQ(730 * 86400, b.p.rules[0].after_s);
  EXPECT_EQ("", std::string(b.p.rules[0].pii_kind));
  EXPECT_EQ(180 * 86400, b.p.rules[1].after_s);
  EXPECT_EQ("*", std::string(b.p.rules[1].pii_kind));
  EXPECT_EQ("every tier: 730d", Text(b.p.rules[0]));
  EXPECT_EQ("every tier, pii *: 180d", Text(b.p.rules[1]));
  for (int t : {MEMORY__V1__TIER__TIER_GLOBAL, MEMORY__V1__TIER__TIER_EPISODIC,
                MEMORY__V1__TIER__TIER_ENTRIES})
    EXPECT_TRUE(retention_rule_covers(&b.p.rules[0], t));

  b = Build("off", "12h");
  ASSERT_EQ(0, b.rc) << b.err;
  ASSERT_EQ(1u, b.p.n);
  EXPECT_EQ(12 * 3600, b.p.rules[0].after_s);
  EXPECT_EQ(0, Build("0", "off").rc);
  EXPECT_EQ(0u, Build("0", "off").p.n);
}

TEST(RetentionPolicyTest, FileRulesNarrowByTierLabelAndPiiKind) {
  Built b = Build("off", "off",
                  R"({"rules":[{"after":"30d","tier":"entries"},
                               {"after":"7d","pii_kind":"payment_card"},
                               {"after":"90s","tier":"episodic","label":"secret"}]})");
  ASSERT_EQ(0, b.rc) << b.err;
  ASSERT_EQ(3u, b.p.n);
  EXPECT_EQ("entries: 30d", Text(b.p.rules[0]));
  EXPECT_TRUE(retention_rule_covers(&b.p.rules[0], MEMORY__V1__TIER__TIER_ENTRIES));
  EXPECT_FALSE(retention_rule_covers(&b.p.rules[0], MEMORY__V1__TIER__TIER_GLOBAL));
  EXPECT_EQ("every tier, pii payment_card: 7d", Text(b.p.rules[1]));
  EXPECT_EQ("episodic, label SECRET: 90s", Text(b.p.rules[2]));
  EXPECT_EQ(MEMORY__V1__LABEL__LABEL_SECRET, b.p.rules[2].label);
}

TEST(RetentionPolicyTest, MalformedPoliciesAreRefusedNamingWhatIsWrong) {
  struct Case {
    const char *def, *pii, *file, *want;
  };
  for (const Case& c : std::vector<Case>{
           {"forever", "off", nullptr, "--retention"},
           {"off", "-3d", nullptr, "--retention-pii"},
           {"999999999d", "off", nullptr, "at most 36500d"},
           {"off", "off", R"({"rules":[{"after":"36501d"}]})", "rules[0].after"},
           {"off", "off", "{", "retention policy"},
           {"off", "off", "[]", "want {\"rules\""},
           {"off", "off", R"({"rules":[],"extra":1})", "nothing else"},
           {"off", "off", R"({"rules":[{"tier":"entries"}]})", "rules[0].after is required"},
           {"off", "off", R"({"rules":[{"after":"soon"}]})", "rules[0].after"},
           {"off", "off", R"({"rules":[{"after":"1d"},{"after":"1d","tier":"cache"}]})",
            "rules[1].tier: \"cache\" is not global, episodic, entries, working or session"},
           {"off", "off", R"({"rules":[{"after":"1d","label":"TOP"}]})", "rules[0].label"},
           {"off", "off", R"({"rules":[{"after":"1d","pii_kind":"ssn"}]})", "rules[0].pii_kind"},
           {"off", "off", R"({"rules":[{"after":"1d","tiers":"entries"}]})",
            "unknown member \"tiers\""},
           {"off", "off", R"({"rules":[{"after":30}]})", "must be a string"},
           {"off", "off", R"({"rules":[{"after":"1d","after":"2d"}]})", "retention policy"},
       }) {
    Built b = Build(c.def, c.pii, c.file);
    EXPECT_EQ(-1, b.rc) << c.want;
    EXPECT_NE(std::string::npos, b.err.find(c.want)) << b.err;
  }
  std::string many = R"({"rules":[)";
  for (int i = 0; i < RETENTION_MAX_RULES; i++)
    many += std::string(i ? "," : "") + R"({"after":"1d"})";
  many += "]}";
  Built b = Build("1d", "off", many.c_str());
  EXPECT_EQ(-1, b.rc);
  EXPECT_NE(std::string::npos, b.err.find("more than")) << b.err;
}

}  // namespace
