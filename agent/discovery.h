// GPU discovery backends: what the node has right now (devices, MIG layout, live usage,
// processes mapped to pods, enforcement capability), as a GPUNode status without the audit and
// heartbeat (the reporter adds those).
//
//   NvmlBackend  the real driver through libnvidia-ml (agent/nvml.h); opens the library lazily and
//                retries on every pass until it loads, so a node whose driver comes up late or
//                is upgraded is picked up without a restart.
//   FileBackend  one node entry in the cluster-file schema (docs/cluster-file.md), re-read every pass,
//                for tests, demos and the simulator.
//
// Thread safety: a backend is used by one thread at a time (the agent's loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agent/cgroup.h"
#include "agent/mps_namespace.h"
#include "agent/nvml.h"
#include "api/gpunode.h"
#include "common/status.h"

namespace gpupack::agent {

// Per-cgroup device-memory limits (R615). Device by UUID, cgroup by absolute directory.
class MemoryLimiter {
 public:
  virtual ~MemoryLimiter() = default;
  virtual Status SetLimits(const std::string& device_uuid, const std::string& cgroup_dir, uint64_t soft_bytes,
                           uint64_t hard_bytes) = 0;
  // nullopt when no limit is set on that cgroup for that device.
  virtual StatusOr<std::optional<NvmlMemoryLimits>> GetLimits(const std::string& device_uuid,
                                                              const std::string& cgroup_dir) = 0;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  // One discovery pass. Unavailable (or the NVML error) when the GPUs cannot be read now; the
  // caller reports the error and tries again on its next pass.
  virtual StatusOr<api::GpuNodeStatus> Discover() = 0;
  // The limiter when this backend can enforce caps right now, else nullptr.
  virtual MemoryLimiter* limiter() { return nullptr; }
};

// What MPS the node runs, as the agent finds it each pass.
enum class MpsMode {
  kNone,        // no control daemon (or none looked for)
  kClient,      // a control daemon: clients join the server with their own thread percentage
  kNamespaces,  // an MPS v3 server answers for per-container namespaces
};

// How long a pass waits for the MPS daemon to list its namespaces. A daemon that answers at all
// answers in milliseconds (one CLI run is about 1-3 ms, bench/agent/bench_mps).
inline constexpr std::chrono::milliseconds kMpsLivenessTimeout{2'000};

struct NvmlBackendOptions {
  std::string library = "libnvidia-ml.so.1";
  std::string proc_root = "/proc";
  std::string cgroup_root = "/sys/fs/cgroup";
  // The node's MPS control daemon. pipe_directory ("" = none): a GPU is compute-enforced mps-client
  // while <dir>/control exists and the GPU is EXCLUSIVE_PROCESS (ComputeEnforcementOf). server
  // (agent --mps-server; "" = none): the MPS v3 server on which gpupack-nri gives each container a
  // namespace; a GPU is mps-namespace while the daemon answers `namespace list` for it, checked
  // every pass. The check waits kMpsLivenessTimeout, not the CLI's usual 10 s: a pass runs every
  // 10 s, and a hung daemon must not hold each one that long.
  MpsControlOptions mps{.timeout = kMpsLivenessTimeout};
  // Called with the NVML function name on every failed NVML call (also "dlopen" for load failures).
  std::function<void(std::string_view call)> on_nvml_error;
};

class NvmlBackend final : public GpuBackend, public MemoryLimiter {
 public:
  explicit NvmlBackend(NvmlBackendOptions options);
  ~NvmlBackend() override;

  StatusOr<api::GpuNodeStatus> Discover() override;
  MemoryLimiter* limiter() override;

  Status SetLimits(const std::string& device_uuid, const std::string& cgroup_dir, uint64_t soft_bytes,
                   uint64_t hard_bytes) override;
  StatusOr<std::optional<NvmlMemoryLimits>> GetLimits(const std::string& device_uuid,
                                                      const std::string& cgroup_dir) override;

 private:
  Status EnsureOpen();
  StatusOr<api::GpuNodeStatus> DiscoverAll();
  StatusOr<api::GpuNodeDevice> DiscoverDevice(unsigned int i, std::vector<api::GpuNodeProcess>* processes);
  void AddProcesses(nvmlDevice_t handle, const std::string& uuid, std::vector<api::GpuNodeProcess>* processes);

  NvmlBackendOptions options_;
  ProcReader proc_;
  const MpsControl mps_control_;  // options_.mps
  // What MPS this pass found, and the time of the last pass in µs since the epoch: each pass asks
  // NVML for the process utilisation samples newer than the last one.
  MpsMode mps_mode_ = MpsMode::kNone;
  uint64_t last_pass_us_ = 0;
  std::unique_ptr<Nvml> nvml_;
  bool can_enforce_ = false;
  // Last good total per GPU, so a GPU that stops answering keeps its size while marked unhealthy.
  std::map<std::string, model::MiB> last_total_mib_;
};

class FileBackend final : public GpuBackend {
 public:
  // `path` holds either one node entry (name, gpus, ...) or a cluster file whose entry named
  // `node_name` (or its only entry) is used.
  FileBackend(std::string path, std::string node_name);
  // InvalidArgument / NotFound naming the file and the entry for bad or missing input.
  StatusOr<api::GpuNodeStatus> Discover() override;

 private:
  std::string path_;
  std::string node_name_;
};

// How compute shares are held on a whole GPU (api::kComputeEnforcement*), when the GPU is
// EXCLUSIVE_PROCESS, so that every CUDA client goes through the MPS server: mps-namespace when the
// server answers for the namespaces gpupack-nri gives each container (a ceiling the container
// cannot raise), mps-client when only a control daemon runs (its control pipe exists: the server
// applies the client's own CUDA_MPS_ACTIVE_THREAD_PERCENTAGE); none otherwise (a GPU in DEFAULT
// mode lets a client open its own context beside MPS, uncapped). docs/agent.md "Compute
// enforcement".
std::string_view ComputeEnforcementOf(MpsMode mps, bool exclusive_process);

// Bytes → MiB: capacities round down (never promise memory that is not there), usage rounds up.
model::MiB BytesToMiBFloor(uint64_t bytes);
model::MiB BytesToMiBCeil(uint64_t bytes);

// The GPUNode device list a model::Node describes (MIG instances grouped under their parent GPU).
std::vector<api::GpuNodeDevice> DevicesFromCoreNode(const model::Node& node);

}  // namespace gpupack::agent
