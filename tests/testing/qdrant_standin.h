// qdrant_standin: runs the Qdrant contract stand-in
// (tests/contract/qdrant_contract_server.py: checks every request against
// Qdrant's published OpenAPI spec and answers like Qdrant, in memory) for
// one test, on a free loopback port, and talks to its control endpoints:
// recorded spec violations, injected faults, the request log. It is a
// contract stand-in, not Qdrant.
#ifndef MEMORYD_TESTS_TESTING_QDRANT_STANDIN_H
#define MEMORYD_TESTS_TESTING_QDRANT_STANDIN_H

#include <sys/types.h>

#include <string>

class QdrantStandin {
 public:
  QdrantStandin() = default;
  ~QdrantStandin();  // stops it
  QdrantStandin(const QdrantStandin&) = delete;
  QdrantStandin& operator=(const QdrantStandin&) = delete;

  // Starts the server posing as Qdrant `version` (below 1.10: the old
  // /points/search API), requiring `api_key` when not empty. Waits until
  // it has announced its port. False (see Log()) on failure.
  // port 0 picks a free one; pass port() to come back where it was (state
  // is not kept: a restarted stand-in has no collections).
  bool Start(const std::string& version = "1.19.0", const std::string& api_key = "", int port = 0);
  void Stop();

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string Log() const;  // what the server wrote to stderr

  // Control endpoints (outside Qdrant's API). Each returns the response
  // body, or "ERROR: ..." when the control call itself failed.
  std::string Violations();                    // a JSON list; "[]" when clean
  std::string Requests();                      // the request log, JSON
  std::string Fault(const std::string& json);  // inject a fault (see the script)
  std::string ClearFaults();
  std::string ClearRequests();
  // Any request, as a Qdrant client would send it (contract-checked): e.g.
  // a collection memoryd's catalog does not know.
  std::string Send(const std::string& method, const std::string& path,
                   const std::string& body = "") {
    return Control(method, path, body);
  }

  // Path of the script in the test's runfiles.
  static std::string ScriptPath();

 private:
  std::string Control(const std::string& method, const std::string& path,
                      const std::string& body = "");
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

#endif
