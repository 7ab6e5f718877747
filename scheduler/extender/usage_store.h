// What the cluster remembers of each workload's GPU memory use (docs/recommendations.md), fed
// from the observed use the agents report in GPUNode status (api::GpuNodeContainerUsage), and the
// recommendations made from it (placement/rightsizing.h).
//
// Kept per workload container (namespace, owning workload, container name), and within it per
// pod: a pod's entry is replaced by each later report of it, and stays after the pod is gone, so a
// Deployment's history survives its pods' restarts. Bounded three ways: at most max_pods pods per
// workload container (the most recently seen), entries not seen for `retention` dropped, and at
// most max_workloads workload containers (the least recently seen dropped first). At the defaults,
// 500 × 16 entries of about 150 bytes: 1.2 MB at most.
//
// Where it lives and what a restart costs: in the extender's memory. A restarted or newly elected
// extender relearns every running pod's figures from the GPUNodes at once (each pod's entry is its
// whole life so far); the entries of pods that ended before the restart are lost. The metrics'
// series are bounded by max_workloads (docs/metrics.md).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "api/gpunode.h"
#include "api/recommendation.h"
#include "common/clock.h"
#include "placement/rightsizing.h"

namespace gpupack::extender {

struct UsageStoreOptions {
  size_t max_workloads = 500;
  size_t max_pods = 16;
  std::chrono::nanoseconds retention = std::chrono::hours(24 * 7);
};

class WorkloadUsageStore {
 public:
  WorkloadUsageStore(UsageStoreOptions options, const Clock& clock);

  // One GPUNode's report: every container in it, seen now. Entries without a workload name or a
  // device memory are ignored.
  void Observe(const std::vector<api::GpuNodeContainerUsage>& usage);
  // One recommendation per workload container, by namespace, workload and container; entries past
  // their retention are dropped first.
  api::RecommendationReport Recommend(const placement::RightsizingOptions& options);
  size_t workloads() const;

 private:
  using Key = std::tuple<std::string, std::string, std::string, std::string>;  // ns, kind, name, container
  struct PodEntry {
    placement::ObservedUse observed;
    Clock::TimePoint seen;
  };
  struct Workload {
    std::map<std::string, PodEntry> pods;  // by pod UID
    Clock::TimePoint seen;
  };
  void PruneLocked(Clock::TimePoint now);

  const UsageStoreOptions options_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::map<Key, Workload> workloads_;
};

}  // namespace gpupack::extender
