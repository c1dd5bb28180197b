// memoryd::PrepareCall: what every call of the C++ helpers (Board, Memory)
// carries: the capability token and, for calls with one response, a
// deadline.
#ifndef MEMORYD_CLIENTS_CPP_CALL_H
#define MEMORYD_CLIENTS_CPP_CALL_H

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

namespace memoryd {

// Adds `authorization: Bearer token` (unless token is empty) and, when
// timeout is positive, a deadline of now + timeout.
inline void PrepareCall(grpc::ClientContext* ctx, const std::string& token,
                        std::chrono::milliseconds timeout) {
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  if (timeout.count() > 0) ctx->set_deadline(std::chrono::system_clock::now() + timeout);
}

}  // namespace memoryd

#endif
