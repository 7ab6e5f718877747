// gpupack-agent's command line (docs/agent.md): the flags, their defaults, their parser and the
// parts they configure, apart from the main so that each rule has a unit test.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/discovery.h"
#include "agent/doctor_probe.h"
#include "agent/metrics.h"
#include "agent/reporter.h"
#include "common/status.h"

namespace gpupack::agent {

extern const char* const kAgentUsage;

struct AgentFlags {
  bool help = false;             // --help / -h: print kAgentUsage, exit 0
  std::string node_name;         // default: $NODE_NAME (the caller passes it in)
  std::string backend = "nvml";  // nvml or file:PATH
  std::string kubeconfig;
  std::string listen = ":9402";
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string proc_root = "/proc";
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string mps_pipe_directory;  // the MPS control daemon's pipe directory on the host; "" = no MPS
  // The MPS v3 server gpupack-nri puts namespaces on ("" = none), and the CLI that asks it.
  std::string mps_server, mps_control_binary = "nvidia-cuda-mps-control";
  std::chrono::seconds poll{10}, heartbeat{60}, min_write{10};
  int64_t change_threshold_mib = 256;
  int64_t max_pods_per_device = 16;
  bool once = false, print = false;
  // --doctor: check what this node can enforce, print it (a table, or JSON with --json), exit 0.
  bool doctor = false, json = false;
  std::vector<std::string> cdi_spec_dirs = {"/etc/cdi", "/var/run/cdi"};
  std::string nri_socket = "/var/run/nri/nri.sock";
  // --doctor --cluster: the verdicts every agent reported (agent/doctor_cluster.h), not this node's.
  bool doctor_cluster = false, require_memory_enforced = false;
  std::string agent_namespace;  // where the agent pods run (required with --cluster)
  std::string agent_selector = "app.kubernetes.io/component=agent";
  bool evict_foreign_pods = false;  // agent/eviction.h: off, the audit only reports
  std::chrono::seconds foreign_eviction_interval{60};
};

// `args` without the program name. On failure the status message is what the main prints after
// "gpupack-agent: " (usage included where the flag itself is unknown or missing).
StatusOr<AgentFlags> ParseAgentFlags(const std::vector<std::string>& args, const std::string& node_name_env);

// The GPU backend --backend names (parsed flags only): NVML errors counted in `metrics`, which
// must outlive it.
std::unique_ptr<GpuBackend> MakeGpuBackend(const AgentFlags& flags, AgentMetrics* metrics);
// The pass's and the reporter's options from the flags (the pass's callbacks left unset).
AgentOptions AgentOptionsOf(const AgentFlags& flags);
// The doctor's probe paths from the flags.
DoctorRoots DoctorRootsOf(const AgentFlags& flags);
// What --doctor reads: one discovery pass of `backend` (MakeGpuBackend's), the NVML library's
// memory-limit calls when the backend is nvml, and every file probe at the flags' paths.
DoctorEvidence DoctorEvidenceOf(const AgentFlags& flags, GpuBackend& backend);
ReporterOptions ReporterOptionsOf(const AgentFlags& flags);

}  // namespace gpupack::agent
