// wm_path: the working-memory path rules (working_memory.proto): what is
// normalized to what, and every kind of refusal with its reason.
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "service/working/wm_path.h"
}

namespace {

struct Outcome {
  bool ok;
  std::string out;  // the path, or the reason
};

Outcome Normalize(const std::string& in, unsigned flags = 0) {
  char out[WM_PATH_MAX + 1], err[256];
  if (wm_path_normalize(in.data(), in.size(), flags, out, err, sizeof err) == 0) return {true, out};
  return {false, err};
}

TEST(WmPath, NormalizesSlashes) {
  const std::pair<const char*, const char*> cases[] = {
      {"/a/b", "/a/b"},
      {"a/b", "/a/b"},
      {"//a///b//", "/a/b"},
      {"/a", "/a"},
      {"a", "/a"},
      {"/My Notes/to-do_1", "/My Notes/to-do_1"},
      {"/a b c/d", "/a b c/d"},
      {"///x", "/x"},
  };
  for (const auto& c : cases) {
    Outcome o = Normalize(c.first);
    EXPECT_TRUE(o.ok) << c.first << ": " << o.out;
    EXPECT_EQ(c.second, o.out) << c.first;
  }
}

TEST(WmPath, RootOnlyWhenAllowed) {
  for (const char* root : {"/", "", "///"}) {
    Outcome refused = Normalize(root);
    EXPECT_FALSE(refused.ok) << root;
    EXPECT_NE(std::string::npos, refused.out.find("needs a segment")) << refused.out;
    Outcome ok = Normalize(root, WM_PATH_ROOT_OK);
    EXPECT_TRUE(ok.ok) << root;
    EXPECT_EQ("/", ok.out);
  }
}

TEST(WmPath, RefusesWithAReasonNamingTheSegment) {
  const std::pair<const char*, const char*> cases[] = {
      {"/a/../b", "segment 2 is \"..\""},
      {"/..", "segment 1 is \"..\""},
      {"/a/./b", "segment 2 is \".\""},
      {"/a/$HOME", "segment 2 holds \"$\""},
      {"/a/b$", "holds \"$\""},
      {"/notes.md", "holds \".\""},
      {"/a:b", "holds \":\""},
      {"/a\\b", "holds \"\\\""},
      {"/a/*", "holds \"*\""},
      {"/a/%", "holds \"%\""},
      {"/a/'; DROP TABLE x;--", "holds \"'\""},
      {"/tab\there", "byte 0x09"},
      {"/caf\xc3\xa9", "byte 0xc3"},
      {"/ a", "segment 1 begins with a space"},
      {"/a /b", "segment 1 ends with a space"},
  };
  for (const auto& c : cases) {
    Outcome o = Normalize(c.first);
    EXPECT_FALSE(o.ok) << c.first << " was accepted as " << o.out;
    EXPECT_NE(std::string::npos, o.out.find(c.second)) << c.first << ": " << o.out;
  }
}

TEST(WmPath, RefusesNulInsideTheGivenLength) {
  std::string in("/a\0b", 4);
  Outcome o = Normalize(in);
  EXPECT_FALSE(o.ok);
  EXPECT_NE(std::string::npos, o.out.find("byte 0x00")) << o.out;
}

TEST(WmPath, Bounds) {
  std::string seg64(WM_SEGMENT_MAX, 'x');
  EXPECT_TRUE(Normalize("/" + seg64).ok);
  Outcome long_seg = Normalize("/" + seg64 + "x");
  EXPECT_FALSE(long_seg.ok);
  EXPECT_NE(std::string::npos, long_seg.out.find("65 characters; at most 64")) << long_seg.out;

  std::string deep;
  for (int i = 0; i < WM_SEGMENTS_MAX; i++) deep += "/d";
  EXPECT_TRUE(Normalize(deep).ok);
  Outcome too_deep = Normalize(deep + "/d");
  EXPECT_FALSE(too_deep.ok);
  EXPECT_NE(std::string::npos, too_deep.out.find("more than 16 segments")) << too_deep.out;

  // 16 segments of 64: 1040 characters, over the 512 a path may have.
  std::string wide;
  for (int i = 0; i < WM_SEGMENTS_MAX; i++) wide += "/" + seg64;
  Outcome too_long = Normalize(wide);
  EXPECT_FALSE(too_long.ok);
  EXPECT_NE(std::string::npos, too_long.out.find("longer than 512")) << too_long.out;

  // Collapsed slashes do not count against the normalized length, but the
  // input has a bound of its own.
  EXPECT_TRUE(Normalize(std::string(4000, '/') + "a").ok);
  Outcome huge = Normalize(std::string(WM_PATH_INPUT_MAX + 1, '/'));
  EXPECT_FALSE(huge.ok);
  EXPECT_NE(std::string::npos, huge.out.find("at most 4096")) << huge.out;
}

TEST(WmPath, Under) {
  EXPECT_TRUE(wm_path_under("/a", "/"));
  EXPECT_TRUE(wm_path_under("/a", "/a"));
  EXPECT_TRUE(wm_path_under("/a/b", "/a"));
  EXPECT_FALSE(wm_path_under("/ab", "/a"));
  EXPECT_FALSE(wm_path_under("/a b/c", "/a"));
  EXPECT_FALSE(wm_path_under("/b", "/a"));
}

}  // namespace
