// client_test_support: a suite-wide memoryd, a closed port, running binaries.
#include "tests/clients/client_test_support.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace client_test {

TestMemoryd::TestMemoryd(const std::vector<std::string>& extra) {
  if (!db_.ok()) {
    error_ = db_.error();
    return;
  }
  std::vector<std::string> args = {"--pg-url=" + db_.url(), "--shutdown-grace=2"};
  if (!TestRedisUrl().empty()) args.push_back("--redis-url=" + TestRedisUrl());
  args.insert(args.end(), extra.begin(), extra.end());
  process_ = std::make_unique<MemorydProcess>(args);
  if (!process_->Start()) {
    error_ = "memoryd did not start:\n" + process_->Log();
    return;
  }
  ok_ = true;
}

TestMemoryd::~TestMemoryd() {
  // Stop before the database is dropped (members die after this body).
  Stop();
}

int TestMemoryd::Stop() {
  if (process_ && ok_ && !stopped_) {
    stopped_ = true;
    exit_code_ = process_->Stop(SIGTERM, 10000);
  }
  return exit_code_;
}

int TestMemoryd::port() const { return process_ ? process_->port() : 0; }

std::string TestMemoryd::address() const { return "127.0.0.1:" + std::to_string(port()); }

std::string TestMemoryd::Log() { return process_ ? process_->Log() : ""; }

std::string Runfile(const std::string& path) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  if (srcdir && ws) return std::string(srcdir) + "/" + ws + "/" + path;
  return path;
}

CommandResult Run(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  CommandResult r;
  if (argv.empty()) return r;
  // argv and the environment are built before fork: the test process runs
  // gRPC threads, so the child may only call async-signal-safe functions.
  std::vector<char*> args;
  for (const auto& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  for (char** e = environ; *e; e++) {
    // An entry of env replaces the inherited variable of the same name.
    const char* eq = strchr(*e, '=');
    size_t name_len = eq ? static_cast<size_t>(eq - *e) + 1 : strlen(*e);
    bool replaced = false;
    for (const auto& mine : env)
      if (mine.compare(0, name_len, *e, name_len) == 0) replaced = true;
    if (!replaced) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return r;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) == pid && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

std::string TestMemoryd::Token(const std::string& scope) {
  TestClaims c;
  c.tenant = "clients";
  c.sub = "client-test";
  c.scope = scope;
  return process_ && process_->keys() ? process_->keys()->Mint(c) : "";
}

}  // namespace client_test
