#include "tests/testing/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

int MetricsPortFromLog(const std::string& log) {
  size_t line = log.find("\"msg\":\"metrics serving\"");
  if (line == std::string::npos) return 0;
  size_t at = log.find("\"port\":", line);
  return at == std::string::npos ? 0 : std::atoi(log.c_str() + at + 7);
}

std::string HttpExchange(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buf[8192];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::string HttpBody(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

std::string ScrapeMetrics(int port) {
  return HttpBody(HttpExchange(port, "GET /metrics HTTP/1.0\r\n\r\n"));
}

double MetricSample(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
}
