// pbjson: google.protobuf.Struct <-> JSON text, the form JSON payloads are
// stored in. Pure (no servers).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

extern "C" {
#include "service/core/arena.h"
#include "service/pb/pbjson.h"
}

namespace {

TEST(PbJson, StructSurvivesJsonExactly) {
  arena* a = arena_create();
  // JSON -> Struct -> JSON -> Struct: numbers come back as the same doubles.
  const char* json =
      "{\"n\":[0.1,-2.5e-300,1e308,123456789012345678,-0.0],\"s\":\"\\u00e9\\\"\","
      "\"o\":{\"x\":null,\"t\":true}}";
  Google__Protobuf__Struct* s = nullptr;
  ASSERT_EQ(0, pbjson_to_struct(a, json, strlen(json), &s));
  char* text = nullptr;
  size_t len = 0;
  char err[256];
  ASSERT_EQ(0, pbjson_from_struct(s, "metadata", &text, &len, err, sizeof err)) << err;
  Google__Protobuf__Struct* back = nullptr;
  ASSERT_EQ(0, pbjson_to_struct(a, text, len, &back));
  free(text);
  ASSERT_EQ(3u, back->n_fields);
  const Google__Protobuf__Value* n = nullptr;
  for (size_t i = 0; i < back->n_fields; i++)
    if (strcmp(back->fields[i]->key, "n") == 0) n = back->fields[i]->value;
  ASSERT_NE(nullptr, n);
  ASSERT_EQ(5u, n->list_value->n_values);
  EXPECT_EQ(0.1, n->list_value->values[0]->number_value);
  EXPECT_EQ(-2.5e-300, n->list_value->values[1]->number_value);
  EXPECT_EQ(1e308, n->list_value->values[2]->number_value);
  EXPECT_EQ(123456789012345678.0, n->list_value->values[3]->number_value);
  EXPECT_EQ(-1, pbjson_to_struct(a, "[1]", 3, &back));
  EXPECT_EQ(-1, pbjson_to_struct(a, "{", 1, &back));
  arena_free(a);
}

}  // namespace
