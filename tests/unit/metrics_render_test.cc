// The metrics registry and exposition helpers (service/metrics): histogram
// buckets (an observation on a bound counts in that bucket, cumulative on
// output), label escaping, collectors in registration order.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

extern "C" {
#include "service/metrics/metrics.h"
}

namespace {

std::string Render() {
  size_t len = 0;
  char* text = metrics_render(&len);
  std::string s(text, len);
  free(text);
  return s;
}

void CollectHistogram(strbuf* out, void* arg) {
  metrics_family(out, "t_seconds", "histogram", "A test histogram.");
  metrics_sample_histogram(out, "t_seconds", "m=\"x\"", static_cast<metrics_histogram*>(arg));
}

void CollectCounter(strbuf* out, void* arg) {
  strbuf labels = {};
  strbuf_puts(&labels, "v=\"");
  metrics_label_value(&labels, static_cast<const char*>(arg));
  strbuf_puts(&labels, "\"");
  metrics_family(out, "t_total", "counter", "A test counter.");
  metrics_sample_u64(out, "t_total", labels.p, 7);
  strbuf_free(&labels);
}

TEST(MetricsRender, HistogramBucketsAreCumulativeAndBoundsInclusive) {
  metrics_reset_collectors();
  metrics_histogram h = {};
  metrics_observe_us(&h, 100);       // exactly the first bound (0.0001 s)
  metrics_observe_us(&h, 101);       // just above it
  metrics_observe_us(&h, 3000000);   // 3 s: the 10 s bucket
  metrics_observe_us(&h, 60000000);  // a minute: only +Inf
  ASSERT_EQ(0, metrics_add_collector(CollectHistogram, &h));
  std::string text = Render();
  EXPECT_NE(std::string::npos, text.find("# TYPE t_seconds histogram\n")) << text;
  EXPECT_NE(std::string::npos, text.find("t_seconds_bucket{m=\"x\",le=\"0.0001\"} 1\n")) << text;
  EXPECT_NE(std::string::npos, text.find("t_seconds_bucket{m=\"x\",le=\"0.00025\"} 2\n")) << text;
  EXPECT_NE(std::string::npos, text.find("t_seconds_bucket{m=\"x\",le=\"2.5\"} 2\n")) << text;
  EXPECT_NE(std::string::npos, text.find("t_seconds_bucket{m=\"x\",le=\"10\"} 3\n")) << text;
  EXPECT_NE(std::string::npos, text.find("t_seconds_bucket{m=\"x\",le=\"+Inf\"} 4\n")) << text;
  EXPECT_NE(std::string::npos, text.find("t_seconds_count{m=\"x\"} 4\n")) << text;
  EXPECT_NE(std::string::npos, text.find("t_seconds_sum{m=\"x\"} 63.000201\n")) << text;
  metrics_reset_collectors();
  EXPECT_EQ("", Render());
}

TEST(MetricsRender, LabelValuesAreEscapedAndCollectorsKeepTheirOrder) {
  metrics_reset_collectors();
  metrics_histogram h = {};
  const char* value = "a\"b\\c\nd";
  ASSERT_EQ(0, metrics_add_collector(CollectCounter, const_cast<char*>(value)));
  ASSERT_EQ(0, metrics_add_collector(CollectHistogram, &h));
  std::string text = Render();
  EXPECT_NE(std::string::npos, text.find("t_total{v=\"a\\\"b\\\\c\\nd\"} 7\n")) << text;
  EXPECT_LT(text.find("t_total"), text.find("t_seconds")) << text;
  metrics_reset_collectors();
}

}  // namespace
