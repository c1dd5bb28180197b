// qdrant_standin: the Qdrant contract stand-in
// (tests/contract/qdrant_contract_server.py: checks every request against
// Qdrant's published OpenAPI spec and answers like Qdrant, in memory) for
// one test. It is a contract stand-in, not Qdrant.
#ifndef MEMORYD_TESTS_TESTING_QDRANT_STANDIN_H
#define MEMORYD_TESTS_TESTING_QDRANT_STANDIN_H

#include <string>
#include <vector>

#include "tests/testing/contract_standin.h"

class QdrantStandin : public ContractStandin {
 public:
  // Starts the server posing as Qdrant `version` (below 1.10: the old
  // /points/search API), requiring `api_key` when not empty. Waits until
  // it has announced its port. False (see Log()) on failure.
  // port 0 picks a free one; pass port() to come back where it was (state
  // is not kept: a restarted stand-in has no collections).
  bool Start(const std::string& version = "1.19.0", const std::string& api_key = "", int port = 0) {
    std::vector<std::string> args = {"--version=" + version};
    if (!api_key.empty()) args.push_back("--api-key=" + api_key);
    return StartScript("qdrant_contract_server.py", port, args);
  }
  static std::string ScriptPath() {
    return ContractStandin::ScriptPath("qdrant_contract_server.py");
  }
};

#endif
