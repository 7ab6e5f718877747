// The foreign-process audit (docs/agent.md "Enforcement and audit"): which processes on gpupack's
// devices gpupack did not place there.
//
// A device is gpupack's when the node offers it to gpupack pods: a whole GPU not in MIG mode or a
// MIG instance, unless the administrator excluded it (the node's gpupack.io/excluded-devices; a
// GPU's exclusion covers its MIG instances). Such a device is gpupack's to account for whether or
// not it holds allocations now, so every process on it must belong to a container that holds a
// gpupack allocation of that device; any other process is a finding. The finding names the pod
// and container when the process's cgroup maps to a pod on this node, and says "not in a pod"
// for a host process. Excluded devices (handed to NVIDIA's device plugin, say) are not audited.
//
// Thread safety: pure functions.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "agent/pods.h"
#include "api/gpunode.h"

namespace gpupack::agent {

// The UUIDs of the devices gpupack places pods on, as above.
std::set<std::string> ManagedDevices(const api::GpuNodeStatus& status);

// One foreign-process finding per process on a managed device that no allocation explains.
// `status.processes` carry the pod UID and container id their cgroups gave; `pods` are the pods
// bound to this node. An allocation explains a process when the process is in a container that
// holds the device, and also, so that a pod list running behind the runtime raises no false
// finding, when it is in the pod's own cgroup or in a container the list does not know yet (just
// started or restarted) of a pod holding the device. A pod's allocation counts until the pod has
// finished (Succeeded or Failed): a pod being deleted runs through its grace period and keeps its
// share in the extender's ledger until it is gone.
std::vector<api::GpuNodeAuditFinding> ForeignProcessFindings(const api::GpuNodeStatus& status,
                                                             const std::vector<PodInfo>& pods);

}  // namespace gpupack::agent
