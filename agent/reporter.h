// Decides when the node's GPUNode status and its extended-resource capacity are written to the
// API server, so that 1,000 nodes do not flood it:
//  - the status is written when something changed "beyond the threshold" (device set, health,
//    MIG layout, enforcement, audit, process list, allocations or tracked containers; or any used
//    memory or a container's observed peak moving by more than change_threshold_mib) but not more often than
//    min_write_interval, and in any case when the heartbeat is due (heartbeat_interval after the last successful
//    write);
//  - node capacity (gpupack.io/gpu-memory = Σ schedulable device memory, as a quantity in Mi;
//    gpupack.io/gpu = schedulable devices × max pods per device) is written when it changes and
//    re-checked every capacity_recheck_interval, because kubelet may reset extended resources.
// Write rate at the defaults (heartbeat 60 s, min interval 10 s): ≤ 1/60 s per quiet node, ≤ 1/10 s
// per busy one; for 1,000 nodes 17 writes/s steady, 100 writes/s worst case (see docs/agent.md).
//
// Thread safety: not thread-safe; one agent loop drives it.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "api/gpunode.h"
#include "common/clock.h"
#include "common/status.h"

namespace gpupack::agent {

// Where reports go (the API server in production, a recorder in tests).
class ReportSink {
 public:
  virtual ~ReportSink() = default;
  virtual Status WriteGpuNodeStatus(const std::string& node, const api::GpuNodeStatus& status) = 0;
  // Makes the node's capacity and allocatable carry these values (reads first; writes only when
  // they differ). `gpu_memory` is a quantity string such as "81559Mi"; `gpu_compute` is 100 per
  // device (gpupack.io/gpu-compute, so kubelet admits the compute shares the extender placed).
  virtual Status EnsureNodeCapacity(const std::string& node, const std::string& gpu_memory, int64_t gpus,
                                    int64_t gpu_compute) = 0;
  // A Kubernetes event about an audit finding (best effort).
  virtual Status EmitAuditEvent(const std::string& node, const api::GpuNodeAuditFinding& finding) = 0;
};

struct ReporterOptions {
  std::string node_name;
  std::chrono::seconds heartbeat_interval{60};
  std::chrono::seconds min_write_interval{10};
  model::MiB change_threshold_mib = 256;
  std::chrono::seconds capacity_recheck_interval{300};
  int max_pods_per_device = 16;
};

// The node capacity a status implies: Σ memory of whole GPUs not in MIG mode and of MIG
// instances, and their count, leaving out devices the administrator excluded.
struct NodeCapacity {
  model::MiB memory_mib = 0;
  int64_t devices = 0;
  bool operator==(const NodeCapacity&) const = default;
};
NodeCapacity CapacityOf(const api::GpuNodeStatus& status);

// True when `now` differs from `last` by more than used-memory noise below `threshold_mib`
// (heartbeat times are ignored).
bool SignificantChange(const api::GpuNodeStatus& last, const api::GpuNodeStatus& now, model::MiB threshold_mib);

class Reporter {
 public:
  Reporter(ReporterOptions options, ReportSink* sink, const Clock* clock);

  enum class Outcome { kWritten, kSkipped };
  // Writes `status` (stamped with the heartbeat time) if due. The sink's error when the write
  // fails; the next call retries. Capacity errors are logged, not returned, and retried on the
  // next call.
  StatusOr<Outcome> Report(api::GpuNodeStatus status);

 private:
  void MaybeEnsureCapacity(const api::GpuNodeStatus& status);

  ReporterOptions options_;
  ReportSink* sink_;
  const Clock* clock_;
  std::optional<api::GpuNodeStatus> last_;
  Clock::TimePoint last_write_{};
  std::optional<NodeCapacity> capacity_;
  Clock::TimePoint capacity_checked_{};
};

}  // namespace gpupack::agent
