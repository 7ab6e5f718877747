// gpupack-agent: the node agent (docs/agent.md). Parses flags, wires the
// discovery backend, the enforcer, the reporter and the HTTP endpoints, and runs one pass every
// poll interval until SIGTERM or SIGINT; `--once --print` runs one pass and prints it.

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/kube_sink.h"
#include "common/build_info.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "server/http_server.h"

namespace {

using namespace gpupack;
using std::chrono::seconds;

constexpr const char* kUsage = R"(usage: gpupack-agent --node-name NAME [--backend nvml|file:PATH] [flags]

  --node-name NAME            this node (default: $NODE_NAME)
  --backend nvml|file:PATH    GPUs from the driver (default) or from one node entry of a cluster file
  --kubeconfig FILE           API server from a kubeconfig (default: in-cluster service account)
  --once                      run one pass and exit (status 1 when discovery fails)
  --print                     with --once: print the GPUNode object as JSON on stdout; no API server
  --listen HOST:PORT          serve /metrics and /healthz (default :9402; port 0 picks a free
                              port); the bound address is printed as the first stdout line
  --poll-interval DUR         discovery / enforcement / audit period (default 10s)
  --heartbeat-interval DUR    GPUNode status written at least this often (default 60s)
  --min-write-interval DUR    and, for changes, at most this often (default 10s)
  --change-threshold-mib N    used-memory movement that counts as a change (default 256)
  --max-pods-per-device N     gpupack.io/gpu capacity = devices x N (default 16)
  --nvml-library PATH         NVML library to dlopen (default libnvidia-ml.so.1)
  --proc-root DIR             where /proc is (default /proc; the agent needs hostPID)
  --cgroup-root DIR           cgroup v2 mount (default /sys/fs/cgroup)
Durations as Go writes them (30s, 5m, 1h30m), at least 1s.
)";

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpupack-agent: %s\n", message.c_str());
  return 2;
}

// The agent's periods are whole seconds: a Go duration of at least 1s, rounded down.
bool ParseSeconds(const std::string& text, seconds* out) {
  StatusOr<std::chrono::nanoseconds> duration = ParseDuration(text);
  if (!duration.ok() || *duration < seconds(1)) return false;
  *out = std::chrono::duration_cast<seconds>(*duration);
  return true;
}

bool ParseInt(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoll(text);
  return *out >= lo && *out <= hi;
}

}  // namespace

int main(int argc, char** argv) {
  std::string node_name = std::getenv("NODE_NAME") ? std::getenv("NODE_NAME") : "";
  std::string backend_flag = "nvml", kubeconfig, listen = ":9402";
  std::string nvml_library = "libnvidia-ml.so.1", proc_root = "/proc", cgroup_root = "/sys/fs/cgroup";
  seconds poll(10), heartbeat(60), min_write(10);
  int64_t threshold = 256, max_pods = 16;
  bool once = false, print = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--once") {
      once = true;
      continue;
    }
    if (arg == "--print") {
      print = true;
      continue;
    }
    if (i + 1 >= argc) return Fail(arg + " needs a value\n" + kUsage);
    const std::string value = argv[++i];
    bool ok = true;
    if (arg == "--node-name") node_name = value;
    else if (arg == "--backend") backend_flag = value;
    else if (arg == "--kubeconfig") kubeconfig = value;
    else if (arg == "--listen") listen = value;
    else if (arg == "--nvml-library") nvml_library = value;
    else if (arg == "--proc-root") proc_root = value;
    else if (arg == "--cgroup-root") cgroup_root = value;
    else if (arg == "--poll-interval") ok = ParseSeconds(value, &poll);
    else if (arg == "--heartbeat-interval") ok = ParseSeconds(value, &heartbeat);
    else if (arg == "--min-write-interval") ok = ParseSeconds(value, &min_write);
    else if (arg == "--change-threshold-mib") ok = ParseInt(value, 0, 1 << 30, &threshold);
    else if (arg == "--max-pods-per-device") ok = ParseInt(value, 1, 1024, &max_pods);
    else return Fail("unknown flag " + arg + "\n" + kUsage);
    if (!ok) return Fail(arg + " " + value + ": invalid value");
  }
  if (node_name.empty()) return Fail("--node-name (or $NODE_NAME) is required\n" + std::string(kUsage));
  if (print && !once) return Fail("--print needs --once");

  agent::AgentMetrics metrics(node_name);
  metrics.SetBuildInfo(BuildInfo{GPUPACK_VERSION, GPUPACK_REVISION});
  std::unique_ptr<agent::GpuBackend> backend;
  if (backend_flag == "nvml") {
    agent::NvmlBackendOptions o;
    o.library = nvml_library;
    o.proc_root = proc_root;
    o.cgroup_root = cgroup_root;
    o.on_nvml_error = [&metrics](std::string_view call) { metrics.CountNvmlError(call); };
    backend = std::make_unique<agent::NvmlBackend>(o);
  } else if (backend_flag.rfind("file:", 0) == 0 && backend_flag.size() > 5) {
    backend = std::make_unique<agent::FileBackend>(backend_flag.substr(5), node_name);
  } else {
    return Fail("--backend " + backend_flag + ": expected nvml or file:PATH");
  }
  agent::AgentOptions options;
  options.node_name = node_name;
  options.cgroup_root = cgroup_root;
  options.max_pods_per_device = static_cast<int>(max_pods);

  if (print) {
    agent::Agent pass(options, backend.get(), nullptr, nullptr, nullptr, &metrics, &SystemClock::Instance());
    auto status = pass.RunOnce();
    if (!status.ok()) {
      std::fprintf(stderr, "gpupack-agent: %s\n", status.status().ToString().c_str());
      return 1;
    }
    std::cout << api::GpuNodeObject(node_name, *status).dump(2) << std::endl;
    return 0;
  }

  auto config = kube::ConfigFromFlagOrCluster(kubeconfig);
  if (!config.ok()) return Fail(config.status().ToString());
  auto client = kube::Client::Create(*config);
  if (!client.ok()) return Fail(client.status().ToString());
  agent::KubeSink sink(client->get());
  agent::ReporterOptions ro;
  ro.node_name = node_name;
  ro.heartbeat_interval = heartbeat;
  ro.min_write_interval = min_write;
  ro.change_threshold_mib = threshold;
  ro.max_pods_per_device = static_cast<int>(max_pods);
  agent::Reporter reporter(ro, &sink, &SystemClock::Instance());
  kube::InformerOptions io;
  io.field_selector = "spec.nodeName=" + node_name;
  // A pod change on this node (a container started, a pod terminating) runs a pass early, so caps
  // are applied as soon as the container exists and soft limits are zeroed while the cgroup is
  // still there.
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool pods_changed = false;
  auto wake = [&] {
    std::lock_guard<std::mutex> lock(mu);
    pods_changed = true;
    cv.notify_all();
  };
  kube::InformerHandlers handlers;
  handlers.on_add = [&](const nlohmann::json&) { wake(); };
  handlers.on_update = [&](const nlohmann::json&, const nlohmann::json&) { wake(); };
  handlers.on_delete = [&](const nlohmann::json&) { wake(); };
  kube::Informer pods(client->get(), kube::PodsResource(), io, handlers);
  agent::PodLister lister = [&pods]() -> StatusOr<std::vector<nlohmann::json>> {
    if (!pods.HasSynced()) return Status::Unavailable("pod informer has not synced yet");
    return pods.List();
  };
  // One GET of the Node per pass: the administrator's device exclusions (docs/annotations.md).
  options.excluded_devices = [&client, &node_name]() -> StatusOr<std::vector<std::string>> {
    GPUPACK_ASSIGN_OR_RETURN(nlohmann::json node, (*client)->GetNode(node_name));
    return api::ExcludedDevicesOfNode(node);
  };
  agent::Agent agent(options, backend.get(), lister, &reporter, &sink, &metrics, &SystemClock::Instance());

  if (once) {
    pods.Start();
    pods.WaitForSync(std::chrono::seconds(30));
    auto status = agent.RunOnce();
    if (!status.ok()) {
      std::fprintf(stderr, "gpupack-agent: %s\n", status.status().ToString().c_str());
      return 1;
    }
    return 0;
  }

  std::string host;
  int port = 0;
  if (!server::ParseListenAddress(listen, &host, &port).ok()) return Fail("--listen " + listen + ": expected HOST:PORT");
  const StopSignals stop_signals;  // before any thread starts, so only the waiter below receives them

  Clock::TimePoint last_pass = SystemClock::Instance().Now();
  server::HttpServerOptions http_options;
  http_options.component = "agent";
  http_options.worker_threads = 1;  // /metrics only
  http_options.health = [&]() -> std::string {
    std::lock_guard<std::mutex> lock(mu);
    const auto age = SystemClock::Instance().Now() - last_pass;
    if (age > 3 * poll + seconds(30)) return "agent loop stalled: last pass " +
                                             std::to_string(std::chrono::duration_cast<seconds>(age).count()) + "s ago";
    return "";
  };
  server::HttpServer http(http_options);
  http.AddMetrics([&metrics] { return metrics.Collect(); });
  StatusOr<std::string> address = http.Start(listen);
  if (!address.ok()) return Fail(address.status().ToString());
  std::cout << *address << std::endl;

  std::thread waiter([&] {
    const int signal_number = stop_signals.Wait();
    GPUPACK_LOG(kInfo, "agent") << "signal " << signal_number << ": stopping";
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    cv.notify_all();
  });
  pods.Start();
  // Enforcement waits for the pod list; discovery and reporting do not wait long for it.
  pods.WaitForSync(std::chrono::seconds(5));
  GPUPACK_LOG(kInfo, "agent") << "node " << node_name << ", backend " << backend_flag << ", poll " << poll.count()
                              << "s, heartbeat " << heartbeat.count() << "s";
  for (;;) {
    auto status = agent.RunOnce();
    if (!status.ok()) GPUPACK_LOG(kError, "agent") << "discovery failed (retrying): " << status.status();
    std::unique_lock<std::mutex> lock(mu);
    last_pass = SystemClock::Instance().Now();
    // At most one early pass per second, however busy the pods are.
    if (cv.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; })) break;
    if (cv.wait_for(lock, poll - std::min(poll, seconds(1)), [&] { return stopping || pods_changed; }) && stopping) break;
    pods_changed = false;
  }
  waiter.join();
  pods.Stop();
  http.Drain();
  return 0;
}
