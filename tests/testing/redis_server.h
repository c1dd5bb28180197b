// redis_server: a private redis-server for one test, on a free loopback
// port with nothing persisted, which the test may stop (kill) and start
// again to simulate a Redis outage. Tests that do not need to kill Redis
// use the shared server `make test` starts (TestRedisUrl()).
#ifndef MEMORYD_TESTS_TESTING_REDIS_SERVER_H
#define MEMORYD_TESTS_TESTING_REDIS_SERVER_H

#include <sys/types.h>

#include <string>

class RedisServer {
 public:
  RedisServer();   // starts it; check ok() and error()
  ~RedisServer();  // stops it
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  bool running() const { return pid_ > 0; }

  bool Stop();   // SIGKILL (an outage, not a shutdown) and reap
  bool Start();  // again on the same port; waits until it answers PING
  // SIGSTOP: connections are accepted, nothing is answered (a hung
  // Redis); Thaw (SIGCONT) lets it go on. Stop thaws first.
  bool Freeze();
  bool Thaw();

 private:
  bool Ping() const;
  int port_ = 0;
  pid_t pid_ = -1;
  bool ok_ = false;
  std::string error_;
};

#endif
