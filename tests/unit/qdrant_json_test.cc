// qdrant_json (Qdrant REST bodies and answer parsers), without a server:
// every filter condition kind maps to Qdrant's JSON (compared as parsed
// JSON, not as text), the read diode wraps the user filter as one nested
// condition, every body has the shape of its OpenAPI schema, ids above
// INT64_MAX survive both ways, and every parser refuses malformed answers
// (error envelopes, text bodies, truncation, wrong types, corrupt metadata)
// with a message and without leaking payload references.
//
// QDRANT_JSON_DUMP_DIR=dir makes the test write every body it builds to
// dir/<operation>__<test>.json, for checking them against Qdrant's OpenAPI
// schemas by hand (python3-jsonschema).
#include <gtest/gtest.h>
#include <jansson.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "memory/v1/common.pb-c.h"
#include "service/core/arena.h"
#include "service/qdrant/qdrant_json.h"
}

namespace {

// Parses with qdrant_json_load (so ids above INT64_MAX are comparable) or fails the
// test.
json_t* Load(const std::string& text) {
  json_t* j = nullptr;
  char err[256] = "";
  EXPECT_EQ(STATUS_OK, qdrant_json_load(text.data(), text.size(), &j, err, sizeof err))
      << err << "\n"
      << text;
  return j;
}

::testing::AssertionResult SameJson(const std::string& want, const std::string& got) {
  json_t* a = Load(want);
  json_t* b = Load(got);
  bool same = a && b && json_equal(a, b);
  json_decref(a);
  json_decref(b);
  if (same) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\nwant: " << want << "\n got: " << got;
}

void Dump(const char* op, const std::string& body) {
  const char* dir = getenv("QDRANT_JSON_DUMP_DIR");
  if (!dir) return;
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  static int seq = 0;
  std::string path =
      std::string(dir) + "/" + op + "__" + t->name() + "_" + std::to_string(seq++) + ".json";
  FILE* f = fopen(path.c_str(), "w");
  if (!f) return;
  fwrite(body.data(), 1, body.size(), f);
  fclose(f);
}

// A builder's result: the body, or "ERR <code>: message". out and len are
// read here, after the builder call in the argument list has run.
std::string Take(const char* op, int rc, char** outp, size_t* lenp, const char* err) {
  char* out = *outp;
  size_t len = *lenp;
  *outp = nullptr;
  if (rc != STATUS_OK) {
    EXPECT_EQ(nullptr, out);
    return "ERR " + std::to_string(rc) + ": " + err;
  }
  EXPECT_EQ(strlen(out), len);
  std::string s(out, len);
  free(out);
  Dump(op, s);
  return s;
}

vs_id Num(uint64_t n) {
  vs_id id = {};
  id.num = n;
  return id;
}

vs_id Uuid(const char* s) {
  vs_id id = {};
  EXPECT_EQ(0, vs_uuid_parse(s, &id));
  return id;
}

class QdrantJsonTest : public ::testing::Test {
 protected:
  void SetUp() override { a_ = arena_create(); }
  void TearDown() override { arena_free(a_); }

  template <typename T>
  T* New() {
    return static_cast<T*>(arena_zalloc(a_, sizeof(T)));
  }

  // ---- filter construction ----
  Google__Protobuf__Value* Str(const char* s) {
    auto* v = New<Google__Protobuf__Value>();
    google__protobuf__value__init(v);
    v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
    v->string_value = arena_strdup(a_, s);
    return v;
  }
  Google__Protobuf__Value* Dbl(double d) {
    auto* v = New<Google__Protobuf__Value>();
    google__protobuf__value__init(v);
    v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE;
    v->number_value = d;
    return v;
  }
  Google__Protobuf__Value* Bool(bool b) {
    auto* v = New<Google__Protobuf__Value>();
    google__protobuf__value__init(v);
    v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE;
    v->bool_value = b;
    return v;
  }
  Google__Protobuf__ListValue* List(std::vector<Google__Protobuf__Value*> vs) {
    auto* l = New<Google__Protobuf__ListValue>();
    google__protobuf__list_value__init(l);
    l->n_values = vs.size();
    l->values =
        static_cast<Google__Protobuf__Value**>(arena_alloc(a_, (vs.size() + 1) * sizeof(void*)));
    for (size_t i = 0; i < vs.size(); i++) l->values[i] = vs[i];
    return l;
  }
  Memory__V1__Condition* Cond() {
    auto* c = New<Memory__V1__Condition>();
    memory__v1__condition__init(c);
    return c;
  }
  Memory__V1__FieldCondition* FieldOf(Memory__V1__Condition* c, const char* key) {
    auto* f = New<Memory__V1__FieldCondition>();
    memory__v1__field_condition__init(f);
    f->key = arena_strdup(a_, key);
    c->condition_case = MEMORY__V1__CONDITION__CONDITION_FIELD;
    c->field = f;
    return f;
  }
  Memory__V1__Condition* Match(const char* key, Google__Protobuf__Value* v) {
    auto* c = Cond();
    auto* f = FieldOf(c, key);
    f->condition_case = MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_VALUE;
    f->match_value = v;
    return c;
  }
  Memory__V1__Condition* Any(const char* key, Google__Protobuf__ListValue* l) {
    auto* c = Cond();
    auto* f = FieldOf(c, key);
    f->condition_case = MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_ANY;
    f->match_any = l;
    return c;
  }
  Memory__V1__Condition* Except(const char* key, Google__Protobuf__ListValue* l) {
    auto* c = Cond();
    auto* f = FieldOf(c, key);
    f->condition_case = MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_EXCEPT;
    f->match_except = l;
    return c;
  }
  Memory__V1__Range* NewRange() {
    auto* r = New<Memory__V1__Range>();
    memory__v1__range__init(r);
    return r;
  }
  Memory__V1__Condition* RangeC(const char* key, Memory__V1__Range* r) {
    auto* c = Cond();
    auto* f = FieldOf(c, key);
    f->condition_case = MEMORY__V1__FIELD_CONDITION__CONDITION_RANGE;
    f->range = r;
    return c;
  }
  Memory__V1__Condition* IsEmpty(const char* key) {
    auto* c = Cond();
    auto* e = New<Memory__V1__IsEmptyCondition>();
    memory__v1__is_empty_condition__init(e);
    e->key = arena_strdup(a_, key);
    c->condition_case = MEMORY__V1__CONDITION__CONDITION_IS_EMPTY;
    c->is_empty = e;
    return c;
  }
  Memory__V1__PointId* PidNum(uint64_t n) {
    auto* p = New<Memory__V1__PointId>();
    memory__v1__point_id__init(p);
    p->kind_case = MEMORY__V1__POINT_ID__KIND_NUM;
    p->num = n;
    return p;
  }
  Memory__V1__PointId* PidUuid(const char* s) {
    auto* p = New<Memory__V1__PointId>();
    memory__v1__point_id__init(p);
    p->kind_case = MEMORY__V1__POINT_ID__KIND_UUID;
    p->uuid = arena_strdup(a_, s);
    return p;
  }
  Memory__V1__Condition* HasId(std::vector<Memory__V1__PointId*> ids) {
    auto* c = Cond();
    auto* h = New<Memory__V1__HasIdCondition>();
    memory__v1__has_id_condition__init(h);
    h->n_ids = ids.size();
    h->ids = static_cast<Memory__V1__PointId**>(arena_alloc(a_, (ids.size() + 1) * sizeof(void*)));
    for (size_t i = 0; i < ids.size(); i++) h->ids[i] = ids[i];
    c->condition_case = MEMORY__V1__CONDITION__CONDITION_HAS_ID;
    c->has_id = h;
    return c;
  }
  Memory__V1__Condition** Conds(const std::vector<Memory__V1__Condition*>& cs) {
    auto** a =
        static_cast<Memory__V1__Condition**>(arena_alloc(a_, (cs.size() + 1) * sizeof(void*)));
    for (size_t i = 0; i < cs.size(); i++) a[i] = cs[i];
    return a;
  }
  Memory__V1__Filter* Filter(std::vector<Memory__V1__Condition*> must,
                             std::vector<Memory__V1__Condition*> should = {},
                             std::vector<Memory__V1__Condition*> must_not = {}) {
    auto* f = New<Memory__V1__Filter>();
    memory__v1__filter__init(f);
    f->n_must = must.size();
    f->must = Conds(must);
    f->n_should = should.size();
    f->should = Conds(should);
    f->n_must_not = must_not.size();
    f->must_not = Conds(must_not);
    return f;
  }
  Memory__V1__Condition* Nested(Memory__V1__Filter* f) {
    auto* c = Cond();
    c->condition_case = MEMORY__V1__CONDITION__CONDITION_FILTER;
    c->filter = f;
    return c;
  }

  // The filter for scope (tenant t1, owner alice, clr 2 by default) and f.
  std::string F(const Memory__V1__Filter* f, const qdrant_json_scope* s = nullptr) {
    qdrant_json_scope def = {"t1", "alice", 2, nullptr, 0, 0, nullptr};
    char* out = nullptr;
    size_t len = 0;
    char err[256] = "";
    int rc = qdrant_json_filter(s ? s : &def, f, &out, &len, err, sizeof err);
    return Take("filter", rc, &out, &len, err);
  }

  // The user filter alone as Qdrant sees it: the nested condition after
  // the three diode conditions (or "" when there is none).
  std::string User(const Memory__V1__Filter* f) {
    std::string body = F(f);
    if (body.rfind("ERR", 0) == 0) return body;
    json_t* j = Load(body);
    json_t* must = json_object_get(j, "must");
    std::string s;
    if (json_array_size(must) == 4) {
      char* t = json_dumps(json_array_get(must, 3), JSON_COMPACT | JSON_SORT_KEYS);
      s = t;
      free(t);
    } else {
      EXPECT_EQ(3u, json_array_size(must)) << body;
    }
    json_decref(j);
    return s;
  }

  arena* a_ = nullptr;
};

const char kDiode[] =
    "{\"key\":\"memoryd.tenant\",\"match\":{\"value\":\"t1\"}},"
    "{\"key\":\"memoryd.owner\",\"match\":{\"value\":\"alice\"}},"
    "{\"key\":\"memoryd.label\",\"range\":{\"lte\":2}}";

std::string WithDiode(const std::string& user) {
  return std::string("{\"must\":[") + kDiode + (user.empty() ? "" : "," + user) + "]}";
}

// ---------------------------------------------------------------------
// filters

TEST_F(QdrantJsonTest, NoUserFilterIsTheDiodeAlone) {
  EXPECT_TRUE(SameJson(WithDiode(""), F(nullptr)));
  // A filter with no conditions adds nothing either.
  EXPECT_TRUE(SameJson(WithDiode(""), F(Filter({}))));
}

TEST_F(QdrantJsonTest, ReadAllBreadthDropsTheOwnerCondition) {
  qdrant_json_scope s = {"t1", nullptr, 4, nullptr, 0, 0, nullptr};
  EXPECT_TRUE(
      SameJson("{\"must\":[{\"key\":\"memoryd.tenant\",\"match\":{\"value\":\"t1\"}},"
               "{\"key\":\"memoryd.label\",\"range\":{\"lte\":4}}]}",
               F(nullptr, &s)));
}

// An erasure's time bound (the retention sweeper's) narrows the scope.
TEST_F(QdrantJsonTest, AnErasuresTimeBoundIsARangeOnUpdatedUs) {
  qdrant_json_scope s = {"t1", nullptr, 4, nullptr, 0, 1795680000123456, nullptr};
  EXPECT_TRUE(
      SameJson("{\"must\":[{\"key\":\"memoryd.tenant\",\"match\":{\"value\":\"t1\"}},"
               "{\"key\":\"memoryd.label\",\"range\":{\"lte\":4}},"
               "{\"key\":\"memoryd.updated_us\",\"range\":{\"lt\":1795680000123456}}]}",
               F(nullptr, &s)));
}

// A search's time window (RecallOptions.time_range): [start, end) on
// updated_us, either end open.
TEST_F(QdrantJsonTest, ASearchsTimeWindowIsARangeOnUpdatedUs) {
  tier_time_range tr = {1, 1, 1700000000000000, 1800000000000000};
  qdrant_json_scope s = {"t1", nullptr, 4, nullptr, 0, 0, &tr};
  EXPECT_TRUE(
      SameJson("{\"must\":[{\"key\":\"memoryd.tenant\",\"match\":{\"value\":\"t1\"}},"
               "{\"key\":\"memoryd.label\",\"range\":{\"lte\":4}},"
               "{\"key\":\"memoryd.updated_us\",\"range\":{\"gte\":1700000000000000}},"
               "{\"key\":\"memoryd.updated_us\",\"range\":{\"lt\":1800000000000000}}]}",
               F(nullptr, &s)));
  tr.has_start = 0;
  EXPECT_TRUE(
      SameJson("{\"must\":[{\"key\":\"memoryd.tenant\",\"match\":{\"value\":\"t1\"}},"
               "{\"key\":\"memoryd.label\",\"range\":{\"lte\":4}},"
               "{\"key\":\"memoryd.updated_us\",\"range\":{\"lt\":1800000000000000}}]}",
               F(nullptr, &s)));
}

TEST_F(QdrantJsonTest, ScopeIdsBecomeOneSortedDeduplicatedHasId) {
  vs_id ids[] = {Uuid("5C56C793-69F3-4FBF-87E6-C4BF54C28C26"), Num(18446744073709551615ull), Num(7),
                 Num(7)};
  qdrant_json_scope s = {"t1", "alice", 2, ids, 4, 0, nullptr};
  std::string body = F(nullptr, &s);
  EXPECT_TRUE(SameJson(WithDiode("{\"has_id\":[7,18446744073709551615,"
                                 "\"5c56c793-69f3-4fbf-87e6-c4bf54c28c26\"]}"),
                       body));
  // The big id is a JSON integer, digit for digit.
  EXPECT_NE(std::string::npos, body.find("[7,18446744073709551615,\"5c56c793"));
}

TEST_F(QdrantJsonTest, MatchValueMapsStringsBoolsAndIntegers) {
  EXPECT_TRUE(
      SameJson("{\"must\":[{\"key\":\"payload.city\",\"match\":{\"value\":\"London\"}},"
               "{\"key\":\"payload.a.b[].c\",\"match\":{\"value\":true}},"
               "{\"key\":\"payload.n\",\"match\":{\"value\":-9007199254740992}}]}",
               User(Filter({Match("city", Str("London")), Match("a.b[].c", Bool(true)),
                            Match("n", Dbl(-9007199254740992.0))}))));
}

TEST_F(QdrantJsonTest, IntegersAreWrittenAsJsonIntegers) {
  std::string body = F(Filter({Match("n", Dbl(42))}));
  EXPECT_NE(std::string::npos, body.find("\"value\":42}")) << body;
}

TEST_F(QdrantJsonTest, MatchValueWithoutQdrantFormIsInvalid) {
  EXPECT_EQ(0u, F(Filter({Match("n", Dbl(1.5))}))
                    .rfind("ERR -8: filter key n: Qdrant matches only integers", 0));
  EXPECT_EQ(0u, F(Filter({Match("n", Dbl(1e300))})).rfind("ERR -8:", 0));
  EXPECT_EQ(0u, F(Filter({Match("n", Dbl(NAN))})).rfind("ERR -8:", 0));
  auto* nul = New<Google__Protobuf__Value>();
  google__protobuf__value__init(nul);
  nul->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_NULL_VALUE;
  EXPECT_EQ(0u,
            F(Filter({Match("n", nul)})).rfind("ERR -8: filter key n: a match value must be", 0));
}

TEST_F(QdrantJsonTest, MatchAnyAndExceptTakeStringOrIntegerSets) {
  EXPECT_TRUE(
      SameJson("{\"must\":[{\"key\":\"payload.color\",\"match\":{\"any\":[\"red\",\"green\"]}}],"
               "\"must_not\":[{\"key\":\"payload.n\",\"match\":{\"except\":[1,2]}}]}",
               User(Filter({Any("color", List({Str("red"), Str("green"), Str("red")}))}, {},
                           {Except("n", List({Dbl(1), Dbl(2), Dbl(1)}))}))));
}

TEST_F(QdrantJsonTest, MixedOrBooleanListsAreInvalid) {
  EXPECT_EQ(
      0u, F(Filter({Any("x", List({Str("a"), Dbl(1)}))}))
              .rfind("ERR -8: filter key x: Qdrant's match any takes only strings or only integers",
                     0));
  EXPECT_EQ(0u, F(Filter({Except("x", List({Bool(true)}))})).rfind("ERR -8:", 0));
  EXPECT_EQ(0u, F(Filter({Any("x", List({Dbl(0.5)}))})).rfind("ERR -8:", 0));
}

TEST_F(QdrantJsonTest, RangeWritesOnlyTheBoundsSet) {
  auto* r1 = NewRange();
  r1->lower_case = MEMORY__V1__RANGE__LOWER_GT;
  r1->gt = 1.5;
  r1->upper_case = MEMORY__V1__RANGE__UPPER_LTE;
  r1->lte = 10;
  auto* r2 = NewRange();
  r2->lower_case = MEMORY__V1__RANGE__LOWER_GTE;
  r2->gte = -0.1;
  auto* r3 = NewRange();
  r3->upper_case = MEMORY__V1__RANGE__UPPER_LT;
  r3->lt = 1e300;
  EXPECT_TRUE(
      SameJson("{\"must\":[{\"key\":\"payload.a\",\"range\":{\"gt\":1.5,\"lte\":10}},"
               "{\"key\":\"payload.b\",\"range\":{\"gte\":-0.1}},"
               "{\"key\":\"payload.c\",\"range\":{\"lt\":1e300}}]}",
               User(Filter({RangeC("a", r1), RangeC("b", r2), RangeC("c", r3)}))));
}

TEST_F(QdrantJsonTest, RangeBoundsRoundTripExactly) {
  auto* r = NewRange();
  r->lower_case = MEMORY__V1__RANGE__LOWER_GT;
  r->gt = 0.1 + 0.2;
  json_t* j = Load(F(Filter({RangeC("a", r)})));
  json_t* gt = json_object_get(
      json_object_get(
          json_array_get(json_object_get(json_array_get(json_object_get(j, "must"), 3), "must"), 0),
          "range"),
      "gt");
  EXPECT_EQ(0.1 + 0.2, json_real_value(gt));
  json_decref(j);
}

TEST_F(QdrantJsonTest, RangeWithoutAFiniteBoundIsInvalid) {
  EXPECT_EQ(
      0u,
      F(Filter({RangeC("a", NewRange())})).rfind("ERR -8: filter key a: a range needs a bound", 0));
  auto* r = NewRange();
  r->upper_case = MEMORY__V1__RANGE__UPPER_LT;
  r->lt = INFINITY;
  EXPECT_EQ(0u, F(Filter({RangeC("a", r)})).rfind("ERR -8: range bound is not a finite number", 0));
}

TEST_F(QdrantJsonTest, IsEmptyNamesThePrefixedKey) {
  EXPECT_TRUE(SameJson("{\"should\":[{\"is_empty\":{\"key\":\"payload.tags\"}}]}",
                       User(Filter({}, {IsEmpty("tags")}))));
}

TEST_F(QdrantJsonTest, HasIdWritesBigIdsExactlyAndUuidsLowerCase) {
  std::string body = F(Filter({HasId({PidNum(9223372036854775808ull), PidNum(1),
                                      PidUuid("5C56C793-69F3-4FBF-87E6-C4BF54C28C26")})}));
  EXPECT_TRUE(SameJson(WithDiode("{\"must\":[{\"has_id\":[1,9223372036854775808,"
                                 "\"5c56c793-69f3-4fbf-87e6-c4bf54c28c26\"]}]}"),
                       body));
  EXPECT_NE(std::string::npos, body.find("[1,9223372036854775808,")) << body;
}

TEST_F(QdrantJsonTest, HasIdWithABadIdIsInvalid) {
  EXPECT_EQ(0u, F(Filter({HasId({PidUuid("not-a-uuid")})})).rfind("ERR -8: has_id: id 0", 0));
  auto* unset = New<Memory__V1__PointId>();
  memory__v1__point_id__init(unset);
  EXPECT_EQ(0u, F(Filter({HasId({unset})})).rfind("ERR -8:", 0));
}

TEST_F(QdrantJsonTest, NestedFiltersKeepShouldAndMustNotInside) {
  // (a = 1 AND b = 2) OR (c = 3), NOT d empty.
  auto* user =
      Filter({}, {Nested(Filter({Match("a", Dbl(1)), Match("b", Dbl(2))})), Match("c", Dbl(3))},
             {IsEmpty("d")});
  std::string body = F(user);
  EXPECT_TRUE(
      SameJson(WithDiode("{\"should\":[{\"must\":[{\"key\":\"payload.a\",\"match\":{\"value\":1}},"
                         "{\"key\":\"payload.b\",\"match\":{\"value\":2}}]},"
                         "{\"key\":\"payload.c\",\"match\":{\"value\":3}}],"
                         "\"must_not\":[{\"is_empty\":{\"key\":\"payload.d\"}}]}"),
               body));
}

TEST_F(QdrantJsonTest, EmptyClausesAreOmittedNotEmptyArrays) {
  std::string u = User(Filter({}, {}, {Match("x", Str("y"))}));
  EXPECT_EQ(std::string::npos, u.find("\"must\"")) << u;
  EXPECT_EQ(std::string::npos, u.find("\"should\"")) << u;
  EXPECT_TRUE(SameJson("{\"must_not\":[{\"key\":\"payload.x\",\"match\":{\"value\":\"y\"}}]}", u));
  // A nested empty filter stays an (empty) Filter condition: it matches
  // everything, as in Qdrant.
  EXPECT_TRUE(SameJson("{\"must\":[{}]}", User(Filter({Nested(Filter({}))}))));
}

TEST_F(QdrantJsonTest, FiltersNestedTooDeepAreInvalid) {
  Memory__V1__Filter* f = Filter({Match("x", Dbl(1))});
  for (int i = 0; i < QDRANT_JSON_MAX_FILTER_DEPTH; i++) f = Filter({Nested(f)});
  EXPECT_EQ(0u, F(f).rfind("ERR -8: filter nests deeper than 16 levels", 0));
  Memory__V1__Filter* ok = Filter({Match("x", Dbl(1))});
  for (int i = 0; i < QDRANT_JSON_MAX_FILTER_DEPTH - 1; i++) ok = Filter({Nested(ok)});
  EXPECT_NE(0u, F(ok).rfind("ERR", 0));
}

TEST_F(QdrantJsonTest, UnsetConditionsAndEmptyKeysAreInvalid) {
  EXPECT_EQ(0u, F(Filter({Cond()})).rfind("ERR -8: a filter condition has nothing set", 0));
  auto* c = Cond();
  FieldOf(c, "x");
  EXPECT_EQ(0u,
            F(Filter({c})).rfind("ERR -8: filter key x: the field condition has no test set", 0));
  EXPECT_EQ(0u,
            F(Filter({Match("", Dbl(1))})).rfind("ERR -8: a filter condition has an empty key", 0));
}

TEST_F(QdrantJsonTest, KeysAndValuesAreEscaped) {
  std::string body =
      F(Filter({Match("we\"ird\\key\n", Str("line\nbreak \x01 \"q\" é")), IsEmpty("日本")}));
  EXPECT_TRUE(SameJson(WithDiode("{\"must\":[{\"key\":\"payload.we\\\"ird\\\\key\\n\","
                                 "\"match\":{\"value\":\"line\\nbreak \\u0001 \\\"q\\\" é\"}},"
                                 "{\"is_empty\":{\"key\":\"payload.日本\"}}]}"),
                       body));
}

TEST_F(QdrantJsonTest, TextThatIsNotUtf8IsInvalid) {
  EXPECT_EQ(
      0u,
      F(Filter({Match("k", Str("\xff\xfe"))})).rfind("ERR -8: match value is not valid UTF-8", 0));
  qdrant_json_scope s = {"t\xc3", "alice", 2, nullptr, 0, 0, nullptr};
  EXPECT_EQ(0u, F(nullptr, &s).rfind("ERR -8: tenant is not valid UTF-8", 0));
  qdrant_json_scope none = {nullptr, nullptr, 2, nullptr, 0, 0, nullptr};
  EXPECT_EQ(0u, F(nullptr, &none).rfind("ERR -8: the read diode needs a tenant", 0));
}

// ---------------------------------------------------------------------
// bodies

TEST_F(QdrantJsonTest, CreateCollectionNamesSizeAndDistance) {
  char *out = nullptr, err[256];
  size_t len = 0;
  EXPECT_TRUE(
      SameJson("{\"vectors\":{\"size\":3,\"distance\":\"Cosine\"}}",
               Take("create_collection",
                    qdrant_json_create_collection(3, VS_COSINE, &out, &len, err, sizeof err), &out,
                    &len, err)));
  EXPECT_TRUE(
      SameJson("{\"vectors\":{\"size\":65536,\"distance\":\"Dot\"}}",
               Take("create_collection",
                    qdrant_json_create_collection(65536, VS_DOT, &out, &len, err, sizeof err), &out,
                    &len, err)));
  EXPECT_TRUE(
      SameJson("{\"vectors\":{\"size\":1,\"distance\":\"Euclid\"}}",
               Take("create_collection",
                    qdrant_json_create_collection(1, VS_EUCLID, &out, &len, err, sizeof err), &out,
                    &len, err)));
  EXPECT_EQ(
      "ERR -8: unknown distance 4",
      Take("x", qdrant_json_create_collection(3, 4, &out, &len, err, sizeof err), &out, &len, err));
  EXPECT_EQ("ERR -8: dims 0 out of 1..65536",
            Take("x", qdrant_json_create_collection(0, VS_DOT, &out, &len, err, sizeof err), &out,
                 &len, err));
}

TEST_F(QdrantJsonTest, TenantIndexUsesIsTenantFrom111On) {
  char *out = nullptr, err[256];
  size_t len = 0;
  qdrant_json_version v111 = {1, 11, 0}, v119 = {1, 19, 0}, v110 = {1, 10, 1}, v2 = {2, 0, 0};
  const char tenant[] =
      "{\"field_name\":\"memoryd.tenant\",\"field_schema\":{\"type\":\"keyword\",\"is_tenant\":"
      "true}}";
  EXPECT_TRUE(SameJson(tenant, Take("payload_index",
                                    qdrant_json_payload_index("memoryd.tenant", 1, &v111, &out,
                                                              &len, err, sizeof err),
                                    &out, &len, err)));
  EXPECT_TRUE(SameJson(tenant, Take("payload_index",
                                    qdrant_json_payload_index("memoryd.tenant", 1, &v119, &out,
                                                              &len, err, sizeof err),
                                    &out, &len, err)));
  EXPECT_TRUE(SameJson(
      tenant, Take("payload_index",
                   qdrant_json_payload_index("memoryd.tenant", 1, &v2, &out, &len, err, sizeof err),
                   &out, &len, err)));
  EXPECT_TRUE(SameJson(
      "{\"field_name\":\"memoryd.tenant\",\"field_schema\":\"keyword\"}",
      Take("payload_index_1_10",
           qdrant_json_payload_index("memoryd.tenant", 1, &v110, &out, &len, err, sizeof err), &out,
           &len, err)));
  EXPECT_TRUE(SameJson(
      "{\"field_name\":\"memoryd.owner\",\"field_schema\":\"keyword\"}",
      Take("payload_index",
           qdrant_json_payload_index("memoryd.owner", 0, &v119, &out, &len, err, sizeof err), &out,
           &len, err)));
  EXPECT_TRUE(
      SameJson("{\"field_name\":\"memoryd.updated_us\",\"field_schema\":\"integer\"}",
               Take("payload_index",
                    qdrant_json_payload_index("memoryd.updated_us", QDRANT_JSON_INDEX_INTEGER,
                                              &v119, &out, &len, err, sizeof err),
                    &out, &len, err)));
}

TEST_F(QdrantJsonTest, UpsertWritesPointsWithStampedMetadata) {
  float v1[] = {0.1f, -2.5f, 3e-8f};
  float v2[] = {1.0f, 0.0f, -0.0f};
  json_t* payload = json_pack("{s:s, s:{s:[i, f, b, n]}, s:f}", "city", "London", "nested", "xs", 1,
                              0.30000000000000004, 1, "big", 1e300);
  const char* pii[] = {"email", "phone"};
  vs_point_in pts[2] = {};
  pts[0].id = Num(18446744073709551615ull);
  pts[0].vector = v1;
  pts[0].payload = payload;
  pts[0].pii_kinds = pii;
  pts[0].npii = 2;
  pts[1].id = Uuid("5c56c793-69f3-4fbf-87e6-c4bf54c28c26");
  pts[1].vector = v2;
  pts[1].payload = nullptr;
  tier_meta metas[2] = {};
  metas[0] = {nullptr, "alice", 3, 2, 1700000000000000, 1700000000000001, 0, 0, nullptr, 0};
  metas[1] = {nullptr, "bob", 1, 1, 5, 5, 0, 0, nullptr, 0};
  char *out = nullptr, err[256];
  size_t len = 0;
  std::string body =
      Take("upsert", qdrant_json_upsert("t1", 3, pts, metas, 2, &out, &len, err, sizeof err), &out,
           &len, err);
  EXPECT_TRUE(SameJson(
      "{\"points\":["
      "{\"id\":18446744073709551615,\"vector\":[0.100000001,-2.5,2.99999989e-08],"
      "\"payload\":{\"payload\":{\"city\":\"London\",\"nested\":{\"xs\":[1,0.30000000000000004,"
      "true,null]},\"big\":1e300},"
      "\"memoryd\":{\"tenant\":\"t1\",\"owner\":\"alice\",\"label\":3,\"version\":2,"
      "\"created_us\":1700000000000000,\"updated_us\":1700000000000001,\"pii_kinds\":[\"email\","
      "\"phone\"]}}},"
      "{\"id\":\"5c56c793-69f3-4fbf-87e6-c4bf54c28c26\",\"vector\":[1,0,-0],"
      "\"payload\":{\"payload\":{},\"memoryd\":{\"tenant\":\"t1\",\"owner\":\"bob\",\"label\":1,"
      "\"version\":1,\"created_us\":5,\"updated_us\":5,\"pii_kinds\":[]}}}]}",
      body));
  // Every float reads back as the very same float.
  json_t* j = Load(body);
  json_t* vec = json_object_get(json_array_get(json_object_get(j, "points"), 0), "vector");
  for (int i = 0; i < 3; i++) EXPECT_EQ(v1[i], (float)json_number_value(json_array_get(vec, i)));
  json_decref(j);
  json_decref(payload);
}

TEST_F(QdrantJsonTest, UpsertRefusesWhatQdrantCannotStore) {
  float nan_vec[] = {0.0f, NAN};
  vs_point_in p = {};
  p.id = Num(1);
  p.vector = nan_vec;
  tier_meta m = {nullptr, "alice", 1, 1, 0, 0, 0, 0, nullptr, 0};
  char *out = nullptr, err[256];
  size_t len = 0;
  EXPECT_EQ("ERR -8: vector component is not a finite number",
            Take("x", qdrant_json_upsert("t1", 2, &p, &m, 1, &out, &len, err, sizeof err), &out,
                 &len, err));
  float ok[] = {0.0f, 1.0f};
  p.vector = ok;
  json_t* arr = json_array();
  p.payload = arr;
  EXPECT_EQ("ERR -8: a point payload must be a JSON object",
            Take("x", qdrant_json_upsert("t1", 2, &p, &m, 1, &out, &len, err, sizeof err), &out,
                 &len, err));
  json_decref(arr);
  p.payload = nullptr;
  p.vector = nullptr;
  EXPECT_EQ("ERR -8: a point has no vector",
            Take("x", qdrant_json_upsert("t1", 2, &p, &m, 1, &out, &len, err, sizeof err), &out,
                 &len, err));
}

TEST_F(QdrantJsonTest, RetrieveAsksForMetadataOrEverything) {
  vs_id ids[] = {Num(1), Num(18446744073709551615ull),
                 Uuid("5c56c793-69f3-4fbf-87e6-c4bf54c28c26")};
  char *out = nullptr, err[256];
  size_t len = 0;
  EXPECT_TRUE(SameJson(
      "{\"ids\":[1,18446744073709551615,\"5c56c793-69f3-4fbf-87e6-c4bf54c28c26\"],"
      "\"with_payload\":{\"include\":[\"memoryd\"]},\"with_vector\":false}",
      Take("retrieve",
           qdrant_json_retrieve(ids, 3, QDRANT_JSON_PAYLOAD_META, 0, &out, &len, err, sizeof err),
           &out, &len, err)));
  EXPECT_TRUE(SameJson(
      "{\"ids\":[1],\"with_payload\":true,\"with_vector\":true}",
      Take("retrieve",
           qdrant_json_retrieve(ids, 1, QDRANT_JSON_PAYLOAD_ALL, 1, &out, &len, err, sizeof err),
           &out, &len, err)));
}

TEST_F(QdrantJsonTest, QueryCarriesVectorFilterPagingAndThreshold) {
  float v[] = {0.5f, 0.25f};
  vs_search q = {};
  q.vector = v;
  q.limit = 10;
  q.offset = 20;
  q.filter = Filter({Match("k", Str("v"))});
  q.has_threshold = 1;
  q.threshold = 0.75f;
  q.with_payload = 1;
  qdrant_json_scope s = {"t1", "alice", 2, nullptr, 0, 0, nullptr};
  char *out = nullptr, err[256];
  size_t len = 0;
  std::string filter =
      WithDiode("{\"must\":[{\"key\":\"payload.k\",\"match\":{\"value\":\"v\"}}]}");
  EXPECT_TRUE(SameJson("{\"query\":[0.5,0.25],\"filter\":" + filter +
                           ",\"limit\":10,\"offset\":20,\"score_threshold\":0.75,"
                           "\"with_payload\":true,\"with_vector\":false}",
                       Take("query", qdrant_json_query(&s, &q, 2, 0, &out, &len, err, sizeof err),
                            &out, &len, err)));
  q.has_threshold = 0;
  q.with_payload = 0;
  q.with_vector = 1;
  q.filter = nullptr;
  EXPECT_TRUE(SameJson("{\"vector\":[0.5,0.25],\"filter\":" + WithDiode("") +
                           ",\"limit\":10,\"offset\":20,"
                           "\"with_payload\":{\"include\":[\"memoryd\"]},\"with_vector\":true}",
                       Take("search", qdrant_json_query(&s, &q, 2, 1, &out, &len, err, sizeof err),
                            &out, &len, err)));
}

TEST_F(QdrantJsonTest, ScrollStartsAtAnOffsetWhenGiven) {
  qdrant_json_scope s = {"t1", "alice", 2, nullptr, 0, 0, nullptr};
  vs_id off = Uuid("5c56c793-69f3-4fbf-87e6-c4bf54c28c26");
  char *out = nullptr, err[256];
  size_t len = 0;
  EXPECT_TRUE(SameJson("{\"filter\":" + WithDiode("") +
                           ",\"limit\":256,\"offset\":\"5c56c793-69f3-4fbf-87e6-c4bf54c28c26\","
                           "\"with_payload\":{\"include\":[\"memoryd\"]},\"with_vector\":false}",
                       Take("scroll",
                            qdrant_json_scroll(&s, nullptr, 256, &off, QDRANT_JSON_PAYLOAD_META, 0,
                                               &out, &len, err, sizeof err),
                            &out, &len, err)));
  EXPECT_TRUE(
      SameJson("{\"filter\":" + WithDiode("{\"must\":[{\"is_empty\":{\"key\":\"payload.x\"}}]}") +
                   ",\"limit\":1,\"with_payload\":true,\"with_vector\":true}",
               Take("scroll",
                    qdrant_json_scroll(&s, Filter({IsEmpty("x")}), 1, nullptr,
                                       QDRANT_JSON_PAYLOAD_ALL, 1, &out, &len, err, sizeof err),
                    &out, &len, err)));
  EXPECT_EQ("ERR -8: limit 0 is below 1",
            Take("x",
                 qdrant_json_scroll(&s, nullptr, 0, nullptr, QDRANT_JSON_PAYLOAD_ALL, 1, &out, &len,
                                    err, sizeof err),
                 &out, &len, err));
}

TEST_F(QdrantJsonTest, CountAndDeleteBodies) {
  qdrant_json_scope s = {"t1", "alice", 2, nullptr, 0, 0, nullptr};
  char *out = nullptr, err[256];
  size_t len = 0;
  EXPECT_TRUE(SameJson("{\"filter\":" + WithDiode("") + ",\"exact\":true}",
                       Take("count", qdrant_json_count(&s, nullptr, 1, &out, &len, err, sizeof err),
                            &out, &len, err)));
  EXPECT_TRUE(
      SameJson("{\"filter\":" + WithDiode("") + ",\"exact\":false}",
               Take("count", qdrant_json_count(&s, Filter({}), 0, &out, &len, err, sizeof err),
                    &out, &len, err)));
  vs_id ids[] = {Num(9223372036854775808ull), Uuid("5c56c793-69f3-4fbf-87e6-c4bf54c28c26")};
  std::string del =
      Take("delete", qdrant_json_delete(ids, 2, &out, &len, err, sizeof err), &out, &len, err);
  EXPECT_TRUE(
      SameJson("{\"points\":[9223372036854775808,\"5c56c793-69f3-4fbf-87e6-c4bf54c28c26\"]}", del));
  EXPECT_NE(std::string::npos, del.find("[9223372036854775808,"));
}

// ---------------------------------------------------------------------
// answers

// A record/scored point with valid metadata; extra fields spliced in.
std::string Point(const std::string& id, const std::string& extra = "",
                  const std::string& memoryd = "") {
  std::string meta = memoryd.empty()
                         ? "{\"tenant\":\"t1\",\"owner\":\"alice\",\"label\":2,\"version\":3,"
                           "\"created_us\":10,\"updated_us\":20,\"pii_kinds\":[\"email\"]}"
                         : memoryd;
  return "{\"id\":" + id + ",\"payload\":{\"payload\":{\"k\":\"v\"},\"memoryd\":" + meta + "}" +
         extra + "}";
}

std::string Ok(const std::string& result) {
  return "{\"usage\":{\"cpu\":1},\"result\":" + result + ",\"status\":\"ok\",\"time\":0.001}";
}

TEST_F(QdrantJsonTest, EnvelopeHandsOutResultAndIgnoresUnknownKeys) {
  std::string body = Ok("{\"x\":1}");
  json_t* r = nullptr;
  char err[256] = "";
  ASSERT_EQ(STATUS_OK, qdrant_json_parse_envelope(body.data(), body.size(), &r, err, sizeof err))
      << err;
  EXPECT_EQ(1, json_integer_value(json_object_get(r, "x")));
  json_decref(r);
}

TEST_F(QdrantJsonTest, EnvelopeRefusesErrorsAndOddShapes) {
  struct Case {
    std::string body;
    const char* why;
  } cases[] = {
      {"{\"status\":{\"error\":\"Wrong input: bad\\nthing\"},\"time\":0}",
       "qdrant reported an error: Wrong input: bad thing"},
      {"Forbidden", "qdrant's answer is not JSON"},
      {"{\"result\":1,\"status\":\"ok\"", "qdrant's answer is not JSON"},
      {"[1,2]", "qdrant's answer is not a JSON object"},
      {"{\"status\":\"ok\"}", "qdrant's answer has no result"},
      {"{\"status\":\"error\",\"result\":1}", "qdrant's answer has no \"ok\" status"},
      {"{\"result\":1,\"result\":2,\"status\":\"ok\"}", "qdrant's answer is not JSON"},
      {"", "qdrant's answer is not JSON"},
      {std::string("{\"result\":\"a\0b\",\"status\":\"ok\"}", 28), "qdrant's answer is not JSON"},
  };
  for (const Case& c : cases) {
    json_t* r = nullptr;
    char err[256] = "";
    EXPECT_EQ(STATUS_EINTERNAL,
              qdrant_json_parse_envelope(c.body.data(), c.body.size(), &r, err, sizeof err))
        << c.body;
    EXPECT_EQ(nullptr, r);
    EXPECT_EQ(0u, std::string(err).rfind(c.why, 0)) << c.body << " -> " << err;
  }
}

TEST_F(QdrantJsonTest, ErrorTextPrefersQdrantsMessage) {
  char out[64];
  std::string j =
      "{\"status\":{\"error\":\"Not found: Collection `x` doesn't exist!\"},\"time\":0.0}";
  qdrant_json_error_text(j.data(), j.size(), out, sizeof out);
  EXPECT_STREQ("Not found: Collection `x` doesn't exist!", out);
}

TEST_F(QdrantJsonTest, ErrorTextOfPlainBodiesIsSanitizedAndCut) {
  char out[32];
  std::string forbidden = "Invalid api-key\n";
  qdrant_json_error_text(forbidden.data(), forbidden.size(), out, sizeof out);
  EXPECT_STREQ("Invalid api-key", out);
  std::string odd("a\x01\xff\tb\0c", 7);
  qdrant_json_error_text(odd.data(), odd.size(), out, sizeof out);
  EXPECT_STREQ("a?? b?c", out);
  std::string longer(100, 'x');
  qdrant_json_error_text(longer.data(), longer.size(), out, sizeof out);
  EXPECT_EQ(std::string(28, 'x') + "...", out);
  qdrant_json_error_text("", 0, out, sizeof out);
  EXPECT_STREQ("(empty body)", out);
  qdrant_json_error_text(nullptr, 5, out, sizeof out);
  EXPECT_STREQ("(empty body)", out);
  // JSON without the error shape is shown as text.
  std::string other = "{\"detail\":\"x\"}";
  qdrant_json_error_text(other.data(), other.size(), out, sizeof out);
  EXPECT_STREQ("{\"detail\":\"x\"}", out);
  char tiny[4];
  qdrant_json_error_text(longer.data(), longer.size(), tiny, sizeof tiny);
  EXPECT_STREQ("...", tiny);
}

TEST_F(QdrantJsonTest, VersionParsesMajorMinorPatch) {
  struct Case {
    const char* body;
    int major, minor, patch;
  } cases[] = {
      {"{\"title\":\"qdrant - vector search engine\",\"version\":\"1.19.0\",\"commit\":\"abc\"}", 1,
       19, 0},
      {"{\"title\":\"qdrant\",\"version\":\"v1.9.2-dev\"}", 1, 9, 2},
      {"{\"title\":\"qdrant\",\"version\":\"1.10\"}", 1, 10, 0},
      {"{\"version\":\"2.0.1+build.5\"}", 2, 0, 1},
  };
  for (const Case& c : cases) {
    qdrant_json_version v = {};
    char err[256] = "";
    ASSERT_EQ(STATUS_OK, qdrant_json_parse_version(c.body, strlen(c.body), &v, err, sizeof err))
        << c.body << err;
    EXPECT_EQ(c.major, v.major);
    EXPECT_EQ(c.minor, v.minor);
    EXPECT_EQ(c.patch, v.patch);
  }
}

TEST_F(QdrantJsonTest, VersionRefusesWhatIsNotAVersion) {
  const char* bad[] = {"{\"title\":\"qdrant\"}",
                       "{\"version\":1.19}",
                       "{\"version\":\"abc\"}",
                       "{\"version\":\"1\"}",
                       "{\"version\":\"1.x\"}",
                       "{\"version\":\"1.2.\"}",
                       "{\"version\":\"1234567890.1.1\"}",
                       "not json",
                       "\"1.19.0\""};
  for (const char* b : bad) {
    qdrant_json_version v = {};
    char err[256] = "";
    EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_version(b, strlen(b), &v, err, sizeof err)) << b;
    EXPECT_NE('\0', err[0]);
  }
}

TEST_F(QdrantJsonTest, CollectionInfoGivesSizeAndDistance) {
  std::string body = Ok(
      "{\"status\":\"green\",\"optimizer_status\":\"ok\",\"segments_count\":1,\"points_count\":0,"
      "\"config\":{\"params\":{\"vectors\":{\"size\":384,\"distance\":\"Dot\"},\"shard_number\":1},"
      "\"hnsw_config\":{},\"optimizer_config\":{}},\"payload_schema\":{}}");
  int dims = 0, dist = 0;
  char err[256] = "";
  ASSERT_EQ(STATUS_OK,
            qdrant_json_parse_collection(body.data(), body.size(), &dims, &dist, err, sizeof err))
      << err;
  EXPECT_EQ(384, dims);
  EXPECT_EQ(VS_DOT, dist);
}

TEST_F(QdrantJsonTest, CollectionInfoRefusesForeignShapes) {
  const char* bad[] = {
      "{\"config\":{\"params\":{\"vectors\":{\"img\":{\"size\":3,\"distance\":\"Dot\"}}}}}",
      "{\"config\":{\"params\":{\"vectors\":{\"size\":3,\"distance\":\"Manhattan\"}}}}",
      "{\"config\":{\"params\":{\"vectors\":{\"size\":0,\"distance\":\"Dot\"}}}}",
      "{\"config\":{\"params\":{\"vectors\":{\"size\":\"3\",\"distance\":\"Dot\"}}}}",
      "{\"config\":{\"params\":{}}}",
      "[]",
  };
  for (const char* b : bad) {
    std::string body = Ok(b);
    int dims = 0, dist = 0;
    char err[256] = "";
    EXPECT_EQ(STATUS_EINTERNAL,
              qdrant_json_parse_collection(body.data(), body.size(), &dims, &dist, err, sizeof err))
        << b;
    EXPECT_NE('\0', err[0]);
  }
}

TEST_F(QdrantJsonTest, BoolUpdateAndCountResults) {
  char err[256] = "";
  int v = -1;
  std::string t = Ok("true"), f = Ok("false"), n = Ok("1");
  EXPECT_EQ(STATUS_OK, qdrant_json_parse_bool(t.data(), t.size(), &v, err, sizeof err));
  EXPECT_EQ(1, v);
  EXPECT_EQ(STATUS_OK, qdrant_json_parse_bool(f.data(), f.size(), &v, err, sizeof err));
  EXPECT_EQ(0, v);
  EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_bool(n.data(), n.size(), &v, err, sizeof err));

  std::string done = Ok("{\"operation_id\":18446744073709551615,\"status\":\"completed\"}");
  std::string ack = Ok("{\"operation_id\":5,\"status\":\"acknowledged\"}");
  std::string late = Ok("{\"operation_id\":5,\"status\":\"wait_timeout\"}");
  std::string odd = Ok("{\"status\":\"exploded\"}");
  std::string none = Ok("{}");
  EXPECT_EQ(STATUS_OK, qdrant_json_parse_update(done.data(), done.size(), err, sizeof err)) << err;
  EXPECT_EQ(STATUS_OK, qdrant_json_parse_update(ack.data(), ack.size(), err, sizeof err));
  EXPECT_EQ(STATUS_ETIMEOUT, qdrant_json_parse_update(late.data(), late.size(), err, sizeof err));
  EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_update(odd.data(), odd.size(), err, sizeof err));
  EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_update(none.data(), none.size(), err, sizeof err));

  int64_t c = -1;
  std::string good = Ok("{\"count\":12}"), neg = Ok("{\"count\":-1}"),
              str = Ok("{\"count\":\"12\"}"), huge = Ok("{\"count\":18446744073709551615}");
  EXPECT_EQ(STATUS_OK, qdrant_json_parse_count(good.data(), good.size(), &c, err, sizeof err));
  EXPECT_EQ(12, c);
  EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_count(neg.data(), neg.size(), &c, err, sizeof err));
  EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_count(str.data(), str.size(), &c, err, sizeof err));
  EXPECT_EQ(STATUS_EINTERNAL,
            qdrant_json_parse_count(huge.data(), huge.size(), &c, err, sizeof err));
  EXPECT_STREQ("qdrant's count result has no count", err);
}

TEST_F(QdrantJsonTest, QueryHitsComeBackWithMetadataPayloadAndVector) {
  std::string body = Ok(
      "{\"points\":[" +
      Point("18446744073709551615", ",\"version\":3,\"score\":0.9,\"vector\":[1,0.5,-0.25]") + "," +
      Point("\"5C56C793-69F3-4FBF-87E6-C4BF54C28C26\"",
            ",\"version\":1,\"score\":0.5,\"vector\":[0,0,0]") +
      "]}");
  qdrant_json_read r = {"t1", 3, 1, 1};
  vs_hit* hits = nullptr;
  size_t n = 0;
  char err[256] = "";
  ASSERT_EQ(STATUS_OK,
            qdrant_json_parse_hits(body.data(), body.size(), &r, 0, a_, &hits, &n, err, sizeof err))
      << err;
  ASSERT_EQ(2u, n);
  EXPECT_EQ(18446744073709551615ull, hits[0].point.id.num);
  EXPECT_STREQ("", hits[0].point.id.uuid);
  EXPECT_FLOAT_EQ(0.9f, hits[0].score);
  EXPECT_EQ(-0.25f, hits[0].point.vector[2]);
  EXPECT_STREQ("alice", hits[0].point.meta.owner);
  EXPECT_EQ(2, hits[0].point.meta.label);
  EXPECT_EQ(3, hits[0].point.meta.version);
  EXPECT_EQ(10, hits[0].point.meta.create_us);
  EXPECT_EQ(20, hits[0].point.meta.update_us);
  ASSERT_EQ(1u, hits[0].point.meta.npii);
  EXPECT_STREQ("email", hits[0].point.meta.pii_kinds[0]);
  ASSERT_TRUE(json_is_object(hits[0].point.payload));
  EXPECT_STREQ("v", json_string_value(json_object_get(hits[0].point.payload, "k")));
  // The user payload only: no memoryd metadata inside it.
  EXPECT_EQ(nullptr, json_object_get(hits[0].point.payload, "memoryd"));
  EXPECT_STREQ("5c56c793-69f3-4fbf-87e6-c4bf54c28c26", hits[1].point.id.uuid);
  vs_hits_release(hits, n);
}

TEST_F(QdrantJsonTest, LegacySearchHitsAreABareList) {
  std::string body = Ok("[" + Point("7", ",\"version\":0,\"score\":3") + "]");
  qdrant_json_read r = {"t1", 3, 0, 0};
  vs_hit* hits = nullptr;
  size_t n = 0;
  char err[256] = "";
  ASSERT_EQ(STATUS_OK,
            qdrant_json_parse_hits(body.data(), body.size(), &r, 1, a_, &hits, &n, err, sizeof err))
      << err;
  ASSERT_EQ(1u, n);
  EXPECT_EQ(7u, hits[0].point.id.num);
  EXPECT_EQ(3.0f, hits[0].score);
  EXPECT_EQ(nullptr, hits[0].point.payload);
  EXPECT_EQ(nullptr, hits[0].point.vector);
  // The query shape is not a search answer, and the other way round.
  EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_hits(body.data(), body.size(), &r, 0, a_, &hits, &n,
                                                     err, sizeof err));
  EXPECT_STREQ("qdrant's query result has no list of points", err);
}

TEST_F(QdrantJsonTest, CorruptPointsFailTheWholeAnswer) {
  struct Case {
    std::string point;
    const char* why;
  } cases[] = {
      {"{\"id\":1,\"score\":1,\"payload\":{\"payload\":{}}}",
       "qdrant point 1 is corrupt: no memoryd metadata"},
      {"{\"id\":1,\"score\":1}", "qdrant point 1 is corrupt: no memoryd metadata"},
      {Point("1", ",\"score\":1",
             "{\"tenant\":\"t2\",\"owner\":\"a\",\"label\":1,\"version\":1,\"created_us\":0,"
             "\"updated_us\":0,\"pii_kinds\":[]}"),
       "qdrant point 1 is corrupt: memoryd.tenant names another tenant"},
      {Point("1", ",\"score\":1",
             "{\"tenant\":\"t1\",\"owner\":\"a\",\"label\":5,\"version\":1,\"created_us\":0,"
             "\"updated_us\":0,\"pii_kinds\":[]}"),
       "qdrant point 1 is corrupt: memoryd.label is not 1..4"},
      {Point("1", ",\"score\":1",
             "{\"tenant\":\"t1\",\"owner\":\"\",\"label\":1,\"version\":1,\"created_us\":0,"
             "\"updated_us\":0,\"pii_kinds\":[]}"),
       "qdrant point 1 is corrupt: memoryd.owner is not a string"},
      {Point("1", ",\"score\":1",
             "{\"tenant\":\"t1\",\"owner\":\"a\",\"label\":1,\"version\":0,\"created_us\":0,"
             "\"updated_us\":0,\"pii_kinds\":[]}"),
       "qdrant point 1 is corrupt: memoryd.version is not a positive integer"},
      {Point("1", ",\"score\":1",
             "{\"tenant\":\"t1\",\"owner\":\"a\",\"label\":1,\"version\":1,\"created_us\":-1,"
             "\"updated_us\":0,\"pii_kinds\":[]}"),
       "qdrant point 1 is corrupt: memoryd.created_us/updated_us are not times"},
      {Point("1", ",\"score\":1",
             "{\"tenant\":\"t1\",\"owner\":\"a\",\"label\":1,\"version\":1,\"created_us\":0,"
             "\"updated_us\":0,\"pii_kinds\":[1]}"),
       "qdrant point 1 is corrupt: memoryd.pii_kinds[0] is not a kind"},
      {Point("1", ",\"score\":1",
             "{\"tenant\":\"t1\",\"owner\":\"a\",\"label\":1,\"version\":1,\"created_us\":0,"
             "\"updated_us\":0}"),
       "qdrant point 1 is corrupt: memoryd.pii_kinds is not a list"},
      {Point("-1", ",\"score\":1"), "a point has no valid id"},
      {Point("true", ",\"score\":1"), "a point has no valid id"},
      {Point("\"not-a-uuid\"", ",\"score\":1"), "a point has no valid id"},
      {Point("1.5", ",\"score\":1"), "a point has no valid id"},
      {Point("18446744073709551616", ",\"score\":1"), "a point has no valid id"},
      {Point("1", ",\"score\":\"high\",\"vector\":[1,2,3]"), "a qdrant hit has no valid score"},
      {Point("1", ",\"score\":1e300,\"vector\":[1,2,3]"), "a qdrant hit has no valid score"},
      {Point("1", ",\"vector\":[1,2,3]"), "a qdrant hit has no valid score"},
      {Point("1", ",\"score\":1,\"vector\":[1,2]"),
       "qdrant point 1 has 2 vector components, not 3"},
      {Point("1", ",\"score\":1,\"vector\":{\"a\":[1,2,3]}"),
       "qdrant point 1 has no (unnamed) vector"},
      {Point("1", ",\"score\":1,\"vector\":[1,\"2\",3]"),
       "qdrant point 1: vector component 1 is not a float"},
      {Point("1", ",\"score\":1,\"vector\":[1,1e39,3]"),
       "qdrant point 1: vector component 1 is not a float"},
      {"{\"id\":1,\"score\":1,\"vector\":[1,2,3],\"payload\":{\"payload\":[],\"memoryd\":{"
       "\"tenant\":\"t1\",\"owner\":\"a\",\"label\":1,\"version\":1,\"created_us\":0,\"updated_"
       "us\":0,\"pii_kinds\":[]}}}",
       "qdrant point 1 is corrupt: no payload object"},
      {"3", "a point is not an object"},
  };
  qdrant_json_read r = {"t1", 3, 1, 1};
  for (const Case& c : cases) {
    // A good point first: its payload reference must be dropped too.
    std::string body =
        Ok("{\"points\":[" + Point("9", ",\"score\":1,\"vector\":[1,2,3]") + "," + c.point + "]}");
    vs_hit* hits = nullptr;
    size_t n = 7;
    char err[256] = "";
    EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_hits(body.data(), body.size(), &r, 0, a_, &hits,
                                                       &n, err, sizeof err))
        << c.point;
    EXPECT_EQ(nullptr, hits);
    EXPECT_EQ(0u, n);
    EXPECT_EQ(0u, std::string(err).rfind(c.why, 0)) << c.point << " -> " << err;
  }
}

TEST_F(QdrantJsonTest, RetrievedRecordsAreABareList) {
  std::string body =
      Ok("[" + Point("1") + "," + Point("\"00000000-0000-0000-0000-00000000000A\"") + "]");
  qdrant_json_read r = {"t1", 3, 0, 0};
  vs_point* pts = nullptr;
  size_t n = 0;
  char err[256] = "";
  ASSERT_EQ(STATUS_OK, qdrant_json_parse_records(body.data(), body.size(), &r, 0, a_, &pts, &n,
                                                 nullptr, nullptr, err, sizeof err))
      << err;
  ASSERT_EQ(2u, n);
  EXPECT_EQ(1u, pts[0].id.num);
  EXPECT_STREQ("00000000-0000-0000-0000-00000000000a", pts[1].id.uuid);
  EXPECT_EQ(nullptr, pts[0].payload);
  vs_points_release(pts, n);
}

TEST_F(QdrantJsonTest, ScrollGivesTheNextPageOffset) {
  qdrant_json_read r = {"t1", 3, 1, 0};
  struct Case {
    std::string next;
    int has;
    vs_id want;
  } cases[] = {
      {",\"next_page_offset\":18446744073709551615", 1, Num(18446744073709551615ull)},
      {",\"next_page_offset\":\"5C56C793-69F3-4FBF-87E6-C4BF54C28C26\"", 1,
       Uuid("5c56c793-69f3-4fbf-87e6-c4bf54c28c26")},
      {",\"next_page_offset\":null", 0, {}},
      {"", 0, {}},
  };
  for (const Case& c : cases) {
    std::string body = Ok("{\"points\":[" + Point("3") + "]" + c.next + "}");
    vs_point* pts = nullptr;
    size_t n = 0;
    vs_id next = {};
    int has = -1;
    char err[256] = "";
    ASSERT_EQ(STATUS_OK, qdrant_json_parse_records(body.data(), body.size(), &r, 1, a_, &pts, &n,
                                                   &next, &has, err, sizeof err))
        << err;
    ASSERT_EQ(1u, n);
    EXPECT_STREQ("v", json_string_value(json_object_get(pts[0].payload, "k")));
    EXPECT_EQ(c.has, has) << c.next;
    if (c.has) {
      EXPECT_EQ(0, vs_id_cmp(&c.want, &next)) << c.next;
    }
    vs_points_release(pts, n);
  }
  std::string bad = Ok("{\"points\":[],\"next_page_offset\":[1]}");
  vs_point* pts = nullptr;
  size_t n = 0;
  char err[256] = "";
  EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_records(bad.data(), bad.size(), &r, 1, a_, &pts, &n,
                                                        nullptr, nullptr, err, sizeof err));
  EXPECT_STREQ("qdrant's next_page_offset is not a point id", err);
  std::string flat = Ok("[]");
  EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_records(flat.data(), flat.size(), &r, 1, a_, &pts,
                                                        &n, nullptr, nullptr, err, sizeof err));
  EXPECT_STREQ("qdrant's scroll result has no list of points", err);
}

TEST_F(QdrantJsonTest, IdsParseFromIntegersUuidsAndDecimalStrings) {
  struct Case {
    const char* json;
    int ok;
    vs_id want;
  } cases[] = {
      {"0", 1, Num(0)},
      {"9223372036854775807", 1, Num(9223372036854775807ull)},
      {"\"18446744073709551615\"", 1, Num(18446744073709551615ull)},
      {"\"5C56C793-69F3-4FBF-87E6-C4BF54C28C26\"", 1, Uuid("5c56c793-69f3-4fbf-87e6-c4bf54c28c26")},
      {"-1", 0, {}},
      {"\"18446744073709551616\"", 0, {}},
      {"\"007\"", 0, {}},
      {"\"\"", 0, {}},
      {"1.0", 0, {}},
      {"null", 0, {}},
      {"\"5c56c79369f34fbf87e6c4bf54c28c26\"", 0, {}},
  };
  for (const Case& c : cases) {
    json_t* j = json_loads(c.json, JSON_DECODE_ANY, nullptr);
    ASSERT_NE(nullptr, j) << c.json;
    vs_id id;
    EXPECT_EQ(c.ok ? 0 : -1, qdrant_json_parse_id(j, &id)) << c.json;
    if (c.ok) {
      EXPECT_EQ(0, vs_id_cmp(&c.want, &id)) << c.json;
    }
    json_decref(j);
  }
}

TEST_F(QdrantJsonTest, BigIntegersInsidePayloadsBecomeReals) {
  std::string body =
      Ok("[" +
         std::string(
             "{\"id\":18446744073709551615,\"payload\":{\"payload\":{\"n\":18446744073709551616,"
             "\"m\":-9223372036854775809,\"ok\":9223372036854775807},\"memoryd\":"
             "{\"tenant\":\"t1\",\"owner\":\"alice\",\"label\":2,\"version\":3,"
             "\"created_us\":10,\"updated_us\":20,\"pii_kinds\":[]}}}") +
         "]");
  qdrant_json_read r = {"t1", 3, 1, 0};
  vs_point* pts = nullptr;
  size_t n = 0;
  char err[256] = "";
  ASSERT_EQ(STATUS_OK, qdrant_json_parse_records(body.data(), body.size(), &r, 0, a_, &pts, &n,
                                                 nullptr, nullptr, err, sizeof err))
      << err;
  ASSERT_EQ(1u, n);
  EXPECT_EQ(18446744073709551615ull, pts[0].id.num);
  json_t* p = pts[0].payload;
  EXPECT_TRUE(json_is_real(json_object_get(p, "n")));
  EXPECT_EQ(18446744073709551616.0, json_real_value(json_object_get(p, "n")));
  EXPECT_EQ(-9223372036854775809.0, json_real_value(json_object_get(p, "m")));
  EXPECT_EQ(INT64_MAX, json_integer_value(json_object_get(p, "ok")));
  vs_points_release(pts, n);
}

TEST_F(QdrantJsonTest, AnswersNestedTooDeepAreRefusedBeforeParsing) {
  std::string deep =
      std::string(QDRANT_JSON_MAX_DEPTH + 1, '[') + std::string(QDRANT_JSON_MAX_DEPTH + 1, ']');
  json_t* j = nullptr;
  char err[256] = "";
  EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_load(deep.data(), deep.size(), &j, err, sizeof err));
  EXPECT_STREQ("qdrant's answer nests deeper than 128 levels", err);
  std::string ok =
      std::string(QDRANT_JSON_MAX_DEPTH, '[') + std::string(QDRANT_JSON_MAX_DEPTH, ']');
  ASSERT_EQ(STATUS_OK, qdrant_json_load(ok.data(), ok.size(), &j, err, sizeof err)) << err;
  json_decref(j);
  // Brackets inside strings do not count.
  std::string quoted = "{\"s\":\"" + std::string(1000, '[') + "\"}";
  ASSERT_EQ(STATUS_OK, qdrant_json_load(quoted.data(), quoted.size(), &j, err, sizeof err)) << err;
  json_decref(j);
}

TEST_F(QdrantJsonTest, EveryTruncationOfAGoodAnswerFailsCleanly) {
  std::string body =
      Ok("{\"points\":[" + Point("18446744073709551615", ",\"score\":0.5,\"vector\":[1,2,3]") +
         "],\"next_page_offset\":\"5c56c793-69f3-4fbf-87e6-c4bf54c28c26\"}");
  qdrant_json_read r = {"t1", 3, 1, 1};
  for (size_t cut = 0; cut < body.size(); cut++) {
    // Exact-size heap copies, so ASan sees any read past the end.
    char* b = static_cast<char*>(malloc(cut ? cut : 1));
    memcpy(b, body.data(), cut);
    vs_hit* hits = nullptr;
    vs_point* pts = nullptr;
    size_t n = 0;
    char err[256] = "";
    EXPECT_EQ(STATUS_EINTERNAL,
              qdrant_json_parse_hits(b, cut, &r, 0, a_, &hits, &n, err, sizeof err))
        << cut;
    EXPECT_NE('\0', err[0]);
    EXPECT_EQ(STATUS_EINTERNAL, qdrant_json_parse_records(b, cut, &r, 1, a_, &pts, &n, nullptr,
                                                          nullptr, err, sizeof err));
    free(b);
  }
  vs_hit* hits = nullptr;
  size_t n = 0;
  char err[256] = "";
  ASSERT_EQ(STATUS_OK,
            qdrant_json_parse_hits(body.data(), body.size(), &r, 0, a_, &hits, &n, err, sizeof err))
      << err;
  vs_hits_release(hits, n);
}

TEST_F(QdrantJsonTest, DistanceNamesGoBothWays) {
  for (int d : {VS_COSINE, VS_DOT, VS_EUCLID})
    EXPECT_EQ(d, qdrant_json_distance_parse(qdrant_json_distance_name(d)));
  EXPECT_EQ(nullptr, qdrant_json_distance_name(0));
  EXPECT_EQ(0, qdrant_json_distance_parse("Manhattan"));
  EXPECT_EQ(0, qdrant_json_distance_parse("cosine"));
  EXPECT_EQ(0, qdrant_json_distance_parse(nullptr));
}

}  // namespace
