// memoryd_process: fork/exec plus a reader thread on the stderr pipe.
#include "tests/testing/memoryd_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {
std::string& binary_in_runfiles() {
  static std::string path = "service/memoryd";
  return path;
}
}  // namespace

void MemorydProcess::UseBinary(const std::string& runfiles_path) {
  binary_in_runfiles() = runfiles_path;
}

std::string MemorydProcess::BinaryPath() {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  if (srcdir && ws) return std::string(srcdir) + "/" + ws + "/" + binary_in_runfiles();
  return binary_in_runfiles();
}

MemorydProcess::MemorydProcess(std::vector<std::string> args) : args_(std::move(args)) {
  for (const auto& a : args_)
    if (a.rfind("--jwks=", 0) == 0 || a == "--jwks") return;
  keys_.reset(new TestKeys());
  args_.push_back("--jwks=" + keys_->jwks_path());
  args_.push_back("--signing-key=" + keys_->signing_key_path());
}

MemorydProcess::~MemorydProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    Wait(5000);
  }
  if (reader_.joinable()) reader_.join();
}

void MemorydProcess::ReadLoop(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    std::lock_guard<std::mutex> lock(mu_);
    log_.append(buf, static_cast<size_t>(n));
  }
  close(fd);
}

std::string MemorydProcess::Log() {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

std::string MemorydProcess::LogWith(const std::string& text, int timeout_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string log = Log();
  while (log.find(text) == std::string::npos && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    log = Log();
  }
  return log;
}

void MemorydProcess::Reaped(int status) {
  exited_ = true;
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  // The pipe ends with the process: the reader sees its last lines (the
  // reason it stopped) before Log() is asked for them.
  if (reader_.joinable()) reader_.join();
  if (WIFSIGNALED(status)) {
    std::lock_guard<std::mutex> lock(mu_);
    log_ += "[test harness] memoryd died of signal " + std::to_string(WTERMSIG(status)) + " (" +
            strsignal(WTERMSIG(status)) + (WCOREDUMP(status) ? ", core dumped" : "") + ")\n";
  }
}

bool MemorydProcess::Start(int timeout_ms) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  std::string bin = BinaryPath();
  std::vector<std::string> argv_s = {bin, "--listen=127.0.0.1:0"};
  argv_s.insert(argv_s.end(), args_.begin(), args_.end());
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], 2);
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  reader_ = std::thread(&MemorydProcess::ReadLoop, this, fds[0]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string log = Log();
    size_t at = log.find("\"msg\":\"memoryd serving\"");
    if (at != std::string::npos) {
      size_t p = log.find("\"port\":", at);
      if (p != std::string::npos) {
        port_ = atoi(log.c_str() + p + 7);
        return port_ > 0;
      }
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      Reaped(status);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int MemorydProcess::Wait(int timeout_ms) {
  if (exited_) return status_;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      Reaped(status);
      return status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

int MemorydProcess::Stop(int sig, int timeout_ms) {
  if (exited_) return status_;
  kill(pid_, sig);
  return Wait(timeout_ms);
}
