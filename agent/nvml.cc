#include "agent/nvml.h"

#include <dlfcn.h>

#include <algorithm>

namespace gpupack::agent {
namespace {

struct CodeInfo {
  nvmlReturn_t code;
  const char* name;
  const char* meaning;
};

constexpr CodeInfo kCodes[] = {
    {NVML_SUCCESS, "NVML_SUCCESS", "the operation was successful"},
    {NVML_ERROR_UNINITIALIZED, "NVML_ERROR_UNINITIALIZED", "NVML was not initialised"},
    {NVML_ERROR_INVALID_ARGUMENT, "NVML_ERROR_INVALID_ARGUMENT", "a supplied argument is invalid"},
    {NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED", "the device does not support the requested operation"},
    {NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION",
     "the caller lacks the permission for the operation (run privileged)"},
    {NVML_ERROR_ALREADY_INITIALIZED, "NVML_ERROR_ALREADY_INITIALIZED", "NVML is already initialised"},
    {NVML_ERROR_NOT_FOUND, "NVML_ERROR_NOT_FOUND", "the queried object was not found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "NVML_ERROR_INSUFFICIENT_SIZE", "an input buffer is too small"},
    {NVML_ERROR_INSUFFICIENT_POWER, "NVML_ERROR_INSUFFICIENT_POWER",
     "a device's external power cables are not connected properly"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED", "the NVIDIA kernel driver is not loaded"},
    {NVML_ERROR_TIMEOUT, "NVML_ERROR_TIMEOUT", "the operation timed out"},
    {NVML_ERROR_IRQ_ISSUE, "NVML_ERROR_IRQ_ISSUE",
     "the NVIDIA kernel driver detected an interrupt problem with the GPU"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML_ERROR_LIBRARY_NOT_FOUND",
     "the NVML shared library could not be found or loaded"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "NVML_ERROR_FUNCTION_NOT_FOUND",
     "the installed NVML lacks this function (driver too old)"},
    {NVML_ERROR_CORRUPTED_INFOROM, "NVML_ERROR_CORRUPTED_INFOROM", "the GPU's infoROM is corrupted"},
    {NVML_ERROR_GPU_IS_LOST, "NVML_ERROR_GPU_IS_LOST", "the GPU has fallen off the bus or is otherwise inaccessible"},
    {NVML_ERROR_RESET_REQUIRED, "NVML_ERROR_RESET_REQUIRED", "the GPU needs a reset before it can be used again"},
    {NVML_ERROR_OPERATING_SYSTEM, "NVML_ERROR_OPERATING_SYSTEM", "the operating system blocked the GPU call"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
     "the NVML library and the kernel driver versions differ (reload the driver)"},
    {NVML_ERROR_IN_USE, "NVML_ERROR_IN_USE", "the GPU is in use by another operation"},
    {NVML_ERROR_MEMORY, "NVML_ERROR_MEMORY", "insufficient host memory"},
    {NVML_ERROR_NO_DATA, "NVML_ERROR_NO_DATA", "no data is available"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
     "ECC is enabled, which vGPU does not support"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "NVML_ERROR_INSUFFICIENT_RESOURCES",
     "not enough resources to complete the operation"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "NVML_ERROR_FREQ_NOT_SUPPORTED", "the requested frequency is not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
     "the struct version passed is not supported by this driver"},
    {NVML_ERROR_DEPRECATED, "NVML_ERROR_DEPRECATED", "the function is deprecated"},
    {NVML_ERROR_NOT_READY, "NVML_ERROR_NOT_READY", "the system is not ready for the request"},
    {NVML_ERROR_GPU_NOT_FOUND, "NVML_ERROR_GPU_NOT_FOUND", "the GPU was not found"},
    {NVML_ERROR_INVALID_STATE, "NVML_ERROR_INVALID_STATE", "the resource is in an invalid state"},
    {NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED", "the reset type is not supported"},
    {NVML_ERROR_UNKNOWN, "NVML_ERROR_UNKNOWN", "an unknown internal error occurred"},
};

}  // namespace

std::string NvmlReturnMessage(nvmlReturn_t code) {
  for (const CodeInfo& info : kCodes) {
    if (info.code == code) return std::string(info.name) + " (" + std::to_string(code) + "): " + info.meaning;
  }
  return "unknown NVML return code " + std::to_string(code);
}

Status NvmlStatus(nvmlReturn_t code, std::string_view call) {
  if (code == NVML_SUCCESS) return Status::Ok();
  std::string msg = std::string(call) + ": " + NvmlReturnMessage(code);
  switch (code) {
    case NVML_ERROR_NOT_FOUND:
      return Status::NotFound(std::move(msg));
    case NVML_ERROR_NO_PERMISSION:
      return Status::PermissionDenied(std::move(msg));
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return Status::FailedPrecondition(std::move(msg));
    case NVML_ERROR_INVALID_ARGUMENT:
      return Status::InvalidArgument(std::move(msg));
    default:
      return Status::Unavailable(std::move(msg));
  }
}

// Function pointers; the optional ones may be null.
struct Nvml::Functions {
  nvmlReturn_t (*Init_v2)(void) = nullptr;
  nvmlReturn_t (*Shutdown)(void) = nullptr;
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*DeviceGetCount_v2)(unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetHandleByIndex_v2)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*DeviceGetIndex)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*DeviceGetComputeRunningProcesses_v3)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;
  // Optional.
  nvmlReturn_t (*SystemGetCudaDriverVersion_v2)(int*) = nullptr;
  nvmlReturn_t (*DeviceGetHandleByUUID)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfo_v2)(nvmlDevice_t, nvmlMemory_v2_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMigMode)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*DeviceGetGpuInstanceId)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*DeviceGetGpuInstanceById)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*GpuInstanceGetInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*) = nullptr;
  nvmlReturn_t (*DeviceGetGpuInstanceProfileInfoV)(nvmlDevice_t, unsigned int,
                                                   nvmlGpuInstanceProfileInfo_v2_t*) = nullptr;
  nvmlReturn_t (*DeviceSetMemoryLimits_v1)(nvmlDevice_t, nvmlSetMemoryLimits_v1_t*) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryLimits_v1)(nvmlDevice_t, nvmlGetMemoryLimits_v1_t*) = nullptr;
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*DeviceGetProcessUtilization)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                              unsigned long long) = nullptr;
  nvmlReturn_t (*DeviceGetComputeMode)(nvmlDevice_t, int*) = nullptr;
};

namespace {

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

StatusOr<std::unique_ptr<Nvml>> Nvml::Open(const std::string& library) {
  dlerror();
  void* handle = dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::Unavailable("cannot load " + library + " (" + NvmlReturnMessage(NVML_ERROR_LIBRARY_NOT_FOUND) +
                               "): " + (err ? err : "unknown dlopen error") +
                               "; is the NVIDIA driver installed and the library visible to the agent?");
  }
  auto fn = std::make_unique<Functions>();
  struct Required {
    const char* name;
    void* resolved;
  };
  Resolve(handle, "nvmlInit_v2", &fn->Init_v2);
  Resolve(handle, "nvmlShutdown", &fn->Shutdown);
  Resolve(handle, "nvmlSystemGetDriverVersion", &fn->SystemGetDriverVersion);
  Resolve(handle, "nvmlDeviceGetCount_v2", &fn->DeviceGetCount_v2);
  Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", &fn->DeviceGetHandleByIndex_v2);
  Resolve(handle, "nvmlDeviceGetUUID", &fn->DeviceGetUUID);
  Resolve(handle, "nvmlDeviceGetName", &fn->DeviceGetName);
  Resolve(handle, "nvmlDeviceGetIndex", &fn->DeviceGetIndex);
  Resolve(handle, "nvmlDeviceGetMemoryInfo", &fn->DeviceGetMemoryInfo);
  Resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", &fn->DeviceGetComputeRunningProcesses_v3);
  const Required required[] = {
      {"nvmlInit_v2", reinterpret_cast<void*>(fn->Init_v2)},
      {"nvmlShutdown", reinterpret_cast<void*>(fn->Shutdown)},
      {"nvmlSystemGetDriverVersion", reinterpret_cast<void*>(fn->SystemGetDriverVersion)},
      {"nvmlDeviceGetCount_v2", reinterpret_cast<void*>(fn->DeviceGetCount_v2)},
      {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void*>(fn->DeviceGetHandleByIndex_v2)},
      {"nvmlDeviceGetUUID", reinterpret_cast<void*>(fn->DeviceGetUUID)},
      {"nvmlDeviceGetName", reinterpret_cast<void*>(fn->DeviceGetName)},
      {"nvmlDeviceGetIndex", reinterpret_cast<void*>(fn->DeviceGetIndex)},
      {"nvmlDeviceGetMemoryInfo", reinterpret_cast<void*>(fn->DeviceGetMemoryInfo)},
      {"nvmlDeviceGetComputeRunningProcesses_v3", reinterpret_cast<void*>(fn->DeviceGetComputeRunningProcesses_v3)},
  };
  for (const Required& r : required) {
    if (r.resolved == nullptr) {
      dlclose(handle);
      return Status::FailedPrecondition(library + " lacks " + r.name + " (" +
                                        NvmlReturnMessage(NVML_ERROR_FUNCTION_NOT_FOUND) + ")");
    }
  }
  Resolve(handle, "nvmlSystemGetCudaDriverVersion_v2", &fn->SystemGetCudaDriverVersion_v2);
  Resolve(handle, "nvmlDeviceGetHandleByUUID", &fn->DeviceGetHandleByUUID);
  Resolve(handle, "nvmlDeviceGetMemoryInfo_v2", &fn->DeviceGetMemoryInfo_v2);
  Resolve(handle, "nvmlDeviceGetMigMode", &fn->DeviceGetMigMode);
  Resolve(handle, "nvmlDeviceGetMaxMigDeviceCount", &fn->DeviceGetMaxMigDeviceCount);
  Resolve(handle, "nvmlDeviceGetMigDeviceHandleByIndex", &fn->DeviceGetMigDeviceHandleByIndex);
  Resolve(handle, "nvmlDeviceGetGpuInstanceId", &fn->DeviceGetGpuInstanceId);
  Resolve(handle, "nvmlDeviceGetGpuInstanceById", &fn->DeviceGetGpuInstanceById);
  Resolve(handle, "nvmlGpuInstanceGetInfo", &fn->GpuInstanceGetInfo);
  Resolve(handle, "nvmlDeviceGetGpuInstanceProfileInfoV", &fn->DeviceGetGpuInstanceProfileInfoV);
  Resolve(handle, "nvmlDeviceSetMemoryLimits_v1", &fn->DeviceSetMemoryLimits_v1);
  Resolve(handle, "nvmlDeviceGetMemoryLimits_v1", &fn->DeviceGetMemoryLimits_v1);
  Resolve(handle, "nvmlDeviceGetUtilizationRates", &fn->DeviceGetUtilizationRates);
  Resolve(handle, "nvmlDeviceGetProcessUtilization", &fn->DeviceGetProcessUtilization);
  Resolve(handle, "nvmlDeviceGetComputeMode", &fn->DeviceGetComputeMode);

  const nvmlReturn_t rc = fn->Init_v2();
  if (rc != NVML_SUCCESS) {
    dlclose(handle);
    return NvmlStatus(rc, "nvmlInit_v2");
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(fn)));
}

Nvml::Nvml(void* handle, std::unique_ptr<Functions> fn) : handle_(handle), fn_(std::move(fn)) {}

Nvml::~Nvml() {
  fn_->Shutdown();
  dlclose(handle_);
}

bool Nvml::has_mig_functions() const {
  return fn_->DeviceGetMigMode && fn_->DeviceGetMaxMigDeviceCount && fn_->DeviceGetMigDeviceHandleByIndex &&
         fn_->DeviceGetGpuInstanceId;
}

bool Nvml::has_memory_limits() const { return fn_->DeviceSetMemoryLimits_v1 && fn_->DeviceGetMemoryLimits_v1; }

Status Nvml::Check(nvmlReturn_t code, std::string_view call) const {
  if (code != NVML_SUCCESS && observer_) observer_(call);
  return NvmlStatus(code, call);
}

StatusOr<std::string> Nvml::ReadString(nvmlReturn_t (*fn)(nvmlDevice_t, char*, unsigned int), nvmlDevice_t device,
                                       unsigned int size, std::string_view call) const {
  std::string buf(size, '\0');
  GPUPACK_RETURN_IF_ERROR(Check(fn(device, buf.data(), size), call));
  buf.resize(std::find(buf.begin(), buf.end(), '\0') - buf.begin());
  return buf;
}

StatusOr<std::string> Nvml::DriverVersion() const {
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  GPUPACK_RETURN_IF_ERROR(Check(fn_->SystemGetDriverVersion(buf, sizeof(buf)), "nvmlSystemGetDriverVersion"));
  buf[sizeof(buf) - 1] = '\0';
  return std::string(buf);
}

StatusOr<int> Nvml::CudaDriverVersion() const {
  if (!fn_->SystemGetCudaDriverVersion_v2) {
    return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlSystemGetCudaDriverVersion_v2");
  }
  int v = 0;
  GPUPACK_RETURN_IF_ERROR(Check(fn_->SystemGetCudaDriverVersion_v2(&v), "nvmlSystemGetCudaDriverVersion_v2"));
  return v;
}

StatusOr<unsigned int> Nvml::DeviceCount() const {
  unsigned int n = 0;
  GPUPACK_RETURN_IF_ERROR(Check(fn_->DeviceGetCount_v2(&n), "nvmlDeviceGetCount_v2"));
  return n;
}

StatusOr<nvmlDevice_t> Nvml::DeviceByIndex(unsigned int index) const {
  nvmlDevice_t d = nullptr;
  GPUPACK_RETURN_IF_ERROR(Check(fn_->DeviceGetHandleByIndex_v2(index, &d), "nvmlDeviceGetHandleByIndex_v2"));
  return d;
}

StatusOr<nvmlDevice_t> Nvml::DeviceByUuid(const std::string& uuid) const {
  if (!fn_->DeviceGetHandleByUUID) return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetHandleByUUID");
  nvmlDevice_t d = nullptr;
  GPUPACK_RETURN_IF_ERROR(Check(fn_->DeviceGetHandleByUUID(uuid.c_str(), &d), "nvmlDeviceGetHandleByUUID"));
  return d;
}

StatusOr<std::string> Nvml::Uuid(nvmlDevice_t device) const {
  return ReadString(fn_->DeviceGetUUID, device, NVML_DEVICE_UUID_V2_BUFFER_SIZE, "nvmlDeviceGetUUID");
}

StatusOr<std::string> Nvml::Name(nvmlDevice_t device) const {
  return ReadString(fn_->DeviceGetName, device, NVML_DEVICE_NAME_V2_BUFFER_SIZE, "nvmlDeviceGetName");
}

StatusOr<unsigned int> Nvml::Index(nvmlDevice_t device) const {
  unsigned int i = 0;
  GPUPACK_RETURN_IF_ERROR(Check(fn_->DeviceGetIndex(device, &i), "nvmlDeviceGetIndex"));
  return i;
}

StatusOr<NvmlMemory> Nvml::Memory(nvmlDevice_t device) const {
  if (fn_->DeviceGetMemoryInfo_v2) {
    nvmlMemory_v2_t m{};
    m.version = kNvmlMemoryV2;
    const nvmlReturn_t rc = fn_->DeviceGetMemoryInfo_v2(device, &m);
    if (rc == NVML_SUCCESS) return NvmlMemory{m.total, m.used};
    if (rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH && rc != NVML_ERROR_FUNCTION_NOT_FOUND) {
      return Check(rc, "nvmlDeviceGetMemoryInfo_v2");
    }
  }
  nvmlMemory_t m{};
  GPUPACK_RETURN_IF_ERROR(Check(fn_->DeviceGetMemoryInfo(device, &m), "nvmlDeviceGetMemoryInfo"));
  return NvmlMemory{m.total, m.used};
}

StatusOr<std::vector<NvmlProcess>> Nvml::Processes(nvmlDevice_t device) const {
  // The list changes between calls: size it, over-allocate, and retry a few times if it grew.
  unsigned int count = 0;
  nvmlReturn_t rc = fn_->DeviceGetComputeRunningProcesses_v3(device, &count, nullptr);
  if (rc == NVML_SUCCESS) return std::vector<NvmlProcess>{};
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) break;
    std::vector<nvmlProcessInfo_t> infos(count + 8);
    count = static_cast<unsigned int>(infos.size());
    rc = fn_->DeviceGetComputeRunningProcesses_v3(device, &count, infos.data());
    if (rc == NVML_SUCCESS) {
      std::vector<NvmlProcess> out;
      for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
        // NVML_VALUE_NOT_AVAILABLE (-1) when the driver cannot attribute memory.
        const uint64_t used = infos[i].usedGpuMemory == ~0ULL ? 0 : infos[i].usedGpuMemory;
        out.push_back({infos[i].pid, used});
      }
      return out;
    }
  }
  return Check(rc, "nvmlDeviceGetComputeRunningProcesses_v3");
}

StatusOr<bool> Nvml::MigEnabled(nvmlDevice_t device) const {
  if (!has_mig_functions()) return false;
  unsigned int current = 0, pending = 0;
  const nvmlReturn_t rc = fn_->DeviceGetMigMode(device, &current, &pending);
  if (rc == NVML_ERROR_NOT_SUPPORTED) return false;
  GPUPACK_RETURN_IF_ERROR(Check(rc, "nvmlDeviceGetMigMode"));
  return current == NVML_DEVICE_MIG_ENABLE;
}

StatusOr<std::vector<nvmlDevice_t>> Nvml::MigDevices(nvmlDevice_t device) const {
  if (!has_mig_functions()) return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetMigDeviceHandleByIndex");
  unsigned int max = 0;
  GPUPACK_RETURN_IF_ERROR(Check(fn_->DeviceGetMaxMigDeviceCount(device, &max), "nvmlDeviceGetMaxMigDeviceCount"));
  std::vector<nvmlDevice_t> out;
  for (unsigned int i = 0; i < max; ++i) {
    nvmlDevice_t mig = nullptr;
    const nvmlReturn_t rc = fn_->DeviceGetMigDeviceHandleByIndex(device, i, &mig);
    if (rc == NVML_ERROR_NOT_FOUND) continue;  // an empty slot
    GPUPACK_RETURN_IF_ERROR(Check(rc, "nvmlDeviceGetMigDeviceHandleByIndex"));
    out.push_back(mig);
  }
  return out;
}

StatusOr<unsigned int> Nvml::GpuInstanceId(nvmlDevice_t mig_device) const {
  if (!fn_->DeviceGetGpuInstanceId) return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetGpuInstanceId");
  unsigned int id = 0;
  GPUPACK_RETURN_IF_ERROR(Check(fn_->DeviceGetGpuInstanceId(mig_device, &id), "nvmlDeviceGetGpuInstanceId"));
  return id;
}

StatusOr<NvmlGpuInstance> Nvml::GpuInstance(nvmlDevice_t parent, unsigned int gpu_instance_id) const {
  if (!fn_->DeviceGetGpuInstanceById || !fn_->GpuInstanceGetInfo) {
    return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetGpuInstanceById");
  }
  nvmlGpuInstance_t gi = nullptr;
  GPUPACK_RETURN_IF_ERROR(
      Check(fn_->DeviceGetGpuInstanceById(parent, gpu_instance_id, &gi), "nvmlDeviceGetGpuInstanceById"));
  nvmlGpuInstanceInfo_t info{};
  GPUPACK_RETURN_IF_ERROR(Check(fn_->GpuInstanceGetInfo(gi, &info), "nvmlGpuInstanceGetInfo"));
  return NvmlGpuInstance{info.id, info.profileId, info.placement.start, info.placement.size};
}

StatusOr<std::map<unsigned int, std::string>> Nvml::ProfileNames(nvmlDevice_t device) const {
  if (!fn_->DeviceGetGpuInstanceProfileInfoV) {
    return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetGpuInstanceProfileInfoV");
  }
  std::map<unsigned int, std::string> out;
  for (unsigned int selector = 0; selector < NVML_GPU_INSTANCE_PROFILE_COUNT; ++selector) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = kNvmlGpuInstanceProfileInfoV2;
    const nvmlReturn_t rc = fn_->DeviceGetGpuInstanceProfileInfoV(device, selector, &info);
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT) continue;
    GPUPACK_RETURN_IF_ERROR(Check(rc, "nvmlDeviceGetGpuInstanceProfileInfoV"));
    info.name[sizeof(info.name) - 1] = '\0';
    std::string name = info.name;
    if (name.rfind("MIG ", 0) == 0) name.erase(0, 4);
    out[info.id] = name;
  }
  return out;
}

Status Nvml::SetMemoryLimits(nvmlDevice_t device, const std::string& cgroup_dir, uint64_t soft_bytes,
                             uint64_t hard_bytes) const {
  if (!fn_->DeviceSetMemoryLimits_v1) return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceSetMemoryLimits_v1");
  nvmlSetMemoryLimits_v1_t limits{cgroup_dir.c_str(), soft_bytes, hard_bytes};
  return Check(fn_->DeviceSetMemoryLimits_v1(device, &limits), "nvmlDeviceSetMemoryLimits_v1");
}

StatusOr<NvmlMemoryLimits> Nvml::GetMemoryLimits(nvmlDevice_t device, const std::string& cgroup_dir) const {
  if (!fn_->DeviceGetMemoryLimits_v1) return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetMemoryLimits_v1");
  nvmlGetMemoryLimits_v1_t limits{cgroup_dir.c_str(), 0, 0, 0};
  GPUPACK_RETURN_IF_ERROR(Check(fn_->DeviceGetMemoryLimits_v1(device, &limits), "nvmlDeviceGetMemoryLimits_v1"));
  return NvmlMemoryLimits{limits.softLimit, limits.hardLimit, limits.currentUsed};
}

StatusOr<int> Nvml::SmUtilization(nvmlDevice_t device) const {
  if (!fn_->DeviceGetUtilizationRates) {
    return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetUtilizationRates");
  }
  nvmlUtilization_t u{};
  const nvmlReturn_t rc = fn_->DeviceGetUtilizationRates(device, &u);
  if (rc == NVML_ERROR_NOT_SUPPORTED) return NvmlStatus(rc, "nvmlDeviceGetUtilizationRates");  // MIG mode: expected
  GPUPACK_RETURN_IF_ERROR(Check(rc, "nvmlDeviceGetUtilizationRates"));
  return static_cast<int>(u.gpu);
}

StatusOr<std::map<uint32_t, int>> Nvml::ProcessSmUtilization(nvmlDevice_t device, uint64_t since_us) const {
  if (!fn_->DeviceGetProcessUtilization) {
    return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetProcessUtilization");
  }
  // Sized by a first call with no buffer (INSUFFICIENT_SIZE and the count); NOT_FOUND when no
  // process ran since `since_us`.
  unsigned int count = 0;
  nvmlReturn_t rc = fn_->DeviceGetProcessUtilization(device, nullptr, &count, since_us);
  std::map<uint32_t, int> out;
  if (rc == NVML_ERROR_NOT_FOUND || (rc == NVML_SUCCESS && count == 0)) return out;
  if (rc == NVML_ERROR_NOT_SUPPORTED) return NvmlStatus(rc, "nvmlDeviceGetProcessUtilization");  // MIG: expected
  if (rc != NVML_ERROR_INSUFFICIENT_SIZE && rc != NVML_SUCCESS) return Check(rc, "nvmlDeviceGetProcessUtilization");
  std::vector<nvmlProcessUtilizationSample_t> samples(count + 8);
  count = static_cast<unsigned int>(samples.size());
  rc = fn_->DeviceGetProcessUtilization(device, samples.data(), &count, since_us);
  if (rc == NVML_ERROR_NOT_FOUND) return out;
  GPUPACK_RETURN_IF_ERROR(Check(rc, "nvmlDeviceGetProcessUtilization"));
  // Several samples per process: their mean is its share of the SMs' time over the window.
  std::map<uint32_t, std::pair<int64_t, int64_t>> sum_and_n;
  for (unsigned int i = 0; i < count && i < samples.size(); ++i) {
    auto& [sum, n] = sum_and_n[samples[i].pid];
    sum += samples[i].smUtil;
    ++n;
  }
  for (const auto& [pid, sn] : sum_and_n) out[pid] = static_cast<int>(sn.first / sn.second);
  return out;
}

StatusOr<bool> Nvml::ExclusiveProcess(nvmlDevice_t device) const {
  if (!fn_->DeviceGetComputeMode) return NvmlStatus(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetComputeMode");
  int mode = NVML_COMPUTEMODE_DEFAULT;
  GPUPACK_RETURN_IF_ERROR(Check(fn_->DeviceGetComputeMode(device, &mode), "nvmlDeviceGetComputeMode"));
  return mode == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS;
}

}  // namespace gpupack::agent
