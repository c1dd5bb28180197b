// global_query (property predicates -> SQL) and page_token, without a
// database: paths are split and quoted exactly, operands never enter the
// SQL text, op/operand mismatches are refused with the predicate named,
// and page tokens open only for the caller and filters they were sealed
// to.
#include <gtest/gtest.h>
#include <jansson.h>

#include <string>

extern "C" {
#include "memory/v1/common.pb-c.h"
#include "service/core/arena.h"
#include "service/global/global_query.h"
#include "service/pb/page_token.h"
}

namespace {

class GlobalQueryTest : public ::testing::Test {
 protected:
  void SetUp() override { a_ = arena_create(); }
  void TearDown() override { arena_free(a_); }

  // Path -> the text[] literal, or "ERR: why".
  std::string Path(const char* path, const char* value = nullptr, std::string* nested = nullptr) {
    const char *lit = nullptr, *doc = nullptr;
    char why[256] = "";
    int rc = global_path_parse(a_, path, value, &lit, nested ? &doc : nullptr, why, sizeof why);
    if (rc != 0) return std::string("ERR: ") + why;
    if (nested) *nested = doc ? doc : "(none)";
    return lit;
  }

  // Compiles one predicate; returns the SQL or "ERR: why".
  std::string Sql(int op, global_kind kind, const char* value, const char* path = "a.b",
                  pgq_params* q = nullptr) {
    pgq_sql b = {};
    global_pred p = {path, op, kind, value};
    char why[256] = "";
    int rc = global_pred_sql(&b, a_, 3, &p, why, sizeof why);
    if (rc != 0) return std::string("ERR: ") + why;
    if (q) *q = b.params;
    return b.buf;
  }

  arena* a_ = nullptr;
};

TEST_F(GlobalQueryTest, PathsSplitOnDotsAndQuoteEverySegment) {
  EXPECT_EQ("{\"a\"}", Path("a"));
  EXPECT_EQ("{\"address\",\"city\"}", Path("address.city"));
  EXPECT_EQ("{\"authors\",\"0\",\"name\"}", Path("authors.0.name"));
  // Array-literal metacharacters stay data.
  EXPECT_EQ("{\"we\\\"ird\",\"{x}\",\"b\\\\s\",\"a,b\"}", Path("we\"ird.{x}.b\\s.a,b"));
  EXPECT_EQ("{\"日本\",\"语\"}", Path("日本.语"));
}

TEST_F(GlobalQueryTest, BadPathsAreRefusedWithAReason) {
  EXPECT_EQ("ERR: path: required", Path(""));
  EXPECT_NE(std::string::npos, Path("a..b").find("empty segment"));
  EXPECT_NE(std::string::npos, Path(".a").find("empty segment"));
  EXPECT_NE(std::string::npos, Path("a.").find("empty segment"));
  std::string seventeen = "a";
  for (int i = 0; i < 16; i++) seventeen += ".a";
  EXPECT_NE(std::string::npos, Path(seventeen.c_str()).find("more than 16 segments"));
  std::string sixteen = "a";
  for (int i = 0; i < 15; i++) sixteen += ".a";
  EXPECT_EQ('{', Path(sixteen.c_str())[0]);
  std::string long_path(257, 'x');
  EXPECT_NE(std::string::npos, Path(long_path.c_str()).find("longer than 256"));
  EXPECT_EQ('{', Path(std::string(256, 'x').c_str())[0]);
}

TEST_F(GlobalQueryTest, TheContainmentPrefilterIsValidJsonOrAbsent) {
  std::string doc;
  Path("a.b\"c", "{\"k\":[1,2]}", &doc);
  json_error_t e;
  json_t* j = json_loads(doc.c_str(), 0, &e);
  ASSERT_NE(nullptr, j) << doc << ": " << e.text;
  json_t* inner = json_object_get(json_object_get(j, "a"), "b\"c");
  ASSERT_NE(nullptr, inner) << doc;
  EXPECT_EQ(2u, json_array_size(json_object_get(inner, "k")));
  json_decref(j);
  // A numeric segment may index an array: no prefilter.
  Path("a.0", "1", &doc);
  EXPECT_EQ("(none)", doc);
}

TEST_F(GlobalQueryTest, OperandsAreParametersNeverSqlText) {
  const char* evil = "\"'; DROP TABLE entities; --\"";
  pgq_params q = {};
  std::string sql =
      Sql(MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EQ, GLOBAL_KIND_STRING, evil, "x';--.y", &q);
  EXPECT_EQ(std::string::npos, sql.find("DROP")) << sql;
  EXPECT_EQ(std::string::npos, sql.find("x';--")) << sql;
  // path, operand and the prefilter document
  ASSERT_EQ(3, q.n);
  EXPECT_STREQ(evil, q.vals[1]);
  for (int op = MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EQ;
       op <= MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EXISTS; op++) {
    std::string s = Sql(op, GLOBAL_KIND_STRING, evil);
    EXPECT_EQ(std::string::npos, s.find("DROP")) << op << ": " << s;
    EXPECT_EQ(0u, s.find(" AND ")) << op << ": " << s;
  }
}

TEST_F(GlobalQueryTest, OrderingsTakeNumbersOrStringsOnly) {
  for (int op = MEMORY__V1__PREDICATE_OP__PREDICATE_OP_LT;
       op <= MEMORY__V1__PREDICATE_OP__PREDICATE_OP_GE; op++) {
    EXPECT_NE(std::string::npos, Sql(op, GLOBAL_KIND_NUMBER, "1").find("::numeric"));
    EXPECT_NE(std::string::npos, Sql(op, GLOBAL_KIND_STRING, "\"m\"").find("COLLATE \"C\""));
    for (global_kind k :
         {GLOBAL_KIND_BOOL, GLOBAL_KIND_NULL, GLOBAL_KIND_LIST, GLOBAL_KIND_OBJECT}) {
      std::string s = Sql(op, k, "true");
      EXPECT_EQ(0u, s.find("ERR: predicates[3].value:")) << s;
      EXPECT_NE(std::string::npos, s.find("numbers or strings")) << s;
    }
  }
}

TEST_F(GlobalQueryTest, MissingOperatorsAndOperandsAreNamed) {
  std::string s = Sql(MEMORY__V1__PREDICATE_OP__PREDICATE_OP_UNSPECIFIED, GLOBAL_KIND_NUMBER, "1");
  EXPECT_NE(std::string::npos, s.find("predicates[3].op: PREDICATE_OP_UNSPECIFIED")) << s;
  EXPECT_EQ(0u, Sql(99, GLOBAL_KIND_NUMBER, "1").find("ERR: predicates[3].op"));
  s = Sql(MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EQ, GLOBAL_KIND_NONE, nullptr);
  EXPECT_NE(std::string::npos, s.find("predicates[3].value: required for EQ")) << s;
  // EXISTS ignores the operand and reads the path once.
  s = Sql(MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EXISTS, GLOBAL_KIND_NONE, nullptr);
  EXPECT_EQ(" AND (properties #> $1) IS NOT NULL", s);
  s = Sql(MEMORY__V1__PREDICATE_OP__PREDICATE_OP_EQ, GLOBAL_KIND_NUMBER, "1", "a..b");
  EXPECT_EQ(0u, s.find("ERR: predicates[3].path:")) << s;
}

TEST(PageTokenTest, OpensOnlyForItsDomainBindingAndShape) {
  arena* a = arena_create();
  const char* bind[] = {"tenant", "alice", "digest"};
  const char* fields[] = {"Ada Lovelace", "ada"};
  char* tok = page_token_encode(a, "d", bind, 3, fields, 2);
  ASSERT_NE(nullptr, tok);
  const char* got[2];
  ASSERT_EQ(0, page_token_decode(a, "d", bind, 3, tok, got, 2));
  EXPECT_STREQ("Ada Lovelace", got[0]);
  EXPECT_STREQ("ada", got[1]);
  EXPECT_EQ(-1, page_token_decode(a, "other", bind, 3, tok, got, 2));
  const char* bob[] = {"tenant", "bob", "digest"};
  EXPECT_EQ(-1, page_token_decode(a, "d", bob, 3, tok, got, 2));
  EXPECT_EQ(-1, page_token_decode(a, "d", bind, 2, tok, got, 2));
  EXPECT_EQ(-1, page_token_decode(a, "d", bind, 3, tok, got, 1));
  // Every single-character change is refused.
  std::string t = tok;
  for (size_t i = 0; i < t.size(); i++) {
    std::string m = t;
    m[i] = m[i] == 'A' ? 'B' : 'A';
    EXPECT_EQ(-1, page_token_decode(a, "d", bind, 3, m.c_str(), got, 2)) << i;
  }
  EXPECT_EQ(-1, page_token_decode(a, "d", bind, 3, "", got, 2));
  EXPECT_EQ(-1, page_token_decode(a, "d", bind, 3, "!!!", got, 2));
  // Empty fields are carried; over-long ones are refused at encoding.
  const char* empty[] = {"", "x"};
  char* t2 = page_token_encode(a, "d", bind, 3, empty, 2);
  ASSERT_NE(nullptr, t2);
  ASSERT_EQ(0, page_token_decode(a, "d", bind, 3, t2, got, 2));
  EXPECT_STREQ("", got[0]);
  std::string big(PAGE_TOKEN_FIELD_MAX + 1, 'x');
  const char* too_long[] = {big.c_str()};
  EXPECT_EQ(nullptr, page_token_encode(a, "d", bind, 3, too_long, 1));
  arena_free(a);
}

}  // namespace
