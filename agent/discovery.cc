#include "agent/discovery.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <tuple>

#include <yaml-cpp/yaml.h>

#include "common/file.h"
#include "common/input_check.h"
#include "common/log.h"
#include "translate/cluster_file.h"

namespace gpupack::agent {
namespace {

constexpr uint64_t kMiB = 1024ULL * 1024ULL;

// "NVIDIA A100-SXM4-40GB MIG 3g.20gb" → "3g.20gb": the MIG handle's name, used only when the
// privileged profile query fails.
std::string ProfileFromMigName(const std::string& name) {
  const size_t at = name.rfind("MIG ");
  return at == std::string::npos ? "" : name.substr(at + 4);
}

// 13040 → "13.4".
std::string FormatCudaVersion(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

}  // namespace

model::MiB BytesToMiBFloor(uint64_t bytes) { return static_cast<model::MiB>(bytes / kMiB); }
model::MiB BytesToMiBCeil(uint64_t bytes) { return static_cast<model::MiB>((bytes + kMiB - 1) / kMiB); }

NvmlBackend::NvmlBackend(NvmlBackendOptions options)
    : options_(std::move(options)), proc_(options_.proc_root), mps_control_(options_.mps) {}

NvmlBackend::~NvmlBackend() = default;

Status NvmlBackend::EnsureOpen() {
  if (nvml_) return Status::Ok();
  auto opened = Nvml::Open(options_.library);
  if (!opened.ok()) {
    if (options_.on_nvml_error) options_.on_nvml_error("nvmlInit_v2");
    return opened.status();
  }
  nvml_ = std::move(opened).value();
  if (options_.on_nvml_error) nvml_->set_error_observer(options_.on_nvml_error);
  GPUPACK_LOG(kInfo, "agent") << "NVML loaded from " << options_.library
                              << (nvml_->has_memory_limits() ? " (R615 memory limits available)" : "");
  return Status::Ok();
}

MemoryLimiter* NvmlBackend::limiter() { return nvml_ && can_enforce_ ? this : nullptr; }

std::string_view ComputeEnforcementOf(MpsMode mps, bool exclusive_process) {
  if (!exclusive_process) return api::kComputeEnforcementNone;
  switch (mps) {
    case MpsMode::kNamespaces:
      return api::kComputeEnforcementMpsNamespace;
    case MpsMode::kClient:
      return api::kComputeEnforcementMpsClient;
    case MpsMode::kNone:
      break;
  }
  return api::kComputeEnforcementNone;
}

void NvmlBackend::AddProcesses(nvmlDevice_t handle, const std::string& uuid,
                               std::vector<api::GpuNodeProcess>* processes) {
  auto procs = nvml_->Processes(handle);
  if (!procs.ok()) {
    GPUPACK_LOG(kWarning, "agent") << "processes on " << uuid << ": " << procs.status();
    return;
  }
  // SM time per process since the last pass; unknown (-1) where NVML cannot tell (MIG instances,
  // older drivers). A process without a sample ran no kernel in the window: 0.
  auto sm = nvml_->ProcessSmUtilization(handle, last_pass_us_);
  if (!sm.ok() && sm.status().code() != StatusCode::kFailedPrecondition) {
    GPUPACK_LOG(kDebug, "agent") << "process utilisation on " << uuid << ": " << sm.status();
  }
  for (const NvmlProcess& p : *procs) {
    api::GpuNodeProcess out;
    out.pid = p.pid;
    out.device = uuid;
    out.used_mib = BytesToMiBCeil(p.used_bytes);
    if (sm.ok()) {
      auto it = sm->find(p.pid);
      out.sm_util_pct = it == sm->end() ? 0 : it->second;
    }
    // A process we cannot place (gone already, or no hostPID) stays in the list without a pod.
    if (auto path = proc_.CgroupPath(p.pid); path.ok()) {
      if (auto owner = ParseKubeCgroupPath(*path)) {
        out.pod_uid = owner->pod_uid;
        out.container_id = owner->container_id;
      }
    }
    processes->push_back(std::move(out));
  }
}

StatusOr<api::GpuNodeDevice> NvmlBackend::DiscoverDevice(unsigned int i, std::vector<api::GpuNodeProcess>* processes) {
  GPUPACK_ASSIGN_OR_RETURN(nvmlDevice_t handle, nvml_->DeviceByIndex(i));
  api::GpuNodeDevice dev;
  GPUPACK_ASSIGN_OR_RETURN(dev.uuid, nvml_->Uuid(handle));
  auto name = nvml_->Name(handle);
  dev.model = name.ok() ? *name : "unknown";
  auto index = nvml_->Index(handle);
  dev.index = index.ok() ? static_cast<int>(*index) : static_cast<int>(i);
  auto memory = nvml_->Memory(handle);
  if (memory.ok()) {
    dev.memory_mib = BytesToMiBFloor(memory->total_bytes);
    dev.used_mib = BytesToMiBCeil(memory->used_bytes);
    last_total_mib_[dev.uuid] = dev.memory_mib;
  } else if (memory.status().code() == StatusCode::kUnavailable) {
    // A GPU that stops answering (fallen off the bus, needs a reset) is reported unhealthy so
    // the extender stops placing pods on it; its size stays what it was.
    GPUPACK_LOG(kWarning, "agent") << "GPU " << dev.uuid << " marked unhealthy: " << memory.status();
    dev.healthy = false;
  } else {
    // Refused, not broken: in MIG mode the parent's aggregate needs privilege. The MIG instances
    // below fill in the figures.
    GPUPACK_LOG(kDebug, "agent") << "memory of " << dev.uuid << ": " << memory.status();
  }
  const auto last_total = last_total_mib_.find(dev.uuid);
  if (!memory.ok() && last_total != last_total_mib_.end()) dev.memory_mib = last_total->second;
  const bool parent_memory_known = memory.ok();
  auto mig = nvml_->MigEnabled(handle);
  if (!mig.ok()) {
    GPUPACK_LOG(kWarning, "agent") << "MIG mode of " << dev.uuid << ": " << mig.status();
  }
  dev.mig_enabled = mig.ok() && *mig;
  auto exclusive = nvml_->ExclusiveProcess(handle);
  dev.compute_enforcement = std::string(ComputeEnforcementOf(mps_mode_, exclusive.ok() && *exclusive));
  if (!dev.mig_enabled) {
    if (auto util = nvml_->SmUtilization(handle); util.ok()) dev.sm_util_pct = *util;
    AddProcesses(handle, dev.uuid, processes);
    return dev;
  }
  std::map<unsigned int, std::string> profiles;
  if (auto p = nvml_->ProfileNames(handle); p.ok()) profiles = std::move(p).value();
  GPUPACK_ASSIGN_OR_RETURN(std::vector<nvmlDevice_t> migs, nvml_->MigDevices(handle));
  for (nvmlDevice_t mh : migs) {
    api::GpuNodeMigInstance inst;
    GPUPACK_ASSIGN_OR_RETURN(inst.uuid, nvml_->Uuid(mh));
    if (auto m = nvml_->Memory(mh); m.ok()) {
      inst.memory_mib = BytesToMiBFloor(m->total_bytes);
      inst.used_mib = BytesToMiBCeil(m->used_bytes);
    } else {
      GPUPACK_LOG(kWarning, "agent") << "memory of " << inst.uuid << ": " << m.status();
    }
    if (auto gi_id = nvml_->GpuInstanceId(mh); gi_id.ok()) {
      inst.gpu_instance_id = static_cast<int>(*gi_id);
      // Placement and profile id need privilege; without it the name still gives the profile.
      if (auto gi = nvml_->GpuInstance(handle, *gi_id); gi.ok()) {
        inst.placement_start = static_cast<int>(gi->placement_start);
        inst.placement_size = static_cast<int>(gi->placement_size);
        if (auto it = profiles.find(gi->profile_id); it != profiles.end()) inst.profile = it->second;
      }
    }
    if (inst.profile.empty()) {
      if (auto n = nvml_->Name(mh); n.ok()) inst.profile = ProfileFromMigName(*n);
    }
    inst.compute_enforcement = dev.compute_enforcement;  // MPS runs per instance; the mode is the GPU's
    AddProcesses(mh, inst.uuid, processes);
    if (!parent_memory_known) {
      dev.used_mib += inst.used_mib;
      if (last_total == last_total_mib_.end()) dev.memory_mib += inst.memory_mib;
    }
    dev.mig_instances.push_back(std::move(inst));
  }
  return dev;
}

StatusOr<api::GpuNodeStatus> NvmlBackend::Discover() {
  GPUPACK_RETURN_IF_ERROR(EnsureOpen());
  auto status = DiscoverAll();
  if (!status.ok() && status.status().code() == StatusCode::kUnavailable) {
    // The driver went away or was reloaded (NOT_LOADED, LIB_RM_VERSION_MISMATCH, ...): start over
    // with a fresh dlopen and nvmlInit on the next pass.
    GPUPACK_LOG(kWarning, "agent") << "closing NVML after: " << status.status();
    nvml_.reset();
    can_enforce_ = false;
  }
  return status;
}

StatusOr<api::GpuNodeStatus> NvmlBackend::DiscoverAll() {
  api::GpuNodeStatus status;
  GPUPACK_ASSIGN_OR_RETURN(status.enforcement.driver_version, nvml_->DriverVersion());
  if (auto cuda = nvml_->CudaDriverVersion(); cuda.ok()) status.enforcement.cuda_version = FormatCudaVersion(*cuda);
  const EnforcementCapability cap =
      DetectEnforcement(status.enforcement.driver_version, nvml_->has_memory_limits(), options_.cgroup_root);
  status.enforcement.mode = cap.mode;
  status.enforcement.reason = cap.reason;
  can_enforce_ = cap.mode != api::kEnforcementNone;
  const std::string control = options_.mps.pipe_directory + "/control";
  std::error_code no_throw;
  const bool mps_running = !options_.mps.pipe_directory.empty() && std::filesystem::exists(control, no_throw);
  mps_mode_ = mps_running ? MpsMode::kClient : MpsMode::kNone;
  if (options_.mps.pipe_directory.empty()) {
    status.enforcement.compute_reason = "no MPS pipe directory configured (--mps-pipe-directory)";
  } else if (!mps_running) {
    status.enforcement.compute_reason = "no MPS control daemon (" + control + " not found)";
  } else if (options_.mps.server.empty()) {
    status.enforcement.compute_reason = "MPS control daemon at " + control + "; mps-client on EXCLUSIVE_PROCESS GPUs";
  } else if (StatusOr<std::vector<std::string>> names = mps_control_.NamespaceNames(); !names.ok()) {
    // The daemon runs but does not answer for namespaces (not v3, no such server): the clients'
    // own settings still apply.
    status.enforcement.compute_reason = "MPS control daemon at " + control + ", but server " + options_.mps.server +
                                        " gives no namespaces (" + names.status().message() +
                                        "); mps-client on EXCLUSIVE_PROCESS GPUs";
  } else {
    mps_mode_ = MpsMode::kNamespaces;
    const auto ours =
        std::count_if(names->begin(), names->end(), [](const std::string& n) { return IsGpupackMpsNamespace(n); });
    status.enforcement.compute_reason = "MPS v3 server " + options_.mps.server + " at " + control + " (" +
                                        std::to_string(ours) +
                                        " gpupack namespaces); mps-namespace on EXCLUSIVE_PROCESS GPUs";
  }
  const uint64_t pass_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  GPUPACK_ASSIGN_OR_RETURN(unsigned int count, nvml_->DeviceCount());
  for (unsigned int i = 0; i < count; ++i) {
    auto dev = DiscoverDevice(i, &status.processes);
    if (!dev.ok()) {
      // One unreadable GPU (no permission inside this container, lost) must not hide the others.
      GPUPACK_LOG(kWarning, "agent") << "GPU " << i << " skipped: " << dev.status();
      continue;
    }
    status.devices.push_back(std::move(dev).value());
  }
  last_pass_us_ = pass_us;
  // NVML lists processes in no particular order; a stable order keeps the reporter from seeing a
  // "change" in every pass.
  std::sort(status.processes.begin(), status.processes.end(),
            [](const api::GpuNodeProcess& a, const api::GpuNodeProcess& b) {
              return std::tie(a.device, a.pid) < std::tie(b.device, b.pid);
            });
  return status;
}

Status NvmlBackend::SetLimits(const std::string& device_uuid, const std::string& cgroup_dir, uint64_t soft_bytes,
                              uint64_t hard_bytes) {
  GPUPACK_RETURN_IF_ERROR(EnsureOpen());
  GPUPACK_ASSIGN_OR_RETURN(nvmlDevice_t d, nvml_->DeviceByUuid(device_uuid));
  return nvml_->SetMemoryLimits(d, cgroup_dir, soft_bytes, hard_bytes);
}

StatusOr<std::optional<NvmlMemoryLimits>> NvmlBackend::GetLimits(const std::string& device_uuid,
                                                                 const std::string& cgroup_dir) {
  GPUPACK_RETURN_IF_ERROR(EnsureOpen());
  GPUPACK_ASSIGN_OR_RETURN(nvmlDevice_t d, nvml_->DeviceByUuid(device_uuid));
  auto limits = nvml_->GetMemoryLimits(d, cgroup_dir);
  // The driver answers NOT_SUPPORTED for a cgroup that has no limit set.
  if (!limits.ok() && limits.status().code() == StatusCode::kFailedPrecondition) {
    return std::optional<NvmlMemoryLimits>();
  }
  if (!limits.ok()) return limits.status();
  return std::optional<NvmlMemoryLimits>(*limits);
}

std::vector<api::GpuNodeDevice> DevicesFromCoreNode(const model::Node& node) {
  std::vector<api::GpuNodeDevice> out;
  std::map<std::string, size_t> parent_at;
  for (const model::Device& d : node.devices) {
    if (d.kind == model::DeviceKind::kGpu) {
      api::GpuNodeDevice g;
      g.uuid = d.uuid;
      g.index = d.index;
      g.model = d.model;
      g.memory_mib = d.capacity_mib;
      g.used_mib = d.used_mib;
      g.healthy = d.healthy;
      out.push_back(std::move(g));
      continue;
    }
    auto it = parent_at.find(d.parent_uuid);
    if (it == parent_at.end()) {
      api::GpuNodeDevice g;
      g.uuid = d.parent_uuid;
      g.index = d.index;
      g.model = d.model;
      g.healthy = d.healthy;
      g.mig_enabled = true;
      it = parent_at.emplace(d.parent_uuid, out.size()).first;
      out.push_back(std::move(g));
    }
    api::GpuNodeDevice& parent = out[it->second];
    // The cluster file gives MIG GPUs no separate total; the instances are what is usable.
    parent.memory_mib += d.capacity_mib;
    parent.used_mib += d.used_mib;
    parent.mig_instances.push_back(
        {d.uuid, d.mig_profile, d.capacity_mib, d.used_mib, d.gpu_instance_id, d.placement_start, d.placement_size});
  }
  return out;
}

FileBackend::FileBackend(std::string path, std::string node_name)
    : path_(std::move(path)), node_name_(std::move(node_name)) {}

StatusOr<api::GpuNodeStatus> FileBackend::Discover() {
  GPUPACK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path_, "the file backend's inventory"));
  StatusOr<YAML::Node> parsed = ParseYamlStrict(text);
  if (!parsed.ok()) return parsed.status().WithContext(path_);
  const YAML::Node root = *parsed;
  if (!root.IsMap()) return Status::InvalidArgument(path_ + ": expected a node entry or a cluster file");
  YAML::Node entry = root;
  std::string where = "node";  // a file holding one node entry
  if (root["nodes"]) {
    const YAML::Node nodes = root["nodes"];
    if (!nodes.IsSequence()) return YamlFieldError(nodes, "nodes", "expected a list").WithContext(path_);
    entry = YAML::Node();
    // The extender and the simulator refuse a cluster file that names a node twice; so does the
    // agent, rather than report whichever entry comes last.
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!nodes[i].IsMap() || !nodes[i]["name"] || !nodes[i]["name"].IsScalar()) continue;
      const std::string name = nodes[i]["name"].as<std::string>();
      auto [first, fresh] = seen.emplace(name, i);
      if (!fresh) {
        return YamlFieldError(nodes[i]["name"], "nodes[" + std::to_string(i) + "].name",
                              "duplicate node \"" + name + "\" (also nodes[" + std::to_string(first->second) + "])")
            .WithContext(path_);
      }
      if (name == node_name_ || (nodes.size() == 1 && node_name_.empty())) {
        entry = nodes[i];
        where = "nodes[" + std::to_string(i) + "]";
      }
    }
    if (!entry.IsDefined() || entry.IsNull()) {
      return Status::NotFound(path_ + ": no node entry named \"" + node_name_ + "\"");
    }
  }
  StatusOr<model::Node> parsed_node = translate::ParseNodeEntry(entry, where);
  if (!parsed_node.ok()) return parsed_node.status().WithContext(path_);
  const model::Node node = std::move(parsed_node).value();
  api::GpuNodeStatus status;
  status.devices = DevicesFromCoreNode(node);
  status.enforcement.reason = "file backend";
  for (const model::Device& d : node.devices) {
    // hardIsolation on a whole GPU in the file stands for a driver that enforces caps.
    if (d.kind == model::DeviceKind::kGpu && d.hard_isolation) {
      status.enforcement.mode = std::string(api::kEnforcementCgroupMisc);
    }
  }
  return status;
}

}  // namespace gpupack::agent
