// embed_json: the OpenAI embeddings API's request body, answers of every
// shape a server may give (the documented one, index-less, out of order,
// wrong counts, lengths and values) and error texts, with hand-written
// expectations.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

extern "C" {
#include "service/core/arena.h"
#include "service/core/status.h"
#include "service/embed/embed_json.h"
}

namespace {

class EmbedJsonTest : public ::testing::Test {
 protected:
  void SetUp() override { a_ = arena_create(); }
  void TearDown() override { arena_free(a_); }

  int Parse(const std::string& body, size_t n, int want) {
    err_[0] = '\0';
    return embed_json_parse(body.data(), body.size(), n, want, a_, &v_, &dims_, err_, sizeof err_);
  }

  arena* a_ = nullptr;
  float* v_ = nullptr;
  int dims_ = -1;
  char err_[256];
};

TEST_F(EmbedJsonTest, TheRequestHasTheApisShape) {
  const char* texts[] = {"one \"quoted\"", "ünïcode"};
  size_t len = 0;
  char* body = embed_json_request("m-1", texts, 2, &len);
  ASSERT_NE(nullptr, body);
  EXPECT_EQ(std::string("{\"model\":\"m-1\",\"input\":[\"one \\\"quoted\\\"\",\"ünïcode\"],"
                        "\"encoding_format\":\"float\"}"),
            std::string(body, len));
  free(body);
  const char* bad[] = {"\xff\xfe"};  // not UTF-8
  EXPECT_EQ(nullptr, embed_json_request("m", bad, 1, &len));
}

TEST_F(EmbedJsonTest, TheDocumentedAnswerIsReadInInputOrder) {
  // Out of order, with the fields servers add.
  ASSERT_EQ(STATUS_OK, Parse(R"({"object":"list","model":"m","usage":{"prompt_tokens":2},
      "data":[{"object":"embedding","index":1,"embedding":[3,4]},
              {"object":"embedding","index":0,"embedding":[1.5,-2]}]})",
                             2, 2))
      << err_;
  EXPECT_EQ(2, dims_);
  EXPECT_FLOAT_EQ(1.5f, v_[0]);
  EXPECT_FLOAT_EQ(-2.0f, v_[1]);
  EXPECT_FLOAT_EQ(3.0f, v_[2]);
  EXPECT_FLOAT_EQ(4.0f, v_[3]);
  // Without index (some servers): input order; any length when 0 is asked.
  ASSERT_EQ(STATUS_OK, Parse(R"({"data":[{"embedding":[1,2,3]}]})", 1, 0)) << err_;
  EXPECT_EQ(3, dims_);
}

TEST_F(EmbedJsonTest, OtherShapesAreRefusedNamingWhatWasWrong) {
  struct Case {
    const char* body;
    size_t n;
    int code;
    const char* want;
  } cases[] = {
      {"not json", 1, STATUS_EINTERNAL, "not JSON"},
      {"[]", 1, STATUS_EINTERNAL, "not a JSON object"},
      {R"({"result":[]})", 1, STATUS_EINTERNAL, "no `data` array"},
      {R"({"data":[]})", 1, STATUS_EINTERNAL, "answered 0 embeddings for 1 inputs"},
      {R"({"data":[1]})", 1, STATUS_EINTERNAL, "data[0] is not an object"},
      {R"({"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]})", 2, STATUS_EINTERNAL,
       "index 0 more than once"},
      {R"({"data":[{"index":2,"embedding":[1]},{"index":0,"embedding":[1]}]})", 2, STATUS_EINTERNAL,
       "not an integer from 0 to 1"},
      {R"({"data":[{"index":"0","embedding":[1]}]})", 1, STATUS_EINTERNAL, "index"},
      {R"({"data":[{"index":0,"embedding":"AAAA"}]})", 1, STATUS_EINTERNAL, "base64"},
      {R"({"data":[{"index":0,"embedding":[]}]})", 1, STATUS_EINTERNAL, "not an array"},
      {R"({"data":[{"index":0,"embedding":[1,"x"]}]})", 1, STATUS_EINTERNAL, "embedding[1]"},
      {R"({"data":[{"index":0,"embedding":[1e39]}]})", 1, STATUS_EINTERNAL, "finite float"},
      {R"({"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1]}]})", 2,
       STATUS_EINTERNAL, "of 2 and of 1 dimensions"},
      {R"({"data":[{"index":0,"embedding":[1],"x":1,"x":2}]})", 1, STATUS_EINTERNAL, "not JSON"},
      // Too short for two vectors of the first one's length: refused before
      // they are allocated.
      {R"({"data":[{"embedding":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]},)"
       R"({"embedding":[1]}]})",
       2, STATUS_EINTERNAL, "too short for 2 vectors of 28 dimensions"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.code, Parse(c.body, c.n, 0)) << c.body;
    EXPECT_NE(std::string::npos, std::string(err_).find(c.want)) << c.body << ": " << err_;
    EXPECT_EQ(nullptr, v_);
  }
}

TEST_F(EmbedJsonTest, AnotherLengthThanAskedIsAPreconditionWithTheLength) {
  EXPECT_EQ(STATUS_EPRECONDITION, Parse(R"({"data":[{"index":0,"embedding":[1,2,3]}]})", 1, 4));
  EXPECT_EQ(3, dims_);
  EXPECT_NE(std::string::npos, std::string(err_).find("3-dimensional vectors; 4 expected")) << err_;
}

TEST_F(EmbedJsonTest, ErrorTextsKeepTheServersWords) {
  char out[64];
  std::string b = R"({"error":{"message":"bad key","type":"auth","param":null,"code":"k1"}})";
  embed_json_error_text(b.data(), b.size(), out, sizeof out);
  EXPECT_STREQ("bad key (type auth, code k1)", out);
  b = R"({"error":"Input validation error","error_type":"Validation"})";  // TEI
  embed_json_error_text(b.data(), b.size(), out, sizeof out);
  EXPECT_STREQ("Input validation error", out);
  b = "upstream\x01 gone";
  embed_json_error_text(b.data(), b.size(), out, sizeof out);
  EXPECT_STREQ("upstream? gone", out);
  embed_json_error_text(nullptr, 0, out, sizeof out);
  EXPECT_STREQ("(empty body)", out);
  b = std::string(100, 'x');
  embed_json_error_text(b.data(), b.size(), out, sizeof out);
  EXPECT_EQ(63u, std::string(out).size());
  EXPECT_EQ("...", std::string(out).substr(60));
  // A type longer than the formatting buffer: cut, never read past it.
  char wide[320];
  b = R"({"error":{"message":"m","type":")" + std::string(300, 't') + R"("}})";
  embed_json_error_text(b.data(), b.size(), wide, sizeof wide);
  std::string w(wide);
  EXPECT_EQ(0u, w.find("m (type ttt")) << w;
  EXPECT_LT(w.size(), sizeof wide);
  EXPECT_EQ(std::string::npos, w.find_first_not_of("m (type,t"));
}

}  // namespace
