// gpupack-agent: the node agent (docs/agent.md). Parses flags, wires the
// discovery backend, the enforcer, the reporter and the HTTP endpoints, and runs one pass every
// poll interval until SIGTERM or SIGINT; `--once --print` runs one pass and prints it; `--doctor`
// checks what the node can enforce and prints the report.

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/doctor.h"
#include "agent/doctor_cluster.h"
#include "agent/flags.h"
#include "agent/kube_sink.h"
#include "agent/run_loop.h"
#include "common/build_info.h"
#include "common/cli.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "server/http_server.h"

namespace {

using namespace gpupack;

int Fail(const std::string& message) { return gpupack::FailStartup("gpupack-agent", message); }

// One pass for --once; exit status 1 when discovery fails.
int RunOnePass(agent::Agent& pass, const std::string& node_name, bool print) {
  auto status = pass.RunOnce();
  if (!status.ok()) {
    std::fprintf(stderr, "gpupack-agent: %s\n", status.status().ToString().c_str());
    return 1;
  }
  if (print) std::cout << api::GpuNodeObject(node_name, *status).dump(2) << std::endl;
  return 0;
}

// --doctor --cluster: every agent node's verdicts from its GPUNode; exit 1 when one failed.
int RunClusterDoctor(const agent::AgentFlags& flags) {
  auto config = kube::ConfigFromFlagOrCluster(flags.kubeconfig);
  if (!config.ok()) return Fail(config.status().ToString());
  auto client = kube::Client::Create(*config);
  if (!client.ok()) return Fail(client.status().ToString());
  kube::ListOptions pods_of_agent;
  pods_of_agent.label_selector = flags.agent_selector;
  auto pods = (*client)->List(kube::PodsResource(), flags.agent_namespace, pods_of_agent);
  if (!pods.ok()) return Fail("listing the agent pods: " + pods.status().ToString());
  auto gpunodes = (*client)->List(kube::GpuNodesResource(), "");
  if (!gpunodes.ok()) return Fail("listing GPUNodes: " + gpunodes.status().ToString());
  const agent::ClusterDoctorResult result =
      agent::ClusterDoctor(pods->items, gpunodes->items, flags.require_memory_enforced);
  for (const std::string& line : result.lines) std::cout << line << "\n";
  std::cout << std::flush;
  return result.ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  StatusOr<agent::AgentFlags> parsed = agent::ParseAgentFlags(std::vector<std::string>(argv + 1, argv + argc),
                                                              std::getenv("NODE_NAME") ? std::getenv("NODE_NAME") : "");
  if (!parsed.ok()) return Fail(parsed.status().message());
  const agent::AgentFlags& flags = *parsed;
  if (flags.help) {
    std::fputs(agent::kAgentUsage, stdout);
    return 0;
  }
  const std::string& node_name = flags.node_name;

  agent::AgentMetrics metrics(node_name);
  metrics.SetBuildInfo(BuildInfo{GPUPACK_VERSION, GPUPACK_REVISION});
  std::unique_ptr<agent::GpuBackend> backend = agent::MakeGpuBackend(flags, &metrics);
  agent::AgentOptions options = agent::AgentOptionsOf(flags);

  if (flags.doctor && flags.doctor_cluster) return RunClusterDoctor(flags);
  if (flags.doctor) {
    const agent::DoctorReport report = agent::Diagnose(agent::DoctorEvidenceOf(flags, *backend));
    std::cout << (flags.json ? agent::DoctorJson(report).dump(2) + "\n" : agent::DoctorTable(report)) << std::flush;
    return 0;  // verdicts are the answer, not a failure of the run
  }
  if (flags.print) {
    agent::Agent pass(options, backend.get(), nullptr, nullptr, nullptr, &metrics, &SystemClock::Instance());
    return RunOnePass(pass, node_name, true);
  }

  auto config = kube::ConfigFromFlagOrCluster(flags.kubeconfig);
  if (!config.ok()) return Fail(config.status().ToString());
  auto client = kube::Client::Create(*config);
  if (!client.ok()) return Fail(client.status().ToString());
  agent::KubeSink sink(client->get());
  agent::Reporter reporter(agent::ReporterOptionsOf(flags), &sink, &SystemClock::Instance());
  agent::RunLoop loop(agent::RunLoopOptions{flags.poll}, SystemClock::Instance());
  kube::InformerOptions io;
  io.field_selector = "spec.nodeName=" + node_name;
  kube::InformerHandlers handlers;  // a pod change on this node runs a pass early
  handlers.on_add = [&loop](const nlohmann::json&) { loop.PodsChanged(); };
  handlers.on_update = [&loop](const nlohmann::json&, const nlohmann::json&) { loop.PodsChanged(); };
  handlers.on_delete = [&loop](const nlohmann::json&) { loop.PodsChanged(); };
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
  agent::Agent agent(options, backend.get(), lister, &reporter, &sink, &metrics, &SystemClock::Instance(), &sink);

  if (flags.once) {
    pods.Start();
    pods.WaitForSync(std::chrono::seconds(30));
    return RunOnePass(agent, node_name, false);
  }

  std::string host;
  int port = 0;
  if (!server::ParseListenAddress(flags.listen, &host, &port).ok()) {
    return Fail("--listen " + flags.listen + ": expected HOST:PORT");
  }
  const StopSignals stop_signals;  // before any thread starts, so only the waiter below receives them
  server::HttpServerOptions http_options;
  http_options.component = "agent";
  http_options.worker_threads = 1;  // /metrics only
  http_options.health = [&loop] { return loop.Health(); };
  server::HttpServer http(http_options);
  http.AddMetrics([&metrics] { return metrics.Collect(); });
  StatusOr<std::string> address = http.Start(flags.listen);
  if (!address.ok()) return Fail(address.status().ToString());
  std::cout << *address << std::endl;

  std::thread waiter([&] {
    const int signal_number = stop_signals.Wait();
    GPUPACK_LOG(kInfo, "agent") << "signal " << signal_number << ": stopping";
    loop.Stop();
  });
  pods.Start();
  // Enforcement waits for the pod list; discovery and reporting do not wait long for it.
  pods.WaitForSync(std::chrono::seconds(5));
  GPUPACK_LOG(kInfo, "agent") << "node " << node_name << ", backend " << flags.backend << ", poll "
                              << flags.poll.count() << "s, heartbeat " << flags.heartbeat.count() << "s, "
                              << (flags.evict_foreign_pods
                                      ? "evicting pods with foreign processes after " +
                                            std::to_string(flags.foreign_eviction_interval.count()) + "s"
                                      : std::string("foreign processes reported, not evicted"));
  loop.Run([&agent] {
    auto status = agent.RunOnce();
    if (!status.ok()) GPUPACK_LOG(kError, "agent") << "discovery failed (retrying): " << status.status();
  });
  waiter.join();
  pods.Stop();
  http.Drain();
  return 0;
}
