// nginx_balancer: fork/exec of /usr/sbin/nginx; see nginx_balancer.h.
#include "tests/testing/nginx_balancer.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/testing/ports.h"

namespace {

const char kBinary[] = "/usr/sbin/nginx";

bool Accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

}  // namespace

NginxBalancer::NginxBalancer(const std::vector<int>& upstream_ports) {
  if (access(kBinary, X_OK) != 0) {
    error_ = std::string(kBinary) + " is missing (scripts/install-deps.sh installs nginx)";
    return;
  }
  const char* tmp = getenv("TEST_TMPDIR");
  char templ[512];
  snprintf(templ, sizeof templ, "%s/nginx-XXXXXX", tmp ? tmp : "/tmp");
  if (!mkdtemp(templ)) {
    error_ = std::string("mkdtemp: ") + strerror(errno);
    return;
  }
  dir_ = templ;
  port_ = FreePort();
  std::ostringstream conf;
  // One process in the foreground, every path in dir_. The upstream is
  // round-robin (nginx's default); a replica that refuses connections is
  // skipped for the next (grpc_next_upstream error timeout, the default).
  conf << "daemon off;\nmaster_process off;\nworker_rlimit_nofile 4096;\n"
       << "error_log " << dir_ << "/error.log warn;\npid " << dir_ << "/nginx.pid;\n"
       << "events { worker_connections 2048; }\n"
       << "http {\n  access_log off;\n"
       << "  client_body_temp_path " << dir_ << "/body;\n"
       << "  proxy_temp_path " << dir_ << "/proxy;\n"
       << "  fastcgi_temp_path " << dir_ << "/fastcgi;\n"
       << "  uwsgi_temp_path " << dir_ << "/uwsgi;\n"
       << "  scgi_temp_path " << dir_ << "/scgi;\n"
       << "  upstream memoryd {\n";
  for (int p : upstream_ports) conf << "    server 127.0.0.1:" << p << " max_fails=0;\n";
  // keepalive_requests: nginx ends a connection (client's or upstream's)
  // with GOAWAY after that many calls (1000 by default), failing the calls
  // in flight on it: a balancer's artefact, not memoryd's.
  conf << "    keepalive 64;\n    keepalive_requests 1000000;\n  }\n"
       << "  server {\n    listen 127.0.0.1:" << port_ << " http2;\n"
       << "    keepalive_requests 1000000;\n"
       << "    location / {\n      grpc_pass grpc://memoryd;\n"
       << "      grpc_read_timeout 300s;\n      grpc_send_timeout 300s;\n"
       << "      grpc_socket_keepalive on;\n    }\n  }\n}\n";
  std::ofstream(dir_ + "/nginx.conf") << conf.str();
  pid_ = fork();
  if (pid_ < 0) {
    error_ = std::string("fork: ") + strerror(errno);
    return;
  }
  if (pid_ == 0) {
    std::string c = dir_ + "/nginx.conf";
    execl(kBinary, kBinary, "-p", dir_.c_str(), "-c", c.c_str(), "-e",
          (dir_ + "/error.log").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (Accepts(port_)) {
      ok_ = true;
      return;
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      error_ = "nginx exited at start: " + ErrorLog();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  error_ = "nginx did not listen within 10 s: " + ErrorLog();
}

NginxBalancer::~NginxBalancer() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status;
    waitpid(pid_, &status, 0);
  }
}

std::string NginxBalancer::ErrorLog() const {
  std::ifstream in(dir_ + "/error.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
