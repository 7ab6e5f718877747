// gpupack-extender: the kube-scheduler extender (docs/extender.md, docs/cluster-file.md). Parses
// flags, loads the config and the backend, serves until SIGTERM or SIGINT, then stops gracefully
// (in-flight requests finish, idle keep-alive connections close).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "common/build_info.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "placement/decision.h"
#include "placement/placement.h"
#include "placement/workload.h"
#include "scheduler/cluster/kube_backend.h"
#include "scheduler/extender/backend.h"
#include "scheduler/extender/config.h"
#include "scheduler/extender/extender.h"
#include "scheduler/extender/maintainer.h"
#include "scheduler/extender/metrics.h"
#include "scheduler/extender/routes.h"
#include "server/http_server.h"
#include "translate/cluster_file.h"

namespace {

constexpr const char* kUsage =
    R"(usage: gpupack-extender [--standalone-cluster FILE | --kubeconfig FILE] [--config FILE]
                        [--listen HOST:PORT] [--metrics-listen HOST:PORT] [--policy fgd|binpack|spread]

  --standalone-cluster FILE  no API server: inventory from a cluster file (docs/cluster-file.md),
                             binds recorded in memory
  --kubeconfig FILE          talk to this cluster (default without either flag: the in-cluster
                             service account)
  --config FILE              YAML config (docs/configuration.md); defaults apply without one
  --listen HOST:PORT         verbs and /healthz /readyz /metrics (overrides the config's listen);
                             port 0 picks a free port. The bound HOST:PORT is printed as the first
                             line on stdout.
  --metrics-listen HOST:PORT a second listener with only /healthz /readyz /metrics
  --policy NAME              overrides the config's policy
Verbs: POST {prefix}/filter, /prioritize, /bind, /preempt (kube-scheduler extender v1).
)";

int Fail(const std::string& message) { return gpupack::FailStartup("gpupack-extender", message); }

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupack;
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    static const char* const kFlags[] = {"--standalone-cluster", "--kubeconfig", "--config", "--listen",
                                         "--metrics-listen",     "--policy"};
    if (std::find(std::begin(kFlags), std::end(kFlags), arg) == std::end(kFlags)) {
      return Fail("unknown flag " + arg + "\n" + kUsage);
    }
    if (i + 1 >= argc) return Fail(arg + " needs a value");
    flags[arg] = argv[++i];
  }
  if (flags.count("--standalone-cluster") && flags.count("--kubeconfig")) {
    return Fail("--standalone-cluster and --kubeconfig exclude each other");
  }

  const StopSignals stop_signals;  // before any thread starts

  extender::ExtenderConfig config;
  if (flags.count("--config")) {
    StatusOr<extender::ExtenderConfig> loaded = extender::LoadExtenderConfig(flags["--config"]);
    if (!loaded.ok()) return Fail(loaded.status().message());
    config = *loaded;
  }
  if (flags.count("--listen")) config.listen = flags["--listen"];
  if (flags.count("--metrics-listen")) config.metrics_listen = flags["--metrics-listen"];
  if (flags.count("--policy")) {
    StatusOr<model::PolicyKind> kind = placement::ParsePolicyKind(flags["--policy"]);
    if (!kind.ok()) return Fail("--policy: expected fgd, binpack or spread, got \"" + flags["--policy"] + "\"");
    config.policy = *kind;
  }

  std::unique_ptr<extender::ClusterBackend> backend;
  model::MiB typical_device_mib = 81920;
  if (flags.count("--standalone-cluster")) {
    StatusOr<std::vector<model::Node>> nodes = translate::LoadClusterFile(flags["--standalone-cluster"]);
    if (!nodes.ok()) return Fail(nodes.status().message());
    if (Status fits = extender::CheckConfigAgainstCluster(config, *nodes); !fits.ok()) {
      return Fail((flags.count("--config") ? flags["--config"] + ": " : std::string()) + fits.message());
    }
    typical_device_mib = placement::TypicalDeviceMiB(*nodes);
    backend = std::make_unique<extender::StandaloneBackend>(std::move(nodes).value());
  } else {
    cluster::KubeBackendConfig kube;
    kube.max_devices_per_container = config.max_devices_per_container;
    StatusOr<std::unique_ptr<cluster::KubeBackend>> made =
        cluster::NewKubeBackend(flags.count("--kubeconfig") ? flags["--kubeconfig"] : "", std::move(kube));
    if (!made.ok()) return Fail(made.status().message());
    backend = std::move(made).value();
  }

  placement::PlacementOptions placement;
  placement.reserve_mib_per_device = config.reserve_per_device_mib;
  auto policy = std::make_shared<placement::Policy>(config.policy, placement::DefaultPriorWorkload(typical_device_mib),
                                                    placement);
  const Clock& clock = SystemClock::Instance();
  extender::ClusterState state(policy, clock, config.heartbeat_ttl, config.tie_break_seed);
  extender::ExtenderMetrics metrics(&state, config.per_device_metrics, BuildInfo{GPUPACK_VERSION, GPUPACK_REVISION});
  extender::Extender service(state, *backend, extender::ExtenderOptionsOf(config), clock, &metrics);

  if (Status started = backend->Start(state); !started.ok()) return Fail(started.ToString());

  server::HttpServer http(extender::ExtenderServerOptions(config, service));
  extender::RegisterVerbs(http, service, config.prefix);
  extender::RegisterMetrics(http, service, metrics);
  // The metrics listener is a second server with only the built-in endpoints.
  std::unique_ptr<server::HttpServer> metrics_http;
  if (!config.metrics_listen.empty()) {
    metrics_http = std::make_unique<server::HttpServer>(extender::MetricsServerOptions(config, service));
    extender::RegisterMetrics(*metrics_http, service, metrics);
  }
  StatusOr<std::string> address = http.Start(config.listen);
  if (!address.ok()) return Fail(address.status().message());
  if (metrics_http) {
    StatusOr<std::string> metrics_address = metrics_http->Start(config.metrics_listen);
    if (!metrics_address.ok()) return Fail(metrics_address.status().message());
    GPUPACK_LOG(kInfo, "extender") << "metrics on " << *metrics_address;
  }
  std::printf("%s\n", address->c_str());
  std::fflush(stdout);
  GPUPACK_LOG(kInfo, "extender") << "serving verbs on " << *address << config.prefix << " (policy "
                                 << placement::PolicyKindName(config.policy) << ", "
                                 << (flags.count("--standalone-cluster") ? "standalone" : "cluster") << ")";

  extender::Maintainer maintainer([&service] { service.Maintain(); }, clock);
  const int received = stop_signals.Wait();
  GPUPACK_LOG(kInfo, "extender") << "signal " << received << ": draining";
  maintainer.Stop();
  http.Drain();
  if (metrics_http) metrics_http->Drain();
  backend->Stop();
  GPUPACK_LOG(kInfo, "extender") << "stopped";
  return 0;
}
