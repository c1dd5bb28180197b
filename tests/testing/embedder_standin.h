// embedder_standin: the embedder contract stand-in
// (tests/contract/embedder_contract_server.py: checks every request against
// the OpenAI embeddings API's request shape and answers in its response and
// error shapes, with deterministic vectors) for one test. It is a contract
// stand-in, not an embedding model.
#ifndef MEMORYD_TESTS_TESTING_EMBEDDER_STANDIN_H
#define MEMORYD_TESTS_TESTING_EMBEDDER_STANDIN_H

#include <string>
#include <vector>

#include "tests/testing/contract_standin.h"

class EmbedderStandin : public ContractStandin {
 public:
  // Starts the server with its models ("name=dims,name=dims"), requiring
  // `api_key` (as Authorization: Bearer) when not empty. The API's base
  // URL is url() + "/v1".
  bool Start(const std::string& models = "standin-embed-16=16", const std::string& api_key = "",
             int port = 0) {
    std::vector<std::string> args = {"--models=" + models};
    if (!api_key.empty()) args.push_back("--api-key=" + api_key);
    return StartScript("embedder_contract_server.py", port, args);
  }
  std::string base_url() const { return url() + "/v1"; }
};

#endif
