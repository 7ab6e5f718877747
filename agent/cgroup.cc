#include "agent/cgroup.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <vector>

#include "api/gpunode.h"
#include "common/file.h"

namespace gpupack::agent {
namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

bool LooksLikeUid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool dash_pos = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_pos ? c != '-' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "kubepods-burstable-pod1b2c_…​.slice" or "pod1b2c-…" → the UID with dashes.
std::optional<std::string> PodUidOfSegment(std::string_view seg) {
  std::string uid;
  if (EndsWith(seg, ".slice")) {
    const size_t at = seg.rfind("-pod");
    if (at == std::string_view::npos || seg.find("kubepods") == std::string_view::npos) return std::nullopt;
    uid = std::string(seg.substr(at + 4, seg.size() - (at + 4) - 6));
    for (char& c : uid) {
      if (c == '_') c = '-';
    }
  } else if (StartsWith(seg, "pod")) {
    uid = std::string(seg.substr(3));
  } else {
    return std::nullopt;
  }
  if (!LooksLikeUid(uid)) return std::nullopt;
  return uid;
}

// "cri-containerd-<id>.scope", "docker-<id>.scope", "crio-<id>.scope" or a bare "<id>".
std::optional<std::string> ContainerIdOfSegment(std::string_view seg) {
  if (EndsWith(seg, ".scope")) {
    seg.remove_suffix(6);
    if (StartsWith(seg, "crio-conmon-")) return std::nullopt;  // CRI-O's monitor, not the container
    const size_t dash = seg.rfind('-');
    if (dash == std::string_view::npos) return std::nullopt;
    seg = seg.substr(dash + 1);
  }
  if (seg.size() < 12) return std::nullopt;
  for (char c : seg) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return std::string(seg);
}

}  // namespace

std::optional<std::string> CgroupPathFromProcFile(std::string_view content) {
  std::optional<std::string> memory, cpu, systemd;
  for (std::string_view line : Split(content, '\n')) {
    if (line.empty()) continue;
    // hierarchy-id:controller-list:path; the path may itself contain ':'.
    const size_t a = line.find(':');
    if (a == std::string_view::npos) continue;
    const size_t b = line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, a);
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string path(line.substr(b + 1));
    if (id == "0" && controllers.empty()) return path;  // cgroup v2
    for (std::string_view c : Split(controllers, ',')) {
      if (c == "memory" && !memory) memory = path;
      if (c == "cpu" && !cpu) cpu = path;
      if (c == "name=systemd" && !systemd) systemd = path;
    }
  }
  if (memory) return memory;
  if (cpu) return cpu;
  return systemd;
}

std::optional<CgroupOwner> ParseKubeCgroupPath(std::string_view path) {
  const std::vector<std::string_view> segs = Split(path, '/');
  bool in_kubepods = false;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (StartsWith(segs[i], "kubepods") || segs[i].find("-kubepods") != std::string_view::npos) in_kubepods = true;
    if (!in_kubepods) continue;
    auto uid = PodUidOfSegment(segs[i]);
    if (!uid) continue;
    CgroupOwner owner{*uid, ""};
    if (i + 1 < segs.size()) {
      auto id = ContainerIdOfSegment(segs[i + 1]);
      if (!id) return std::nullopt;  // something under the pod that is not a container
      owner.container_id = *id;
    }
    return owner;
  }
  return std::nullopt;
}

StatusOr<std::string> ProcReader::CgroupPath(int64_t pid) const {
  const std::string file = proc_root_ + "/" + std::to_string(pid) + "/cgroup";
  GPUPACK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(file, "the process' cgroup file"));
  auto path = CgroupPathFromProcFile(text);
  if (!path) return Status::InvalidArgument(file + ": no cgroup line found");
  return *path;
}

ContainerCgroups ScanContainerCgroups(const std::string& cgroup_root) {
  namespace fs = std::filesystem;
  ContainerCgroups out;
  std::error_code ec;
  // Container leaves sit at most a few levels below kubepods; bound the walk so a huge or cyclic
  // tree cannot stall the agent.
  constexpr int kMaxDepth = 8;
  fs::recursive_directory_iterator it(cgroup_root, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
    // Pods live under kubepods (kubepods.slice, kubelet.slice/kubelet-kubepods.slice, ...);
    // skip system.slice, user.slice and the like without walking them.
    if (it.depth() == 0 && it->path().filename().string().find("kube") == std::string::npos) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    const std::string rel = "/" + fs::relative(it->path(), cgroup_root, ec).generic_string();
    auto owner = ParseKubeCgroupPath(rel);
    if (!owner) continue;
    if (!owner->container_id.empty()) {
      out[{owner->pod_uid, owner->container_id}] = it->path().string();
      it.disable_recursion_pending();
    }
  }
  return out;
}

int DriverBranch(std::string_view driver_version) {
  int branch = 0;
  for (size_t i = 0; i < driver_version.size() && std::isdigit(static_cast<unsigned char>(driver_version[i])); ++i) {
    branch = branch * 10 + (driver_version[i] - '0');
    if (branch > 100000) break;
  }
  return branch;
}

EnforcementCapability DetectEnforcement(std::string_view driver_version, bool nvml_has_memory_limits,
                                        const std::string& cgroup_root) {
  const std::string none(api::kEnforcementNone);
  if (DriverBranch(driver_version) < kMemoryLimitsDriverBranch) {
    return {none, "driver " + std::string(driver_version) + " is older than R615 (no per-cgroup memory limits)"};
  }
  if (!nvml_has_memory_limits) return {none, "NVML lacks nvmlDeviceSetMemoryLimits_v1"};
  std::ifstream in(cgroup_root + "/cgroup.controllers");
  if (!in) return {none, "cgroup v2 is not mounted at " + cgroup_root};
  std::string word;
  while (in >> word) {
    if (word == "dmem") return {std::string(api::kEnforcementCgroupDmem), ""};
  }
  return {std::string(api::kEnforcementCgroupMisc), "kernel has no dmem controller; driver misc accounting"};
}

}  // namespace gpupack::agent
