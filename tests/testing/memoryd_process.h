// memoryd_process: runs the real memoryd binary for a test: picks a free
// port (--listen=127.0.0.1:0), reads the bound port from its JSON log on
// stderr, keeps the log for diagnostics, and stops it with a signal.
#ifndef MEMORYD_TESTS_TESTING_MEMORYD_PROCESS_H
#define MEMORYD_TESTS_TESTING_MEMORYD_PROCESS_H

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/test_keys.h"

class MemorydProcess {
 public:
  // args are extra flags ("--pg-url=..." etc.). Unless they include --jwks,
  // the process gets fresh test keys (keys()) as --jwks and --signing-key.
  explicit MemorydProcess(std::vector<std::string> args);
  ~MemorydProcess();  // SIGKILL if still running

  // Starts and waits up to timeout_ms for "memoryd serving". Returns false
  // (log available) if it exits or times out first.
  bool Start(int timeout_ms = 20000);
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends sig and waits up to timeout_ms; returns the exit status
  // (WEXITSTATUS) or -1 on timeout / killed by a signal.
  int Stop(int sig, int timeout_ms);
  // Waits for the process to exit by itself.
  int Wait(int timeout_ms);
  std::string Log();  // everything written to stderr so far
  // Log() once it holds text, or after timeout_ms without it: a line is
  // written as its event ends (a call's after its client heard the answer)
  // and reaches the test through a pipe, so a test that looks at once may
  // look too early.
  std::string LogWith(const std::string& text, int timeout_ms = 5000);
  // The keys the process trusts (NULL when the caller passed --jwks).
  TestKeys* keys() { return keys_.get(); }

  // Path of the memoryd binary in the test's runfiles.
  static std::string BinaryPath();
  // Runs another build of memoryd from now on (its path in the runfiles,
  // "tests/server/stub_tier/memoryd_stub": a binary with a test tier).
  static void UseBinary(const std::string& runfiles_path);

 private:
  void ReadLoop(int fd);
  // The process has exited with waitpid's status: a death by a signal is
  // added to the log, which otherwise just ends.
  void Reaped(int status);
  std::vector<std::string> args_;
  std::unique_ptr<TestKeys> keys_;
  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = -1;
  bool exited_ = false;
  std::thread reader_;
  std::mutex mu_;
  std::string log_;
};

#endif
