// contract_standin: fork/exec of a stand-in script; see contract_standin.h.
#include "tests/testing/contract_standin.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace {

const char kPython[] = "/usr/bin/python3";

}  // namespace

std::string ContractStandin::ScriptPath(const std::string& script) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  std::string rel = "tests/contract/" + script;
  if (srcdir && ws) return std::string(srcdir) + "/" + ws + "/" + rel;
  return rel;
}

ContractStandin::~ContractStandin() { Stop(); }

bool ContractStandin::StartScript(const std::string& script, int port,
                                  const std::vector<std::string>& args) {
  const char* tmp = getenv("TEST_TMPDIR");
  log_path_ = std::string(tmp ? tmp : "/tmp") + "/" + script + "-" + std::to_string(getpid()) +
              "-" + std::to_string(reinterpret_cast<uintptr_t>(this)) + ".log";
  std::vector<std::string> argv = {kPython, ScriptPath(script), "--port=" + std::to_string(port),
                                   "--host=127.0.0.1"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  int out[2];
  if (pipe(out) != 0) return false;
  pid_ = fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) dup2(log, 2);
    dup2(out[1], 1);
    close(out[0]);
    execv(kPython, cargv.data());
    _exit(127);
  }
  close(out[1]);
  // The first line of stdout is "PORT <n>".
  std::string line;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  char c;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (read(out[0], &c, 1) != 1) break;
    if (c == '\n') break;
    line += c;
  }
  close(out[0]);
  if (line.rfind("PORT ", 0) != 0) {
    Stop();
    return false;
  }
  port_ = atoi(line.c_str() + 5);
  return port_ > 0;
}

void ContractStandin::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status;
  for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; i++) usleep(20000);
  if (waitpid(pid_, &status, WNOHANG) == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

std::string ContractStandin::Log() const {
  std::ifstream f(log_path_);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// One HTTP/1.0 request over a plain socket: the fixture needs no client
// library, and the server closes the connection after the answer.
std::string ContractStandin::Control(const std::string& method, const std::string& path,
                                     const std::string& body) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "ERROR: socket";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port_));
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return "ERROR: connect";
  }
  std::string req =
      method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "ERROR: write";
  }
  std::string resp;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  size_t sep = resp.find("\r\n\r\n");
  if (sep == std::string::npos) return "ERROR: no HTTP answer";
  if (resp.compare(0, 12, "HTTP/1.0 200") != 0 && resp.compare(0, 12, "HTTP/1.1 200") != 0)
    return "ERROR: " + resp.substr(0, resp.find("\r\n"));
  return resp.substr(sep + 4);
}

std::string ContractStandin::Violations() { return Control("GET", "/__standin/violations"); }
std::string ContractStandin::Requests() { return Control("GET", "/__standin/requests"); }
std::string ContractStandin::Fault(const std::string& json) {
  return Control("POST", "/__standin/faults", json);
}
std::string ContractStandin::ClearFaults() { return Control("DELETE", "/__standin/faults"); }
std::string ContractStandin::ClearRequests() { return Control("DELETE", "/__standin/requests"); }
