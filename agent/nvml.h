// The NVML binding: libnvidia-ml loaded with dlopen at run time, so the agent builds without an
// NVIDIA SDK and starts (and keeps retrying) on a node where the driver is missing.
//
// Every NVML call goes through a wrapper that turns the return code into a Status whose message
// names the call and the NVML error ("nvmlDeviceGetUUID: NVML_ERROR_GPU_IS_LOST (15): the GPU has
// fallen off the bus or is otherwise inaccessible"). Optional functions (newer than the oldest
// driver we support) are resolved only when present: the MIG calls, nvmlDeviceGetMemoryInfo_v2
// (falls back to v1), nvmlSystemGetCudaDriverVersion_v2, the R615 per-cgroup memory limits
// (nvmlDeviceSetMemoryLimits_v1 / GetMemoryLimits_v1), and the utilisation and compute-mode calls
// (nvmlDeviceGetUtilizationRates, nvmlDeviceGetProcessUtilization, nvmlDeviceGetComputeMode).
//
// Thread safety: NVML itself is thread-safe; an Nvml object is immutable after Open, so its
// methods may be called concurrently. The error observer must be set before sharing the object.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/nvml_api.h"
#include "common/status.h"

namespace gpupack::agent {

// "NVML_ERROR_GPU_IS_LOST (15): the GPU has fallen off the bus or is otherwise inaccessible".
// Unknown codes are named by number.
std::string NvmlReturnMessage(nvmlReturn_t code);
// OK for NVML_SUCCESS; otherwise "<call>: <NvmlReturnMessage>" with a StatusCode chosen by
// meaning: NOT_FOUND → NotFound, NO_PERMISSION → PermissionDenied, NOT_SUPPORTED and
// FUNCTION_NOT_FOUND → FailedPrecondition, INVALID_ARGUMENT → InvalidArgument, anything else
// (driver not loaded, GPU lost, timeouts, ...) → Unavailable, i.e. worth retrying later.
Status NvmlStatus(nvmlReturn_t code, std::string_view call);

struct NvmlMemory {
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
};

struct NvmlProcess {
  uint32_t pid = 0;
  uint64_t used_bytes = 0;  // 0 when NVML cannot tell
};

struct NvmlMemoryLimits {
  uint64_t soft_bytes = 0;
  uint64_t hard_bytes = 0;
  uint64_t current_used_bytes = 0;
};

struct NvmlGpuInstance {
  unsigned int id = 0;
  unsigned int profile_id = 0;
  unsigned int placement_start = 0;
  unsigned int placement_size = 0;
};

class Nvml {
 public:
  // Loads `library` (a soname searched the usual way, or a path), resolves the required symbols
  // and calls nvmlInit_v2. Unavailable naming dlerror() when the library cannot be loaded,
  // FailedPrecondition naming the symbol when a required one is missing, the NvmlStatus of
  // nvmlInit_v2 when initialisation fails. Never aborts: callers retry later.
  static StatusOr<std::unique_ptr<Nvml>> Open(const std::string& library = "libnvidia-ml.so.1");
  ~Nvml();  // nvmlShutdown, dlclose
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Called with the NVML function name on every failed call (metrics count them). Expected
  // "absences" (NOT_SUPPORTED for MIG mode on a non-MIG GPU, NOT_FOUND for empty MIG slots) are
  // not reported.
  void set_error_observer(std::function<void(std::string_view call)> observer) { observer_ = std::move(observer); }

  bool has_mig_functions() const;
  bool has_memory_limits() const;

  StatusOr<std::string> DriverVersion() const;
  // CUDA driver API version as NVML reports it, e.g. 13040 for 13.4. FailedPrecondition when the
  // driver predates the call.
  StatusOr<int> CudaDriverVersion() const;
  StatusOr<unsigned int> DeviceCount() const;
  StatusOr<nvmlDevice_t> DeviceByIndex(unsigned int index) const;
  StatusOr<nvmlDevice_t> DeviceByUuid(const std::string& uuid) const;
  StatusOr<std::string> Uuid(nvmlDevice_t device) const;
  StatusOr<std::string> Name(nvmlDevice_t device) const;
  StatusOr<unsigned int> Index(nvmlDevice_t device) const;
  // nvmlDeviceGetMemoryInfo_v2 (version set), falling back to v1 when v2 is absent or refuses the
  // version (FUNCTION_NOT_FOUND / ARGUMENT_VERSION_MISMATCH).
  StatusOr<NvmlMemory> Memory(nvmlDevice_t device) const;
  // nvmlDeviceGetComputeRunningProcesses_v3, sized by a first call and retried if the list grew.
  StatusOr<std::vector<NvmlProcess>> Processes(nvmlDevice_t device) const;
  // False when MIG is unsupported (NOT_SUPPORTED) or the MIG calls are absent.
  StatusOr<bool> MigEnabled(nvmlDevice_t device) const;
  // The MIG device handles of a MIG-enabled GPU (empty slots skipped).
  StatusOr<std::vector<nvmlDevice_t>> MigDevices(nvmlDevice_t device) const;
  StatusOr<unsigned int> GpuInstanceId(nvmlDevice_t mig_device) const;
  StatusOr<NvmlGpuInstance> GpuInstance(nvmlDevice_t parent, unsigned int gpu_instance_id) const;
  // Profile id → profile name without the "MIG " prefix ("1g.10gb"), for every profile the GPU
  // supports (selectors the GPU refuses are skipped).
  StatusOr<std::map<unsigned int, std::string>> ProfileNames(nvmlDevice_t device) const;
  // R615 per-cgroup limits. FailedPrecondition when the driver lacks them.
  Status SetMemoryLimits(nvmlDevice_t device, const std::string& cgroup_dir, uint64_t soft_bytes,
                         uint64_t hard_bytes) const;
  StatusOr<NvmlMemoryLimits> GetMemoryLimits(nvmlDevice_t device, const std::string& cgroup_dir) const;
  // nvmlDeviceGetUtilizationRates' gpu figure: percent of the last sample period in which a kernel
  // ran. FailedPrecondition on a MIG-enabled GPU (NOT_SUPPORTED, not reported to the observer) or
  // when the call is absent.
  StatusOr<int> SmUtilization(nvmlDevice_t device) const;
  // Per process, the mean smUtil of nvmlDeviceGetProcessUtilization's samples newer than
  // `since_us` (microseconds since the epoch; 0 = every sample the driver keeps): the percent of
  // the SMs' time its kernels ran. Empty when no process ran since then.
  StatusOr<std::map<uint32_t, int>> ProcessSmUtilization(nvmlDevice_t device, uint64_t since_us) const;
  // Whether the device's compute mode is EXCLUSIVE_PROCESS (nvmlDeviceGetComputeMode).
  StatusOr<bool> ExclusiveProcess(nvmlDevice_t device) const;

 private:
  struct Functions;
  Nvml(void* handle, std::unique_ptr<Functions> fn);
  Status Check(nvmlReturn_t code, std::string_view call) const;
  StatusOr<std::string> ReadString(nvmlReturn_t (*fn)(nvmlDevice_t, char*, unsigned int), nvmlDevice_t device,
                                   unsigned int size, std::string_view call) const;

  void* handle_;
  std::unique_ptr<Functions> fn_;
  std::function<void(std::string_view)> observer_;
};

}  // namespace gpupack::agent
