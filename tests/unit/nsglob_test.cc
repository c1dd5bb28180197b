// nsglob: namespace/key validation with reasons, segment-wise `*` matching,
// exact pattern containment (checked against brute force) and the SQL LIKE
// translation (checked against a LIKE emulator).
#include <gtest/gtest.h>

#include <bitset>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "service/auth/nsglob.h"
}

namespace {

using Check = int (*)(const char*, size_t, char*, size_t);

// The reason a check gives, or "" when it accepts.
std::string Why(Check check, const std::string& s) {
  char why[256] = "";
  int rc = check(s.data(), s.size(), why, sizeof why);
  EXPECT_TRUE(rc == 0 || rc == -1) << rc;
  if (rc == 0) return "";
  EXPECT_NE('\0', why[0]) << "no reason for \"" << s << "\"";
  return why;
}

bool Has(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---------------------------------------------------------------- validation

TEST(NsglobNamespace, AcceptsThreeSegmentsOfTheAllowedCharacters) {
  EXPECT_EQ("", Why(nsglob_check_namespace, "agent:workflow:node"));
  EXPECT_EQ("", Why(nsglob_check_namespace, "a-1:b_2:c.3"));
  EXPECT_EQ("", Why(nsglob_check_namespace, "AZaz09:_.-:x"));
  std::string s64(64, 'a');
  EXPECT_EQ("", Why(nsglob_check_namespace, s64 + ":" + s64 + ":" + s64));
  EXPECT_EQ(NSGLOB_NAMESPACE_MAX, (int)(s64 + ":" + s64 + ":" + s64).size());
}

TEST(NsglobNamespace, NamesTheEmptySegment) {
  EXPECT_EQ("namespace: segment 1 is empty", Why(nsglob_check_namespace, ":b:c"));
  EXPECT_EQ("namespace: segment 2 is empty", Why(nsglob_check_namespace, "a::c"));
  EXPECT_EQ("namespace: segment 3 is empty", Why(nsglob_check_namespace, "a:b:"));
  EXPECT_EQ("namespace: segment 1 is empty", Why(nsglob_check_namespace, ""));
}

TEST(NsglobNamespace, NeedsExactlyThreeSegments) {
  EXPECT_TRUE(Has(Why(nsglob_check_namespace, "a"), "found 1"));
  EXPECT_TRUE(Has(Why(nsglob_check_namespace, "a:b"), "three"));
  EXPECT_TRUE(Has(Why(nsglob_check_namespace, "a:b"), "found 2"));
  EXPECT_TRUE(Has(Why(nsglob_check_namespace, "a:b:c:d"), "more than three"));
}

TEST(NsglobNamespace, NamesTheBadCharacterAndItsSegment) {
  EXPECT_EQ("namespace: character '%' is not allowed in segment 1",
            Why(nsglob_check_namespace, "a%:b:c"));
  EXPECT_EQ("namespace: character '*' is not allowed in segment 2",
            Why(nsglob_check_namespace, "a:*:c"));
  EXPECT_EQ("namespace: character ' ' is not allowed in segment 3",
            Why(nsglob_check_namespace, "a:b:c d"));
  EXPECT_EQ("namespace: byte 0x00 is not allowed in segment 3",
            Why(nsglob_check_namespace, std::string("a:b:c\0", 6)));
  EXPECT_EQ("namespace: byte 0xc3 is not allowed in segment 1",
            Why(nsglob_check_namespace, "\xc3\xa9:b:c"));
  for (char c : std::string("'\"\\/;?#!@ ,=+()[]{}")) {
    std::string ns = std::string("a:b") + c + ":c";
    EXPECT_NE("", Why(nsglob_check_namespace, ns)) << ns;
  }
}

TEST(NsglobNamespace, SegmentsAreAtMost64Characters) {
  EXPECT_EQ("namespace: segment 2 is longer than 64 characters",
            Why(nsglob_check_namespace, "a:" + std::string(65, 'b') + ":c"));
}

TEST(NsglobNamespace, LengthIsTakenFromTheArgumentNotTheTerminator) {
  char why[64];
  EXPECT_EQ(0, nsglob_check_namespace("a:b:cdef", 5, why, sizeof why));
  EXPECT_EQ(-1, nsglob_check_namespace("a:b:cdef", 4, why, sizeof why));
}

TEST(NsglobNamespace, ReasonIsTruncatedToTheBufferAndOptional) {
  char why[8];
  memset(why, 'x', sizeof why);
  EXPECT_EQ(-1, nsglob_check_namespace("a::c", 4, why, sizeof why));
  EXPECT_EQ("namespa", std::string(why));
  EXPECT_EQ(-1, nsglob_check_namespace("a::c", 4, nullptr, 0));
  EXPECT_EQ(-1, nsglob_check_namespace("a::c", 4, nullptr, 99));
  char untouched = 'u';
  EXPECT_EQ(-1, nsglob_check_namespace("a::c", 4, &untouched, 0));
  EXPECT_EQ('u', untouched);
}

TEST(NsglobNamespace, ValidIsTheSameVerdictAsOneOrZero) {
  for (std::string s : {"a:b:c", "a::c", "a:b", "a:*:c", "a:b:c:d", "x%:y:z"}) {
    EXPECT_EQ(nsglob_check_namespace(s.data(), s.size(), nullptr, 0) == 0,
              nsglob_valid_namespace(s.data(), s.size()) == 1)
        << s;
    EXPECT_EQ(nsglob_check_pattern(s.data(), s.size(), nullptr, 0) == 0,
              nsglob_valid_pattern(s.data(), s.size()) == 1)
        << s;
  }
  EXPECT_EQ(1, nsglob_valid_namespace("a:b:c", 5));
  EXPECT_EQ(0, nsglob_valid_namespace("a:*:c", 5));
}

TEST(NsglobPattern, AllowsStarsAnywhereInASegment) {
  EXPECT_EQ("", Why(nsglob_check_pattern, "*:*:*"));
  EXPECT_EQ("", Why(nsglob_check_pattern, "agent-*:build:step-*"));
  EXPECT_EQ("", Why(nsglob_check_pattern, "**:a*b*c:*x"));
  EXPECT_EQ("", Why(nsglob_check_pattern, "plain:literal:ns"));
}

TEST(NsglobPattern, KeepsTheNamespaceRules) {
  EXPECT_EQ("namespace pattern: segment 2 is empty", Why(nsglob_check_pattern, "*::*"));
  EXPECT_TRUE(Has(Why(nsglob_check_pattern, "*:*"), "found 2"));
  EXPECT_TRUE(Has(Why(nsglob_check_pattern, "*:*:*:*"), "more than three"));
  EXPECT_EQ("namespace pattern: character '%' is not allowed in segment 1",
            Why(nsglob_check_pattern, "%:*:*"));
  EXPECT_EQ("namespace pattern: character '?' is not allowed in segment 3",
            Why(nsglob_check_pattern, "*:*:a?"));
  EXPECT_EQ("namespace pattern: character ''' is not allowed in segment 3",
            Why(nsglob_check_pattern, "a:b:c'; DROP TABLE entries; --"));
  // `*` counts towards the 64.
  EXPECT_EQ("", Why(nsglob_check_pattern, std::string(64, '*') + ":b:c"));
  EXPECT_EQ("namespace pattern: segment 1 is longer than 64 characters",
            Why(nsglob_check_pattern, std::string(65, '*') + ":b:c"));
}

TEST(NsglobKey, AcceptsPrintableUtf8) {
  EXPECT_EQ("", Why(nsglob_check_key, "user-42/profile"));
  EXPECT_EQ("", Why(nsglob_check_key, "ключ-ü-🙂"));
  EXPECT_EQ("", Why(nsglob_check_key, "'; DROP TABLE entries; -- % _ \\ : ?"));
  EXPECT_EQ("", Why(nsglob_check_key, " "));
  EXPECT_EQ("", Why(nsglob_check_key, "\xc2\xa0"));          // U+00A0, first after C1
  EXPECT_EQ("", Why(nsglob_check_key, "\xf4\x8f\xbf\xbf"));  // U+10FFFF
  EXPECT_EQ("", Why(nsglob_check_key, std::string(512, 'k')));
}

TEST(NsglobKey, IsOneTo512Bytes) {
  EXPECT_EQ("key: must be 1 to 512 bytes, got 0", Why(nsglob_check_key, ""));
  EXPECT_EQ("key: must be 1 to 512 bytes, got 513", Why(nsglob_check_key, std::string(513, 'k')));
  // Bytes, not characters: 171 three-byte characters are 513 bytes.
  std::string wide;
  for (int i = 0; i < 171; i++) wide += "\xe2\x82\xac";  // €
  EXPECT_TRUE(Has(Why(nsglob_check_key, wide), "got 513"));
}

TEST(NsglobKey, RefusesStar) {
  EXPECT_EQ("key: `*` is only allowed in patterns (byte 1)", Why(nsglob_check_key, "a*b"));
}

TEST(NsglobKey, RefusesControlCharacters) {
  EXPECT_EQ("key: control character U+000A at byte 1", Why(nsglob_check_key, "a\nb"));
  EXPECT_EQ("key: control character U+0000 at byte 1",
            Why(nsglob_check_key, std::string("a\0b", 3)));
  EXPECT_EQ("key: control character U+001F at byte 0", Why(nsglob_check_key, "\x1f"));
  EXPECT_EQ("key: control character U+007F at byte 1", Why(nsglob_check_key, "a\x7f"));
  EXPECT_EQ("key: control character U+0085 at byte 0", Why(nsglob_check_key, "\xc2\x85"));
  EXPECT_EQ("key: control character U+009F at byte 0", Why(nsglob_check_key, "\xc2\x9f"));
}

TEST(NsglobKey, RefusesInvalidUtf8) {
  EXPECT_EQ("key: not valid UTF-8 at byte 0", Why(nsglob_check_key, "\xff"));
  EXPECT_EQ("key: not valid UTF-8 at byte 1", Why(nsglob_check_key, "a\x80"));     // stray
  EXPECT_EQ("key: not valid UTF-8 at byte 0", Why(nsglob_check_key, "\xc0\xaf"));  // overlong
  EXPECT_EQ("key: not valid UTF-8 at byte 0", Why(nsglob_check_key, "\xe0\x80\xaf"));
  EXPECT_EQ("key: not valid UTF-8 at byte 0", Why(nsglob_check_key, "\xed\xa0\x80"));  // surrogate
  EXPECT_EQ("key: not valid UTF-8 at byte 0", Why(nsglob_check_key, "\xf4\x90\x80\x80"));
  EXPECT_EQ("key: not valid UTF-8 at byte 2", Why(nsglob_check_key, "ab\xe2\x82"));  // truncated
  EXPECT_EQ("key: not valid UTF-8 at byte 0", Why(nsglob_check_key, "\xe2(\xac"));
}

TEST(NsglobKeyPattern, IsAKeyWithStars) {
  EXPECT_EQ("", Why(nsglob_check_key_pattern, "user-*"));
  EXPECT_EQ("", Why(nsglob_check_key_pattern, "*"));
  EXPECT_EQ("", Why(nsglob_check_key_pattern, "*%_\\'*"));
  EXPECT_EQ("key pattern: must be 1 to 512 bytes, got 0", Why(nsglob_check_key_pattern, ""));
  EXPECT_TRUE(Has(Why(nsglob_check_key_pattern, std::string(513, '*')), "got 513"));
  EXPECT_EQ("key pattern: control character U+0009 at byte 1",
            Why(nsglob_check_key_pattern, "*\t"));
  EXPECT_EQ("key pattern: not valid UTF-8 at byte 1", Why(nsglob_check_key_pattern, "*\xfe"));
  EXPECT_EQ(1, nsglob_valid_key_pattern("a*", 2));
  EXPECT_EQ(0, nsglob_valid_key("a*", 2));
  EXPECT_EQ(1, nsglob_valid_key("a", 1));
  EXPECT_EQ(0, nsglob_valid_key_pattern("", 0));
}

// ------------------------------------------------------------------ matching

TEST(NsglobMatch, StarStaysInsideItsSegment) {
  EXPECT_TRUE(nsglob_match("planner:*:*", "planner:build:step1"));
  EXPECT_TRUE(nsglob_match("agent-*:build:step-*", "agent-7:build:step-3"));
  EXPECT_TRUE(nsglob_match("*:*:*", "a:b:c"));
  EXPECT_TRUE(nsglob_match("a*b*c:*:*", "abc:x:y"));
  EXPECT_TRUE(nsglob_match("a*b*c:*:*", "axxbyybc:x:y"));
  EXPECT_FALSE(nsglob_match("a*b*c:*:*", "axxbyybcd:x:y"));
  EXPECT_FALSE(nsglob_match("planner:*", "planner:build:step1"));
  EXPECT_FALSE(nsglob_match("*:c", "a:b:c"));
  EXPECT_FALSE(nsglob_match("a*:b:c", "ax:y:b:c"));
  EXPECT_FALSE(nsglob_match("*:*:*", "a:b:c:d"));
  EXPECT_FALSE(nsglob_match("*:*", "a:b:c"));
}

TEST(NsglobMatch, StarMatchesTheEmptyRun) {
  EXPECT_TRUE(nsglob_match("a*:b:c", "a:b:c"));
  EXPECT_TRUE(nsglob_match("**a**:b:c", "a:b:c"));
  // ...but a segment is never empty, so `*` alone still needs a character.
  EXPECT_FALSE(nsglob_match("*:b:c", ":b:c"));
}

TEST(NsglobMatch, OnlyStarIsSpecial) {
  EXPECT_TRUE(nsglob_match("a_b:c.d:e-f", "a_b:c.d:e-f"));
  EXPECT_FALSE(nsglob_match("a_b:*:*", "axb:c:d"));
  EXPECT_FALSE(nsglob_match("a.b:*:*", "axb:c:d"));
  EXPECT_FALSE(nsglob_match("Ab:*:*", "ab:c:d"));  // case-sensitive
}

TEST(NsglobMatch, InvalidGlobMatchesNothing) {
  EXPECT_FALSE(nsglob_match("a%:b:c", "a%:b:c"));
  EXPECT_FALSE(nsglob_match("a::c", "a::c"));
  EXPECT_FALSE(nsglob_match("", ""));
  // Over-long glob segments are refused even where they would match a
  // valid namespace.
  EXPECT_FALSE(nsglob_match((std::string(64, '*') + "a:b:c").c_str(), "a:b:c"));
  EXPECT_TRUE(nsglob_match((std::string(63, '*') + "a:b:c").c_str(), "a:b:c"));
}

TEST(NsglobMatch, NothingMatchesAnInvalidNamespace) {
  EXPECT_FALSE(nsglob_match("*:*:*", "a:*:c"));
  EXPECT_FALSE(nsglob_match("*:*:*", ("a:b:" + std::string(65, 'c')).c_str()));
  EXPECT_FALSE(nsglob_match("*:*:*", "a:b:c d"));
  EXPECT_TRUE(nsglob_match("*:*:*", ("a:b:" + std::string(64, 'c')).c_str()));
}

TEST(NsglobKeyMatch, StarSpansAnything) {
  EXPECT_TRUE(nsglob_key_match("user-*", "user-42/profile"));
  EXPECT_TRUE(nsglob_key_match("*", "x"));
  EXPECT_TRUE(nsglob_key_match("*:*", "a:b:c"));  // `:` is ordinary in keys
  EXPECT_TRUE(nsglob_key_match("к*й", "ключ-й"));
  EXPECT_TRUE(nsglob_key_match("50%_off\\", "50%_off\\"));
  EXPECT_FALSE(nsglob_key_match("50%", "50x"));
  EXPECT_FALSE(nsglob_key_match("a_c", "abc"));
  EXPECT_FALSE(nsglob_key_match("user-*", "user"));
  EXPECT_FALSE(nsglob_key_match("", ""));
  EXPECT_FALSE(nsglob_key_match("*", "a*b"));  // not a valid key
  EXPECT_FALSE(nsglob_key_match("*", "a\nb"));
  EXPECT_FALSE(nsglob_key_match("a\n*", "a\nb"));  // not a valid pattern
}

// ----------------------------------------------------------------- literals

TEST(NsglobLiteral, IsLiteralWhenThereIsNoStar) {
  EXPECT_EQ(1, nsglob_is_literal("a:b:c"));
  EXPECT_EQ(1, nsglob_is_literal("50%_off"));
  EXPECT_EQ(0, nsglob_is_literal("a:b:*"));
  EXPECT_EQ(0, nsglob_is_literal("*"));
}

// --------------------------------------------------------------- containment

// Every string of 1..maxlen characters over alphabet.
std::vector<std::string> Strings(const std::string& alphabet, size_t maxlen) {
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

TEST(NsglobCovers, Examples) {
  EXPECT_TRUE(nsglob_covers("*:*:*", "planner:*:*"));
  EXPECT_TRUE(nsglob_covers("planner:*:*", "planner:build:*"));
  EXPECT_TRUE(nsglob_covers("a*:*:*", "ab*:x:y"));
  EXPECT_TRUE(nsglob_covers("a*b:*:*", "a*xb:*:*"));
  EXPECT_TRUE(nsglob_covers("a*b:*:*", "ab:*:*"));
  EXPECT_TRUE(nsglob_covers("*a*:*:*", "x*ay*:*:*"));
  EXPECT_TRUE(nsglob_covers("a:b:c", "a:b:c"));
  EXPECT_TRUE(nsglob_covers("a:b:*", "a:b:**"));
  EXPECT_TRUE(nsglob_covers("a:b:**", "a:b:*"));
  EXPECT_FALSE(nsglob_covers("planner:*:*", "*:*:*"));
  EXPECT_FALSE(nsglob_covers("planner:*:*", "plan*:x:y"));
  EXPECT_FALSE(nsglob_covers("*b:*:*", "*:*:*"));
  EXPECT_FALSE(nsglob_covers("a*b:*:*", "a*:*:*"));
  EXPECT_FALSE(nsglob_covers("a*b:*:*", "a*b*:*:*"));
  EXPECT_TRUE(nsglob_covers("*a*a*:*:*", "*aa*:*:*"));   // both need two a's...
  EXPECT_FALSE(nsglob_covers("*aa*:*:*", "*a*a*:*:*"));  // ...but not adjacent ones
  EXPECT_TRUE(nsglob_covers("*a*a*:*:*", "*a*xa*:*:*"));
  EXPECT_FALSE(nsglob_covers("a:b:c", "a:b:*"));  // inner `*` needs an outer `*`
  EXPECT_FALSE(nsglob_covers("a:b:?", "a:b:c"));  // invalid outer
  EXPECT_FALSE(nsglob_covers("*:*:*", "a:b"));    // invalid inner
  EXPECT_FALSE(nsglob_covers("bad", "a:b:c"));
}

TEST(NsglobCovers, EveryValidPatternCoversItself) {
  for (auto& seg : Strings("a_*", 3)) {
    std::string p = seg + ":" + seg + ":x" + seg;
    EXPECT_TRUE(nsglob_covers(p.c_str(), p.c_str())) << p;
    EXPECT_TRUE(nsglob_covers("*:*:*", p.c_str())) << p;
  }
}

TEST(NsglobCovers, SegmentLimitDoesNotChangeTheVerdict) {
  // inner's language is bounded by 64-byte segments; containment is still
  // decided by the unbounded argument (see nsglob.c).
  std::string a63(63, 'a');
  EXPECT_TRUE(
      nsglob_covers(("x:y:" + std::string(62, 'a') + "*").c_str(), ("x:y:" + a63 + "*").c_str()));
  EXPECT_FALSE(
      nsglob_covers(("x:y:" + a63 + "*").c_str(), ("x:y:" + std::string(62, 'a') + "*").c_str()));
  // A literal outer using 64 distinct characters still leaves one out.
  std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.";
  ASSERT_EQ(64u, chars.size());
  EXPECT_FALSE(
      nsglob_covers(("x:y:" + chars).c_str(), ("x:y:" + chars.substr(0, 63) + "*").c_str()));
}

// One segment of patterns over {a,b,*} against words over {a,b,c}: `c`
// stands for every character the patterns do not use, so this decides
// containment over the real alphabet, and words of up to 4 characters are
// enough (a counterexample, if any, is as long as inner: see nsglob.c).
TEST(NsglobCovers, MatchesBruteForceContainmentPerSegment) {
  auto pats = Strings("ab*", 3);
  auto words = Strings("abc", 4);
  ASSERT_LE(words.size(), 256u);
  std::vector<std::bitset<256>> lang(pats.size());
  for (size_t i = 0; i < pats.size(); i++)
    for (size_t w = 0; w < words.size(); w++)
      lang[i][w] = nsglob_match(("x:x:" + pats[i]).c_str(), ("x:x:" + words[w]).c_str()) == 1;
  size_t contained_pairs = 0;
  for (size_t o = 0; o < pats.size(); o++) {
    for (size_t i = 0; i < pats.size(); i++) {
      bool contained = (lang[i] & ~lang[o]).none();
      contained_pairs += contained;
      EXPECT_EQ(contained,
                nsglob_covers(("x:x:" + pats[o]).c_str(), ("x:x:" + pats[i]).c_str()) == 1)
          << "outer " << pats[o] << " inner " << pats[i];
    }
  }
  // Not vacuous either way.
  EXPECT_GT(contained_pairs, pats.size());
  EXPECT_LT(contained_pairs, pats.size() * pats.size() / 2);
}

// Whole namespaces: all three segments vary at once, every segment pattern
// over {a,*} up to 2 characters plus the literal `b`, every namespace with
// segments over {a,b,c} up to 2 characters (`c` unused by the patterns).
TEST(NsglobCovers, MatchesBruteForceContainmentOverWholeNamespaces) {
  std::vector<std::string> segs = Strings("a*", 2);
  segs.push_back("b");
  std::vector<std::string> pats;
  for (auto& x : segs)
    for (auto& y : segs)
      for (auto& z : segs) pats.push_back(x + ":" + y + ":" + z);
  auto words = Strings("abc", 2);
  std::vector<std::string> nss;
  for (auto& x : words)
    for (auto& y : words)
      for (auto& z : words) nss.push_back(x + ":" + y + ":" + z);
  ASSERT_LE(nss.size(), 2048u);
  std::vector<std::bitset<2048>> lang(pats.size());
  for (size_t i = 0; i < pats.size(); i++)
    for (size_t n = 0; n < nss.size(); n++)
      lang[i][n] = nsglob_match(pats[i].c_str(), nss[n].c_str()) == 1;
  for (size_t o = 0; o < pats.size(); o++)
    for (size_t i = 0; i < pats.size(); i++)
      EXPECT_EQ((lang[i] & ~lang[o]).none(), nsglob_covers(pats[o].c_str(), pats[i].c_str()) == 1)
          << "outer " << pats[o] << " inner " << pats[i];
}

// ---------------------------------------------------------------------- LIKE

// SQL LIKE with ESCAPE '\' (PostgreSQL): `%` any run, `_` one character,
// `\x` the literal x. Dynamic programming over bytes; for valid UTF-8 with
// `_` always escaped, bytes and characters give the same answer.
bool Like(const std::string& p, const std::string& s) {
  // at[j]: p[0..pi) matches s[0..j).
  std::vector<bool> at(s.size() + 1, false);
  at[0] = true;
  for (size_t pi = 0; pi < p.size(); pi++) {
    std::vector<bool> next(s.size() + 1, false);
    if (p[pi] == '%') {
      bool any = false;
      for (size_t j = 0; j <= s.size(); j++) next[j] = any = any || at[j];
    } else {
      char lit = p[pi];
      bool wild = lit == '_';
      if (lit == '\\') {
        if (++pi == p.size()) return false;  // PostgreSQL: an error
        lit = p[pi];
      }
      for (size_t j = 0; j < s.size(); j++)
        if (at[j] && (wild || s[j] == lit)) next[j + 1] = true;
    }
    at = next;
  }
  return at[s.size()];
}

TEST(NsglobLike, EmulatorBehavesLikeLike) {
  EXPECT_TRUE(Like("a%", "abc"));
  EXPECT_TRUE(Like("a_c", "abc"));
  EXPECT_FALSE(Like("a\\_c", "abc"));
  EXPECT_TRUE(Like("a\\_c", "a_c"));
  EXPECT_TRUE(Like("\\%", "%"));
  EXPECT_TRUE(Like("\\\\", "\\"));
  EXPECT_TRUE(Like("%", ""));
}

std::string ToLike(const std::string& p) {
  std::string out(2 * p.size() + 1, '\0');
  int n = nsglob_to_like(p.data(), p.size(), &out[0], out.size());
  EXPECT_GE(n, 0) << p;
  out.resize(n < 0 ? 0 : n);
  return out;
}

TEST(NsglobLike, StarBecomesPercent) {
  EXPECT_EQ("a%", ToLike("a*"));
  EXPECT_EQ("%:%:%", ToLike("*:*:*"));
  EXPECT_EQ("agent-%:build:step-%", ToLike("agent-*:build:step-*"));
}

TEST(NsglobLike, EscapesLikeMetacharacters) {
  EXPECT_EQ("a\\_b:%:%", ToLike("a_b:*:*"));
  EXPECT_EQ("50\\%\\_off\\\\", ToLike("50%_off\\"));
  EXPECT_EQ("\\\\%", ToLike("\\*"));  // a literal backslash, then any run
  EXPECT_EQ("\\%\\%%", ToLike("%%*"));
}

TEST(NsglobLike, QuotesAndSqlPassThroughAsLiterals) {
  // Bound as a parameter, `'` is an ordinary character.
  EXPECT_EQ("'; DROP TABLE x; --", ToLike("'; DROP TABLE x; --"));
  EXPECT_EQ("x' OR '1'='1", ToLike("x' OR '1'='1"));
  EXPECT_EQ("\\\\'", ToLike("\\'"));
  EXPECT_TRUE(Like(ToLike("x' OR '1'='1"), "x' OR '1'='1"));
  EXPECT_FALSE(Like(ToLike("x' OR '1'='1"), "anything"));
}

TEST(NsglobLike, RefusesASmallBuffer) {
  char out[16];
  EXPECT_EQ(-1, nsglob_to_like("abcd", 4, out, 4));  // no room for the NUL
  EXPECT_EQ(4, nsglob_to_like("abcd", 4, out, 5));
  EXPECT_STREQ("abcd", out);
  EXPECT_EQ(-1, nsglob_to_like("a%", 2, out, 3));  // the escape needs room too
  EXPECT_EQ(3, nsglob_to_like("a%", 2, out, 4));
  EXPECT_STREQ("a\\%", out);
  EXPECT_EQ(-1, nsglob_to_like("", 0, out, 0));
  EXPECT_EQ(0, nsglob_to_like("", 0, out, 1));
  EXPECT_STREQ("", out);
  // 2 * len + 1 always suffices, even for all-metacharacter input.
  std::string worst(100, '%');
  std::vector<char> big(2 * worst.size() + 1);
  EXPECT_EQ(200, nsglob_to_like(worst.data(), worst.size(), big.data(), big.size()));
  EXPECT_EQ(-1, nsglob_to_like(worst.data(), worst.size(), big.data(), big.size() - 1));
}

// LIKE(to_like(p)) selects exactly what nsglob_match(p) matches, with all
// three segments varying: `%` may cross a `:` only in principle.
TEST(NsglobLike, AgreesWithMatchOnEnumeratedNamespaces) {
  std::vector<std::string> segs = {"*", "a", "_", "a*", "*_", "_*", "**", "a_"};
  std::vector<std::string> words = {"a", "_", "x", "a_", "_a", "xa", "__"};
  std::vector<std::string> nss;
  for (auto& x : words)
    for (auto& y : words)
      for (auto& z : words) nss.push_back(x + ":" + y + ":" + z);
  size_t matched = 0;
  for (auto& x : segs) {
    for (auto& y : segs) {
      for (auto& z : segs) {
        std::string pattern = x + ":" + y + ":" + z;
        std::string like = ToLike(pattern);
        for (auto& ns : nss) {
          bool m = nsglob_match(pattern.c_str(), ns.c_str()) == 1;
          matched += m;
          ASSERT_EQ(m, Like(like, ns)) << pattern << " (" << like << ") vs " << ns;
        }
      }
    }
  }
  EXPECT_GT(matched, 0u);
}

// The same for key patterns, over the characters LIKE and SQL care about.
TEST(NsglobLike, AgreesWithKeyMatchOnEnumeratedKeys) {
  auto pats = Strings("%_\\'*", 3);
  auto keys = Strings("%_\\'x", 3);
  size_t matched = 0;
  for (auto& p : pats) {
    std::string like = ToLike(p);
    for (auto& k : keys) {
      bool m = nsglob_key_match(p.c_str(), k.c_str()) == 1;
      matched += m;
      ASSERT_EQ(m, Like(like, k)) << p << " (" << like << ") vs " << k;
    }
  }
  EXPECT_GT(matched, pats.size());
}

TEST(NsglobLike, MultibyteKeysMatchWholeCharacters) {
  EXPECT_TRUE(nsglob_key_match("ключ*", "ключ-🙂"));
  EXPECT_TRUE(Like(ToLike("ключ*"), "ключ-🙂"));
  EXPECT_TRUE(nsglob_key_match("*🙂", "ключ-🙂"));
  EXPECT_TRUE(Like(ToLike("*🙂"), "ключ-🙂"));
  EXPECT_FALSE(nsglob_key_match("*й", "ключ-🙂"));
  EXPECT_FALSE(Like(ToLike("*й"), "ключ-🙂"));
}

}  // namespace
