// wm_render: WorkingMemory.Render's text: FULL exactly at, under and over
// the budget; the TREE fallback; the TREE cut at a line with its marker;
// characters (not bytes) counted, so a multi-byte character is never split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "service/core/arena.h"
#include "service/core/text.h"
#include "service/working/wm_render.h"
}

namespace {

struct Doc {
  std::string path;
  std::string content;
  bool fetched = true;
};

class WmRender : public ::testing::Test {
 protected:
  void SetUp() override { a_ = arena_create(); }
  void TearDown() override { arena_free(a_); }

  wm_rendered Render(const std::vector<Doc>& docs, bool tree, int64_t max) {
    docs_.clear();
    for (const Doc& d : docs)
      docs_.push_back({d.path.c_str(), d.fetched ? d.content.c_str() : nullptr,
                       text_utf8_chars(d.content.c_str())});
    wm_rendered out;
    EXPECT_EQ(0, wm_render(a_, docs_.data(), docs_.size(), tree, max, &out));
    EXPECT_EQ(static_cast<size_t>(out.len), strlen(out.text));
    EXPECT_EQ(text_utf8_chars(out.text), out.chars) << out.text;
    EXPECT_LE(out.chars, max);
    return out;
  }

  arena* a_ = nullptr;
  std::vector<wm_doc> docs_;
};

const std::vector<Doc> kDocs = {
    {"/notes/plan", "héllo wörld\n"},   // ends with a line break: none added
    {"/notes/todo", "- milk\n- 日本"},  // does not: one added
    {"/z", ""},
};
const char kFull[] = "## /notes/plan\nhéllo wörld\n\n## /notes/todo\n- milk\n- 日本\n\n## /z\n\n";

TEST_F(WmRender, FullAtExactlyTheBudget) {
  int64_t exact = text_utf8_chars(kFull);
  EXPECT_EQ(exact, wm_render_full_chars(docs_.data(), 0) + exact);  // empty: 0
  wm_rendered r = Render(kDocs, false, exact);
  EXPECT_STREQ(kFull, r.text);
  EXPECT_FALSE(r.tree);
  EXPECT_FALSE(r.tree_fallback);
  EXPECT_EQ(exact, r.chars);
  EXPECT_EQ(exact, wm_render_full_chars(docs_.data(), docs_.size()));
  // Bytes are more than characters here: the budget counts characters.
  EXPECT_GT(strlen(kFull), static_cast<size_t>(exact));
}

TEST_F(WmRender, FullUnderTheBudget) {
  wm_rendered r = Render(kDocs, false, 4000);
  EXPECT_STREQ(kFull, r.text);
  EXPECT_FALSE(r.truncated);
}

TEST_F(WmRender, OneCharacterOverFallsBackToTheTree) {
  int64_t exact = text_utf8_chars(kFull);
  wm_rendered r = Render(kDocs, false, exact - 1);
  EXPECT_TRUE(r.tree);
  EXPECT_TRUE(r.tree_fallback);
  EXPECT_FALSE(r.truncated);
  EXPECT_STREQ("notes/\n  plan\n  todo\nz\n", r.text);
}

TEST_F(WmRender, TreeAskedFor) {
  wm_rendered r = Render(kDocs, true, 4000);
  EXPECT_TRUE(r.tree);
  EXPECT_FALSE(r.tree_fallback);
  EXPECT_STREQ("notes/\n  plan\n  todo\nz\n", r.text);
}

TEST_F(WmRender, AMissingContentMeansFullCannotFit) {
  std::vector<Doc> docs = kDocs;
  docs[2].fetched = false;
  wm_rendered r = Render(docs, false, 4000);
  EXPECT_TRUE(r.tree_fallback);
}

TEST_F(WmRender, TreeSharesDirectoriesAndNestsDeeper) {
  std::vector<Doc> docs = {{"/a", ""},     {"/a/b", ""},   {"/a/b/c", ""}, {"/a/d", ""},
                           {"/a b/x", ""}, {"/e/f/g", ""}, {"/e/f/h", ""}, {"/e/i", ""}};
  // Byte order, as the store sorts: "/a b/x" (space) comes before "/a/...".
  std::sort(docs.begin(), docs.end(), [](const Doc& l, const Doc& r) { return l.path < r.path; });
  wm_rendered r = Render(docs, true, 4000);
  EXPECT_STREQ(
      "a\n"
      "a b/\n"
      "  x\n"
      "a/\n"
      "  b\n"
      "  b/\n"
      "    c\n"
      "  d\n"
      "e/\n"
      "  f/\n"
      "    g\n"
      "    h\n"
      "  i\n",
      r.text);
}

TEST_F(WmRender, TreeCutAtALineWithItsMarker) {
  std::vector<Doc> docs;
  for (int i = 0; i < 100; i++) docs.push_back({"/d/doc" + std::to_string(100 + i), "x"});
  std::string all = "d/\n";
  for (int i = 0; i < 100; i++) all += "  doc" + std::to_string(100 + i) + "\n";
  wm_rendered whole = Render(docs, true, static_cast<int64_t>(all.size()));
  EXPECT_EQ(all, whole.text);
  EXPECT_FALSE(whole.truncated);

  // 3 + 10 lines of 9 = 93 characters, and "… 90 more\n" is 10: 103.
  wm_rendered cut = Render(docs, true, 103);
  EXPECT_TRUE(cut.truncated);
  EXPECT_EQ(90, cut.omitted);
  EXPECT_EQ(103, cut.chars);
  std::string want = "d/\n";
  for (int i = 0; i < 10; i++) want += "  doc" + std::to_string(100 + i) + "\n";
  want += "\xe2\x80\xa6 90 more\n";
  EXPECT_EQ(want, cut.text);

  // One less: the tenth line no longer fits with the marker.
  wm_rendered less = Render(docs, true, 102);
  EXPECT_EQ(91, less.omitted);
  EXPECT_EQ(94, less.chars);  // 3 + 9 lines of 9 + "… 91 more\n" (10)

  // Too small for anything: empty, everything omitted.
  wm_rendered none = Render(docs, true, 5);
  EXPECT_STREQ("", none.text);
  EXPECT_TRUE(none.truncated);
  EXPECT_EQ(100, none.omitted);
}

TEST_F(WmRender, EmptyMemory) {
  wm_rendered full = Render({}, false, 1);
  EXPECT_STREQ("", full.text);
  EXPECT_FALSE(full.tree);
  wm_rendered tree = Render({}, true, 1);
  EXPECT_STREQ("", tree.text);
  EXPECT_FALSE(tree.truncated);
}

}  // namespace
