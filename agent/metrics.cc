#include "agent/metrics.h"

#include <chrono>
#include <set>

#include <prometheus/text_serializer.h>

#include "agent/eviction.h"
#include "agent/foreign_process.h"
#include "common/build_info_metric.h"

namespace gpupack::agent {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

prometheus::Family<prometheus::Gauge>* Gauge(prometheus::Registry& r, const char* name, const char* help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Counter>* Counter(prometheus::Registry& r, const char* name, const char* help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

}  // namespace

void AgentMetrics::GaugeSeries::Begin() {
  for (auto& [labels, entry] : live_) entry.second = false;
}

void AgentMetrics::GaugeSeries::Set(const std::map<std::string, std::string>& labels, double value) {
  auto it = live_.find(labels);
  if (it == live_.end()) it = live_.emplace(labels, std::make_pair(&family_->Add(labels), false)).first;
  it->second.first->Set(value);
  it->second.second = true;
}

void AgentMetrics::GaugeSeries::End() {
  for (auto it = live_.begin(); it != live_.end();) {
    if (it->second.second) {
      ++it;
      continue;
    }
    family_->Remove(it->second.first);
    it = live_.erase(it);
  }
}

AgentMetrics::AgentMetrics(std::string node)
    : node_(std::move(node)),
      registry_(std::make_shared<prometheus::Registry>()),
      nvml_errors_(Counter(*registry_, "gpupack_agent_nvml_errors_total", "Failed NVML calls, by NVML function.")),
      reports_(Counter(*registry_, "gpupack_agent_reports_total",
                       "GPUNode status report decisions: written, skipped (nothing due) or error.")),
      actions_(Counter(*registry_, "gpupack_agent_enforcement_actions_total",
                       "Memory-limit actions on container cgroups: apply, verify, clear (soft limit zeroed), error.")),
      evictions_(Counter(*registry_, "gpupack_agent_evictions_total",
                         "Evictions of pods holding foreign processes on gpupack devices: evicted, blocked_by_pdb "
                         "(a PodDisruptionBudget refused), failed.")),
      report_time_(&Gauge(*registry_, "gpupack_agent_report_timestamp_seconds",
                          "Unix time of the last successful GPUNode status write.")
                        ->Add({{"node", node_}})),
      total_(Gauge(*registry_, "gpupack_agent_gpu_memory_total_bytes",
                   "Memory of each device (whole GPU or MIG instance).")),
      used_(Gauge(*registry_, "gpupack_agent_gpu_memory_used_bytes", "Live memory use of each device, from NVML.")),
      allocated_(Gauge(*registry_, "gpupack_agent_gpu_memory_allocated_bytes",
                       "Sum of the caps of gpupack containers on each device.")),
      healthy_(Gauge(*registry_, "gpupack_agent_gpu_healthy", "1 when the device answers NVML, 0 when it does not.")),
      cap_(Gauge(*registry_, "gpupack_agent_container_memory_cap_bytes",
                 "Memory cap of a gpupack container on a device.")),
      cap_used_(Gauge(*registry_, "gpupack_agent_container_memory_used_bytes",
                      "Live memory use of a gpupack container on a device.")),
      enforced_(Gauge(*registry_, "gpupack_agent_container_memory_enforced",
                      "1 when a driver memory limit equal to the cap is in place on the container's cgroup.")),
      mode_(Gauge(*registry_, "gpupack_agent_enforcement_mode",
                  "1 for the node's enforcement mode (cgroup-dmem, cgroup-misc, mps, none), else 0.")),
      findings_(Gauge(*registry_, "gpupack_agent_audit_findings",
                      "Current audit findings by kind (over-cap, over-compute, unenforced, foreign-process).")),
      foreign_(Gauge(*registry_, "gpupack_agent_foreign_processes",
                     "Processes on a device gpupack manages that no gpupack allocation of it explains.")),
      compute_allocated_(Gauge(*registry_, "gpupack_agent_gpu_compute_allocated_percent",
                               "Sum of the compute shares (percent of the device's SMs) of gpupack containers on each "
                               "device.")),
      sm_util_(Gauge(*registry_, "gpupack_agent_gpu_sm_utilization_percent",
                     "NVML utilisation of each whole GPU: percent of the last sample period a kernel ran.")),
      compute_mode_(Gauge(*registry_, "gpupack_agent_gpu_compute_enforcement",
                          "1 for how each device holds compute shares (mps-namespace, mps-client, none), else 0.")),
      container_compute_(Gauge(*registry_, "gpupack_agent_container_compute_share_percent",
                               "Compute share (percent of the device's SMs) of a gpupack container on a device.")),
      container_compute_used_(Gauge(*registry_, "gpupack_agent_container_compute_used_percent",
                                    "Percent of the SMs' time a gpupack container's processes ran on a device.")),
      namespace_compute_(Gauge(*registry_, "gpupack_agent_namespace_compute_allocated_percent",
                               "Sum of a namespace's compute shares on this node, percent of one device.")),
      namespace_compute_used_(Gauge(*registry_, "gpupack_agent_namespace_compute_used_percent",
                                    "Sum of a namespace's containers' SM time on this node, percent of one device.")) {
  // Every result from the start, so that a rate over them is defined before the first eviction.
  for (std::string_view result : {kEvictionEvicted, kEvictionBlockedByPdb, kEvictionFailed}) {
    evictions_->Add({{"node", node_}, {"result", std::string(result)}});
  }
}

void AgentMetrics::SetBuildInfo(const BuildInfo& build) { ExportBuildInfo(*registry_, build); }

void AgentMetrics::CountNvmlError(std::string_view call) {
  nvml_errors_->Add({{"node", node_}, {"call", std::string(call)}}).Increment();
}

void AgentMetrics::CountReport(std::string_view result) {
  reports_->Add({{"node", node_}, {"result", std::string(result)}}).Increment();
}

void AgentMetrics::SetReportTime(Clock::TimePoint t) {
  report_time_->Set(std::chrono::duration<double>(t.time_since_epoch()).count());
}

void AgentMetrics::CountEnforcement(const EnforcementPass& pass) {
  const std::pair<const char*, int> actions[] = {
      {"apply", pass.applied}, {"verify", pass.verified}, {"clear", pass.cleared}, {"error", pass.errors}};
  for (const auto& [action, n] : actions) {
    actions_->Add({{"node", node_}, {"action", action}}).Increment(n);
  }
}

void AgentMetrics::CountEviction(std::string_view result) {
  evictions_->Add({{"node", node_}, {"result", std::string(result)}}).Increment();
}

void AgentMetrics::Update(const api::GpuNodeStatus& status, const std::vector<ContainerCap>& caps) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, model::MiB> allocated;
  std::map<std::string, int> compute;
  for (const ContainerCap& c : caps) {
    allocated[c.device] += c.cap_mib;
    if (c.compute_pct != api::kComputeNotRecorded) compute[c.device] += c.compute_pct;
  }
  const std::set<std::string> managed = ManagedDevices(status);
  std::map<std::string, int> foreign;
  for (const api::GpuNodeAuditFinding& f : status.audit) foreign[f.device] += f.kind == api::kAuditForeignProcess;
  GaugeSeries* const replaced[] = {&total_,
                                   &used_,
                                   &allocated_,
                                   &healthy_,
                                   &cap_,
                                   &cap_used_,
                                   &enforced_,
                                   &mode_,
                                   &findings_,
                                   &foreign_,
                                   &compute_allocated_,
                                   &sm_util_,
                                   &compute_mode_,
                                   &container_compute_,
                                   &container_compute_used_,
                                   &namespace_compute_,
                                   &namespace_compute_used_};
  for (GaugeSeries* g : replaced) g->Begin();
  auto device = [&](const std::string& uuid, int index, const std::string& model, const std::string& profile,
                    model::MiB total, model::MiB used, bool healthy, const std::string& compute_enforcement,
                    int sm_util_pct) {
    const std::map<std::string, std::string> labels = {{"node", node_},
                                                       {"gpu_uuid", uuid},
                                                       {"gpu_index", std::to_string(index)},
                                                       {"gpu_model", model},
                                                       {"mig_profile", profile}};
    total_.Set(labels, static_cast<double>(total) * kMiB);
    used_.Set(labels, static_cast<double>(used) * kMiB);
    allocated_.Set(labels, static_cast<double>(allocated[uuid]) * kMiB);
    healthy_.Set(labels, healthy ? 1 : 0);
    if (managed.count(uuid) > 0) foreign_.Set(labels, foreign[uuid]);
    compute_allocated_.Set(labels, compute[uuid]);
    if (sm_util_pct >= 0) sm_util_.Set(labels, sm_util_pct);
    for (std::string_view mode :
         {api::kComputeEnforcementMpsNamespace, api::kComputeEnforcementMpsClient, api::kComputeEnforcementNone}) {
      std::map<std::string, std::string> with_mode = labels;
      with_mode["mode"] = std::string(mode);
      compute_mode_.Set(with_mode, compute_enforcement == mode ? 1 : 0);
    }
  };
  for (const api::GpuNodeDevice& d : status.devices) {
    if (!d.mig_enabled) {
      device(d.uuid, d.index, d.model, "", d.memory_mib, d.used_mib, d.healthy, d.compute_enforcement, d.sm_util_pct);
      continue;
    }
    for (const api::GpuNodeMigInstance& m : d.mig_instances) {
      device(m.uuid, d.index, d.model, m.profile, m.memory_mib, m.used_mib, d.healthy, m.compute_enforcement, -1);
    }
  }
  // Per namespace: the series dashboards sum without a pod label (one per namespace and node).
  std::map<std::string, int> ns_compute, ns_used;
  for (const ContainerCap& c : caps) {
    if (c.compute_pct != api::kComputeNotRecorded) ns_compute[c.ns] += c.compute_pct;
    if (c.used_compute_pct >= 0) ns_used[c.ns] += c.used_compute_pct;
  }
  for (const auto& [ns, pct] : ns_compute) namespace_compute_.Set({{"node", node_}, {"namespace", ns}}, pct);
  for (const auto& [ns, pct] : ns_used) namespace_compute_used_.Set({{"node", node_}, {"namespace", ns}}, pct);
  for (const ContainerCap& c : caps) {
    const std::map<std::string, std::string> labels = {
        {"node", node_}, {"namespace", c.ns}, {"pod", c.pod}, {"container", c.container}, {"gpu_uuid", c.device}};
    cap_.Set(labels, static_cast<double>(c.cap_mib) * kMiB);
    cap_used_.Set(labels, static_cast<double>(c.used_mib) * kMiB);
    enforced_.Set(labels, c.enforced ? 1 : 0);
    if (c.compute_pct != api::kComputeNotRecorded) container_compute_.Set(labels, c.compute_pct);
    if (c.used_compute_pct >= 0) container_compute_used_.Set(labels, c.used_compute_pct);
  }
  for (std::string_view mode :
       {api::kEnforcementCgroupDmem, api::kEnforcementCgroupMisc, api::kEnforcementMps, api::kEnforcementNone}) {
    mode_.Set({{"node", node_}, {"mode", std::string(mode)}}, status.enforcement.mode == mode ? 1 : 0);
  }
  std::map<std::string, int> per_kind = {{std::string(api::kAuditOverCap), 0},
                                         {std::string(api::kAuditOverCompute), 0},
                                         {std::string(api::kAuditUnenforced), 0},
                                         {std::string(api::kAuditForeignProcess), 0}};
  for (const api::GpuNodeAuditFinding& f : status.audit) ++per_kind[f.kind];
  for (const auto& [kind, n] : per_kind) findings_.Set({{"node", node_}, {"kind", kind}}, n);
  for (GaugeSeries* g : replaced) g->End();
}

std::vector<prometheus::MetricFamily> AgentMetrics::Collect() const { return registry_->Collect(); }

std::string AgentMetrics::Serialize() const { return prometheus::TextSerializer().Serialize(Collect()); }

}  // namespace gpupack::agent
