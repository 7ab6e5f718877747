// ReportSink and PodEvictor backed by the Kubernetes API server (kube/client.h): the GPUNode status
// through UpsertGpuNodeStatus (create if missing, then PUT status with conflict retry), node
// capacity through a merge patch of nodes/<name>/status (capacity and allocatable), audit findings
// as Warning events on the pod concerned (or on the Node when no pod is), and evictions through
// EvictPod (policy/v1 Eviction) with their Warning events on the pod.
//
// Thread safety: as thread-safe as kube::Client (fully).
#pragma once

#include "agent/eviction.h"
#include "agent/reporter.h"
#include "kube/client.h"

namespace gpupack::agent {

class KubeSink final : public ReportSink, public PodEvictor {
 public:
  explicit KubeSink(kube::Client* client) : client_(client) {}

  Status WriteGpuNodeStatus(const std::string& node, const api::GpuNodeStatus& status) override;
  Status EnsureNodeCapacity(const std::string& node, const std::string& gpu_memory, int64_t gpus,
                            int64_t gpu_compute) override;
  Status EmitAuditEvent(const std::string& node, const api::GpuNodeAuditFinding& finding) override;

  StatusOr<kube::EvictionAnswer> Evict(const PodInfo& pod) override;
  Status EmitPodWarning(const PodInfo& pod, std::string_view reason, const std::string& message) override;

 private:
  kube::Client* client_;
};

}  // namespace gpupack::agent
