// gpupack-extender: the kube-scheduler extender (docs/extender.md, docs/cluster-file.md). Parses
// flags, loads the config and the backend, serves until SIGTERM or SIGINT, then stops gracefully
// (in-flight requests finish, idle keep-alive connections close). `gpupack-extender recommend`
// instead asks a running extender for its right-sizing report (docs/recommendations.md).
#include <httplib.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

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
#include "scheduler/extender/flags.h"
#include "scheduler/extender/maintainer.h"
#include "scheduler/extender/metrics.h"
#include "scheduler/extender/recommend_command.h"
#include "scheduler/extender/recommendations.h"
#include "scheduler/extender/routes.h"
#include "scheduler/extender/usage_store.h"
#include "server/http_server.h"
#include "translate/cluster_file.h"

namespace {

int Fail(const std::string& message) { return gpupack::FailStartup("gpupack-extender", message); }

// `gpupack-extender recommend …`: GET /recommendations, print the table or the JSON.
int Recommend(const std::vector<std::string>& args) {
  using namespace gpupack;
  auto fail = [](const std::string& message) { return FailStartup("gpupack-extender recommend", message); };
  StatusOr<extender::RecommendFlags> flags = extender::ParseRecommendFlags(args);
  if (!flags.ok()) return fail(flags.status().message());
  if (flags->help) {
    std::fputs(extender::kRecommendUsage, stdout);
    return 0;
  }
  httplib::Client client(flags->extender);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(30));
  httplib::Result got = client.Get("/recommendations");
  if (!got) return fail("cannot reach the extender at " + flags->extender + ": " + httplib::to_string(got.error()));
  if (got->status != 200) {
    return fail(flags->extender + "/recommendations answered " + std::to_string(got->status) + ": " + got->body);
  }
  const nlohmann::json body = nlohmann::json::parse(got->body, nullptr, /*allow_exceptions=*/false);
  StatusOr<api::RecommendationReport> report = api::RecommendationReportFromJson(body);
  if (!report.ok()) return fail(flags->extender + "/recommendations: " + report.status().message());
  const api::RecommendationReport shown = extender::InNamespace(std::move(report).value(), flags->ns);
  if (flags->json) {
    std::printf("%s\n", api::RecommendationReportToJson(shown).dump().c_str());
  } else {
    std::fputs(extender::FormatRecommendationTable(shown).c_str(), stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupack;
  if (argc > 1 && std::string(argv[1]) == "recommend")
    return Recommend(std::vector<std::string>(argv + 2, argv + argc));
  StatusOr<extender::ExtenderFlags> parsed =
      extender::ParseExtenderFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) return Fail(parsed.status().message());
  const extender::ExtenderFlags& flags = *parsed;
  if (flags.help) {
    std::fputs(extender::kExtenderUsage, stdout);
    return 0;
  }

  const StopSignals stop_signals;  // before any thread starts

  StatusOr<extender::ExtenderConfig> configured = extender::ConfigOf(flags);
  if (!configured.ok()) return Fail(configured.status().message());
  const extender::ExtenderConfig& config = *configured;

  const Clock& clock = SystemClock::Instance();
  extender::WorkloadUsageStore usage(config.usage_store, clock);
  std::unique_ptr<extender::ClusterBackend> backend;
  model::MiB typical_device_mib = 81920;
  if (flags.standalone_cluster) {
    StatusOr<std::vector<model::Node>> nodes = translate::LoadClusterFile(*flags.standalone_cluster);
    if (!nodes.ok()) return Fail(nodes.status().message());
    if (Status fits = extender::CheckConfigAgainstCluster(config, *nodes); !fits.ok()) {
      return Fail((flags.config_path ? *flags.config_path + ": " : std::string()) + fits.message());
    }
    typical_device_mib = placement::TypicalDeviceMiB(*nodes);
    backend = std::make_unique<extender::StandaloneBackend>(std::move(nodes).value());
  } else {
    cluster::KubeBackendConfig kube;
    kube.max_devices_per_container = config.max_devices_per_container;
    kube.binds_in_flight = config.bind_threads;
    kube.usage = &usage;
    kube.ceiling_overcommit_pct = config.ceiling_overcommit_pct;
    StatusOr<std::unique_ptr<cluster::KubeBackend>> made =
        cluster::NewKubeBackend(flags.kubeconfig.value_or(""), std::move(kube));
    if (!made.ok()) return Fail(made.status().message());
    backend = std::move(made).value();
  }

  const placement::PlacementOptions placement = extender::PlacementOptionsOf(config);
  auto policy = std::make_shared<placement::Policy>(config.policy, placement::DefaultPriorWorkload(typical_device_mib),
                                                    placement);
  extender::ClusterState state(policy, clock, config.heartbeat_ttl, config.tie_break_seed);
  extender::ExtenderMetrics metrics(&state, config.per_device_metrics, BuildInfo{GPUPACK_VERSION, GPUPACK_REVISION});
  extender::Extender service(state, *backend, extender::ExtenderOptionsOf(config), clock, &metrics);

  if (Status started = backend->Start(state); !started.ok()) return Fail(started.ToString());

  server::HttpServer http(extender::ExtenderServerOptions(config, service));
  extender::RegisterVerbs(http, service, config.prefix);
  extender::RegisterMetrics(http, service, metrics);
  const placement::RightsizingOptions& rightsizing = config.rightsizing;
  extender::RegisterRecommendations(http, usage, rightsizing);
  // The metrics listener is a second server with only the built-in endpoints.
  std::unique_ptr<server::HttpServer> metrics_http;
  if (!config.metrics_listen.empty()) {
    metrics_http = std::make_unique<server::HttpServer>(extender::MetricsServerOptions(config, service));
    extender::RegisterMetrics(*metrics_http, service, metrics);
    extender::RegisterRecommendations(*metrics_http, usage, rightsizing);
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
                                 << (flags.standalone_cluster ? "standalone" : "cluster") << ")";

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
