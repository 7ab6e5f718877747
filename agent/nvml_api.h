// Our own declarations of the part of the NVML C API the agent uses, so the build needs no NVIDIA
// SDK. Layouts and values follow nvml.h 13.3.29 (docs/design.md, "Sources") and, for the
// R615 memory-limit calls, the NVML API reference. Both the real library (through dlopen) and the
// fake library built for tests (agent/testing/fake_nvml.cc) use exactly these declarations.
//
// Only plain C types appear here; the functions are typedefs of pointers, resolved with dlsym.
#pragma once

#include <cstddef>

extern "C" {

typedef int nvmlReturn_t;  // a C enum in nvml.h: int-sized
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;

enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999,
};

enum : unsigned int {
  NVML_INIT_FLAG_NO_GPUS = 1u << 0,
  NVML_DEVICE_MIG_DISABLE = 0,
  NVML_DEVICE_MIG_ENABLE = 1,
  NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96,
  NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
  // Profile selectors run 0x0 .. 0x11 (NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12).
  NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12,
};

// NVML_STRUCT_VERSION(data, ver) = sizeof(struct) | ver << 24.
constexpr unsigned int NvmlStructVersion(std::size_t size, unsigned int version) {
  return static_cast<unsigned int>(size) | (version << 24U);
}

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int version;  // nvmlMemory_v2
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes
  unsigned int gpuInstanceId;        // 0xFFFFFFFF when not MIG
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

// Percent of the last sample period in which a kernel ran (gpu) and device memory was read or
// written (memory). nvmlDeviceGetUtilizationRates answers NOT_SUPPORTED on a MIG-enabled GPU.
typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// One sample of nvmlDeviceGetProcessUtilization: percent of the sample period in which the
// process ran on the SMs (smUtil), timestamps in microseconds since the epoch.
typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

// nvmlComputeMode_t: EXCLUSIVE_PROCESS lets only one context (the MPS server's, when MPS runs) hold
// the device, so a client cannot bypass MPS by creating its own.
enum : int {
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};

typedef struct {
  unsigned int start;
  unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct {
  unsigned int version;  // nvmlGpuInstanceProfileInfo_v2
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[96];
} nvmlGpuInstanceProfileInfo_v2_t;

typedef struct {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

// R615 (CUDA 13.4) per-cgroup device-memory limits. Bytes; nameSpace is the cgroup directory.
typedef struct {
  const char* nameSpace;
  unsigned long long softLimit;
  unsigned long long hardLimit;
} nvmlSetMemoryLimits_v1_t;

typedef struct {
  const char* nameSpace;
  unsigned long long softLimit;
  unsigned long long hardLimit;
  unsigned long long currentUsed;
} nvmlGetMemoryLimits_v1_t;

}  // extern "C"

static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");
static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t layout");
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t layout");
static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152, "nvmlGpuInstanceProfileInfo_v2_t layout");
static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24, "nvmlGpuInstanceInfo_t layout");
static_assert(sizeof(nvmlSetMemoryLimits_v1_t) == 24, "nvmlSetMemoryLimits_v1_t layout");
static_assert(sizeof(nvmlGetMemoryLimits_v1_t) == 32, "nvmlGetMemoryLimits_v1_t layout");

inline constexpr unsigned int kNvmlMemoryV2 = NvmlStructVersion(sizeof(nvmlMemory_v2_t), 2);  // 0x02000028
inline constexpr unsigned int kNvmlGpuInstanceProfileInfoV2 =
    NvmlStructVersion(sizeof(nvmlGpuInstanceProfileInfo_v2_t), 2);  // 0x02000098
static_assert(kNvmlMemoryV2 == 0x02000028u);
static_assert(kNvmlGpuInstanceProfileInfoV2 == 0x02000098u);
