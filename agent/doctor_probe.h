// The doctor's probes (agent/doctor.h): they read the node and fill the evidence, nothing more;
// every path is injectable so the tests run them against temporary trees.
//
//   cgroup  <root>/cgroup.controllers, <root>/dmem.capacity (exists only on the root cgroup; one
//           line per registered region, NVIDIA's named nvidia/<pci>/vidmem), and the kubepods
//           cgroup's cgroup.controllers and cgroup.subtree_control
//   mps     <pipe dir>/control, the named pipe a running nvidia-cuda-mps-control serves
//   cdi     every *.yaml, *.yml, *.json spec in the CDI spec directories whose kind is an NVIDIA
//           GPU's (nvidia.com/gpu, k8s.device-plugin.nvidia.com/gpu, …), and which of its devices
//           run the container toolkit's nvidia-cdi-hook apply-cuda-memory-limits
//   nri     the runtime's NRI socket
//   nvml    a discovery pass of the agent's own backend, and whether the library exports the R615
//           memory-limit calls
//
// Thread safety: stateless functions; the backend is used by the calling thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/discovery.h"
#include "agent/doctor.h"

namespace gpupack::agent {

struct DoctorRoots {
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string mps_pipe_dir;                                          // "" = none given
  std::vector<std::string> cdi_dirs = {"/etc/cdi", "/var/run/cdi"};  // the CDI specification's default dirs
  std::string nri_socket = "/var/run/nri/nri.sock";                  // NRI's default socket
};

CgroupEvidence ProbeCgroup(const std::string& root);
MpsEvidence ProbeMps(const std::string& pipe_dir);
CdiEvidence ProbeCdi(const std::vector<std::string>& dirs);
NriEvidence ProbeNri(const std::string& socket);

// The NVML part of the evidence from one discovery pass (or its error). `library` names what the
// backend reads; `memory_limit_calls` as ProbeMemoryLimitCalls answered (nullopt: not probed).
NvmlEvidence NvmlEvidenceOf(const StatusOr<api::GpuNodeStatus>& discovered, std::string library,
                            std::optional<bool> memory_limit_calls);
// Whether `library` exports nvmlDeviceSetMemoryLimits_v1 (it is opened and initialised once more);
// nullopt when it cannot be opened.
std::optional<bool> ProbeMemoryLimitCalls(const std::string& library);

// Every file probe, with `nvml` as the NVML part.
DoctorEvidence ProbeNode(const DoctorRoots& roots, NvmlEvidence nvml);

}  // namespace gpupack::agent
