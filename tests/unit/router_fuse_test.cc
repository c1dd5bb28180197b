// router_fuse: the hybrid's reciprocal-rank fusion, on hand-computed
// examples (router.proto documents the rule).
#include <gtest/gtest.h>

extern "C" {
#include "service/router/router_fuse.h"
}

namespace {

TEST(RouterFuse, MergesPointsNamingAGraphEntityAndRanksByRrf) {
  rfuse_entity ents[] = {{"a", 0}, {"b", 0}, {"c", 0}};
  const char* names[] = {"b", nullptr, "z", "b"};
  rfuse_result out[7];
  size_t n = rfuse(ents, 3, 0, names, 4, out);
  // b = 1/62 + 1/61 (point 0 merges; point 3 names b too and adds
  // nothing); a = 1/61; p1 = 1/62; c = 1/63 before p2 = 1/63 (a tie:
  // graph first).
  ASSERT_EQ(5u, n);
  EXPECT_EQ(1, out[0].entity);
  EXPECT_EQ(0, out[0].point);
  EXPECT_DOUBLE_EQ(1.0 / 62 + 1.0 / 61, out[0].score);
  EXPECT_EQ(0, out[1].entity);
  EXPECT_EQ(-1, out[1].point);
  EXPECT_EQ(-1, out[2].entity);
  EXPECT_EQ(1, out[2].point);
  EXPECT_EQ(2, out[3].entity);
  EXPECT_EQ(2, out[4].point);
  EXPECT_DOUBLE_EQ(out[3].score, out[4].score);
}

TEST(RouterFuse, TraversalDepthBoostsNearerEntities) {
  EXPECT_DOUBLE_EQ(2.0, rfuse_graph_weight(1, 0));
  EXPECT_DOUBLE_EQ(1.5, rfuse_graph_weight(1, 1));
  EXPECT_DOUBLE_EQ(1.0, rfuse_graph_weight(0, 3));
  rfuse_entity ents[] = {{"near", 1}, {"far", 3}};
  rfuse_result out[2];
  ASSERT_EQ(2u, rfuse(ents, 2, 1, nullptr, 0, out));
  EXPECT_DOUBLE_EQ(1.5 / 61, out[0].score);
  EXPECT_DOUBLE_EQ(1.25 / 62, out[1].score);
}

TEST(RouterFuse, PointsNamingTheSameUnknownEntityMergeIntoOne) {
  const char* names[] = {"x", "x", nullptr};
  rfuse_result out[3];
  ASSERT_EQ(2u, rfuse(nullptr, 0, 0, names, 3, out));
  EXPECT_EQ(0, out[0].point);
  EXPECT_DOUBLE_EQ(1.0 / 61, out[0].score);
  EXPECT_EQ(2, out[1].point);
}

}  // namespace
