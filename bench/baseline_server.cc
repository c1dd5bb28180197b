// baseline_server: the grpc++ reference point for memoryd's benchmarks. It
// answers grpc.health.v1.Health/Check with SERVING (for the server as a whole,
// service "") as fast as grpc++ 1.51 allows; Watch answers UNIMPLEMENTED, which
// the health protocol allows.
//
// Two implementations, chosen by --api: "async" (the default; --threads
// completion queues with one polling thread each, one per core unless told)
// and "callback" (CallbackService + DefaultReactor, threads managed by grpc++).
// With the load generator on the same 2-core machine, async with --threads 1
// measured fastest (bench/README.md), so bench/run.sh uses that.
// SIGINT/SIGTERM shut it down cleanly.

#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"

namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// Requests posted per completion queue in the async API: each accepted call
// re-posts one at once, the spares absorb bursts of new streams.
constexpr int kPostedPerCq = 16;

// Whole-server health plus the Health service itself, as grpc++'s default
// health service and memoryd do; anything else is NOT_FOUND.
grpc::Status FillCheck(const HealthCheckRequest& req, HealthCheckResponse* resp) {
  const std::string& svc = req.service();
  if (!svc.empty() && svc != "grpc.health.v1.Health")
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
  resp->set_status(HealthCheckResponse::SERVING);
  return grpc::Status::OK;
}

// ---- callback API -----------------------------------------------------------

class CallbackHealth final : public Health::CallbackService {
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx, const HealthCheckRequest* req,
                                  HealthCheckResponse* resp) override {
    // The context's default reactor avoids allocating one per call.
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(FillCheck(*req, resp));
    return reactor;
  }
};

// ---- async API --------------------------------------------------------------

using AsyncHealth = Health::AsyncService;

// A tag on a completion queue; Proceed owns deleting itself.
class Tag {
 public:
  virtual ~Tag() = default;
  virtual void Proceed(bool ok) = 0;
};

class CheckCall final : public Tag {
 public:
  CheckCall(AsyncHealth* svc, grpc::ServerCompletionQueue* cq)
      : svc_(svc), cq_(cq), writer_(&ctx_) {
    svc_->RequestCheck(&ctx_, &req_, &writer_, cq_, cq_, this);
  }

  void Proceed(bool ok) override {
    if (finishing_ || !ok) {  // sent, or the server is shutting down
      delete this;
      return;
    }
    new CheckCall(svc_, cq_);
    finishing_ = true;
    grpc::Status st = FillCheck(req_, &resp_);
    if (st.ok())
      writer_.Finish(resp_, st, this);
    else
      writer_.FinishWithError(st, this);
  }

 private:
  AsyncHealth* svc_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext ctx_;
  HealthCheckRequest req_;
  HealthCheckResponse resp_;
  grpc::ServerAsyncResponseWriter<HealthCheckResponse> writer_;
  bool finishing_ = false;
};

// An async method nobody requests would leave its calls queued until their
// deadline, so Watch is requested too and refused like a callback service's.
class WatchCall final : public Tag {
 public:
  WatchCall(AsyncHealth* svc, grpc::ServerCompletionQueue* cq)
      : svc_(svc), cq_(cq), writer_(&ctx_) {
    svc_->RequestWatch(&ctx_, &req_, &writer_, cq_, cq_, this);
  }

  void Proceed(bool ok) override {
    if (finishing_ || !ok) {
      delete this;
      return;
    }
    new WatchCall(svc_, cq_);
    finishing_ = true;
    writer_.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""), this);
  }

 private:
  AsyncHealth* svc_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext ctx_;
  HealthCheckRequest req_;
  grpc::ServerAsyncWriter<HealthCheckResponse> writer_;
  bool finishing_ = false;
};

void PollCq(grpc::ServerCompletionQueue* cq) {
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
}

// ---- flags and main ---------------------------------------------------------

struct Flags {
  std::string listen = "127.0.0.1:50061";
  std::string api = "async";
  int threads = 0;  // 0: one per core
};

void Usage(FILE* f) {
  std::fprintf(f,
               "usage: baseline_server [--listen ADDR] [--threads N] [--api async|callback]\n"
               "\n"
               "grpc++ reference server for memoryd benchmarks: answers\n"
               "grpc.health.v1.Health/Check with SERVING (service \"\" or\n"
               "\"grpc.health.v1.Health\"; others NOT_FOUND), Watch with UNIMPLEMENTED.\n"
               "\n"
               "  --listen ADDR   address to listen on, insecure (default 127.0.0.1:50061)\n"
               "  --threads N     async API: completion queues = polling threads\n"
               "                  (default: number of cores); ignored by --api callback,\n"
               "                  whose threads grpc++ manages\n"
               "  --api KIND      async (default, measured fastest) or callback\n"
               "  --help          this text\n"
               "\n"
               "SIGINT/SIGTERM: stop accepting, finish in-flight calls (1 s grace), exit 0.\n");
}

// Accepts --flag VALUE and --flag=VALUE. Returns 0 ok, 1 after --help, -1 bad.
int ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i], val;
    if (a == "--help" || a == "-h") {
      Usage(stdout);
      return 1;
    }
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (i + 1 < argc) {
      val = argv[++i];
    } else {
      std::fprintf(stderr, "baseline_server: %s needs a value\n", a.c_str());
      return -1;
    }
    if (a == "--listen") {
      f->listen = val;
    } else if (a == "--api" && (val == "async" || val == "callback")) {
      f->api = val;
    } else if (a == "--threads") {
      char* end;
      long n = std::strtol(val.c_str(), &end, 10);
      if (*end || n < 1 || n > 256) {
        std::fprintf(stderr, "baseline_server: --threads wants 1..256\n");
        return -1;
      }
      f->threads = static_cast<int>(n);
    } else {
      std::fprintf(stderr, "baseline_server: bad flag %s %s (try --help)\n", a.c_str(),
                   val.c_str());
      return -1;
    }
  }
  return 0;
}

int Serve(const Flags& f, const sigset_t& sigs) {
  bool async = f.api == "async";
  int nthreads = f.threads;
  if (nthreads == 0) nthreads = std::max(1u, std::thread::hardware_concurrency());

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(f.listen, grpc::InsecureServerCredentials(), &port);
  CallbackHealth cb_service;
  AsyncHealth async_service;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
  if (async) {
    builder.RegisterService(&async_service);
    for (int i = 0; i < nthreads; i++) cqs.push_back(builder.AddCompletionQueue());
  } else {
    builder.RegisterService(&cb_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "baseline_server: cannot listen on %s\n", f.listen.c_str());
    // Queues from AddCompletionQueue must still be shut down and drained.
    for (auto& cq : cqs) {
      cq->Shutdown();
      PollCq(cq.get());
    }
    return 1;
  }

  std::vector<std::thread> pollers;
  for (auto& cq : cqs) {
    for (int i = 0; i < kPostedPerCq; i++) new CheckCall(&async_service, cq.get());
    new WatchCall(&async_service, cq.get());
    pollers.emplace_back(PollCq, cq.get());
  }
  std::fprintf(stderr, "baseline_server: listening on %s (api=%s, threads=%s)\n", f.listen.c_str(),
               f.api.c_str(), async ? std::to_string(nthreads).c_str() : "grpc++");

  int sig = 0;
  sigwait(&sigs, &sig);
  std::fprintf(stderr, "baseline_server: signal %d, shutting down\n", sig);
  // In-flight calls get a second; then the core cancels them.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  // Queues only after the server (grpc++ rule); pollers drain them and delete
  // every still-posted call object, then return.
  for (auto& cq : cqs) cq->Shutdown();
  for (auto& t : pollers) t.join();
  server.reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  int rc = ParseFlags(argc, argv, &flags);
  if (rc != 0) return rc > 0 ? 0 : 2;
  // Blocked before grpc++ starts threads so they inherit the mask and only
  // sigwait in Serve sees the signals: no async-signal-safety concerns.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  return Serve(flags, sigs);
}
