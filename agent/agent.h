// One pass of the node agent, wired from its parts: discover the GPUs, attribute processes to
// pods and containers, enforce and audit caps, sample each container's use, evict pods holding foreign processes when
// that policy is on, update metrics, report to the API server. The binary (cmd/agent) runs passes on a timer; `--once
// --print` runs one and prints it.
//
// Thread safety: RunOnce is called by one thread at a time.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/discovery.h"
#include "agent/doctor_probe.h"
#include "agent/enforcer.h"
#include "agent/eviction.h"
#include "agent/metrics.h"
#include "agent/reporter.h"
#include "agent/usage_tracker.h"
#include "common/clock.h"

namespace gpupack::agent {

// The pods bound to this node (an informer's cache in production). An error skips enforcement
// for the pass, so a flaky API server never makes the agent think every pod went away.
using PodLister = std::function<StatusOr<std::vector<nlohmann::json>>()>;

struct AgentOptions {
  std::string node_name;
  std::string cgroup_root = "/sys/fs/cgroup";
  int max_pods_per_device = 16;
  // The UUIDs the administrator took out of gpupack's pool (the node's gpupack.io/excluded-devices
  // annotation), read every pass; null = none. On an error the last answer is kept, so a flaky API
  // server neither returns excluded devices to the pool nor takes others out.
  std::function<StatusOr<std::vector<std::string>>()> excluded_devices;
  // Whether (and how often) pods holding foreign processes are evicted (agent/eviction.h).
  EvictionOptions eviction;
  // Where the node doctor looks (agent/doctor_probe.h); each pass reports its verdicts as the
  // status' conditions. nullopt: no conditions.
  std::optional<DoctorRoots> doctor;
};

class Agent {
 public:
  // Every pointer may be null except `backend` and `clock`: no pods (discovery only), no reporter
  // (nothing written), no sink (no events), no metrics, no evictor (no evictions, whatever
  // options.eviction says).
  Agent(AgentOptions options, GpuBackend* backend, PodLister pods, Reporter* reporter, ReportSink* events,
        AgentMetrics* metrics, const Clock* clock, PodEvictor* evictor = nullptr);

  // The status of this pass, stamped with the current time, or the discovery error. A failed
  // report write is logged and counted, not returned (the next pass retries).
  StatusOr<api::GpuNodeStatus> RunOnce();

 private:
  AgentOptions options_;
  GpuBackend* backend_;
  PodLister pods_;
  Reporter* reporter_;
  ReportSink* events_;
  AgentMetrics* metrics_;
  const Clock* clock_;
  Enforcer enforcer_;
  UsageTracker usage_;
  ForeignPodEvictions evictions_;
  std::vector<api::GpuNodeAuditFinding> last_findings_;
  std::vector<ContainerCap> last_caps_;
  std::vector<api::GpuNodeCondition> last_conditions_;  // for their lastTransitionTime
  std::set<std::string> announced_;                     // findings already logged and sent as events
  std::vector<std::string> excluded_;                   // the last good answer of options_.excluded_devices
};

}  // namespace gpupack::agent
