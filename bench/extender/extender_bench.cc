// The extender under load, as kube-scheduler drives it, with the targets it is held to:
//   - filter + prioritize of one pod against 1,000 and 5,000 nodes (names only, nodeCacheCapable)
//     and 500 full Node objects (~4 KB each), over HTTP on loopback with keep-alive, with 1 and 8
//     concurrent clients: p50 / p99 latency (µs) and requests/s (items_per_second counts one
//     filter + prioritize pair as 2 requests; target: ≥ 2,000 pairs/s at 5,000 nodes with 8
//     clients, ≥ 1,000 with 1). The client (BenchClient) is a minimal keep-alive HTTP/1.1 client:
//     one sendmsg per request, one reused buffer, every reply read in full and checked (status,
//     framing, one priority per node), but not parsed as JSON. kube-scheduler's Go client also
//     encodes the args and decodes the reply (encoding/json), on cores of its own; here client and
//     server share the machine's cores, so a heavier client would mostly measure itself (the
//     cpp-httplib client used before polled before every 4 KB read and spent about half the
//     server's CPU per pair);
//   - the same bodies against a null handler that only decodes them (the transport's limit);
//   - the verbs in-process (server-side time; target: p99 of the pair ≤ 2 ms at 5,000 nodes),
//     from 1 and 8 threads at once (the per-request snapshot keeps them from contending);
//   - the /20000 cases: the same on a second cluster of 20,000 nodes × 8 GPUs (targets: cost
//     linear in cluster size, server-side p50 of the pair ≤ 4 ms, process RSS ≤ 300 MB; run them
//     alone, --benchmark_filter=/20000, so that the RSS counter sees that cluster only);
//   - resident memory with 5,000 nodes × 8 GPUs and 40,000 allocations (target ≤ 150 MB), and
//     with 20,000 × 8 and 160,000.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <benchmark/benchmark.h>

#include "api/extender_types.h"
#include "common/clock.h"
#include "scheduler/extender/args_decoder.h"
#include "scheduler/extender/backend.h"
#include "scheduler/extender/cluster_state.h"
#include "scheduler/extender/extender.h"
#include "scheduler/extender/metrics.h"
#include "scheduler/extender/routes.h"
#include "testing/builders.h"
#include "testing/fake_clock.h"
#include "testing/loopback.h"

namespace gpupack::extender {
namespace {

using nlohmann::json;

constexpr int kGpusPerNode = 8;

std::string NodeName(int i) { return "gpu-node-" + std::to_string(i); }

// A Node as the API server returns it, padded to about 4 KB with realistic fields.
json FullNode(int i) {
  json labels = json::object();
  for (int l = 0; l < 24; ++l) labels["example.com/label-" + std::to_string(l)] = "value-" + std::to_string(l * i % 97);
  labels["kubernetes.io/hostname"] = NodeName(i);
  json conditions = json::array();
  for (const char* type : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "NetworkUnavailable"}) {
    conditions.push_back({{"type", type},
                          {"status", "False"},
                          {"lastHeartbeatTime", "2026-11-29T10:00:00Z"},
                          {"lastTransitionTime", "2026-11-01T00:00:00Z"},
                          {"reason", std::string("Kubelet") + type},
                          {"message", "kubelet has sufficient resources and the condition is as expected"}});
  }
  json images = json::array();
  for (int m = 0; m < 8; ++m) {
    images.push_back(
        {{"names",
          {"registry.example.com/team/image-" + std::to_string(m) + "@sha256:0123456789abcdef0123456789abcdef"}},
         {"sizeBytes", 1234567890 + m}});
  }
  json capacity = {{"cpu", "96"}, {"memory", "1056000000Ki"}, {"pods", "110"}, {"gpupack.io/gpu-memory", "655360Mi"}};
  return {
      {"metadata",
       {{"name", NodeName(i)},
        {"uid", "3f0b1c7e-6a1d-4c1f-9a55-" + std::to_string(100000000000 + i)},
        {"resourceVersion", "918273"},
        {"labels", labels},
        {"annotations",
         {{"node.alpha.kubernetes.io/ttl", "0"}, {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}}}}},
      {"spec", {{"podCIDR", "10.244.1.0/24"}, {"providerID", "cloud://region/zone/" + NodeName(i)}}},
      {"status",
       {{"capacity", capacity},
        {"allocatable", capacity},
        {"conditions", conditions},
        {"addresses",
         {{{"type", "InternalIP"}, {"address", "10.0.0.1"}}, {{"type", "Hostname"}, {"address", NodeName(i)}}}},
        {"nodeInfo",
         {{"kubeletVersion", "v1.31.0"},
          {"containerRuntimeVersion", "containerd://1.7.0"},
          {"osImage", "Ubuntu 22.04"},
          {"kernelVersion", "6.5.0"},
          {"architecture", "amd64"}}},
        {"images", images}}}};
}

// A shared fixture: a cluster of `cluster_nodes` nodes with a realistic mix of allocations,
// served by the extender and by a null handler.
struct World {
  const int cluster_nodes;
  FakeClock clock;
  std::unique_ptr<ClusterState> state;
  std::unique_ptr<StandaloneBackend> backend;
  std::unique_ptr<ExtenderMetrics> metrics;
  std::unique_ptr<Extender> extender;
  std::unique_ptr<server::HttpServer> server;
  int port = 0;
  std::unique_ptr<server::HttpServer> null_server;
  int null_port = 0;
  std::map<int, std::string> names_body;  // by node count
  std::vector<std::string> shape_bodies;  // every node's name, 64 distinct request sizes
  std::string full_nodes_body;

  explicit World(int cluster_nodes) : cluster_nodes(cluster_nodes) {
    std::vector<model::Node> nodes;
    for (int i = 0; i < cluster_nodes; ++i) nodes.push_back(builders::GpuNode(NodeName(i), kGpusPerNode, 81920));
    auto policy = builders::PriorPolicy(model::PolicyKind::kFgd);
    state = std::make_unique<ClusterState>(policy, clock, std::chrono::seconds(0));
    backend = std::make_unique<StandaloneBackend>(std::move(nodes));
    GPUPACK_CHECK(backend->Start(*state).ok());
    // Half the GPUs carry one 20 GiB share, so nodes differ and FGD has work to do.
    for (int i = 0; i < cluster_nodes; ++i) {
      for (int g = 0; g < kGpusPerNode; g += 2) {
        api::Allocation a;
        a.node = NodeName(i);
        a.containers.push_back({"main",
                                0,
                                false,
                                false,
                                false,
                                {{"GPU-" + a.node + "-" + std::to_string(g), g, 20480 + 1024 * (i % 7), "", ""}}});
        state->UpsertPodAllocation("seed-" + std::to_string(i) + "-" + std::to_string(g), "bench/seed", a);
      }
    }
    metrics = std::make_unique<ExtenderMetrics>(state.get(), false, BuildInfo{"bench", "bench"});
    // The binary's defaults for policy: fgd: FGD score levels on the 80 GiB unit, fixed node-order
    // tie-break.
    ExtenderOptions extender_options;
    extender_options.decision.device_mib = 81920;
    extender = std::make_unique<Extender>(*state, *backend, extender_options, clock, metrics.get());
    ExtenderConfig config;
    config.threads = 8;
    server = std::make_unique<server::HttpServer>(ExtenderServerOptions(config, *extender));
    RegisterVerbs(*server, *extender, "");
    GPUPACK_CHECK(server->Start("127.0.0.1:0").ok());
    port = server->port();

    server::HttpServerOptions null_options;
    null_options.worker_threads = 8;
    null_server = std::make_unique<server::HttpServer>(null_options);
    null_server->Handle("POST", "/filter", [](const server::Request& req) {
      DecodedArgs args;
      GPUPACK_CHECK(DecodeExtenderArgsInto(req.body, args).ok());
      return server::Response{
          200,
          "application/json",
          R"({"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""})",
          {}};
    });
    GPUPACK_CHECK(null_server->Start("127.0.0.1:0").ok());
    null_port = null_server->port();

    const json pod = builders::PodJson("bench-pod", "bench-uid", "10Gi");
    for (int n : {1000, 5000, 20000}) {
      if (n > cluster_nodes) continue;
      std::vector<std::string> names;
      for (int i = 0; i < n; ++i) names.push_back(NodeName(i));
      names_body[n] = builders::FilterBody(pod, names);
    }
    {
      std::vector<std::string> names;
      for (int i = 0; i < cluster_nodes; ++i) names.push_back(NodeName(i));
      for (int s = 0; s < 64; ++s) {
        shape_bodies.push_back(builders::FilterBody(
            builders::PodJson("shape-pod", "shape-uid", std::to_string(1024 + 512 * s) + "Mi"), names));
      }
    }
    json items = json::array();
    for (int i = 0; i < 500; ++i) items.push_back(FullNode(i));
    full_nodes_body =
        json{{"Pod", pod}, {"Nodes", {{"metadata", json::object()}, {"items", items}}}, {"NodeNames", nullptr}}.dump();
  }
  ~World() {
    server->Drain();
    null_server->Drain();
  }
};

// The 5,000-node world unless a case asks for more nodes than it has.
World& TheWorld(int nodes = 5000) {
  // Shared by every case; torn down with the process. Built on first use, so that a run of the
  // /20000 cases alone holds only the 20,000-node one.
  static std::mutex mu;
  static std::map<int, World*> worlds;
  std::lock_guard lock(mu);
  const int size = nodes > 5000 ? 20000 : 5000;
  World*& world = worlds[size];
  if (world == nullptr) world = new World(size);
  return *world;
}

// A keep-alive HTTP/1.1 client that costs what a transport must and no more (see the header):
// the request's head and body go out in one sendmsg, the reply is read into one reused buffer
// with as few recv calls as the socket allows, and its status and Content-Length are checked.
class BenchClient {
 public:
  explicit BenchClient(int port) {
    fd_ = ConnectLoopback(port);
    GPUPACK_CHECK(fd_ >= 0);
  }
  ~BenchClient() { close(fd_); }
  BenchClient(const BenchClient&) = delete;
  BenchClient& operator=(const BenchClient&) = delete;

  // POSTs `body` as JSON to `path` and reads the whole reply. Returns its status (-1: the
  // connection failed or the reply was malformed); body() is then the reply's body.
  int Post(std::string_view path, std::string_view body) {
    head_.clear();
    head_.append("POST ").append(path).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n");
    head_.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n\r\n");
    if (!SendAll({head_, body})) return -1;
    return ReadReply();
  }
  std::string_view body() const { return std::string_view(in_).substr(body_at_, body_size_); }

 private:
  bool SendAll(std::array<std::string_view, 2> parts) {
    size_t first = 0;
    while (first < parts.size()) {
      iovec iov[2];
      int count = 0;
      for (size_t i = first; i < parts.size(); ++i) {
        iov[count++] = {const_cast<char*>(parts[i].data()), parts[i].size()};
      }
      msghdr message{};
      message.msg_iov = iov;
      message.msg_iovlen = static_cast<size_t>(count);
      ssize_t sent = sendmsg(fd_, &message, MSG_NOSIGNAL);
      if (sent < 0) return false;
      while (first < parts.size() && static_cast<size_t>(sent) >= parts[first].size()) {
        sent -= static_cast<ssize_t>(parts[first].size());
        ++first;
      }
      if (first < parts.size()) parts[first].remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }

  // Reads one reply: the head, then exactly Content-Length bytes of body.
  int ReadReply() {
    size_t have = 0;
    size_t head_end = std::string::npos;
    while (head_end == std::string::npos) {
      if (!Receive(have)) return -1;
      head_end = std::string_view(in_.data(), have).find("\r\n\r\n");
    }
    const std::string_view head(in_.data(), head_end);
    int status = 0;
    if (!head.starts_with("HTTP/1.1 ") || head.size() < 12) return -1;
    std::from_chars(head.data() + 9, head.data() + 12, status);
    constexpr std::string_view kLength = "\r\ncontent-length:";
    size_t length_at = std::string_view::npos;
    for (size_t i = 0; i + kLength.size() <= head.size(); ++i) {
      if (strncasecmp(head.data() + i, kLength.data(), kLength.size()) == 0) {
        length_at = i + kLength.size();
        break;
      }
    }
    if (length_at == std::string_view::npos) return -1;
    while (length_at < head.size() && head[length_at] == ' ') ++length_at;
    size_t length = 0;
    std::from_chars(head.data() + length_at, head.data() + head.size(), length);
    body_at_ = head_end + 4;
    body_size_ = length;
    while (have < body_at_ + length) {
      if (!Receive(have)) return -1;
    }
    if (have != body_at_ + length) return -1;  // no pipelining: nothing may follow the reply
    return status;
  }

  // Appends what the socket has to in_[0, have), growing in_ when full.
  bool Receive(size_t& have) {
    if (in_.size() - have < 64 * 1024) in_.resize(std::max<size_t>(256 * 1024, 2 * in_.size()));
    const ssize_t n = recv(fd_, in_.data() + have, in_.size() - have, 0);
    if (n <= 0) return false;
    have += static_cast<size_t>(n);
    return true;
  }

  int fd_ = -1;
  std::string head_;
  std::string in_;
  size_t body_at_ = 0;
  size_t body_size_ = 0;
};

void ReportLatency(benchmark::State& state, std::vector<double>& micros) {
  if (micros.empty()) return;
  std::sort(micros.begin(), micros.end());
  auto at = [&](double q) {
    return micros[std::min(micros.size() - 1, static_cast<size_t>(q * static_cast<double>(micros.size())))];
  };
  state.counters["p50_us"] = benchmark::Counter(at(0.50), benchmark::Counter::kAvgThreads);
  state.counters["p99_us"] = benchmark::Counter(at(0.99), benchmark::Counter::kAvgThreads);
}

int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

// Resident memory of the cluster state alone: 5,000 nodes × 8 GPUs and 40,000 allocations,
// measured as the process's RSS growth while building it (registered first, so it runs before the shared World exists).
void BM_MemoryState(benchmark::State& state) {
  for (auto _ : state) {
    const int64_t before = RssBytes();
    FakeClock clock;
    auto policy = builders::PriorPolicy(model::PolicyKind::kFgd);
    ClusterState cluster(policy, clock, std::chrono::seconds(0));
    const int nodes = static_cast<int>(state.range(0));
    const int allocations = static_cast<int>(state.range(1));
    for (int i = 0; i < nodes; ++i) cluster.UpsertNode(builders::GpuNode(NodeName(i), kGpusPerNode, 81920));
    for (int p = 0; p < allocations; ++p) {
      const int node = p % nodes;
      const int gpu = (p / nodes) % kGpusPerNode;
      api::Allocation a;
      a.node = NodeName(node);
      a.containers.push_back(
          {"main", 0, false, false, false, {{"GPU-" + a.node + "-" + std::to_string(gpu), gpu, 8192, "", ""}}});
      cluster.UpsertPodAllocation("pod-uid-" + std::to_string(p) + "-0123456789abcdef",
                                  "namespace/pod-" + std::to_string(p), a);
    }
    state.counters["rss_MB"] = static_cast<double>(RssBytes() - before) / 1e6;
    state.counters["pods"] = static_cast<double>(cluster.PodCount());
  }
}
BENCHMARK(BM_MemoryState)->Args({5000, 40000})->Args({20000, 160000})->Iterations(1)->Unit(benchmark::kMillisecond);

// One iteration = POST filter, then POST prioritize with the same body (as kube-scheduler does
// when the decisive filter is off; with it on, prioritize usually sees one node and is skipped).
// Every reply is read in full and checked: status 200, a filter result object, and a priority
// list with one entry per node sent (`nodes`; 0: not checked).
void RunHttp(benchmark::State& state, int port, const std::string& body, bool prioritize, size_t nodes = 0) {
  BenchClient client(port);
  std::vector<double> micros;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (client.Post("/filter", body) != 200 || !client.body().starts_with("{\"Nodes\":") ||
        !client.body().ends_with("}")) {
      state.SkipWithError("filter failed");
      break;
    }
    if (prioritize) {
      const bool ok = client.Post("/prioritize", body) == 200 && client.body().starts_with("[") &&
                      client.body().ends_with("]") &&
                      (nodes == 0 || size_t(std::count(client.body().begin(), client.body().end(), '{')) == nodes);
      if (!ok) {
        state.SkipWithError("prioritize failed");
        break;
      }
    }
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  ReportLatency(state, micros);
  state.SetItemsProcessed(state.iterations() * (prioritize ? 2 : 1));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()) * (prioritize ? 2 : 1));
}

void BM_HttpFilterPrioritizeNames(benchmark::State& state) {
  World& w = TheWorld(static_cast<int>(state.range(0)));
  RunHttp(state, w.port, w.names_body.at(static_cast<int>(state.range(0))), true, static_cast<size_t>(state.range(0)));
}
BENCHMARK(BM_HttpFilterPrioritizeNames)->Arg(1000)->Arg(5000)->Arg(20000)->Threads(1)->Threads(8)->UseRealTime();

void BM_HttpFilterNames(benchmark::State& state) {
  World& w = TheWorld(static_cast<int>(state.range(0)));
  RunHttp(state, w.port, w.names_body.at(static_cast<int>(state.range(0))), false);
}
BENCHMARK(BM_HttpFilterNames)->Arg(1000)->Arg(5000)->Arg(20000)->Threads(1)->Threads(8)->UseRealTime();

void BM_HttpNullDecodeNames(benchmark::State& state) {
  World& w = TheWorld();
  RunHttp(state, w.null_port, w.names_body.at(static_cast<int>(state.range(0))), false);
}
BENCHMARK(BM_HttpNullDecodeNames)->Arg(1000)->Arg(5000)->Threads(1)->Threads(8)->UseRealTime();

void BM_HttpFilterPrioritizeFullNodes(benchmark::State& state) {
  RunHttp(state, TheWorld().port, TheWorld().full_nodes_body, true, 500);
}
BENCHMARK(BM_HttpFilterPrioritizeFullNodes)->Arg(500)->Threads(1)->Threads(8)->UseRealTime();

void BM_HttpNullDecodeFullNodes(benchmark::State& state) {
  RunHttp(state, TheWorld().null_port, TheWorld().full_nodes_body, false);
}
BENCHMARK(BM_HttpNullDecodeFullNodes)->Arg(500)->Threads(1)->Threads(8)->UseRealTime();

// Server-side time: the verbs without sockets. With several threads, each is a client of its own
// (the HTTP server's workers call the verbs the same way).
void BM_InProcessFilterPrioritizeNames(benchmark::State& state) {
  World& w = TheWorld(static_cast<int>(state.range(0)));
  const std::string& body = w.names_body.at(static_cast<int>(state.range(0)));
  std::vector<double> micros;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(w.extender->Filter(body));
    benchmark::DoNotOptimize(w.extender->Prioritize(body));
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  ReportLatency(state, micros);
  state.SetItemsProcessed(state.iterations() * 2);
  state.counters["process_rss_MB"] =
      benchmark::Counter(static_cast<double>(RssBytes()) / 1e6, benchmark::Counter::kAvgThreads);
}
BENCHMARK(BM_InProcessFilterPrioritizeNames)->Arg(1000)->Arg(5000)->Arg(20000)->Threads(1)->Threads(8)->UseRealTime();

// As above, but every iteration asks for a size not seen in the last 64 calls, so the filter
// evaluates every node afresh (the per-node memo only serves the prioritize that follows).
void BM_InProcessFilterPrioritizeNewShape(benchmark::State& state) {
  World& w = TheWorld(static_cast<int>(state.range(0)));
  std::vector<double> micros;
  size_t next = static_cast<size_t>(state.thread_index()) * 8;  // threads ask for different sizes
  for (auto _ : state) {
    const std::string& body = w.shape_bodies[next++ % w.shape_bodies.size()];
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(w.extender->Filter(body));
    benchmark::DoNotOptimize(w.extender->Prioritize(body));
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  ReportLatency(state, micros);
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_InProcessFilterPrioritizeNewShape)->Arg(5000)->Arg(20000)->Threads(1)->Threads(8)->UseRealTime();

// Decoding alone of the ~1.9 MB full-Node body and of 5,000 names: bytes_per_second is the JSON
// decode rate of the extender's decoder as the verbs call it (simdjson on demand, names as views;
// the same list every time, as from a scheduler, so the duplicate check is remembered) and of the
// reference (nlohmann).
template <bool kFast>
void BM_Decode(benchmark::State& state) {
  const std::string& body = state.range(0) == 500 ? TheWorld().full_nodes_body : TheWorld().names_body.at(5000);
  for (auto _ : state) {
    if constexpr (kFast) {
      DecodedArgs args;
      GPUPACK_CHECK(DecodeExtenderArgsInto(body, args).ok());
      benchmark::DoNotOptimize(args.node_names);
    } else {
      StatusOr<api::ExtenderArgs> args = api::DecodeExtenderArgs(body);
      GPUPACK_CHECK(args.ok());
      benchmark::DoNotOptimize(args);
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}
// Arg 500: full Nodes; arg 5000: names.
BENCHMARK(BM_Decode<true>)->Name("BM_DecodeFast")->Arg(500)->Arg(5000);
BENCHMARK(BM_Decode<false>)->Name("BM_DecodeReference")->Arg(500)->Arg(5000);

}  // namespace
}  // namespace gpupack::extender

BENCHMARK_MAIN();
