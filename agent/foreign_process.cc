#include "agent/foreign_process.h"

#include <algorithm>

namespace gpupack::agent {
namespace {

bool Holds(const PodContainer& c, const std::string& device) {
  return std::any_of(c.devices.begin(), c.devices.end(),
                     [&](const api::AllocatedDevice& d) { return d.uuid == device; });
}

// Whether `pod`'s allocation explains a process in its container `container_id` on `device`, and
// that container when the pod list knows it.
struct Attribution {
  bool explained = false;
  const PodContainer* container = nullptr;
};

Attribution Attribute(const PodInfo& pod, const std::string& container_id, const std::string& device) {
  Attribution a;
  for (const PodContainer& c : pod.containers) {
    if (!container_id.empty() && c.container_id == container_id) a.container = &c;
  }
  if (!pod.gpupack || pod.finished) return a;
  if (a.container != nullptr) {
    a.explained = Holds(*a.container, device);
    return a;
  }
  // The pod's own cgroup, or a container the pod list has not caught up with.
  a.explained = std::any_of(pod.containers.begin(), pod.containers.end(),
                            [&](const PodContainer& c) { return Holds(c, device); });
  return a;
}

}  // namespace

std::set<std::string> ManagedDevices(const api::GpuNodeStatus& status) {
  std::set<std::string> managed;
  for (const api::GpuNodeDevice& d : status.devices) {
    if (!d.mig_enabled) {
      if (!d.excluded) managed.insert(d.uuid);
      continue;
    }
    for (const api::GpuNodeMigInstance& m : d.mig_instances) {
      if (!m.excluded) managed.insert(m.uuid);
    }
  }
  return managed;
}

std::vector<api::GpuNodeAuditFinding> ForeignProcessFindings(const api::GpuNodeStatus& status,
                                                             const std::vector<PodInfo>& pods) {
  const std::set<std::string> managed = ManagedDevices(status);
  std::vector<api::GpuNodeAuditFinding> findings;
  for (const api::GpuNodeProcess& p : status.processes) {
    if (managed.count(p.device) == 0) continue;
    const PodInfo* owner = nullptr;
    for (const PodInfo& pod : pods) {
      if (!p.pod_uid.empty() && pod.uid == p.pod_uid) owner = &pod;
    }
    Attribution a;
    if (owner != nullptr) a = Attribute(*owner, p.container_id, p.device);
    if (a.explained) continue;
    api::GpuNodeAuditFinding f;
    f.kind = std::string(api::kAuditForeignProcess);
    f.device = p.device;
    f.pod_uid = p.pod_uid;
    f.pid = p.pid;
    f.used_mib = p.used_mib;
    std::string who;
    if (owner != nullptr) {
      f.pod = owner->Key();
      who = "pod " + f.pod;
      if (a.container != nullptr) {
        f.container = a.container->name;
        who += ", container " + f.container;
      }
    } else if (!p.pod_uid.empty()) {
      who = "pod UID " + p.pod_uid + ", not among this node's pods";
    } else {
      who = "not in a pod";
    }
    f.message = "process " + std::to_string(p.pid) + " (" + who + ") uses " + std::to_string(p.used_mib) +
                " MiB of gpupack device " + p.device + " without a gpupack allocation of it";
    findings.push_back(std::move(f));
  }
  return findings;
}

}  // namespace gpupack::agent
