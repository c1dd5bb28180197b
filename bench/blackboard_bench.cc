// blackboard_bench: the Blackboard through two memoryd replicas (A and B,
// started by bench/blackboard.sh) against the same Lua script run directly
// through hiredis, in the same run.
//
//   post        Blackboard.Post on A, one call in flight, vs EVALSHA of the
//               very script memoryd runs (bb_lua.h) with the same arguments
//               from this process (direct): alternating rounds, p50 / p99 /
//               qps of each and the ratio memoryd/direct at p50 (goal <= 1.5).
//   propagate   a post on A to its event on a subscriber of B: the value
//               carries the send time (CLOCK_MONOTONIC, same machine), the
//               subscriber subtracts; p50 / p99 at --rate posts/s and at the
//               highest rate --posters concurrent posters reach.
//   fanout      --subscribers streams on one board of B, then posts on A as
//               fast as --posters posters go for --seconds: posts/s, events
//               delivered/s, whether every stream got every post (or a
//               SNAPSHOT instead of those it was too slow for), and B's
//               resident memory per subscriber (VmRSS before and after they
//               connect, --b-pid).
//
// Prints one line per figure and "RATIO: ..." lines the driver collects.
// Exit 0 whenever it ran (benchmarks never fail the build).
#include <getopt.h>
#include <grpcpp/grpcpp.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "memory/v1/blackboard.grpc.pb.h"

extern "C" {
#include "service/blackboard/bb_codec.h"
#include "service/blackboard/bb_lua.h"
#include "service/core/arena.h"
#include "service/store/redis_url.h"
}

namespace {

using memory::v1::Blackboard;
using memory::v1::BlackboardPostRequest;
using memory::v1::BlackboardPostResponse;
using memory::v1::BlackboardSubscribeRequest;
using memory::v1::BlackboardSubscribeResponse;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string a, b, token, tenant = "bench", redis;
  int rounds = 3, seconds = 3, rate = 100, posters = 4, subscribers = 1000;
  long b_pid = 0;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

struct Stats {
  std::vector<double> us;  // latencies
  double seconds = 0;
  double P(double q) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))];
  }
  double Qps() const { return seconds > 0 ? us.size() / seconds : 0; }
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::unique_ptr<Blackboard::Stub> Stub(const std::string& addr) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);  // its own connection
  return Blackboard::NewStub(
      grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args));
}

void Auth(grpc::ClientContext* ctx, const Options& o) {
  ctx->AddMetadata("authorization", "Bearer " + o.token);
}

BlackboardPostRequest Req(const std::string& task, const std::string& key, double v) {
  BlackboardPostRequest req;
  req.set_task_id(task);
  req.set_key(key);
  req.mutable_value()->set_number_value(v);
  return req;
}

// ---- post: memoryd vs the script through hiredis ----

Stats PostThroughMemoryd(Blackboard::Stub* stub, const Options& o, int seconds) {
  Stats s;
  auto start = Clock::now(), end = start + std::chrono::seconds(seconds);
  int i = 0;
  while (Clock::now() < end) {
    grpc::ClientContext ctx;
    Auth(&ctx, o);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    BlackboardPostResponse resp;
    auto t0 = Clock::now();
    i++;
    grpc::Status st = stub->Post(&ctx, Req("bench-post", "k" + std::to_string(i % 16), i), &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "blackboard_bench: Post: %s\n", st.error_message().c_str());
      break;
    }
    s.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

// Read of the same board through memoryd: a script and a gRPC call like a
// Post, but no audit row to store; Post - Read is about what the durable
// audit row costs.
Stats ReadThroughMemoryd(Blackboard::Stub* stub, const Options& o, int seconds) {
  Stats s;
  auto start = Clock::now(), end = start + std::chrono::seconds(seconds);
  while (Clock::now() < end) {
    grpc::ClientContext ctx;
    Auth(&ctx, o);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    memory::v1::BlackboardReadRequest req;
    req.set_task_id("bench-post");
    memory::v1::BlackboardReadResponse resp;
    auto t0 = Clock::now();
    grpc::Status st = stub->Read(&ctx, req, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "blackboard_bench: Read: %s\n", st.error_message().c_str());
      break;
    }
    s.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

// Health/Check from the same client: the floor any call through gRPC pays
// here (client stub, loopback, server runtime), with no backend.
Stats HealthThroughMemoryd(const std::string& addr, int seconds) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  Stats s;
  auto start = Clock::now(), end = start + std::chrono::seconds(seconds);
  while (Clock::now() < end) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    auto t0 = Clock::now();
    if (!stub->Check(&ctx, req, &resp).ok()) break;
    s.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

// The script's KEYS and ARGV as bb_store.c's bb_post_start builds them.
Stats PostDirect(redisContext* c, const Options& o, int seconds) {
  Stats s;
  arena* a = arena_create();
  bb_names n;
  bb_names_make(a, o.tenant.c_str(), "bench-direct", &n);
  // Readying a run hashes the script, so EVALSHA finds it (with an
  // unhashed sha every post went EVALSHA, NOSCRIPT, then EVAL of the body).
  bb_eval hashing;
  bb_eval_init(&hashing, nullptr, a, BB_SCRIPT_POST, 0, 0);
  const bb_script* script = bb_script_get(BB_SCRIPT_POST);
  auto start = Clock::now(), end = start + std::chrono::seconds(seconds);
  int i = 0;
  while (Clock::now() < end) {
    std::string key = "k" + std::to_string(i % 16), json = std::to_string(i++);
    std::vector<std::string> w = {"EVALSHA", script->sha, "6"};
    for (int k = 0; k < BB_KEY_COUNT; k++) w.push_back(n.key[k]);
    w.push_back(BB_LEASE_INDEX);
    for (std::string v :
         {std::string(n.base), std::string(n.channel), std::string("1000"), std::string("4194304"),
          key, std::string("bench-agent"), std::string("1"), std::string("0"), std::string("0"),
          std::string("0"), std::string("0"), std::string("1"), std::string("0"), std::string("0"),
          std::string("0"), std::string("120"), json, std::string("0123456789abcdef"),
          std::string("1000"), std::string("3145728"), std::string("86400000"), std::string("0"),
          // the default quotas (tier_quota.h's order)
          std::string("10000"), std::string("1000"), std::string("1073741824"),
          std::string("268435456")})
      w.push_back(v);
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& x : w) argv.push_back(x.data()), lens.push_back(x.size());
    auto t0 = Clock::now();
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r && r->type == REDIS_REPLY_ERROR && std::strstr(r->str, "NOSCRIPT")) {
      freeReplyObject(r);
      argv[0] = "EVAL", lens[0] = 4;
      argv[1] = script->body, lens[1] = script->len;
      r = static_cast<redisReply*>(
          redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
      argv[0] = "EVALSHA", lens[0] = 7;
      argv[1] = script->sha, lens[1] = 40;
    }
    bool ok = r && r->type == REDIS_REPLY_ARRAY;
    if (r) freeReplyObject(r);
    if (!ok) {
      std::fprintf(stderr, "blackboard_bench: the direct script failed\n");
      break;
    }
    s.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  arena_free(a);
  return s;
}

void BenchPost(const Options& o) {
  redis_url u;
  char err[256];
  if (redis_url_parse(o.redis.c_str(), &u, err, sizeof err) != 0) {
    std::fprintf(stderr, "blackboard_bench: %s\n", err);
    return;
  }
  redisContext* c = redisConnect(u.host, u.port);
  if (!c || c->err) {
    std::fprintf(stderr, "blackboard_bench: cannot connect to Redis\n");
    return;
  }
  if (u.password[0]) freeReplyObject(redisCommand(c, "AUTH %s", u.password));
  if (u.db) freeReplyObject(redisCommand(c, "SELECT %d", u.db));
  auto stub = Stub(o.a);
  std::vector<double> m50, m99, mq, d50, d99, dq, r50, h50;
  PostThroughMemoryd(stub.get(), o, 1);  // warm-up
  PostDirect(c, o, 1);
  for (int r = 0; r < o.rounds; r++) {
    Stats m = PostThroughMemoryd(stub.get(), o, o.seconds);
    Stats d = PostDirect(c, o, o.seconds);
    Stats rd = ReadThroughMemoryd(stub.get(), o, o.seconds);
    r50.push_back(rd.P(0.5));
    h50.push_back(HealthThroughMemoryd(o.a, o.seconds).P(0.5));
    m50.push_back(m.P(0.5)), m99.push_back(m.P(0.99)), mq.push_back(m.Qps());
    d50.push_back(d.P(0.5)), d99.push_back(d.P(0.99)), dq.push_back(d.Qps());
    std::printf(
        "post round %d: memoryd p50 %.0f us p99 %.0f us %.0f/s | direct p50 %.0f us "
        "p99 %.0f us %.0f/s\n",
        r + 1, m.P(0.5), m.P(0.99), m.Qps(), d.P(0.5), d.P(0.99), d.Qps());
  }
  std::printf(
      "post (median of %d rounds, 1 in flight): memoryd p50 %.0f us p99 %.0f us %.0f/s; "
      "script via hiredis p50 %.0f us p99 %.0f us %.0f/s\n",
      o.rounds, Median(m50), Median(m99), Median(mq), Median(d50), Median(d99), Median(dq));
  std::printf(
      "read of that 16-key board through memoryd (no audit row): p50 %.0f us; "
      "Health/Check (gRPC alone, no backend): p50 %.0f us\n",
      Median(r50), Median(h50));
  std::printf("RATIO: Post memoryd/direct-script p50 x%.2f (goal <= 1.5), p99 x%.2f\n",
              Median(m50) / Median(d50), Median(m99) / Median(d99));
  redisFree(c);
}

// ---- propagation ----

// Reads a stream until it ends; calls on_event for each PUT.
template <typename F>
void ReadStream(grpc::ClientReader<BlackboardSubscribeResponse>* reader, F on_event) {
  BlackboardSubscribeResponse ev;
  while (reader->Read(&ev)) on_event(ev);
}

struct Propagation {
  Stats lat;
  double posts_per_s = 0;
};

// Posts on A (posters in parallel; rate > 0 paces the total) for seconds,
// a subscriber on B measures each event's age.
Propagation Propagate(const Options& o, const std::string& task, int rate, int posters) {
  auto sub = Stub(o.b);
  grpc::ClientContext sctx;
  Auth(&sctx, o);
  BlackboardSubscribeRequest sreq;
  sreq.set_task_id(task);
  auto reader = sub->Subscribe(&sctx, sreq);
  BlackboardSubscribeResponse first;
  Propagation p;
  if (!reader->Read(&first)) {
    std::fprintf(stderr, "blackboard_bench: Subscribe on B ended: %s\n",
                 reader->Finish().error_message().c_str());
    return p;
  }
  std::mutex mu;
  std::thread rd([&] {
    ReadStream(reader.get(), [&](const BlackboardSubscribeResponse& ev) {
      if (ev.kind() != memory::v1::BLACKBOARD_EVENT_KIND_PUT || ev.items_size() != 1) return;
      double us = (NowNs() - ev.items(0).value().number_value()) / 1000.0;
      std::lock_guard<std::mutex> g(mu);
      p.lat.us.push_back(us);
    });
  });
  std::atomic<long> posted{0};
  auto start = Clock::now(), end = start + std::chrono::seconds(o.seconds);
  std::vector<std::thread> ps;
  for (int t = 0; t < posters; t++) {
    ps.emplace_back([&, t] {
      auto stub = Stub(o.a);
      int i = 0;
      while (Clock::now() < end) {
        if (rate > 0) {  // paced: post number n goes at start + n / rate
          long n = posted.fetch_add(1);
          auto at = start + std::chrono::microseconds(n * 1000000L / rate);
          std::this_thread::sleep_until(at);
          if (Clock::now() >= end) break;
        }
        grpc::ClientContext ctx;
        Auth(&ctx, o);
        BlackboardPostResponse resp;
        BlackboardPostRequest req =
            Req(task, "p" + std::to_string(t) + "-" + std::to_string(i++ % 8),
                static_cast<double>(NowNs()));
        if (!stub->Post(&ctx, req, &resp).ok()) break;
        if (rate <= 0) posted++;
      }
    });
  }
  for (auto& t : ps) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last events
  sctx.TryCancel();
  rd.join();
  std::lock_guard<std::mutex> g(mu);
  p.posts_per_s = p.lat.us.size() / secs;
  return p;
}

void BenchPropagation(const Options& o) {
  std::vector<double> a50, a99, m50, m99, mrate;
  for (int r = 0; r < o.rounds; r++) {
    Propagation paced = Propagate(o, "bench-prop-paced", o.rate, 1);
    Propagation max = Propagate(o, "bench-prop-max", 0, o.posters);
    a50.push_back(paced.lat.P(0.5)), a99.push_back(paced.lat.P(0.99));
    m50.push_back(max.lat.P(0.5)), m99.push_back(max.lat.P(0.99)), mrate.push_back(max.posts_per_s);
    std::printf(
        "propagation round %d: %d posts/s p50 %.0f us p99 %.0f us | %.0f posts/s "
        "(%d posters) p50 %.0f us p99 %.0f us\n",
        r + 1, o.rate, paced.lat.P(0.5), paced.lat.P(0.99), max.posts_per_s, o.posters,
        max.lat.P(0.5), max.lat.P(0.99));
  }
  std::printf(
      "propagation A->B (median of %d rounds): at %d posts/s p50 %.0f us p99 %.0f us; at "
      "%.0f posts/s p50 %.0f us p99 %.0f us (goal p99 < 5 ms)\n",
      o.rounds, o.rate, Median(a50), Median(a99), Median(mrate), Median(m50), Median(m99));
  std::printf("RATIO: propagation p99 at %d/s %.2f ms, at %.0f/s %.2f ms (goal < 5 ms)\n", o.rate,
              Median(a99) / 1000, Median(mrate), Median(m99) / 1000);
}

// ---- fan-out ----

long RssKiB(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

void BenchFanout(const Options& o) {
  const std::string task = "bench-fanout";
  long rss0 = o.b_pid ? RssKiB(o.b_pid) : -1;
  // Every stream on one completion queue, read by one thread.
  auto stub = Stub(o.b);
  grpc::CompletionQueue cq;
  struct Sub {
    grpc::ClientContext ctx;
    BlackboardSubscribeResponse ev;
    std::unique_ptr<grpc::ClientAsyncReader<BlackboardSubscribeResponse>> r;
    long puts = 0, snapshots = 0;
    bool ended = false;
  };
  std::vector<std::unique_ptr<Sub>> subs;
  BlackboardSubscribeRequest req;
  req.set_task_id(task);
  for (int i = 0; i < o.subscribers; i++) {
    auto s = std::make_unique<Sub>();
    Auth(&s->ctx, o);
    s->r = stub->AsyncSubscribe(&s->ctx, req, &cq, s.get());
    subs.push_back(std::move(s));
  }
  // Tags: the Sub pointer for StartCall, pointer+1 for each Read.
  std::atomic<long> snapshots_seen{0}, events{0};
  std::mutex lat_mu;
  Stats lat;  // post-to-event delays of the paced phase
  bool measure = false;
  std::thread reader([&] {
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
      uintptr_t t = reinterpret_cast<uintptr_t>(tag);
      Sub* s = reinterpret_cast<Sub*>(t & ~uintptr_t(1));
      if (!ok) {
        s->ended = true;
        continue;
      }
      if (t & 1) {
        if (s->ev.kind() == memory::v1::BLACKBOARD_EVENT_KIND_SNAPSHOT) {
          s->snapshots++;
          snapshots_seen++;
        } else {
          s->puts++;
          events++;
          std::lock_guard<std::mutex> g(lat_mu);
          if (measure && s->ev.items_size() == 1)
            lat.us.push_back((NowNs() - s->ev.items(0).value().number_value()) / 1000.0);
        }
      }
      s->r->Read(&s->ev, reinterpret_cast<void*>(t | 1));
    }
  });
  // Wait until every stream had its first SNAPSHOT.
  auto until = Clock::now() + std::chrono::seconds(60);
  while (snapshots_seen < o.subscribers && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  long rss1 = o.b_pid ? RssKiB(o.b_pid) : -1;
  long connected = snapshots_seen.load();
  if (rss0 > 0 && rss1 > 0 && connected > 0)
    std::printf(
        "fanout: B's resident memory %ld KiB before the subscribers, %ld KiB with them: "
        "%.1f KiB per subscriber (gRPC's per-stream state included)\n",
        rss0, rss1, static_cast<double>(rss1 - rss0) / connected);

  // Two phases: paced (rate > 0: one poster, every event's delay
  // measured), then as fast as the posters go.
  for (int rate : {o.rate, 0}) {
    for (auto& s : subs) s->puts = 0, s->snapshots = 0;
    events = 0;
    {
      std::lock_guard<std::mutex> g(lat_mu);
      lat.us.clear();
      measure = rate > 0;
    }
    int posters = rate > 0 ? 1 : o.posters;
    std::atomic<long> posted{0};
    auto start = Clock::now(), end = start + std::chrono::seconds(o.seconds);
    std::vector<std::thread> ps;
    for (int t = 0; t < posters; t++) {
      ps.emplace_back([&, t] {
        auto pst = Stub(o.a);
        int i = 0;
        while (Clock::now() < end) {
          if (rate > 0) {
            std::this_thread::sleep_until(start +
                                          std::chrono::microseconds(posted * 1000000L / rate));
            if (Clock::now() >= end) break;
          }
          grpc::ClientContext ctx;
          Auth(&ctx, o);
          BlackboardPostResponse resp;
          i++;
          BlackboardPostRequest req =
              Req(task, "f" + std::to_string(t) + "-" + std::to_string(i % 8),
                  static_cast<double>(NowNs()));
          if (!pst->Post(&ctx, req, &resp).ok()) break;
          posted++;
        }
      });
    }
    for (auto& t : ps) t.join();
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    long last = -1;  // let the streams drain what is queued for them
    while (events.load() != last) {
      last = events.load();
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    double drained = std::chrono::duration<double>(Clock::now() - start).count() - 0.5;
    long complete = 0, resynced = 0;
    for (auto& s : subs) {
      if (s->puts >= posted) complete++;
      if (s->snapshots > 0) resynced++;
    }
    std::lock_guard<std::mutex> g(lat_mu);
    measure = false;
    if (rate > 0) {
      std::printf(
          "fanout at %d posts/s to %ld subscribers: %ld posts, %ld events (%ld expected); %ld "
          "streams got every post, %ld a fresh SNAPSHOT; post-to-event delay p50 %.0f us p99 "
          "%.0f us\n",
          rate, connected, posted.load(), events.load(), posted * connected, complete, resynced,
          lat.P(0.5), lat.P(0.99));
      std::printf(
          "RATIO: fanout %ld subscribers at %d posts/s: %.0f%% of events delivered, p99 "
          "delay %.2f ms\n",
          connected, rate, 100.0 * events / std::max(1L, posted * connected), lat.P(0.99) / 1000);
    } else {
      std::printf(
          "fanout as fast as %d posters go, %ld subscribers: %.0f posts/s; %ld events delivered "
          "in %.1f s = %.0f events/s; %ld streams got every post, %ld caught up by a fresh "
          "SNAPSHOT (they read slower than that: this one client reads all %ld streams on one "
          "thread)\n",
          posters, connected, posted / secs, events.load(), drained, events / drained, complete,
          resynced, connected);
      std::printf("RATIO: fanout %ld subscribers, highest rate: %.0f posts/s, %.0f events/s\n",
                  connected, posted / secs, events / drained);
    }
  }
  for (auto& s : subs) s->ctx.TryCancel();
  until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until) {
    bool all = true;
    for (auto& s : subs) all = all && s->ended;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  cq.Shutdown();
  reader.join();
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach the driver as they come
  Options o;
  static const struct option longopts[] = {{"a", required_argument, nullptr, 'a'},
                                           {"b", required_argument, nullptr, 'b'},
                                           {"token", required_argument, nullptr, 't'},
                                           {"tenant", required_argument, nullptr, 'n'},
                                           {"redis", required_argument, nullptr, 'r'},
                                           {"rounds", required_argument, nullptr, 'R'},
                                           {"seconds", required_argument, nullptr, 's'},
                                           {"rate", required_argument, nullptr, 'q'},
                                           {"posters", required_argument, nullptr, 'p'},
                                           {"subscribers", required_argument, nullptr, 'S'},
                                           {"b-pid", required_argument, nullptr, 'P'},
                                           {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", longopts, nullptr)) != -1) {
    switch (c) {
      case 'a':
        o.a = optarg;
        break;
      case 'b':
        o.b = optarg;
        break;
      case 't':
        o.token = optarg;
        break;
      case 'n':
        o.tenant = optarg;
        break;
      case 'r':
        o.redis = optarg;
        break;
      case 'R':
        o.rounds = std::atoi(optarg);
        break;
      case 's':
        o.seconds = std::atoi(optarg);
        break;
      case 'q':
        o.rate = std::atoi(optarg);
        break;
      case 'p':
        o.posters = std::atoi(optarg);
        break;
      case 'S':
        o.subscribers = std::atoi(optarg);
        break;
      case 'P':
        o.b_pid = std::atol(optarg);
        break;
      default:
        std::fprintf(stderr,
                     "usage: blackboard_bench --a ADDR --b ADDR --token T --redis URL "
                     "[--tenant T] [--rounds N] [--seconds N] [--rate N] [--posters N] "
                     "[--subscribers N] [--b-pid PID]\n");
        return 2;
    }
  }
  if (o.a.empty() || o.b.empty() || o.token.empty() || o.redis.empty()) {
    std::fprintf(stderr, "blackboard_bench: --a, --b, --token and --redis are required\n");
    return 2;
  }
  BenchPost(o);
  BenchPropagation(o);
  BenchFanout(o);
  return 0;
}
