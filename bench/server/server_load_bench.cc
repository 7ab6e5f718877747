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
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
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
    http = std::make_unique<server::HttpServer>(ExtenderServerOptions(ExtenderConfig{}, *extender));
    RegisterVerbs(*http, *extender, "");
    GPUPACK_CHECK(http->Start("127.0.0.1:0").ok());
    body = builders::FilterBody(builders::PodJson("bench-pod", "bench-uid", "10Gi"), names);
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

}  // namespace
}  // namespace gpupack::extender

int main(int argc, char** argv) {
  // 1,100 client sockets and as many server-side ones live in this one process.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  GPUPACK_CHECK(files.rlim_cur >= 2 * (gpupack::extender::kIdleConnections + gpupack::extender::kSlowConnections) + 64);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
