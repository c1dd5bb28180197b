// nsglob: namespace/key validation with reasons, segment-wise `*` matching,
// exact pattern containment (checked against brute force) and the SQL LIKE
// translation (checked against a LIKE emulator).
#include <gtest/gtest.h>

#include <string>
#include <vector>

extern "C" {
#include "service/auth/nsglob.h"
}

namespace {

std::string Why(int (*check)(const char*, size_t, char*, size_t), const std::string& s) {
  char why[256] = "";
  return check(s.data(), s.size(), why, sizeof why) == 0 ? "" : why;
}

TEST(NsglobValidate, Namespaces) {
  EXPECT_EQ("", Why(nsglob_check_namespace, "agent:workflow:node"));
  EXPECT_EQ("", Why(nsglob_check_namespace, "a-1:b_2:c.3"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_namespace, "a::c").find("segment 2 is empty"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_namespace, "a:b").find("three"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_namespace, "a:b:c:d").find("more than three"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_namespace, "a:b%:c").find("'%'"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_namespace, "a:*:c").find("'*'"));
  EXPECT_NE(std::string::npos,
            Why(nsglob_check_namespace, std::string(65, 'a') + ":b:c").find("longer than 64"));
  EXPECT_NE("", Why(nsglob_check_namespace, ""));
  EXPECT_NE("", Why(nsglob_check_namespace, std::string("a:b:c\0", 6)));
}

TEST(NsglobValidate, Patterns) {
  EXPECT_EQ("", Why(nsglob_check_pattern, "*:*:*"));
  EXPECT_EQ("", Why(nsglob_check_pattern, "agent-*:build:step-*"));
  EXPECT_NE("", Why(nsglob_check_pattern, "*:*"));
  EXPECT_NE("", Why(nsglob_check_pattern, "a:b:c'; DROP TABLE entries; --"));
}

TEST(NsglobValidate, Keys) {
  EXPECT_EQ("", Why(nsglob_check_key, "user-42/profile"));
  EXPECT_EQ("", Why(nsglob_check_key, "ключ-ü-🙂"));
  EXPECT_EQ("", Why(nsglob_check_key, "'; DROP TABLE entries; -- % _ \\"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_key, "a*b").find("`*`"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_key, "a\nb").find("control"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_key, "a\x7f").find("control"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_key, "\xc2\x85").find("control"));  // C1 NEL
  EXPECT_NE(std::string::npos, Why(nsglob_check_key, "\xff").find("UTF-8"));
  EXPECT_NE(std::string::npos, Why(nsglob_check_key, "\xc0\xaf").find("UTF-8"));  // overlong
  EXPECT_NE(std::string::npos, Why(nsglob_check_key, "\xed\xa0\x80").find("UTF-8"));  // surrogate
  EXPECT_NE("", Why(nsglob_check_key, ""));
  EXPECT_NE("", Why(nsglob_check_key, std::string(513, 'k')));
  EXPECT_EQ("", Why(nsglob_check_key_pattern, "user-*"));
}

TEST(NsglobMatch, StarStaysInsideItsSegment) {
  EXPECT_TRUE(nsglob_match("planner:*:*", "planner:build:step1"));
  EXPECT_TRUE(nsglob_match("agent-*:build:step-*", "agent-7:build:step-3"));
  EXPECT_TRUE(nsglob_match("*:*:*", "a:b:c"));
  EXPECT_FALSE(nsglob_match("planner:*", "planner:build:step1"));
  EXPECT_FALSE(nsglob_match("*:c", "a:b:c"));
  EXPECT_FALSE(nsglob_match("a*:b:c", "ax:y:b:c"));
  EXPECT_FALSE(nsglob_match("a%:b:c", "ab:b:c"));  // % is literal
}

// All namespaces over {a,b} with segments of length 1..2, and patterns over
// {a,b,*} with segments of length 1..3: small enough to enumerate.
std::vector<std::string> Segments(const std::string& alphabet, size_t maxlen) {
  std::vector<std::string> out, frontier = {""};
  for (size_t len = 1; len <= maxlen; len++) {
    std::vector<std::string> next;
    for (auto& p : frontier)
      for (char c : alphabet) next.push_back(p + c);
    out.insert(out.end(), next.begin(), next.end());
    frontier = next;
  }
  return out;
}

TEST(NsglobCovers, MatchesBruteForceContainmentPerSegment) {
  // Namespaces are segment-wise, so containment per segment decides it;
  // check segments as "x:x:<seg>" with strings up to 4 letters.
  auto pats = Segments("ab*", 3);
  auto words = Segments("ab", 5);
  for (auto& outer : pats) {
    for (auto& inner : pats) {
      bool contained = true;
      for (auto& w : words) {
        std::string ns = "x:x:" + w;
        if (nsglob_match(("x:x:" + inner).c_str(), ns.c_str()) &&
            !nsglob_match(("x:x:" + outer).c_str(), ns.c_str())) {
          contained = false;
          break;
        }
      }
      EXPECT_EQ(contained, nsglob_covers(("x:x:" + outer).c_str(), ("x:x:" + inner).c_str()) == 1)
          << "outer " << outer << " inner " << inner;
    }
  }
}

TEST(NsglobCovers, Examples) {
  EXPECT_TRUE(nsglob_covers("*:*:*", "planner:*:*"));
  EXPECT_TRUE(nsglob_covers("planner:*:*", "planner:build:*"));
  EXPECT_TRUE(nsglob_covers("a*:*:*", "ab*:x:y"));
  EXPECT_FALSE(nsglob_covers("planner:*:*", "*:*:*"));
  EXPECT_FALSE(nsglob_covers("planner:*:*", "plan*:x:y"));
  EXPECT_FALSE(nsglob_covers("*b:*:*", "*:*:*"));
  EXPECT_FALSE(nsglob_covers("bad", "a:b:c"));
}

// SQL LIKE with ESCAPE '\': % any run, _ one char, \x literal x.
bool Like(const std::string& p, size_t pi, const std::string& s, size_t si) {
  if (pi == p.size()) return si == s.size();
  if (p[pi] == '%') {
    for (size_t k = si; k <= s.size(); k++)
      if (Like(p, pi + 1, s, k)) return true;
    return false;
  }
  if (si == s.size()) return false;
  if (p[pi] == '_') return Like(p, pi + 1, s, si + 1);
  if (p[pi] == '\\') return pi + 1 < p.size() && p[pi + 1] == s[si] && Like(p, pi + 2, s, si + 1);
  return p[pi] == s[si] && Like(p, pi + 1, s, si + 1);
}

std::string ToLike(const std::string& p) {
  std::string out(2 * p.size() + 1, '\0');
  int n = nsglob_to_like(p.data(), p.size(), &out[0], out.size());
  EXPECT_GE(n, 0);
  out.resize(n < 0 ? 0 : n);
  return out;
}

TEST(NsglobLike, EscapesEverythingButStar) {
  EXPECT_EQ("a%", ToLike("a*"));
  EXPECT_EQ("50\\%\\_off\\\\", ToLike("50%_off\\"));
  EXPECT_EQ("'; DROP TABLE x; --", ToLike("'; DROP TABLE x; --"));
  char small[3];
  EXPECT_EQ(-1, nsglob_to_like("abcd", 4, small, sizeof small));
}

TEST(NsglobLike, AgreesWithMatchOnEnumeratedNamespaces) {
  auto pats = Segments("a_%*", 2);
  for (auto& seg : pats) {
    std::string pattern = "a:" + seg + ":*";
    std::string like = ToLike(pattern);
    for (auto& w : Segments("a_%", 3)) {
      std::string ns = "a:" + w + ":b";
      EXPECT_EQ(nsglob_match(pattern.c_str(), ns.c_str()) == 1, Like(like, 0, ns, 0))
          << pattern << " vs " << ns;
    }
  }
}

}  // namespace
