// Which pod and container a process or a cgroup directory belongs to, read from cgroup paths the
// way kubelet lays them out:
//   systemd driver:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/
//                    cri-containerd-<id>.scope   (also docker-<id>.scope, crio-<id>.scope)
//   cgroupfs driver: /kubepods/burstable/pod<uid>/<id>   (guaranteed pods sit directly under kubepods)
// with cgroup v2 ("0::/path" in /proc/<pid>/cgroup) or v1 (one line per hierarchy). Prefixes
// above kubepods (kind, nested runtimes) are allowed.
//
// Thread safety: free functions are pure; the classes hold only paths and are safe to share.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace gpupack::agent {

struct CgroupOwner {
  std::string pod_uid;       // with dashes, as in metadata.uid
  std::string container_id;  // runtime id; empty for the pod-level cgroup
};

// The cgroup path of a process from the text of /proc/<pid>/cgroup: the v2 line ("0::/…") when
// present, else the v1 hierarchy of the memory, then cpu, then name=systemd controller. nullopt
// for empty or unrecognised content.
std::optional<std::string> CgroupPathFromProcFile(std::string_view content);

// The pod (and container) a cgroup path belongs to; nullopt when it is not under kubepods.
std::optional<CgroupOwner> ParseKubeCgroupPath(std::string_view path);

// Reads /proc/<pid>/cgroup under an injectable proc root (tests use a temporary directory).
class ProcReader {
 public:
  explicit ProcReader(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}
  // NotFound when the process is gone (or the agent cannot see it: no hostPID), InvalidArgument
  // when the file has no recognisable cgroup line.
  StatusOr<std::string> CgroupPath(int64_t pid) const;

 private:
  std::string proc_root_;
};

// Container leaf cgroups found under a cgroup v2 mount (default /sys/fs/cgroup), keyed by
// (pod UID, container id), value the absolute directory.
using ContainerCgroups = std::map<std::pair<std::string, std::string>, std::string>;
ContainerCgroups ScanContainerCgroups(const std::string& cgroup_root);

// What the node can enforce: "cgroup-dmem" or "cgroup-misc" when the driver is R615 or newer, NVML
// has the memory-limit calls and cgroup v2 is mounted at `cgroup_root` ("dmem" listed in its
// cgroup.controllers selects the kernel controller, otherwise the driver's misc accounting);
// "none" otherwise, with the reason ("driver 580.65.06 is older than R615").
// The branch of a driver version, its leading number ("615.20" → 615); 0 when it has none.
int DriverBranch(std::string_view driver_version);
// The first branch with the per-cgroup memory limits (nvmlDeviceSetMemoryLimits_v1, CUDA 13.4).
inline constexpr int kMemoryLimitsDriverBranch = 615;

struct EnforcementCapability {
  std::string mode;
  std::string reason;
};
EnforcementCapability DetectEnforcement(std::string_view driver_version, bool nvml_has_memory_limits,
                                        const std::string& cgroup_root);

}  // namespace gpupack::agent
