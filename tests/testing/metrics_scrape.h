// metrics_scrape: reading memoryd's Prometheus /metrics in tests: the
// listener's port from the start-up log, a raw HTTP/1.0 exchange, one
// sample's value.
#ifndef MEMORYD_TESTS_TESTING_METRICS_SCRAPE_H
#define MEMORYD_TESTS_TESTING_METRICS_SCRAPE_H

#include <string>

// The port of the log line {"msg":"metrics serving",...,"port":N}; 0 when
// there is none.
int MetricsPortFromLog(const std::string& log);

// One HTTP/1.0 request to 127.0.0.1:port: the whole answer (status line,
// headers, body), "" when nothing answers.
std::string HttpExchange(int port, const std::string& request);

// The body of an answer from HttpExchange.
std::string HttpBody(const std::string& response);

// GET /metrics: the exposition text.
std::string ScrapeMetrics(int port);

// The value of the sample whose name and labels are exactly series
// ("memoryd_x_total{a=\"b\"}"); -1 when absent.
double MetricSample(const std::string& text, const std::string& series);

#endif
