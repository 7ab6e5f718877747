#include "agent/doctor_probe.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <yaml-cpp/yaml.h>

namespace gpupack::agent {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Words(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string word;
  while (in >> word) out.push_back(word);
  return out;
}

bool Lists(const std::string& path, std::string_view word) {
  const std::vector<std::string> words = Words(path);
  return std::find(words.begin(), words.end(), word) != words.end();
}

// kubelet's pod cgroup: kubepods.slice (systemd driver), kubepods (cgroupfs), or under
// kubelet.slice (kind and other nested set-ups).
std::string FindKubepods(const std::string& root) {
  for (const char* rel : {"kubepods.slice", "kubepods", "kubelet.slice/kubelet-kubepods.slice"}) {
    std::error_code ec;
    if (fs::is_directory(root + "/" + rel, ec)) return root + "/" + rel;
  }
  return "";
}

bool IsNvidiaGpuKind(const std::string& kind) {
  // vendor/class: nvidia.com/gpu, k8s.device-plugin.nvidia.com/gpu, management.nvidia.com/gpu.
  const size_t slash = kind.rfind('/');
  if (slash == std::string::npos || kind.substr(slash + 1) != "gpu") return false;
  const std::string vendor = kind.substr(0, slash);
  return vendor == "nvidia.com" || (vendor.size() > 11 && vendor.ends_with(".nvidia.com"));
}

bool RunsMemoryLimitHook(const YAML::Node& edits) {
  if (!edits || !edits["hooks"] || !edits["hooks"].IsSequence()) return false;
  for (const YAML::Node& hook : edits["hooks"]) {
    if (!hook["args"] || !hook["args"].IsSequence()) continue;
    for (const YAML::Node& arg : hook["args"]) {
      if (arg.IsScalar() && arg.Scalar() == "apply-cuda-memory-limits") return true;
    }
  }
  return false;
}

std::optional<CdiSpecEvidence> ReadCdiSpec(const fs::path& path) {
  CdiSpecEvidence spec;
  spec.path = path.string();
  try {
    const YAML::Node doc = YAML::LoadFile(spec.path);
    if (!doc.IsMap() || !doc["kind"] || !doc["kind"].IsScalar()) return std::nullopt;
    spec.kind = doc["kind"].Scalar();
    if (!IsNvidiaGpuKind(spec.kind)) return std::nullopt;
    const bool spec_wide = RunsMemoryLimitHook(doc["containerEdits"]);
    if (doc["devices"] && doc["devices"].IsSequence()) {
      for (const YAML::Node& device : doc["devices"]) {
        ++spec.devices;
        if (spec_wide || RunsMemoryLimitHook(device["containerEdits"])) ++spec.devices_with_hook;
      }
    }
  } catch (const YAML::Exception& e) {
    // Without a parse there is no kind to read: a file that names an NVIDIA GPU kind counts.
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("nvidia.com/gpu") == std::string::npos) return std::nullopt;
    spec.error = std::string("cannot parse: ") + e.what();
  }
  return spec;
}

}  // namespace

CgroupEvidence ProbeCgroup(const std::string& root) {
  CgroupEvidence c;
  c.root = root;
  std::ifstream controllers(root + "/cgroup.controllers");
  c.v2 = static_cast<bool>(controllers);
  if (!c.v2) return c;
  c.controllers = Words(root + "/cgroup.controllers");
  std::ifstream capacity(root + "/dmem.capacity");
  for (std::string line; std::getline(capacity, line);) {
    if (line.starts_with("nvidia/")) c.nvidia_dmem_regions.push_back(line);
  }
  c.kubepods = FindKubepods(root);
  if (!c.kubepods.empty()) {
    c.kubepods_dmem_enabled = Lists(c.kubepods + "/cgroup.controllers", "dmem");
    c.kubepods_dmem_delegated = Lists(c.kubepods + "/cgroup.subtree_control", "dmem");
  }
  return c;
}

MpsEvidence ProbeMps(const std::string& pipe_dir) {
  MpsEvidence m;
  m.pipe_dir = pipe_dir;
  std::error_code ec;
  m.control_pipe = !pipe_dir.empty() && fs::exists(pipe_dir + "/control", ec);
  return m;
}

CdiEvidence ProbeCdi(const std::vector<std::string>& dirs) {
  CdiEvidence c;
  c.dirs = dirs;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string ext = it->path().extension().string();
      if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      if (auto spec = ReadCdiSpec(f)) c.nvidia_specs.push_back(std::move(*spec));
    }
  }
  return c;
}

NriEvidence ProbeNri(const std::string& socket) {
  struct stat st {};
  return NriEvidence{socket, stat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)};
}

NvmlEvidence NvmlEvidenceOf(const StatusOr<api::GpuNodeStatus>& discovered, std::string library,
                            std::optional<bool> memory_limit_calls) {
  NvmlEvidence n;
  n.library = std::move(library);
  n.memory_limit_calls = memory_limit_calls;
  if (!discovered.ok()) {
    n.error = discovered.status().message();
    return n;
  }
  const api::GpuNodeEnforcement& e = discovered->enforcement;
  n.driver_version = e.driver_version;
  n.cuda_version = e.cuda_version;
  n.enforcement_mode = e.mode;
  n.enforcement_reason = e.reason;
  for (const api::GpuNodeDevice& d : discovered->devices) {
    n.devices.push_back(NvmlDeviceEvidence{d.uuid, d.model, d.mig_enabled, static_cast<int>(d.mig_instances.size()),
                                           d.compute_enforcement});
  }
  return n;
}

std::optional<bool> ProbeMemoryLimitCalls(const std::string& library) {
  auto nvml = Nvml::Open(library);
  if (!nvml.ok()) return std::nullopt;
  return (*nvml)->has_memory_limits();
}

DoctorEvidence ProbeNode(const DoctorRoots& roots, NvmlEvidence nvml) {
  return DoctorEvidence{std::move(nvml), ProbeCgroup(roots.cgroup_root), ProbeMps(roots.mps_pipe_dir),
                        ProbeCdi(roots.cdi_dirs), ProbeNri(roots.nri_socket)};
}

}  // namespace gpupack::agent
