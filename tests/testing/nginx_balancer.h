// nginx_balancer: Debian's nginx as a gRPC load balancer for one test
// (grpc_pass to an upstream of memoryd replicas, round-robin), on a free
// loopback port, configured and run from a private directory in the
// foreground (no master process, nothing outside that directory).
#ifndef MEMORYD_TESTS_TESTING_NGINX_BALANCER_H
#define MEMORYD_TESTS_TESTING_NGINX_BALANCER_H

#include <sys/types.h>

#include <string>
#include <vector>

class NginxBalancer {
 public:
  // Starts nginx in front of 127.0.0.1:port for each port; check ok().
  explicit NginxBalancer(const std::vector<int>& upstream_ports);
  ~NginxBalancer();  // stops it
  NginxBalancer(const NginxBalancer&) = delete;
  NginxBalancer& operator=(const NginxBalancer&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  std::string ErrorLog() const;  // nginx's error log so far

 private:
  int port_ = 0;
  pid_t pid_ = -1;
  bool ok_ = false;
  std::string dir_, error_;
};

#endif
