// Applies and audits gpupack containers' memory caps (docs/agent.md "Enforcement and audit").
//
// Where the driver has R615 per-cgroup limits (a MemoryLimiter is given), each running gpupack
// container gets, on its own leaf cgroup and for each whole GPU it was allocated, hard = its cap
// and soft = its request (gpupack.io/c<i>-memory-request-mib, else the cap). A limit that is
// already in place (e.g. applied by the NVIDIA toolkit's apply-cuda-memory-limits hook) is
// verified and left alone. When a container stops, its pod terminates or disappears, the soft
// limit is zeroed while the cgroup still exists, because the driver adds a leaf's soft limit to
// every ancestor's reservation and a directly deleted leaf would leave it behind. MIG instances
// are hardware partitions (the driver rejects cgroup limits there) and are never touched; neither
// is any container gpupack did not place.
//
// Audit (every pass, with or without a limiter): a gpupack container using more than its cap on a
// device (over-cap); one whose processes' SM time on a GPU without compute enforcement (none) is
// above its compute share (over-compute: without MPS, contexts time-slice the SMs, so a process's
// share of the SMs' time is its share of the compute; under MPS clients run side by side and each
// one's time overstates its share, so no finding is raised there); a gpupack container on a whole GPU whose limit could
// not be applied, on a node that can enforce (unenforced); a process on a device gpupack manages that belongs to no
// container holding a gpupack allocation of that device (foreign-process, agent/foreign_process.h).
//
// Thread safety: not thread-safe; one agent loop drives it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/discovery.h"
#include "agent/pods.h"
#include "api/gpunode.h"

namespace gpupack::agent {

// One gpupack container's share of one device, for metrics.
struct ContainerCap {
  std::string ns, pod, container, device;
  model::MiB cap_mib = 0;
  model::MiB used_mib = 0;
  bool enforced = false;  // a driver limit equal to the cap is in place on its cgroup
  std::string pod_uid;
  bool running = false;  // the container runs (its use is a sample of agent/usage_tracker.h)
  // The compute share the allocation reserves (computePct; api::kComputeNotRecorded in allocations
  // written before compute shares) and the SM time its processes used this pass, percent
  // (Σ of their NVML samples' means; -1 when NVML cannot tell, as on MIG instances).
  int compute_pct = api::kComputeNotRecorded;
  int used_compute_pct = -1;
};

struct EnforcementPass {
  std::vector<api::GpuNodeAuditFinding> findings;
  std::vector<ContainerCap> caps;
  int applied = 0;   // limits set this pass
  int verified = 0;  // limits found already in place
  int cleared = 0;   // soft limits zeroed for containers that went away
  int errors = 0;    // limiter calls that failed
};

class Enforcer {
 public:
  explicit Enforcer(std::string cgroup_root = "/sys/fs/cgroup") : cgroup_root_(std::move(cgroup_root)) {}

  // `status`: this pass's discovery (processes carry pod UID and container id). `pods`: the pods
  // bound to this node. `limiter`: nullptr when the node cannot enforce (audit only).
  EnforcementPass Run(const api::GpuNodeStatus& status, const std::vector<PodInfo>& pods, MemoryLimiter* limiter);

 private:
  struct Applied {
    uint64_t hard_bytes = 0;
    bool seen = false;
  };
  void Enforce(const PodInfo& pod, const PodContainer& c, const api::AllocatedDevice& d,
               const ContainerCgroups& cgroups, MemoryLimiter* limiter, ContainerCap* cap, EnforcementPass* pass);
  void ClearSoft(const std::string& device, const std::string& dir, uint64_t hard_bytes, MemoryLimiter* limiter,
                 EnforcementPass* pass);

  std::string cgroup_root_;
  // Limits this agent set or verified, keyed by (device uuid, cgroup dir).
  std::map<std::pair<std::string, std::string>, Applied> applied_;
};

}  // namespace gpupack::agent
