// The node doctor (gpupack-agent --doctor, docs/agent.md "Doctor"): whether this node can enforce
// what gpupack decides. The evidence (what the probes in agent/doctor_probe.h read: NVML, the
// cgroup tree, the MPS control daemon's pipe, the container toolkit's CDI specs, the runtime's
// NRI socket) goes in; a verdict per check, the node's capabilities and a one-line fix per failure
// come out. Pure: no I/O here, so every verdict has a table test (agent/doctor_test.cc).
//
// Checks, in report order (each ok / degraded / missing):
//   nvml           libnvidia-ml loaded and initialised, GPUs found
//   memory-limits  the R615 per-cgroup memory limits: driver branch, NVML calls, cgroup v2
//   cgroup         the kernel's dmem controller (6.14+) accounting NVIDIA memory and enabled down
//                  to kubepods, or the driver's misc fallback (degraded: hard limits still hold)
//   mps            an MPS control daemon's pipe (soft limits and compute shares need MPS)
//   compute        how compute shares are held per GPU (MIG instances are hardware partitions)
//   mig            MIG mode per GPU, and MIG-enabled GPUs without instances
//   cdi            an NVIDIA CDI spec whose devices carry the toolkit's apply-cuda-memory-limits hook
//   nri            the runtime's NRI socket (needed only with node-side injection)
//
// Thread safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/gpunode.h"
#include "common/clock.h"

namespace gpupack::agent {

enum class CheckVerdict { kOk, kDegraded, kMissing };
// "ok", "degraded", "missing".
std::string_view CheckVerdictName(CheckVerdict verdict);

struct NvmlDeviceEvidence {
  std::string uuid;
  std::string model;
  bool mig_enabled = false;
  int mig_instances = 0;
  // api::kComputeEnforcement* as discovery reported it (GpuNodeDevice::compute_enforcement); empty when
  // the evidence came from somewhere that does not say.
  std::string compute_enforcement;
};

struct NvmlEvidence {
  std::string library;         // what was loaded ("libnvidia-ml.so.1", a path, or "file:…" for the file backend)
  std::string error;           // empty when the library loaded and discovery ran
  std::string driver_version;  // "615.20"
  std::string cuda_version;    // "13.4"
  // Whether the library exports nvmlDeviceSetMemoryLimits_v1; nullopt when not probed.
  std::optional<bool> memory_limit_calls;
  // agent::DetectEnforcement's answer, as discovery reports it (api::kEnforcement*).
  std::string enforcement_mode = "none";
  std::string enforcement_reason;
  std::vector<NvmlDeviceEvidence> devices;
};

struct CgroupEvidence {
  std::string root;                      // the cgroup v2 mount probed
  bool v2 = false;                       // root/cgroup.controllers could be read
  std::vector<std::string> controllers;  // root/cgroup.controllers
  // Lines of root/dmem.capacity whose region is NVIDIA's ("nvidia/0000:17:00.0/vidmem 150323855360"):
  // the driver registered its memory with the kernel's dmem controller.
  std::vector<std::string> nvidia_dmem_regions;
  std::string kubepods;                  // the kubepods cgroup found under root ("" = none)
  bool kubepods_dmem_enabled = false;    // kubepods/cgroup.controllers lists dmem (its parent delegates it)
  bool kubepods_dmem_delegated = false;  // kubepods/cgroup.subtree_control lists dmem (passed on to pods)
};

struct MpsEvidence {
  std::string pipe_dir;       // "" = none configured
  bool control_pipe = false;  // pipe_dir/control exists: a control daemon is running
};

struct CdiSpecEvidence {
  std::string path;
  std::string kind;  // "nvidia.com/gpu"
  int devices = 0;
  int devices_with_hook = 0;  // devices whose edits (or the spec's) run apply-cuda-memory-limits
  std::string error;          // the spec could not be parsed
};

struct CdiEvidence {
  std::vector<std::string> dirs;
  std::vector<CdiSpecEvidence> nvidia_specs;  // specs whose kind is an NVIDIA GPU's
};

struct NriEvidence {
  std::string socket;
  bool present = false;  // a unix socket is there
};

struct DoctorEvidence {
  NvmlEvidence nvml;
  CgroupEvidence cgroup;
  MpsEvidence mps;
  CdiEvidence cdi;
  NriEvidence nri;
};

struct DoctorCheck {
  std::string name;
  CheckVerdict verdict = CheckVerdict::kMissing;
  std::string summary;                                        // one line: what the check found
  std::vector<std::pair<std::string, std::string>> evidence;  // what was read, key → value
  std::string fix;                                            // one line; empty when ok
};

// What the node can enforce, from the checks.
struct DoctorCapabilities {
  bool memory_hard = false;      // whole-GPU caps are driver-enforced limits (MIG instances always are)
  bool memory_soft = false;      // soft limits (borrowing) hold: hard limits and an MPS daemon to evict
  std::string compute = "none";  // hard (MPS namespaces or MIG) | soft (MPS client env) | none
  bool mig = false;              // some GPU is in MIG mode with instances to place on
};

struct DoctorReport {
  std::vector<DoctorCheck> checks;
  DoctorCapabilities can;
  const DoctorCheck* Find(std::string_view name) const;
};

DoctorReport Diagnose(const DoctorEvidence& evidence);

// For people: one line per check ("ok        nvml           driver 615.20, CUDA 13.4, 2 GPUs"),
// its fix indented under it, then the capabilities.
std::string DoctorTable(const DoctorReport& report);
// For tools: {"checks":[{"name","verdict","summary","evidence":{…},"fix"}],
//             "can":{"memoryHard":true,"memorySoft":false,"compute":"soft","mig":true}}.
nlohmann::json DoctorJson(const DoctorReport& report);

// The GPUNode conditions (api::kConditionMemoryEnforced, api::kConditionComputeEnforced) the report
// means. MemoryEnforced is can.memory_hard; ComputeEnforced is can.compute == "hard". When False,
// reason names the check that decided it and its verdict ("MemoryLimitsMissing", "CgroupDegraded"),
// message its summary and fix. lastTransitionTime is `previous`'s where the status is unchanged,
// else `now`.
std::vector<api::GpuNodeCondition> DoctorConditions(const DoctorReport& report,
                                                    const std::vector<api::GpuNodeCondition>& previous,
                                                    Clock::TimePoint now);

}  // namespace gpupack::agent
