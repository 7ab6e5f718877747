#include "agent/agent.h"

#include <map>

#include "common/log.h"

namespace gpupack::agent {
namespace {

std::string FindingKey(const api::GpuNodeAuditFinding& f) {
  return f.kind + "|" + f.device + "|" + f.pod_uid + "|" + f.container + "|" + std::to_string(f.pid);
}

}  // namespace

Agent::Agent(AgentOptions options, GpuBackend* backend, PodLister pods, Reporter* reporter, ReportSink* events,
             AgentMetrics* metrics, const Clock* clock, PodEvictor* evictor)
    : options_(std::move(options)),
      backend_(backend),
      pods_(std::move(pods)),
      reporter_(reporter),
      events_(events),
      metrics_(metrics),
      clock_(clock),
      enforcer_(options_.cgroup_root),
      evictions_(options_.eviction, evictor, clock) {}

StatusOr<api::GpuNodeStatus> Agent::RunOnce() {
  GPUPACK_ASSIGN_OR_RETURN(api::GpuNodeStatus status, backend_->Discover());
  status.max_pods_per_device = options_.max_pods_per_device;
  if (options_.excluded_devices) {
    StatusOr<std::vector<std::string>> excluded = options_.excluded_devices();
    if (excluded.ok()) {
      excluded_ = std::move(excluded).value();
    } else {
      GPUPACK_LOG(kWarning, "agent") << "excluded devices of " << options_.node_name
                                     << " unknown, keeping the last list: " << excluded.status();
    }
  }
  api::MarkExcluded(status, excluded_);
  if (options_.doctor) {
    const DoctorReport report = Diagnose(ProbeNode(*options_.doctor, NvmlEvidenceOf(status, "", std::nullopt)));
    status.conditions = DoctorConditions(report, last_conditions_, clock_->Now());
    last_conditions_ = status.conditions;
  }

  std::optional<std::vector<PodInfo>> pods;
  if (pods_) {
    auto listed = pods_();
    if (listed.ok()) {
      pods.emplace();
      for (const nlohmann::json& p : *listed) pods->push_back(PodInfoFromJson(p));
    } else {
      GPUPACK_LOG(kWarning, "agent") << "pods on " << options_.node_name
                                     << " unknown, enforcement skipped this pass: " << listed.status();
    }
  }

  if (pods) {
    // Name the pod and container of every process we could map to a cgroup.
    std::map<std::pair<std::string, std::string>, std::pair<const PodInfo*, std::string>> by_container;
    for (const PodInfo& pod : *pods) {
      by_container[{pod.uid, ""}] = {&pod, ""};
      for (const PodContainer& c : pod.containers) {
        if (!c.container_id.empty()) by_container[{pod.uid, c.container_id}] = {&pod, c.name};
      }
    }
    for (api::GpuNodeProcess& p : status.processes) {
      auto it = by_container.find({p.pod_uid, p.container_id});
      if (it == by_container.end()) it = by_container.find({p.pod_uid, ""});
      if (it == by_container.end()) continue;
      p.pod = it->second.first->Key();
      p.container = it->second.second;
    }
    EnforcementPass pass = enforcer_.Run(status, *pods, backend_->limiter());
    last_findings_ = std::move(pass.findings);
    last_caps_ = std::move(pass.caps);
    if (metrics_) metrics_->CountEnforcement(pass);
    usage_.Observe(last_caps_, *pods, status, clock_->Now());
  }
  status.audit = last_findings_;
  status.usage = usage_.Report();

  // Σ caps per GPU (a MIG instance's caps count toward its parent GPU).
  // Σ computePct per whole GPU (a MIG instance's shares are of its own SMs, not the GPU's).
  std::map<std::string, model::MiB> caps_on;
  std::map<std::string, int> compute_on;
  for (const ContainerCap& c : last_caps_) {
    caps_on[c.device] += c.cap_mib;
    if (c.compute_pct != api::kComputeNotRecorded) compute_on[c.device] += c.compute_pct;
  }
  for (api::GpuNodeDevice& d : status.devices) {
    d.allocated_mib = caps_on[d.uuid];
    for (const api::GpuNodeMigInstance& m : d.mig_instances) d.allocated_mib += caps_on[m.uuid];
    d.allocated_compute_pct = compute_on[d.uuid];
  }

  std::set<std::string> current;
  for (const api::GpuNodeAuditFinding& f : status.audit) {
    const std::string key = FindingKey(f);
    current.insert(key);
    if (announced_.count(key) > 0) continue;
    GPUPACK_LOG(kWarning, "audit") << f.kind << ": " << f.message;
    if (events_) {
      Status s = events_->EmitAuditEvent(options_.node_name, f);
      if (!s.ok()) GPUPACK_LOG(kWarning, "audit") << "event not recorded: " << s;
    }
  }
  announced_ = std::move(current);
  if (pods) {
    for (const EvictionAttempt& attempt : evictions_.Run(status.audit, *pods)) {
      if (metrics_) metrics_->CountEviction(attempt.result);
    }
  }

  status.heartbeat_time = clock_->Now();
  if (metrics_) metrics_->Update(status, last_caps_);
  if (reporter_) {
    auto outcome = reporter_->Report(status);
    if (!outcome.ok()) {
      GPUPACK_LOG(kWarning, "agent") << "GPUNode status not written (will retry): " << outcome.status();
      if (metrics_) metrics_->CountReport("error");
    } else if (metrics_) {
      metrics_->CountReport(*outcome == Reporter::Outcome::kWritten ? "written" : "skipped");
      if (*outcome == Reporter::Outcome::kWritten) metrics_->SetReportTime(status.heartbeat_time);
    }
  }
  return status;
}

}  // namespace gpupack::agent
