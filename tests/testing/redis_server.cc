// redis_server: fork/exec of /usr/bin/redis-server; see redis_server.h.
#include "tests/testing/redis_server.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/testing/ports.h"

namespace {

const char kBinary[] = "/usr/bin/redis-server";

}  // namespace

RedisServer::RedisServer() {
  if (access(kBinary, X_OK) != 0) {
    error_ = std::string(kBinary) + " is missing (scripts/install-deps.sh installs it)";
    return;
  }
  port_ = FreePort();
  ok_ = Start();
}

RedisServer::~RedisServer() { Stop(); }

// PING over a plain socket: the fixture needs no client library.
bool RedisServer::Ping() const {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port_));
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[16] = {0};
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
            write(fd, "PING\r\n", 6) == 6 && read(fd, buf, sizeof buf - 1) >= 5 &&
            strncmp(buf, "+PONG", 5) == 0;
  close(fd);
  return ok;
}

bool RedisServer::Start() {
  if (pid_ > 0) return true;
  std::string port = std::to_string(port_);
  pid_ = fork();
  if (pid_ < 0) {
    error_ = std::string("fork: ") + strerror(errno);
    return false;
  }
  if (pid_ == 0) {
    // Quiet, in-memory only; the test owns this server alone.
    execl(kBinary, kBinary, "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
          "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning", "--maxmemory-policy",
          "allkeys-lru", "--dir", "/tmp", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (Ping()) return true;
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      error_ = "redis-server exited at start (port " + port + " taken?)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  error_ = "redis-server did not answer PING within 10 s";
  Stop();
  return false;
}

bool RedisServer::Freeze() {
  if (pid_ <= 0 || kill(pid_, SIGSTOP) != 0) return error_ = "freeze: not running", false;
  return true;
}

bool RedisServer::Thaw() {
  if (pid_ <= 0 || kill(pid_, SIGCONT) != 0) return error_ = "thaw: not running", false;
  return true;
}

bool RedisServer::Stop() {
  if (pid_ <= 0) return true;
  kill(pid_, SIGKILL);
  int status;
  bool ok = waitpid(pid_, &status, 0) == pid_;
  if (!ok) error_ = std::string("waitpid: ") + strerror(errno);
  pid_ = -1;
  return ok;
}
