#include "agent/doctor.h"

#include <algorithm>
#include <cctype>

#include "agent/cgroup.h"
#include "api/gpunode.h"

namespace gpupack::agent {
namespace {

using Evidence = std::vector<std::pair<std::string, std::string>>;

DoctorCheck Check(std::string name, CheckVerdict verdict, std::string summary, Evidence evidence,
                  std::string fix = "") {
  return DoctorCheck{std::move(name), verdict, std::move(summary), std::move(evidence), std::move(fix)};
}

std::string YesNo(bool b) { return b ? "yes" : "no"; }

// "1 GPU", "2 GPUs".
std::string Gpus(size_t n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

std::string Join(const std::vector<std::string>& words, const std::string& sep = " ") {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

bool Contains(const std::vector<std::string>& words, std::string_view word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

constexpr std::string_view kNvmlFix =
    "install the NVIDIA driver and make libnvidia-ml.so.1 visible to the agent (the chart mounts the driver "
    "root), or point --nvml-library at it";

DoctorCheck NvmlCheck(const NvmlEvidence& n) {
  Evidence ev = {{"library", n.library}};
  if (!n.error.empty()) {
    ev.push_back({"error", n.error});
    return Check("nvml", CheckVerdict::kMissing, "NVML cannot be used: " + n.error, ev, std::string(kNvmlFix));
  }
  ev.push_back({"driverVersion", n.driver_version});
  ev.push_back({"cudaVersion", n.cuda_version.empty() ? "unknown" : n.cuda_version});
  ev.push_back({"gpus", std::to_string(n.devices.size())});
  for (const NvmlDeviceEvidence& d : n.devices) ev.push_back({d.uuid, d.model});
  const std::string versions =
      "driver " + n.driver_version + (n.cuda_version.empty() ? "" : ", CUDA " + n.cuda_version);
  if (n.devices.empty()) {
    return Check("nvml", CheckVerdict::kDegraded, versions + ", no GPU found", ev,
                 "check nvidia-smi on the node; the agent's container must see every GPU (NVIDIA_VISIBLE_DEVICES=all)");
  }
  return Check("nvml", CheckVerdict::kOk, versions + ", " + Gpus(n.devices.size()), ev);
}

DoctorCheck MemoryLimitsCheck(const NvmlEvidence& n) {
  Evidence ev = {{"driverVersion", n.driver_version},
                 {"memoryLimitCalls", n.memory_limit_calls ? YesNo(*n.memory_limit_calls) : "not probed"},
                 {"mode", n.enforcement_mode},
                 {"reason", n.enforcement_reason}};
  if (!n.error.empty()) {
    return Check("memory-limits", CheckVerdict::kMissing, "NVML cannot be used, so no limit can be set", ev,
                 std::string(kNvmlFix));
  }
  if (n.enforcement_mode == api::kEnforcementCgroupDmem || n.enforcement_mode == api::kEnforcementCgroupMisc) {
    return Check("memory-limits", CheckVerdict::kOk, "per-cgroup memory limits through " + n.enforcement_mode, ev);
  }
  std::string fix;
  if (DriverBranch(n.driver_version) < kMemoryLimitsDriverBranch) {
    fix =
        "upgrade the driver to R615 or newer (CUDA 13.4); until then whole-GPU caps are scheduled and audited, "
        "not enforced";
  } else if (n.memory_limit_calls == false) {
    fix =
        "the libnvidia-ml the agent loads lacks nvmlDeviceSetMemoryLimits_v1: load the library of the running "
        "driver (--nvml-library, or the chart's driver root)";
  } else {
    fix = "mount cgroup v2 at the agent's --cgroup-root (boot with systemd.unified_cgroup_hierarchy=1)";
  }
  return Check(
      "memory-limits", CheckVerdict::kMissing,
      "no per-cgroup memory limits: " + (n.enforcement_reason.empty() ? n.enforcement_mode : n.enforcement_reason), ev,
      fix);
}

// Whether dmem accounts NVIDIA memory but stops above the pods' cgroups: the driver then cannot
// set a limit on a container's cgroup (a limit needs the controller enabled on that cgroup).
bool DmemStopsAboveKubepods(const CgroupEvidence& c) {
  return !c.nvidia_dmem_regions.empty() && !c.kubepods.empty() &&
         !(c.kubepods_dmem_enabled && c.kubepods_dmem_delegated);
}

DoctorCheck CgroupCheck(const CgroupEvidence& c) {
  Evidence ev = {{"root", c.root}, {"cgroupV2", YesNo(c.v2)}};
  if (!c.v2) {
    return Check("cgroup", CheckVerdict::kMissing, "no cgroup v2 at " + c.root + " (no cgroup.controllers)", ev,
                 "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and give the agent the host's mount");
  }
  ev.push_back({"controllers", Join(c.controllers)});
  ev.push_back({"dmem.capacity (nvidia)", c.nvidia_dmem_regions.empty() ? "none" : Join(c.nvidia_dmem_regions, "; ")});
  ev.push_back({"kubepods", c.kubepods.empty() ? "not found" : c.kubepods});
  if (!c.kubepods.empty()) {
    ev.push_back({"kubepods dmem enabled", YesNo(c.kubepods_dmem_enabled)});
    ev.push_back({"kubepods dmem delegated", YesNo(c.kubepods_dmem_delegated)});
  }
  if (DmemStopsAboveKubepods(c)) {
    return Check("cgroup", CheckVerdict::kDegraded,
                 "dmem accounts NVIDIA memory but is not enabled down to " + c.kubepods +
                     ": limits on containers' cgroups cannot be set",
                 ev,
                 "enable dmem from the root down: echo +dmem into cgroup.subtree_control of " + c.root + " and of " +
                     c.kubepods);
  }
  if (!c.nvidia_dmem_regions.empty()) {
    return Check("cgroup", CheckVerdict::kOk,
                 "kernel dmem controller accounts " + std::to_string(c.nvidia_dmem_regions.size()) + " NVIDIA regions",
                 ev);
  }
  if (Contains(c.controllers, "dmem")) {
    return Check("cgroup", CheckVerdict::kDegraded,
                 "dmem controller present, but dmem.capacity names no NVIDIA region: the driver accounts with its misc "
                 "fallback (or predates R615)",
                 ev,
                 "for kernel accounting drop RmMemacctMode=1 from the nvidia module's NVreg_RegistryDwords and reload "
                 "the driver; misc still enforces hard limits");
  }
  return Check("cgroup", CheckVerdict::kDegraded,
               "cgroup v2 without the dmem controller: the driver's misc accounting enforces the limits", ev,
               "for kernel-enforced limits run a kernel 6.14 or newer with CONFIG_CGROUP_DMEM; misc is a supported "
               "fallback");
}

DoctorCheck MpsCheck(const MpsEvidence& m, const NvmlEvidence& n) {
  Evidence ev = {{"pipeDirectory", m.pipe_dir.empty() ? "none given" : m.pipe_dir}};
  // The MPS v3 protocol (namespaces, memory partitioning) comes with R615; which protocol the
  // running daemon speaks (-p 3, CUDA_MPS_PROTOCOL_VERSION) is not read: that needs its control pipe.
  ev.push_back({"protocol", n.error.empty() && DriverBranch(n.driver_version) >= kMemoryLimitsDriverBranch
                                ? "v3 available (driver R615+); the daemon's own is not read"
                                : "v2 only (driver before R615, or unknown)"});
  const std::string start = "start the MPS control daemon (nvidia-cuda-mps-control -d with CUDA_MPS_PIPE_DIRECTORY=";
  if (m.pipe_dir.empty()) {
    return Check(
        "mps", CheckVerdict::kMissing, "no MPS pipe directory given", ev,
        "pass --mps-pipe-directory (the daemon's CUDA_MPS_PIPE_DIRECTORY; NVIDIA's default is /tmp/nvidia-mps)");
  }
  ev.push_back({"controlPipe", YesNo(m.control_pipe)});
  if (!m.control_pipe) {
    return Check("mps", CheckVerdict::kMissing,
                 "no MPS control daemon (" + m.pipe_dir +
                     "/control is absent): soft limits and compute shares are "
                     "not enforced",
                 ev, start + m.pipe_dir + ")");
  }
  return Check("mps", CheckVerdict::kOk, "MPS control daemon pipe at " + m.pipe_dir + "/control", ev);
}

DoctorCheck ComputeCheck(const NvmlEvidence& n) {
  Evidence ev;
  if (!n.error.empty() || n.devices.empty()) {
    return Check("compute", CheckVerdict::kMissing, "no GPU to hold compute shares on", ev, std::string(kNvmlFix));
  }
  int hard = 0, soft = 0, none = 0;
  for (const NvmlDeviceEvidence& d : n.devices) {
    std::string how;
    if (d.mig_enabled) {
      how = "MIG (hardware partitions)";
      ++hard;
    } else if (d.compute_enforcement == api::kComputeEnforcementMpsNamespace) {
      how = d.compute_enforcement;
      ++hard;
    } else if (d.compute_enforcement == api::kComputeEnforcementMpsClient) {
      how = d.compute_enforcement;
      ++soft;
    } else {
      how = d.compute_enforcement.empty() ? "not reported" : d.compute_enforcement;
      ++none;
    }
    ev.push_back({d.uuid, how});
  }
  if (none > 0) {
    return Check("compute", CheckVerdict::kMissing,
                 std::to_string(none) + " of " + std::to_string(n.devices.size()) +
                     " GPUs hold compute shares by scheduling only",
                 ev,
                 "run an MPS control daemon and set those GPUs EXCLUSIVE_PROCESS (nvidia-smi -i <uuid> -c "
                 "EXCLUSIVE_PROCESS), or partition them with MIG");
  }
  if (soft > 0) {
    return Check("compute", CheckVerdict::kDegraded,
                 Gpus(soft) +
                     " with compute capped only by MPS clients' CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, which a "
                     "workload can unset",
                 ev,
                 "hard compute caps need an MPS v3 namespace per container: on R615+ run the daemon "
                 "multi-user (nvidia-cuda-mps-control -p 3 -m -d) with a server and name it with --mps-server "
                 "(chart: agent.mps.server), or partition with MIG");
  }
  return Check("compute", CheckVerdict::kOk, "compute shares are hard on every GPU", ev);
}

DoctorCheck MigCheck(const NvmlEvidence& n) {
  Evidence ev;
  if (!n.error.empty()) return Check("mig", CheckVerdict::kMissing, "NVML cannot be used", ev, std::string(kNvmlFix));
  std::vector<std::string> empty;
  int enabled = 0;
  for (const NvmlDeviceEvidence& d : n.devices) {
    ev.push_back({d.uuid, d.mig_enabled ? "MIG on, " + std::to_string(d.mig_instances) + " instances" : "MIG off"});
    if (!d.mig_enabled) continue;
    ++enabled;
    if (d.mig_instances == 0) empty.push_back(d.uuid);
  }
  if (!empty.empty()) {
    return Check("mig", CheckVerdict::kDegraded, "MIG on without instances (nothing to place on): " + Join(empty, ", "),
                 ev, "create GPU and compute instances (nvidia-smi mig -cgi <profiles> -C, or mig-parted)");
  }
  return Check("mig", CheckVerdict::kOk,
               enabled == 0 ? "no GPU in MIG mode" : Gpus(enabled) + " in MIG mode, with instances", ev);
}

DoctorCheck CdiCheck(const CdiEvidence& c) {
  Evidence ev = {{"dirs", Join(c.dirs)}};
  int devices = 0, hooked = 0;
  std::vector<std::string> broken;
  for (const CdiSpecEvidence& s : c.nvidia_specs) {
    ev.push_back({s.path, s.error.empty() ? s.kind + ": " + std::to_string(s.devices_with_hook) + " of " +
                                                std::to_string(s.devices) + " devices run apply-cuda-memory-limits"
                                          : s.error});
    if (!s.error.empty()) broken.push_back(s.path);
    devices += s.devices;
    hooked += s.devices_with_hook;
  }
  if (c.nvidia_specs.empty()) {
    return Check("cdi", CheckVerdict::kMissing,
                 "no NVIDIA CDI spec in " + Join(c.dirs) + ": the agent sets each limit on its next pass", ev,
                 "nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml with a container toolkit that has the "
                 "apply-cuda-memory-limits hook");
  }
  if (!broken.empty()) {
    return Check("cdi", CheckVerdict::kDegraded, "unreadable CDI spec: " + Join(broken, ", "), ev,
                 "regenerate it with nvidia-ctk cdi generate");
  }
  if (hooked == 0) {
    return Check("cdi", CheckVerdict::kDegraded,
                 "the NVIDIA CDI spec has no apply-cuda-memory-limits hook: a container starts uncapped until the "
                 "agent's next pass",
                 ev, "upgrade the NVIDIA container toolkit to a release with the hook and regenerate the spec");
  }
  // The toolkit attaches the hook to whole GPUs only (MIG devices need none), so some devices without it is normal.
  return Check("cdi", CheckVerdict::kOk,
               std::to_string(hooked) + " of " + std::to_string(devices) +
                   " CDI devices apply the container's memory limits at creation (whole GPUs; MIG needs none)",
               ev);
}

DoctorCheck NriCheck(const NriEvidence& n) {
  Evidence ev = {{"socket", n.socket}, {"present", YesNo(n.present)}};
  if (!n.present) {
    return Check("nri", CheckVerdict::kMissing,
                 "no NRI socket at " + n.socket + " (needed only with agent.nri.enabled)", ev,
                 "enable NRI in the runtime (containerd: [plugins.\"io.containerd.nri.v1.nri\"] disable = false; "
                 "CRI-O: enable_nri = true)");
  }
  return Check("nri", CheckVerdict::kOk, "NRI socket at " + n.socket, ev);
}

}  // namespace

std::string_view CheckVerdictName(CheckVerdict verdict) {
  switch (verdict) {
    case CheckVerdict::kOk:
      return "ok";
    case CheckVerdict::kDegraded:
      return "degraded";
    case CheckVerdict::kMissing:
      return "missing";
  }
  return "missing";
}

const DoctorCheck* DoctorReport::Find(std::string_view name) const {
  for (const DoctorCheck& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

DoctorReport Diagnose(const DoctorEvidence& e) {
  DoctorReport r;
  r.checks = {NvmlCheck(e.nvml),    MemoryLimitsCheck(e.nvml), CgroupCheck(e.cgroup), MpsCheck(e.mps, e.nvml),
              ComputeCheck(e.nvml), MigCheck(e.nvml),          CdiCheck(e.cdi),       NriCheck(e.nri)};
  r.can.memory_hard = r.Find("memory-limits")->verdict == CheckVerdict::kOk && !DmemStopsAboveKubepods(e.cgroup);
  // The soft limit only marks a client; MPS evicts it when another hits its hard wall.
  r.can.memory_soft = r.can.memory_hard && r.Find("mps")->verdict == CheckVerdict::kOk;
  const CheckVerdict compute = r.Find("compute")->verdict;
  r.can.compute = compute == CheckVerdict::kOk ? "hard" : compute == CheckVerdict::kDegraded ? "soft" : "none";
  for (const NvmlDeviceEvidence& d : e.nvml.devices) r.can.mig = r.can.mig || (d.mig_enabled && d.mig_instances > 0);
  return r;
}

std::string DoctorTable(const DoctorReport& report) {
  std::string out;
  for (const DoctorCheck& c : report.checks) {
    std::string verdict(CheckVerdictName(c.verdict));
    std::string name = c.name;
    verdict.resize(10, ' ');
    name.resize(15, ' ');
    out += verdict + name + c.summary + "\n";
    if (!c.fix.empty()) out += std::string(25, ' ') + "fix: " + c.fix + "\n";
  }
  const DoctorCapabilities& can = report.can;
  out += "\nthis node enforces: memory hard " + YesNo(can.memory_hard) + ", memory soft " + YesNo(can.memory_soft) +
         ", compute " + can.compute + ", MIG " + YesNo(can.mig) + "\n";
  return out;
}

nlohmann::json DoctorJson(const DoctorReport& report) {
  nlohmann::json checks = nlohmann::json::array();
  for (const DoctorCheck& c : report.checks) {
    nlohmann::json evidence = nlohmann::json::object();
    for (const auto& [k, v] : c.evidence) evidence[k] = v;
    checks.push_back({{"name", c.name},
                      {"verdict", CheckVerdictName(c.verdict)},
                      {"summary", c.summary},
                      {"evidence", evidence},
                      {"fix", c.fix}});
  }
  return {{"checks", checks},
          {"can",
           {{"memoryHard", report.can.memory_hard},
            {"memorySoft", report.can.memory_soft},
            {"compute", report.can.compute},
            {"mig", report.can.mig}}}};
}

namespace {

// "memory-limits" + degraded → "MemoryLimitsDegraded".
std::string ConditionReason(const DoctorCheck& check) {
  std::string out;
  bool upper = true;
  for (char c : check.name + "-" + std::string(CheckVerdictName(check.verdict))) {
    if (c == '-') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

api::GpuNodeCondition Failed(std::string_view type, const DoctorCheck& check) {
  return {std::string(type),
          false,
          ConditionReason(check),
          check.name + ": " + check.summary + (check.fix.empty() ? "" : "; fix: " + check.fix),
          {}};
}

}  // namespace

std::vector<api::GpuNodeCondition> DoctorConditions(const DoctorReport& report,
                                                    const std::vector<api::GpuNodeCondition>& previous,
                                                    Clock::TimePoint now) {
  const DoctorCheck& limits = *report.Find("memory-limits");
  const DoctorCheck& cgroup = *report.Find("cgroup");
  const DoctorCheck& compute = *report.Find("compute");
  api::GpuNodeCondition memory;
  if (report.can.memory_hard) {
    memory = {std::string(api::kConditionMemoryEnforced),
              true,
              "Enforced",
              limits.summary + "; soft limits " +
                  (report.can.memory_soft ? "held by MPS" : "not held (" + report.Find("mps")->summary + ")"),
              {}};
  } else {
    memory = Failed(api::kConditionMemoryEnforced, limits.verdict != CheckVerdict::kOk ? limits : cgroup);
  }
  api::GpuNodeCondition compute_condition =
      report.can.compute == "hard"
          ? api::GpuNodeCondition{std::string(api::kConditionComputeEnforced), true, "Enforced", compute.summary, {}}
          : Failed(api::kConditionComputeEnforced, compute);
  std::vector<api::GpuNodeCondition> out = {std::move(memory), std::move(compute_condition)};
  for (api::GpuNodeCondition& c : out) {
    const api::GpuNodeCondition* before = api::FindCondition(previous, c.type);
    c.last_transition_time = before != nullptr && before->status == c.status ? before->last_transition_time : now;
  }
  return out;
}

}  // namespace gpupack::agent
