// contract_standin: runs one of the contract stand-ins of tests/contract/
// (HTTP servers that check every request against a published API's shapes
// and answer as that API does, for servers that cannot be installed here)
// for one test, on a free loopback port, and talks to the control
// endpoints they share: recorded contract violations, injected faults, the
// request log. QdrantStandin and EmbedderStandin name the two.
#ifndef MEMORYD_TESTS_TESTING_CONTRACT_STANDIN_H
#define MEMORYD_TESTS_TESTING_CONTRACT_STANDIN_H

#include <sys/types.h>

#include <string>
#include <vector>

class ContractStandin {
 public:
  ContractStandin() = default;
  virtual ~ContractStandin();  // stops it
  ContractStandin(const ContractStandin&) = delete;
  ContractStandin& operator=(const ContractStandin&) = delete;

  void Stop();

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string Log() const;  // what the server wrote to stderr

  // Control endpoints (outside the API). Each returns the response body,
  // or "ERROR: ..." when the control call itself failed.
  std::string Violations();                    // a JSON list; "[]" when clean
  std::string Requests();                      // the request log, JSON
  std::string Fault(const std::string& json);  // inject a fault (see the script)
  std::string ClearFaults();
  std::string ClearRequests();
  // Any request, as a client of the API would send it (contract-checked).
  std::string Send(const std::string& method, const std::string& path,
                   const std::string& body = "") {
    return Control(method, path, body);
  }

  // Path of tests/contract/<script> in the test's runfiles.
  static std::string ScriptPath(const std::string& script);

 protected:
  // Starts /usr/bin/python3 tests/contract/<script> --host=127.0.0.1
  // --port=<port> args... and waits until it has announced its port
  // (`PORT <n>` on stdout). False (see Log()) on failure. port 0 picks a
  // free one.
  bool StartScript(const std::string& script, int port, const std::vector<std::string>& args);

 private:
  std::string Control(const std::string& method, const std::string& path,
                      const std::string& body = "");
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

#endif
