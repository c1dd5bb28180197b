// episodic_bench: the measuring side of the episodic benchmark
// (bench/episodic.sh). Both modes build the same data set from a fixed
// seed: N unit vectors of D dims drawn around 1000 gaussian cluster centres
// (so the top-k of a query is its own cluster's nearest points, not noise),
// and Q query vectors drawn the same way from a separate stream.
//
//   episodic_bench local [data flags] [--rounds R] [--duration S] [--warmup S]
//                        [--batch B]
//       In this process: the embedded index's raw search (episodic_index_search, what
//       memoryd runs under its read lock) vs FAISS IndexFlatIP (DOT) and
//       IndexFlatL2 (EUCLID) on the same vectors, one query at a time, one
//       thread, k best. First checks that both return the same top-k for
//       every query (recall@k of ours vs FAISS, plus the same up to ties),
//       then runs R rounds per side, raw and FAISS alternating in ABBA
//       order. --batch B > 0 adds FAISS with B queries per call (its BLAS
//       path), labelled apart: it is not a single-query figure.
//   episodic_bench server --target HOST:PORT [data flags] [--rounds R]
//                         [--duration S] [--warmup S] [--concurrency 1,4]
//                         [--upsert-batch 500]
//       Through memoryd: creates collections episodic-bench-dot (DISTANCE_DOT)
//       and episodic-bench-euclid (DISTANCE_EUCLID), upserts the N vectors in
//       batches (ids 0..N-1), times the first Search (it loads the index from
//       PostgreSQL), checks recall@k of memoryd's answers against FAISS, then
//       measures Search (limit k) in a closed loop at each concurrency for R
//       rounds, and deletes both collections. The token (episodic:*) comes
//       from $BENCH_TOKEN.
//   data flags: --vectors N [100000] --dims D [384] --queries Q [200] --k K [10]
//       --seed S [42]
//
// Output, like bench/loadgen: a human line and a JSON line per measurement
// ({"label":...,"qps":...,"p50_us":...,"p99_us":...}); the driver takes
// medians over rounds. Exit status: 0 measured; 1 bad usage or memoryd
// unreachable; 2 a memoryd call failed during set-up (status printed);
// 3 memoryd answers EpisodicMemory with UNIMPLEMENTED (not served yet).
#include <faiss/IndexFlat.h>
#include <getopt.h>
#include <grpcpp/grpcpp.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "memory/v1/episodic_memory.grpc.pb.h"

extern "C" {
#include "service/episodic/episodic_index.h"
}

namespace {

using Clock = std::chrono::steady_clock;
using FaissId = faiss::Index::idx_t;

constexpr int kClusters = 1000;
// Per-component noise around a centre whose components are N(0, 1): a
// point's cosine to its own centre is about 0.7, to a foreign one about 0.
constexpr float kNoise = 1.0f;
// Relative tolerance under which two scores count as tied: float32 sums of
// 384 products in different orders differ by ~1e-6 relative.
constexpr double kTieTolerance = 1e-5;

struct Options {
  int vectors = 100000, dims = 384, queries = 200, k = 10;
  uint64_t seed = 42;
  int rounds = 3;
  double duration = 5, warmup = 1;
  int batch = 0;
  std::string target;
  std::vector<int> concurrency{1};
  int upsert_batch = 500;
};

// ---- data ----

// splitmix64 + Box-Muller: the same stream from the same seed everywhere
// (<random>'s distributions are not specified bit for bit), so local and
// server mode, run as two processes, see identical vectors.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float Gaussian() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = ((Next() >> 11) + 0.5) * 0x1p-53, u2 = (Next() >> 11) * 0x1p-53;
    double r = std::sqrt(-2 * std::log(u1)), t = 2 * M_PI * u2;
    spare_ = static_cast<float>(r * std::sin(t));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(t));
  }

 private:
  uint64_t s_;
  float spare_ = 0;
  bool has_spare_ = false;
};

struct Dataset {
  int n, d, nq;
  std::vector<float> base;     // n * d, row i is point id i
  std::vector<float> queries;  // nq * d
  const float* Vec(int64_t i) const { return base.data() + i * d; }
  const float* Query(int64_t i) const { return queries.data() + i * d; }
};

// Unit length, as sentence-embedding models emit them: DOT then ranks like
// cosine, and DOT and EUCLID agree on the order (a cross-check for free).
void Normalize(float* v, int d) {
  double s = 0;
  for (int i = 0; i < d; i++) s += static_cast<double>(v[i]) * v[i];
  double inv = s > 0 ? 1 / std::sqrt(s) : 0;
  for (int i = 0; i < d; i++) v[i] = static_cast<float>(v[i] * inv);
}

void DrawAround(Rng* rng, const std::vector<float>& centres, int d, float* out) {
  const float* c = centres.data() + (rng->Next() % kClusters) * d;
  for (int j = 0; j < d; j++) out[j] = c[j] + kNoise * rng->Gaussian();
  Normalize(out, d);
}

Dataset MakeDataset(const Options& o) {
  Dataset ds{o.vectors, o.dims, o.queries, {}, {}};
  Rng rng(o.seed);
  std::vector<float> centres(static_cast<size_t>(kClusters) * ds.d);
  for (float& x : centres) x = rng.Gaussian();
  ds.base.resize(static_cast<size_t>(ds.n) * ds.d);
  for (int i = 0; i < ds.n; i++) DrawAround(&rng, centres, ds.d, ds.base.data() + i * ds.d);
  // Queries from their own stream: the same queries whatever N is.
  Rng qrng(o.seed ^ 0x51e7c0de51e7c0deull);
  ds.queries.resize(static_cast<size_t>(ds.nq) * ds.d);
  for (int i = 0; i < ds.nq; i++) DrawAround(&qrng, centres, ds.d, ds.queries.data() + i * ds.d);
  return ds;
}

// ---- agreement with FAISS ----

// Dot product, or squared euclidean distance, in double: the judge of ties.
double ExactScore(bool euclid, const float* a, const float* b, int d) {
  double s = 0;
  for (int i = 0; i < d; i++) {
    double x = euclid ? static_cast<double>(a[i]) - b[i] : static_cast<double>(a[i]) * b[i];
    s += euclid ? x * x : x;
  }
  return s;
}

// recall@k of one side's answers against FAISS's. A FAISS id missing from
// ours still counts "up to ties" when its exact score equals our worst
// hit's within float rounding: then either answer is right.
class Agreement {
 public:
  Agreement(const Dataset& ds, bool euclid, int k) : ds_(ds), euclid_(euclid), k_(k) {}

  void Add(int qi, const std::vector<int64_t>& ours, const std::vector<int64_t>& faiss) {
    const float* q = ds_.Query(qi);
    std::unordered_set<int64_t> mine(ours.begin(), ours.end());
    double worst = euclid_ ? -INFINITY : INFINITY;
    for (int64_t id : ours) {
      double s = ExactScore(euclid_, q, ds_.Vec(id), ds_.d);
      worst = euclid_ ? std::max(worst, s) : std::min(worst, s);
    }
    int hits = 0, ties = 0;
    for (int64_t id : faiss) {
      if (mine.count(id)) {
        hits++;
      } else if (static_cast<int>(ours.size()) == k_) {
        double s = ExactScore(euclid_, q, ds_.Vec(id), ds_.d);
        if (std::fabs(s - worst) <= kTieTolerance * std::max(1.0, std::fabs(worst))) ties++;
      }
    }
    hits_ += hits;
    ties_ += ties;
    exact_queries_ += hits == k_;
    queries_++;
  }

  void Report(const char* label, const char* vs) const {
    double denom = static_cast<double>(queries_) * k_;
    double recall = queries_ ? hits_ / denom : 0,
           with_ties = queries_ ? (hits_ + ties_) / denom : 0;
    std::printf("%s: recall@%d vs %s %.4f (%.4f up to ties), %d/%d queries identical\n", label, k_,
                vs, recall, with_ties, exact_queries_, queries_);
    std::printf(
        "{\"label\":\"%s\",\"vs\":\"%s\",\"k\":%d,\"queries\":%d,\"identical\":%d,"
        "\"recall\":%.4f,\"recall_ties\":%.4f}\n",
        label, vs, k_, queries_, exact_queries_, recall, with_ties);
    std::fflush(stdout);
  }

 private:
  const Dataset& ds_;
  bool euclid_;
  int k_;
  long hits_ = 0, ties_ = 0;
  int exact_queries_ = 0, queries_ = 0;
};

std::vector<int64_t> FaissTopK(const faiss::IndexFlat& index, const float* q, int k) {
  std::vector<float> dist(k);
  std::vector<FaissId> ids(k);
  index.search(1, q, k, dist.data(), ids.data());
  std::vector<int64_t> out;
  for (FaissId id : ids)
    if (id >= 0) out.push_back(id);
  return out;
}

// ---- measurement ----

struct Run {
  std::string label;
  int threads = 1;
  int per_call = 1;  // queries answered by one call
  double window_s = 0;
  std::vector<uint64_t> lat_ns;  // counted calls
  uint64_t errors = 0;
  std::string first_error;
};

// Calls one(thread, i) back to back (i = 0, 1, ... per thread) on `threads`
// threads for warmup + duration seconds. Calls started in the warm-up are
// not counted; a call started before the end counts whole, and the window
// runs until the last counted call completes, so qps stays exact when one
// call takes a sizeable part of a second. one returns "" or an error text.
// threads == 1 runs on the calling thread: OpenMP's thread count is a
// per-thread setting (omp_set_num_threads in main), and a lone thread
// needs no handoff.
template <class Fn>
Run ClosedLoop(const std::string& label, int threads, double warmup, double duration, Fn one) {
  Run r;
  r.label = label;
  r.threads = threads;
  auto start = Clock::now();
  auto measure =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup));
  auto end = measure +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration));
  struct PerThread {
    std::vector<uint64_t> lat;
    uint64_t errors = 0;
    std::string first_error;
    Clock::time_point last{};
  };
  std::vector<PerThread> per(threads);
  auto loop = [&](int t) {
    PerThread& p = per[t];
    for (uint64_t i = 0;; i++) {
      auto t0 = Clock::now();
      if (t0 >= end) break;
      std::string err = one(t, i);
      auto t1 = Clock::now();
      if (t0 < measure) continue;
      p.last = t1;
      if (err.empty()) {
        p.lat.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      } else if (p.errors++ == 0) {
        p.first_error = err;
      }
    }
  };
  if (threads == 1) {
    loop(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++) pool.emplace_back(loop, t);
    for (std::thread& th : pool) th.join();
  }
  Clock::time_point last = measure;
  for (PerThread& p : per) {
    r.lat_ns.insert(r.lat_ns.end(), p.lat.begin(), p.lat.end());
    r.errors += p.errors;
    if (r.first_error.empty()) r.first_error = p.first_error;
    last = std::max(last, p.last);
  }
  r.window_s = std::chrono::duration<double>(last - measure).count();
  return r;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Nearest-rank percentile of sorted samples, in microseconds.
double PercentileUs(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p * sorted.size()));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1] / 1e3;
}

void Report(Run r) {
  std::sort(r.lat_ns.begin(), r.lat_ns.end());
  size_t calls = r.lat_ns.size();
  double qps = r.window_s > 0 ? static_cast<double>(calls) * r.per_call / r.window_s : 0;
  double sum = 0;
  for (uint64_t ns : r.lat_ns) sum += ns;
  double mean = calls ? sum / calls / 1e3 : 0;
  double p50 = PercentileUs(r.lat_ns, 0.50), p99 = PercentileUs(r.lat_ns, 0.99);
  double max = calls ? r.lat_ns.back() / 1e3 : 0;
  std::printf(
      "%s t=%d batch=%d: %.2fs %zu calls %llu errors %.1f qps | us mean %.1f p50 %.1f "
      "p99 %.1f max %.1f%s%s\n",
      r.label.c_str(), r.threads, r.per_call, r.window_s, calls,
      static_cast<unsigned long long>(r.errors), qps, mean, p50, p99, max,
      r.errors ? " | first error: " : "", r.first_error.c_str());
  std::printf(
      "{\"label\":\"%s\",\"threads\":%d,\"batch\":%d,\"duration_s\":%.3f,\"calls\":%zu,"
      "\"errors\":%llu,\"qps\":%.2f,\"mean_us\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
      "\"max_us\":%.1f,\"first_error\":\"%s\"}\n",
      r.label.c_str(), r.threads, r.per_call, r.window_s, calls,
      static_cast<unsigned long long>(r.errors), qps, mean, p50, p99, max,
      JsonEscape(r.first_error).c_str());
  std::fflush(stdout);
}

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- local: raw episodic_index_search vs FAISS ----

using Eidx = std::unique_ptr<episodic_index, decltype(&episodic_index_free)>;

Eidx BuildIndex(const Dataset& ds, int distance) {
  Eidx x(episodic_index_create(ds.d, distance), episodic_index_free);
  const tier_meta meta{};  // no owner, label or PII: the bench reads no metadata
  for (int i = 0; x && i < ds.n; i++) {
    vs_id id{};
    id.num = static_cast<uint64_t>(i);
    if (episodic_index_put(x.get(), &id, ds.Vec(i), nullptr, nullptr, nullptr, &meta) != 0)
      x.reset();
  }
  return x;
}

// The raw search as memoryd's embedded backend runs it for a Search without
// filter or threshold: the k best slots, then their point ids. "" or why not.
std::string RawSearch(const episodic_index* x, const float* q, int k, episodic_index_hit* hits,
                      std::vector<int64_t>* ids) {
  long n = episodic_index_search(x, q, static_cast<size_t>(k), 0, 0, nullptr, nullptr, hits);
  if (n < 0) return "episodic_index_search: out of memory";
  ids->resize(static_cast<size_t>(n));
  for (long i = 0; i < n; i++)
    (*ids)[i] = static_cast<int64_t>(episodic_index_id(x, hits[i].slot)->num);
  return "";
}

struct LocalPair {
  const char* raw_label;
  const char* faiss_label;
  bool euclid;
  Eidx raw;
  std::unique_ptr<faiss::IndexFlat> faiss;
};

int RunLocal(const Options& o) {
  // One thread for FAISS, as for episodic_index_search: a single-query comparison.
  // (For nq = 1 FAISS 1.7.3 scans sequentially anyway; this also keeps
  // the --batch side, whose BLAS path may use OpenMP, on one core.)
  omp_set_num_threads(1);
  auto t0 = Clock::now();
  Dataset ds = MakeDataset(o);
  std::printf(
      "episodic_bench local: %d vectors x %d dims (%.0f MB), %d queries, k=%d, seed %llu;"
      " data made in %.2fs\n",
      ds.n, ds.d, ds.base.size() * 4 / 1e6, ds.nq, o.k, static_cast<unsigned long long>(o.seed),
      SecondsSince(t0));

  LocalPair pairs[2] = {{"raw-dot", "faiss-ip", false, {nullptr, episodic_index_free}, nullptr},
                        {"raw-euclid", "faiss-l2", true, {nullptr, episodic_index_free}, nullptr}};
  for (LocalPair& p : pairs) {
    t0 = Clock::now();
    p.raw = BuildIndex(ds, p.euclid ? VS_EUCLID : VS_DOT);
    if (!p.raw) {
      std::fprintf(stderr,
                   "episodic_bench: building the episodic_index index failed (out of memory)\n");
      return 1;
    }
    double raw_s = SecondsSince(t0);
    t0 = Clock::now();
    if (p.euclid)
      p.faiss = std::make_unique<faiss::IndexFlatL2>(ds.d);
    else
      p.faiss = std::make_unique<faiss::IndexFlatIP>(ds.d);
    p.faiss->add(ds.n, ds.base.data());
    std::printf("%s: episodic_index_put x%d %.2fs; %s: add %.2fs\n", p.raw_label, ds.n, raw_s,
                p.faiss_label, SecondsSince(t0));
  }

  // Agreement first: a fast wrong answer is worth nothing. This pass also
  // warms both sides (page faults, caches, branch predictors).
  std::vector<episodic_index_hit> hits(o.k);
  std::vector<int64_t> ids;
  for (LocalPair& p : pairs) {
    Agreement agree(ds, p.euclid, o.k);
    for (int qi = 0; qi < ds.nq; qi++) {
      std::string err = RawSearch(p.raw.get(), ds.Query(qi), o.k, hits.data(), &ids);
      if (!err.empty()) {
        std::fprintf(stderr, "episodic_bench: %s\n", err.c_str());
        return 1;
      }
      agree.Add(qi, ids, FaissTopK(*p.faiss, ds.Query(qi), o.k));
    }
    agree.Report((std::string("recall-") + (p.euclid ? "euclid" : "dot")).c_str(), p.faiss_label);
  }

  // Both sides return ids and scores of the k best for one query; buffers
  // are allocated once, outside the timed calls.
  int batch = std::min(o.batch, ds.nq);
  std::vector<float> fdist(static_cast<size_t>(std::max(batch, 1)) * o.k);
  std::vector<FaissId> fids(fdist.size());
  for (int r = 0; r < o.rounds; r++) {
    std::fprintf(stderr, "episodic_bench: local round %d/%d\n", r + 1, o.rounds);
    for (LocalPair& p : pairs) {
      auto raw = [&] {
        return ClosedLoop(p.raw_label, 1, o.warmup, o.duration, [&](int, uint64_t i) {
          return RawSearch(p.raw.get(), ds.Query(i % ds.nq), o.k, hits.data(), &ids);
        });
      };
      auto faiss = [&] {
        return ClosedLoop(p.faiss_label, 1, o.warmup, o.duration, [&](int, uint64_t i) {
          p.faiss->search(1, ds.Query(i % ds.nq), o.k, fdist.data(), fids.data());
          return std::string();
        });
      };
      // ABBA: whoever goes second alternates, so a drifting machine
      // favours neither side.
      if (r % 2 == 0) {
        Report(raw());
        Report(faiss());
      } else {
        Report(faiss());
        Report(raw());
      }
      if (batch > 0) {
        Run b = ClosedLoop(
            std::string(p.faiss_label) + "-batch", 1, o.warmup, o.duration, [&](int, uint64_t i) {
              int first = static_cast<int>((i * batch) % (ds.nq - batch + 1));
              p.faiss->search(batch, ds.Query(first), o.k, fdist.data(), fids.data());
              return std::string();
            });
        b.per_call = batch;
        Report(b);
      }
    }
  }
  return 0;
}

// ---- server: EpisodicMemory through memoryd ----

const char* CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(sizeof kNames / sizeof kNames[0]) ? kNames[i] : "?";
}

std::string StatusText(const grpc::Status& st) {
  return std::string(CodeName(st.error_code())) + ": " + st.error_message();
}

class Memoryd {
 public:
  Memoryd(std::shared_ptr<grpc::Channel> ch, const std::string& token)
      : stub_(memory::v1::EpisodicMemory::NewStub(ch)), auth_("Bearer " + token) {}

  grpc::Status Create(const std::string& name, int dims, memory::v1::Distance distance) {
    memory::v1::CreateCollectionRequest req;
    req.set_name(name);
    req.set_dims(dims);
    req.set_distance(distance);
    memory::v1::CreateCollectionResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, 10);
    return stub_->CreateCollection(&ctx, req, &resp);
  }

  grpc::Status Delete(const std::string& name) {
    memory::v1::DeleteCollectionRequest req;
    req.set_name(name);
    memory::v1::DeleteCollectionResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, 120);
    return stub_->DeleteCollection(&ctx, req, &resp);
  }

  grpc::Status Upsert(const memory::v1::EpisodicMemoryUpsertRequest& req) {
    memory::v1::EpisodicMemoryUpsertResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, 120);
    grpc::Status st = stub_->Upsert(&ctx, req, &resp);
    if (st.ok() && resp.upserted_count() != req.points_size())
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          "upserted_count " + std::to_string(resp.upserted_count()) + " of " +
                              std::to_string(req.points_size()));
    return st;
  }

  // The first Search of a collection loads its index: a generous deadline.
  grpc::Status Search(const memory::v1::EpisodicMemorySearchRequest& req,
                      std::vector<int64_t>* ids) {
    memory::v1::EpisodicMemorySearchResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, 300);
    grpc::Status st = stub_->Search(&ctx, req, &resp);
    if (!st.ok() || !ids) return st;
    ids->clear();
    for (const memory::v1::ScoredPoint& h : resp.points())
      ids->push_back(static_cast<int64_t>(h.point().id().num()));
    return st;
  }

 private:
  // Every call has a deadline: a stalled server must not hang the bench.
  void Prepare(grpc::ClientContext* ctx, int seconds) {
    ctx->AddMetadata("authorization", auth_);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }

  std::unique_ptr<memory::v1::EpisodicMemory::Stub> stub_;  // thread-safe
  std::string auth_;
};

struct ServerCollection {
  const char* label;  // "dot" / "euclid"
  std::string name;
  memory::v1::Distance distance;
  bool euclid;
  // One per query, built once: the timed loop pays for serialization, not
  // for copying 384 floats into a message.
  std::vector<memory::v1::EpisodicMemorySearchRequest> requests;
};

// Deletes the collections it was told about when the run ends, however it
// ends, so a failed run leaves no 100k-point collection behind.
class Dropper {
 public:
  explicit Dropper(Memoryd* m) : m_(m) {}
  ~Dropper() {
    for (const std::string& name : names_) {
      grpc::Status st = m_->Delete(name);
      if (!st.ok())
        std::fprintf(stderr, "episodic_bench: DeleteCollection %s: %s\n", name.c_str(),
                     StatusText(st).c_str());
    }
  }
  void Add(const std::string& name) { names_.push_back(name); }

 private:
  Memoryd* m_;
  std::vector<std::string> names_;
};

// Reports a failed set-up call (human line on stderr; a JSON line, which
// the driver quotes, on stdout) and returns the exit status: 3 when memoryd
// does not serve the service yet, else 2.
int SetupFailed(const char* what, const std::string& name, const grpc::Status& st) {
  bool unimplemented = st.error_code() == grpc::StatusCode::UNIMPLEMENTED;
  std::fprintf(stderr, "episodic_bench: %s%s %s: %s\n",
               unimplemented ? "memoryd does not serve EpisodicMemory yet: " : "", what,
               name.c_str(), StatusText(st).c_str());
  std::printf(
      "{\"label\":\"server-error\",\"call\":\"%s %s\",\"status\":\"%s\","
      "\"message\":\"%s\"}\n",
      what, name.c_str(), CodeName(st.error_code()), JsonEscape(st.error_message()).c_str());
  std::fflush(stdout);
  return unimplemented ? 3 : 2;
}

int RunServer(const Options& o) {
  const char* token = std::getenv("BENCH_TOKEN");
  if (!token || !*token) {
    std::fprintf(stderr, "episodic_bench: server mode needs BENCH_TOKEN (scope episodic:*)\n");
    return 1;
  }
  auto t0 = Clock::now();
  Dataset ds = MakeDataset(o);
  std::printf(
      "episodic_bench server %s: %d vectors x %d dims, %d queries, limit %d, seed %llu;"
      " data made in %.2fs\n",
      o.target.c_str(), ds.n, ds.d, ds.nq, o.k, static_cast<unsigned long long>(o.seed),
      SecondsSince(t0));

  auto channel = grpc::CreateChannel(o.target, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    std::fprintf(stderr, "episodic_bench: cannot connect to %s\n", o.target.c_str());
    return 1;
  }
  Memoryd memoryd(channel, token);
  Dropper dropper(&memoryd);

  ServerCollection cols[2] = {
      {"dot", "episodic-bench-dot", memory::v1::DISTANCE_DOT, false, {}},
      {"euclid", "episodic-bench-euclid", memory::v1::DISTANCE_EUCLID, true, {}}};
  for (ServerCollection& c : cols) {
    // A collection left by an interrupted run would hold stale points.
    grpc::Status st = memoryd.Delete(c.name);
    if (!st.ok() && st.error_code() != grpc::StatusCode::NOT_FOUND)
      return SetupFailed("DeleteCollection", c.name, st);
    st = memoryd.Create(c.name, ds.d, c.distance);
    if (!st.ok()) return SetupFailed("CreateCollection", c.name, st);
    dropper.Add(c.name);

    t0 = Clock::now();
    for (int first = 0; first < ds.n; first += o.upsert_batch) {
      memory::v1::EpisodicMemoryUpsertRequest req;
      req.set_collection(c.name);
      for (int i = first; i < std::min(ds.n, first + o.upsert_batch); i++) {
        memory::v1::PointInput* p = req.add_points();
        p->mutable_id()->set_num(static_cast<uint64_t>(i));
        p->mutable_vector()->Add(ds.Vec(i), ds.Vec(i) + ds.d);
      }
      st = memoryd.Upsert(req);
      if (!st.ok()) return SetupFailed("Upsert", c.name, st);
    }
    double upload_s = SecondsSince(t0);

    c.requests.resize(ds.nq);
    for (int qi = 0; qi < ds.nq; qi++) {
      c.requests[qi].set_collection(c.name);
      c.requests[qi].set_limit(o.k);
      c.requests[qi].mutable_vector()->Assign(ds.Query(qi), ds.Query(qi) + ds.d);
    }
    // The first Search after the upload loads the index from PostgreSQL.
    std::vector<int64_t> ids;
    t0 = Clock::now();
    st = memoryd.Search(c.requests[0], &ids);
    double first_ms = SecondsSince(t0) * 1e3;
    if (!st.ok()) return SetupFailed("Search", c.name, st);

    // The reference answers; freed when the check is done.
    std::unique_ptr<faiss::IndexFlat> faiss;
    if (c.euclid)
      faiss = std::make_unique<faiss::IndexFlatL2>(ds.d);
    else
      faiss = std::make_unique<faiss::IndexFlatIP>(ds.d);
    faiss->add(ds.n, ds.base.data());
    Agreement agree(ds, c.euclid, o.k);
    std::vector<double> warm_ms;
    for (int qi = 0; qi < ds.nq; qi++) {
      t0 = Clock::now();
      st = memoryd.Search(c.requests[qi], &ids);
      warm_ms.push_back(SecondsSince(t0) * 1e3);
      if (!st.ok()) return SetupFailed("Search", c.name, st);
      agree.Add(qi, ids, FaissTopK(*faiss, ds.Query(qi), o.k));
    }
    std::sort(warm_ms.begin(), warm_ms.end());
    double warm_p50 = warm_ms[warm_ms.size() / 2];
    faiss.reset();
    std::printf(
        "memoryd-setup-%s: upsert %d points in batches of %d: %.1fs (%.0f points/s);"
        " first Search %.1f ms (index load), warm Search p50 %.1f ms\n",
        c.label, ds.n, o.upsert_batch, upload_s, ds.n / upload_s, first_ms, warm_p50);
    std::printf(
        "{\"label\":\"memoryd-setup-%s\",\"points\":%d,\"upsert_batch\":%d,\"upload_s\":%.2f,"
        "\"upload_pps\":%.0f,\"first_search_ms\":%.1f,\"warm_search_ms\":%.2f}\n",
        c.label, ds.n, o.upsert_batch, upload_s, ds.n / upload_s, first_ms, warm_p50);
    agree.Report((std::string("recall-memoryd-") + c.label).c_str(),
                 c.euclid ? "faiss-l2" : "faiss-ip");
  }

  for (int r = 0; r < o.rounds; r++) {
    std::fprintf(stderr, "episodic_bench: memoryd round %d/%d\n", r + 1, o.rounds);
    for (int j = 0; j < 2; j++) {
      // ABBA over the two collections.
      ServerCollection& c = cols[r % 2 == 0 ? j : 1 - j];
      for (int conc : o.concurrency) {
        std::string label = std::string("memoryd-") + c.label + "-c" + std::to_string(conc);
        Report(ClosedLoop(label, conc, o.warmup, o.duration, [&](int t, uint64_t i) {
          // Threads start at different queries so they do not move in step.
          const auto& req = c.requests[(i * conc + t) % ds.nq];
          grpc::Status st = memoryd.Search(req, nullptr);
          return st.ok() ? std::string() : StatusText(st);
        }));
      }
    }
  }
  return 0;
}

// ---- main ----

bool ParseInt(const char* s, int lo, int hi, int* out) {
  char* end;
  long v = std::strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ParseList(const char* s, std::vector<int>* out) {
  out->clear();
  std::string item;
  for (const char* p = s;; p++) {
    if (*p == ',' || *p == '\0') {
      int v;
      if (!ParseInt(item.c_str(), 1, 256, &v)) return false;
      out->push_back(v);
      item.clear();
      if (*p == '\0') return true;
    } else {
      item += *p;
    }
  }
}

int Usage() {
  std::fprintf(stderr,
               "usage: episodic_bench local [data flags] [--rounds R] [--duration S] [--warmup S]"
               " [--batch B]\n"
               "       episodic_bench server --target HOST:PORT [data flags] [--rounds R]"
               " [--duration S] [--warmup S]\n"
               "                      [--concurrency 1,4] [--upsert-batch 500]"
               "   (token in $BENCH_TOKEN)\n"
               "data flags: --vectors N --dims D --queries Q --k K --seed S\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  static const struct option kLongs[] = {{"vectors", required_argument, nullptr, 'n'},
                                         {"dims", required_argument, nullptr, 'd'},
                                         {"queries", required_argument, nullptr, 'q'},
                                         {"k", required_argument, nullptr, 'k'},
                                         {"seed", required_argument, nullptr, 's'},
                                         {"rounds", required_argument, nullptr, 'r'},
                                         {"duration", required_argument, nullptr, 'D'},
                                         {"warmup", required_argument, nullptr, 'w'},
                                         {"batch", required_argument, nullptr, 'b'},
                                         {"target", required_argument, nullptr, 't'},
                                         {"concurrency", required_argument, nullptr, 'c'},
                                         {"upsert-batch", required_argument, nullptr, 'u'},
                                         {nullptr, 0, nullptr, 0}};
  int ch;
  bool ok = true;
  while ((ch = getopt_long(argc, argv, "", kLongs, nullptr)) != -1) {
    switch (ch) {
      case 'n':
        ok = ok && ParseInt(optarg, 1, 100000000, &o.vectors);
        break;
      case 'd':
        ok = ok && ParseInt(optarg, 1, VS_MAX_DIMS, &o.dims);
        break;
      case 'q':
        ok = ok && ParseInt(optarg, 1, 1000000, &o.queries);
        break;
      case 'k':
        ok = ok && ParseInt(optarg, 1, 1000, &o.k);
        break;
      case 's':
        o.seed = std::strtoull(optarg, nullptr, 10);
        break;
      case 'r':
        ok = ok && ParseInt(optarg, 1, 1000, &o.rounds);
        break;
      case 'D':
        o.duration = std::atof(optarg);
        break;
      case 'w':
        o.warmup = std::atof(optarg);
        break;
      case 'b':
        ok = ok && ParseInt(optarg, 0, 100000, &o.batch);
        break;
      case 't':
        o.target = optarg;
        break;
      case 'c':
        ok = ok && ParseList(optarg, &o.concurrency);
        break;
      case 'u':
        ok = ok && ParseInt(optarg, 1, 1000, &o.upsert_batch);
        break;
      default:
        ok = false;
    }
  }
  if (!ok || optind + 1 != argc || o.duration <= 0 || o.warmup < 0 || o.k > o.vectors)
    return Usage();
  const std::string mode = argv[optind];
  if (mode == "local") return RunLocal(o);
  if (mode == "server" && !o.target.empty()) return RunServer(o);
  return Usage();
}
