// The extender's HTTP server under connection load: a filter on 5,000 nodes × 8 GPUs
// (names only, one client, keep-alive), first on a quiet server, then while 1,000 idle keep-alive
// connections and 100 slow-header (slowloris) connections are held open. A slow-header
// connection sends a partial request and one more byte every 500 ms; when the server cuts it at
// the header deadline it reconnects at once, so 100 stay open throughout.
//
// Counters: p50_us / p99_us of the filter round trip; dropped = well-formed requests that got no
// 200 (must be 0); idle_open = idle connections still open after the run (the idle timeout is
// 120 s, so all 1,000); slow_reconnects = slow-header connections the server cut during the run.
// The server runs with the extender's default config (threads: 4).
//
// BM_FilterFlood/C/B: C filters sent at once, each on a connection of its own (C kube-scheduler
// calls arriving together, far more than 4 workers serve at once), each for a pod of a size the
// memo has not seen (10,000 MiB + its index), so that each scores every node afresh and the
// workers, not the reading of the bodies, are what the requests queue for; to a server whose queue bound
// (maxQueueWait) is B ms (0: none; the default is 2000). Counters: ok / shed = answered 200 / 503;
// ok_p50_ms, ok_p99_ms, ok_max_ms = time from a request's send to its 200; late = 200s that took
// over 5 s, kube-scheduler's extender httpTimeout in the chart, so it would have stopped
// listening; shed_max_ms = the slowest 503; served_per_s = 200s per second of the flood.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include <benchmark/benchmark.h>

#include "scheduler/extender/backend.h"
#include "scheduler/extender/cluster_state.h"
#include "scheduler/extender/config.h"
#include "scheduler/extender/extender.h"
#include "scheduler/extender/routes.h"
#include "testing/builders.h"
#include "testing/fake_clock.h"
#include "testing/loopback.h"

namespace gpupack::extender {
namespace {

constexpr int kNodes = 5000;
constexpr int kIdleConnections = 1000;
constexpr int kSlowConnections = 100;

std::string NodeName(int i) { return "gpu-node-" + std::to_string(i); }

int Connect(int port) {
  const int fd = ConnectLoopback(port);
  GPUPACK_CHECK(fd >= 0);
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size());
}

// True while the server has not closed `fd` (nothing to read, or bytes that are not EOF).
bool StillOpen(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) == 0) return true;
  char buffer[4096];
  return recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) > 0;
}

struct World {
  FakeClock clock;
  std::unique_ptr<ClusterState> state;
  std::unique_ptr<StandaloneBackend> backend;
  std::unique_ptr<Extender> extender;
  std::unique_ptr<server::HttpServer> http;
  std::string body;
  std::string flood_body;  // its pod's "10000Mi" is rewritten per request (Flood)

  // The extender's verbs on a server of `config`'s options (a queue bound, threads).
  std::unique_ptr<server::HttpServer> Serve(const ExtenderConfig& config) {
    auto server = std::make_unique<server::HttpServer>(ExtenderServerOptions(config, *extender));
    RegisterVerbs(*server, *extender, "");
    GPUPACK_CHECK(server->Start("127.0.0.1:0").ok());
    return server;
  }

  World() {
    std::vector<model::Node> nodes;
    std::vector<std::string> names;
    for (int i = 0; i < kNodes; ++i) {
      nodes.push_back(builders::GpuNode(NodeName(i), 8, 81920));
      names.push_back(NodeName(i));
    }
    auto policy = builders::PriorPolicy(model::PolicyKind::kFgd);
    state = std::make_unique<ClusterState>(policy, clock, std::chrono::seconds(0));
    backend = std::make_unique<StandaloneBackend>(std::move(nodes));
    GPUPACK_CHECK(backend->Start(*state).ok());
    ExtenderOptions options;
    options.decision.device_mib = 81920;
    extender = std::make_unique<Extender>(*state, *backend, options, clock, nullptr);
    http = Serve(ExtenderConfig{});
    body = builders::FilterBody(builders::PodJson("bench-pod", "bench-uid", "10Gi"), names);
    flood_body = builders::FilterBody(builders::PodJson("flood-pod", "flood-uid", "10000Mi"), names);
  }
};

World& TheWorld() {
  static World* world = new World();
  return *world;
}

// 1,000 kept-alive connections, each served one GET /healthz, then left idle.
struct IdleLoad {
  std::vector<int> fds;
  explicit IdleLoad(int port) {
    for (int i = 0; i < kIdleConnections; ++i) {
      const int fd = Connect(port);
      GPUPACK_CHECK(SendAll(fd, "GET /healthz HTTP/1.1\r\nHost: b\r\n\r\n"));
      char buffer[512];
      GPUPACK_CHECK(recv(fd, buffer, sizeof(buffer), 0) > 0);
      fds.push_back(fd);
    }
  }
  int Open() const {
    return int(std::count_if(fds.begin(), fds.end(), [](int fd) { return StillOpen(fd); }));
  }
  ~IdleLoad() {
    for (int fd : fds) close(fd);
  }
};

// 100 slowloris connections kept open by a background thread.
class SlowLoad {
 public:
  explicit SlowLoad(int port) : port_(port) {
    for (int i = 0; i < kSlowConnections; ++i) fds_.push_back(Open());
    thread_ = std::thread([this] { Run(); });
  }
  ~SlowLoad() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) close(fd);
  }
  int reconnects() const { return reconnects_; }

 private:
  int Open() {
    const int fd = Connect(port_);
    SendAll(fd, "POST /filter HTTP/1.1\r\nHost: b\r\nX-Slow: ");
    return fd;
  }
  void Run() {
    while (!stop_) {
      for (int& fd : fds_) {
        if (!StillOpen(fd) || !SendAll(fd, "x")) {
          close(fd);
          fd = Open();
          ++reconnects_;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  const int port_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<int> reconnects_{0};
  std::thread thread_;
};

void RunFilters(benchmark::State& state, int port, const std::string& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  client.set_read_timeout(30);
  std::vector<double> micros;
  int dropped = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    httplib::Result res = client.Post("/filter", body, "application/json");
    if (!res || res->status != 200) ++dropped;
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(micros.begin(), micros.end());
  auto at = [&](double q) { return micros[std::min(micros.size() - 1, size_t(q * double(micros.size())))]; };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
  state.counters["max_us"] = micros.back();
  state.counters["dropped"] = dropped;
}

void BM_FilterQuiet(benchmark::State& state) {
  World& w = TheWorld();
  RunFilters(state, w.http->port(), w.body);
}
BENCHMARK(BM_FilterQuiet)->Arg(kNodes)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_FilterUnderConnectionLoad(benchmark::State& state) {
  World& w = TheWorld();
  IdleLoad idle(w.http->port());
  SlowLoad slow(w.http->port());
  RunFilters(state, w.http->port(), w.body);
  state.counters["idle_open"] = idle.Open();
  state.counters["slow_reconnects"] = slow.reconnects();
}
BENCHMARK(BM_FilterUnderConnectionLoad)->Arg(kNodes)->Iterations(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One flood: every request is sent (each on its own connection, all connected first), then the
// replies are read as they come. Latencies are from each request's own send.
struct Flood {
  std::vector<double> ok_ms, shed_ms;
  int other = 0;
  double seconds = 0;

  Flood(int port, const std::string& body, int connections) {
    std::vector<int> fds;
    for (int i = 0; i < connections; ++i) fds.push_back(Connect(port));
    std::string request =
        "POST /filter HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    const size_t size_at = request.find("10000Mi");
    GPUPACK_CHECK(size_at != std::string::npos);
    using Steady = std::chrono::steady_clock;
    const Steady::time_point start = Steady::now();
    std::vector<Steady::time_point> sent(fds.size());
    for (size_t i = 0; i < fds.size(); ++i) {
      const std::string mib = std::to_string(10000 + i % 70000);  // five digits, as "10000"
      memcpy(request.data() + size_at, mib.data(), mib.size());
      sent[i] = Steady::now();
      GPUPACK_CHECK(SendAll(fds[i], request));
    }
    std::vector<std::string> replies(fds.size());
    std::vector<pollfd> waiting;
    for (int fd : fds) waiting.push_back({fd, POLLIN, 0});
    size_t left = fds.size();
    char buffer[65536];
    while (left > 0) {
      GPUPACK_CHECK(poll(waiting.data(), waiting.size(), 60'000) > 0);
      for (size_t i = 0; i < waiting.size(); ++i) {
        if (waiting[i].fd < 0 || waiting[i].revents == 0) continue;
        const ssize_t n = recv(waiting[i].fd, buffer, sizeof(buffer), 0);
        if (n > 0) replies[i].append(buffer, size_t(n));
        if (n > 0 && !Complete(replies[i])) continue;
        const double ms = std::chrono::duration<double, std::milli>(Steady::now() - sent[i]).count();
        if (replies[i].starts_with("HTTP/1.1 200")) {
          ok_ms.push_back(ms);
        } else if (replies[i].starts_with("HTTP/1.1 503")) {
          shed_ms.push_back(ms);
        } else {
          ++other;
        }
        waiting[i].fd = -1;
        --left;
      }
    }
    seconds = std::chrono::duration<double>(Steady::now() - start).count();
    for (int fd : fds) close(fd);
    std::sort(ok_ms.begin(), ok_ms.end());
    std::sort(shed_ms.begin(), shed_ms.end());
  }

  // Whether `reply` holds its headers and the whole body its Content-Length announces.
  static bool Complete(const std::string& reply) {
    const size_t end = reply.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    const size_t field = reply.find("Content-Length: ");
    if (field == std::string::npos || field > end) return true;
    return reply.size() >= end + 4 + std::stoul(reply.substr(field + 16));
  }
};

double Quantile(const std::vector<double>& sorted, double q) {
  return sorted.empty() ? 0 : sorted[std::min(sorted.size() - 1, size_t(q * double(sorted.size())))];
}

void BM_FilterFlood(benchmark::State& state) {
  World& w = TheWorld();
  ExtenderConfig config;
  config.max_queue_wait = std::chrono::milliseconds(state.range(1));
  std::unique_ptr<server::HttpServer> server = w.Serve(config);
  for (auto _ : state) {
    const Flood flood(server->port(), w.flood_body, int(state.range(0)));
    state.counters["ok"] = double(flood.ok_ms.size());
    state.counters["shed"] = double(flood.shed_ms.size());
    state.counters["other"] = flood.other;
    state.counters["ok_p50_ms"] = Quantile(flood.ok_ms, 0.50);
    state.counters["ok_p99_ms"] = Quantile(flood.ok_ms, 0.99);
    state.counters["ok_max_ms"] = flood.ok_ms.empty() ? 0 : flood.ok_ms.back();
    state.counters["late"] =
        double(flood.ok_ms.end() - std::upper_bound(flood.ok_ms.begin(), flood.ok_ms.end(), 5000.0));
    state.counters["shed_max_ms"] = flood.shed_ms.empty() ? 0 : flood.shed_ms.back();
    state.counters["served_per_s"] = double(flood.ok_ms.size()) / flood.seconds;
  }
}
BENCHMARK(BM_FilterFlood)
    ->Args({4000, 0})
    ->Args({4000, 500})
    ->Args({8000, 0})
    ->Args({8000, 2000})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);

}  // namespace
}  // namespace gpupack::extender

int main(int argc, char** argv) {
  // 1,100 client sockets and as many server-side ones live in this one process.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  // A flood's 8,000 connections, both ends, beside the idle and slow ones.
  GPUPACK_CHECK(files.rlim_cur >=
                2 * 8000 + 2 * (gpupack::extender::kIdleConnections + gpupack::extender::kSlowConnections) + 64);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
