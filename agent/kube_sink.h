// ReportSink backed by the Kubernetes API server (kube/client.h): the GPUNode status through
// UpsertGpuNodeStatus (create if missing, then PUT status with conflict retry), node capacity
// through a merge patch of nodes/<name>/status (capacity and allocatable), and audit findings as
// Warning events on the pod concerned (or on the Node when no pod is).
//
// Thread safety: as thread-safe as kube::Client (fully).
#pragma once

#include "agent/reporter.h"
#include "kube/client.h"

namespace gpupack::agent {

class KubeSink final : public ReportSink {
 public:
  explicit KubeSink(kube::Client* client) : client_(client) {}

  Status WriteGpuNodeStatus(const std::string& node, const api::GpuNodeStatus& status) override;
  Status EnsureNodeCapacity(const std::string& node, const std::string& gpu_memory, int64_t gpus) override;
  Status EmitAuditEvent(const std::string& node, const api::GpuNodeAuditFinding& finding) override;

 private:
  kube::Client* client_;
};

}  // namespace gpupack::agent
