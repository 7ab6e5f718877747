// Long file: one short fake per NVML function the agent resolves, all over the one shared State; split,
// each part would need that state and its lock.
// A fake libnvidia-ml.so.1 for tests: the agent loads it through the same dlopen path as the real
// driver library. State comes from the JSON file named by $GPUPACK_FAKE_NVML_STATE, read at every
// nvmlInit_v2:
//
//   {"driverVersion": "615.20", "cudaVersion": 13040,
//    "initError": 0,                                  // nvmlInit_v2 returns this code
//    "errors": {"nvmlDeviceGetUUID": 15,              // every call of that function fails
//               "nvmlDeviceGetMemoryInfo_v2@GPU-1": 15},   // ... or only for that device
//    "limits": [{"uuid": "GPU-1", "cgroup": "/sys/fs/cgroup/…", "soft": 1, "hard": 2}],  // pre-applied
//    "limitsLog": "/tmp/x.jsonl",                      // every Set call appended as a JSON line
//    "usageFile": "/tmp/usage.json",                   // {"42": 5325}: each process's usedMiB,
//                                                      // re-read at every process listing
//    "devices": [{"uuid": "GPU-1", "name": "NVIDIA H100 80GB HBM3", "memoryMiB": 81559, "usedMiB": 10,
//                 "noPermission": false,              // nvmlDeviceGetHandleByIndex_v2 → NO_PERMISSION
//                 "migMode": 1,                       // absent = MIG not supported
//                 "profiles": [{"selector": 2, "id": 9, "name": "MIG 3g.40gb"}],
//                 "migInstances": [{"slot": 0, "uuid": "MIG-1", "gpuInstanceId": 1, "profileId": 9,
//                                   "start": 0, "size": 4, "memoryMiB": 40192, "usedMiB": 5,
//                                   "processes": [{"pid": 7, "usedMiB": 5}]}],
//                 "smUtil": 35,                       // nvmlDeviceGetUtilizationRates' gpu (MIG mode: NOT_SUPPORTED)
//                 "computeMode": 3,                   // nvmlDeviceGetComputeMode (absent = 0, DEFAULT)
//                 "processes": [{"pid": 42, "usedMiB": 10,
//                                "smUtil": [30, 40]}]}]}  // its nvmlDeviceGetProcessUtilization samples
//
// Process utilisation samples are stamped 1000, 2000, … µs in list order, so a call with
// lastSeenTimeStamp 1000 returns all but each process's first sample.
//
// Built twice: with FAKE_NVML_R615 (exports the R615 memory-limit calls and the v2 memory call)
// and without (an older driver: both absent, so the agent's fallbacks run).
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/nvml_api.h"

namespace {

using Json = nlohmann::json;
constexpr unsigned long long kMiB = 1024ULL * 1024ULL;

struct FakeProcess {
  unsigned int pid;
  unsigned long long used_mib;
  std::vector<unsigned int> sm_util;  // utilisation samples, oldest first
};

struct FakeDevice;
struct FakeMig;

struct FakeGpuInstance {
  FakeMig* mig;
};

struct FakeMig {
  int tag = 2;
  FakeDevice* parent = nullptr;
  unsigned int slot = 0;
  std::string uuid;
  unsigned int gi_id = 0, profile_id = 0, start = 0, size = 0;
  unsigned long long memory_mib = 0, used_mib = 0;
  std::vector<FakeProcess> processes;
  FakeGpuInstance gi{this};
};

struct FakeProfile {
  unsigned int selector, id;
  std::string name;
};

struct FakeDevice {
  int tag = 1;
  unsigned int index = 0;
  std::string uuid, name;
  unsigned long long memory_mib = 0, used_mib = 0;
  bool no_permission = false;
  int mig_mode = -1;  // -1 = not supported
  unsigned int sm_util = 0;
  int compute_mode = NVML_COMPUTEMODE_DEFAULT;
  std::vector<FakeProfile> profiles;
  std::vector<std::unique_ptr<FakeMig>> migs;
  std::vector<FakeProcess> processes;
};

struct Limit {
  unsigned long long soft, hard;
};

struct State {
  bool initialised = false;
  std::string driver = "615.20";
  int cuda = 13040;
  std::map<std::string, int> errors;
  std::map<std::string, Limit> limits;  // uuid + "|" + cgroup
  std::string limits_log;
  std::string usage_file;
  std::vector<std::unique_ptr<FakeDevice>> devices;
};

std::mutex mu;
State state_storage;
State* const state = &state_storage;
// Devices of earlier nvmlInit_v2 calls: kept until the library is unloaded, so a handle a caller
// still holds never dangles.
std::vector<std::unique_ptr<FakeDevice>> retired;

std::vector<FakeProcess> ReadProcesses(const Json& j) {
  std::vector<FakeProcess> out;
  for (const Json& p : j.value("processes", Json::array())) {
    out.push_back(
        {p.at("pid").get<unsigned int>(), p.value("usedMiB", 0ULL), p.value("smUtil", std::vector<unsigned int>{})});
  }
  return out;
}

int Load() {
  const char* path = std::getenv("GPUPACK_FAKE_NVML_STATE");
  if (path == nullptr) return NVML_ERROR_DRIVER_NOT_LOADED;
  std::ifstream in(path);
  if (!in) return NVML_ERROR_DRIVER_NOT_LOADED;
  Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return NVML_ERROR_UNKNOWN;
  try {
    if (int rc = j.value("initError", 0); rc != 0) return rc;
    State s;
    s.driver = j.value("driverVersion", "615.20");
    s.cuda = j.value("cudaVersion", 13040);
    const Json errors = j.value("errors", Json::object());
    for (auto& [k, v] : errors.items()) s.errors[k] = v.get<int>();
    for (const Json& l : j.value("limits", Json::array())) {
      s.limits[l.at("uuid").get<std::string>() + "|" + l.at("cgroup").get<std::string>()] = {l.value("soft", 0ULL),
                                                                                             l.value("hard", 0ULL)};
    }
    s.limits_log = j.value("limitsLog", "");
    s.usage_file = j.value("usageFile", "");
    unsigned int index = 0;
    for (const Json& d : j.value("devices", Json::array())) {
      auto dev = std::make_unique<FakeDevice>();
      dev->index = index++;
      dev->uuid = d.at("uuid").get<std::string>();
      dev->name = d.value("name", "NVIDIA Fake GPU");
      dev->memory_mib = d.value("memoryMiB", 0ULL);
      dev->used_mib = d.value("usedMiB", 0ULL);
      dev->no_permission = d.value("noPermission", false);
      dev->mig_mode = d.contains("migMode") ? d["migMode"].get<int>() : -1;
      dev->sm_util = d.value("smUtil", 0u);
      dev->compute_mode = d.value("computeMode", static_cast<int>(NVML_COMPUTEMODE_DEFAULT));
      for (const Json& p : d.value("profiles", Json::array())) {
        dev->profiles.push_back(
            {p.at("selector").get<unsigned int>(), p.at("id").get<unsigned int>(), p.at("name").get<std::string>()});
      }
      unsigned int slot = 0;
      for (const Json& m : d.value("migInstances", Json::array())) {
        auto mig = std::make_unique<FakeMig>();
        mig->parent = dev.get();
        mig->slot = m.value("slot", slot);
        slot = mig->slot + 1;
        mig->uuid = m.at("uuid").get<std::string>();
        mig->gi_id = m.value("gpuInstanceId", 0u);
        mig->profile_id = m.value("profileId", 0u);
        mig->start = m.value("start", 0u);
        mig->size = m.value("size", 0u);
        mig->memory_mib = m.value("memoryMiB", 0ULL);
        mig->used_mib = m.value("usedMiB", 0ULL);
        mig->processes = ReadProcesses(m);
        dev->migs.push_back(std::move(mig));
      }
      dev->processes = ReadProcesses(d);
      s.devices.push_back(std::move(dev));
    }
    for (auto& d : state->devices) retired.push_back(std::move(d));
    state->devices.clear();
    *state = std::move(s);
    state->initialised = true;
    return NVML_SUCCESS;
  } catch (const std::exception&) {
    return NVML_ERROR_UNKNOWN;
  }
}

const std::string& UuidOf(nvmlDevice_t d) {
  static const std::string none;
  if (d == nullptr) return none;
  const int tag = *reinterpret_cast<const int*>(d);
  if (tag == 1) return reinterpret_cast<FakeDevice*>(d)->uuid;
  if (tag == 2) return reinterpret_cast<FakeMig*>(d)->uuid;
  return none;
}

// The injected error for `fn` (optionally on one device), or SUCCESS.
int Injected(const char* fn, nvmlDevice_t d = nullptr) {
  if (!state->initialised) return NVML_ERROR_UNINITIALIZED;
  auto it = state->errors.find(fn);
  if (it != state->errors.end()) return it->second;
  if (d != nullptr) {
    it = state->errors.find(std::string(fn) + "@" + UuidOf(d));
    if (it != state->errors.end()) return it->second;
  }
  return NVML_SUCCESS;
}

FakeDevice* AsDevice(nvmlDevice_t d) {
  return d && *reinterpret_cast<const int*>(d) == 1 ? reinterpret_cast<FakeDevice*>(d) : nullptr;
}
FakeMig* AsMig(nvmlDevice_t d) {
  return d && *reinterpret_cast<const int*>(d) == 2 ? reinterpret_cast<FakeMig*>(d) : nullptr;
}

nvmlReturn_t CopyString(const std::string& s, char* buf, unsigned int len) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::copy(s.begin(), s.end(), buf);
  buf[s.size()] = '\0';
  return NVML_SUCCESS;
}

nvmlReturn_t MemoryOf(nvmlDevice_t d, unsigned long long* total, unsigned long long* used) {
  if (FakeDevice* dev = AsDevice(d)) {
    *total = dev->memory_mib * kMiB;
    *used = dev->used_mib * kMiB;
    for (auto& m : dev->migs) *used += m->used_mib * kMiB;
    return NVML_SUCCESS;
  }
  if (FakeMig* mig = AsMig(d)) {
    *total = mig->memory_mib * kMiB;
    *used = mig->used_mib * kMiB;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

// Usage over time: the processes' usedMiB from usageFile as it reads now (a test rewrites it
// between the agent's passes); a file missing or half written leaves the figures as they are.
void DriveUsage(std::vector<FakeProcess>& procs) {
  if (state->usage_file.empty()) return;
  std::ifstream in(state->usage_file);
  const Json usage = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!usage.is_object()) return;
  for (FakeProcess& p : procs) {
    auto it = usage.find(std::to_string(p.pid));
    if (it != usage.end() && it->is_number_unsigned()) p.used_mib = it->get<unsigned long long>();
  }
}

}  // namespace

#define FAKE_GUARD(fn, dev)             \
  std::lock_guard<std::mutex> lock(mu); \
  if (int rc = Injected(fn, dev); rc != 0) return rc

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2(void) {
  std::lock_guard<std::mutex> lock(mu);
  return Load();
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown(void) {
  std::lock_guard<std::mutex> lock(mu);
  state->initialised = false;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t) { return "fake NVML error"; }

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  FAKE_GUARD("nvmlSystemGetDriverVersion", nullptr);
  return CopyString(state->driver, version, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  FAKE_GUARD("nvmlSystemGetCudaDriverVersion_v2", nullptr);
  *v = state->cuda;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  FAKE_GUARD("nvmlDeviceGetCount_v2", nullptr);
  *count = static_cast<unsigned int>(state->devices.size());
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* d) {
  FAKE_GUARD("nvmlDeviceGetHandleByIndex_v2", nullptr);
  if (index >= state->devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (state->devices[index]->no_permission) return NVML_ERROR_NO_PERMISSION;
  *d = reinterpret_cast<nvmlDevice_t>(state->devices[index].get());
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* d) {
  FAKE_GUARD("nvmlDeviceGetHandleByUUID", nullptr);
  for (auto& dev : state->devices) {
    if (dev->uuid == uuid) {
      *d = reinterpret_cast<nvmlDevice_t>(dev.get());
      return NVML_SUCCESS;
    }
    for (auto& m : dev->migs) {
      if (m->uuid == uuid) {
        *d = reinterpret_cast<nvmlDevice_t>(m.get());
        return NVML_SUCCESS;
      }
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int len) {
  FAKE_GUARD("nvmlDeviceGetUUID", d);
  if (UuidOf(d).empty()) return NVML_ERROR_INVALID_ARGUMENT;
  return CopyString(UuidOf(d), uuid, len);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int len) {
  FAKE_GUARD("nvmlDeviceGetName", d);
  if (FakeDevice* dev = AsDevice(d)) return CopyString(dev->name, name, len);
  if (FakeMig* mig = AsMig(d)) {
    std::string profile;
    for (const FakeProfile& p : mig->parent->profiles) {
      if (p.id == mig->profile_id) profile = p.name.substr(p.name.rfind(' ') + 1);
    }
    return CopyString(mig->parent->name + " MIG " + profile, name, len);
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int* index) {
  FAKE_GUARD("nvmlDeviceGetIndex", d);
  FakeDevice* dev = AsDevice(d);
  if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = dev->index;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  FAKE_GUARD("nvmlDeviceGetMemoryInfo", d);
  nvmlReturn_t rc = MemoryOf(d, &m->total, &m->used);
  m->free = m->total - m->used;
  return rc;
}

#ifdef FAKE_NVML_R615
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t* m) {
  FAKE_GUARD("nvmlDeviceGetMemoryInfo_v2", d);
  if (m->version != kNvmlMemoryV2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlReturn_t rc = MemoryOf(d, &m->total, &m->used);
  m->reserved = 0;
  m->free = m->total - m->used;
  return rc;
}
#endif

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d,
                                                                                            unsigned int* count,
                                                                                            nvmlProcessInfo_t* infos) {
  FAKE_GUARD("nvmlDeviceGetComputeRunningProcesses_v3", d);
  std::vector<FakeProcess> procs;
  if (FakeDevice* dev = AsDevice(d)) {
    procs = dev->processes;
    for (auto& m : dev->migs) procs.insert(procs.end(), m->processes.begin(), m->processes.end());
  } else if (FakeMig* mig = AsMig(d)) {
    procs = mig->processes;
  } else {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (*count < procs.size()) {
    *count = static_cast<unsigned int>(procs.size());
    return procs.empty() ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
  }
  DriveUsage(procs);
  *count = static_cast<unsigned int>(procs.size());
  for (size_t i = 0; i < procs.size(); ++i) {
    infos[i] = nvmlProcessInfo_t{procs[i].pid, procs[i].used_mib * kMiB, 0xFFFFFFFFu, 0xFFFFFFFFu};
  }
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d,
                                                                                  nvmlUtilization_t* u) {
  FAKE_GUARD("nvmlDeviceGetUtilizationRates", d);
  FakeDevice* dev = AsDevice(d);
  if (dev == nullptr || dev->mig_mode == 1) return NVML_ERROR_NOT_SUPPORTED;  // as the driver: not in MIG mode
  *u = nvmlUtilization_t{dev->sm_util, 0};
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t d, nvmlProcessUtilizationSample_t* samples, unsigned int* count, unsigned long long last_seen) {
  FAKE_GUARD("nvmlDeviceGetProcessUtilization", d);
  FakeDevice* dev = AsDevice(d);
  if (dev == nullptr || dev->mig_mode == 1) return NVML_ERROR_NOT_SUPPORTED;
  std::vector<nvmlProcessUtilizationSample_t> out;
  for (const FakeProcess& p : dev->processes) {
    for (size_t i = 0; i < p.sm_util.size(); ++i) {
      const unsigned long long stamp = 1000ULL * (i + 1);
      if (stamp > last_seen) out.push_back({p.pid, stamp, p.sm_util[i], 0, 0, 0});
    }
  }
  if (out.empty()) return NVML_ERROR_NOT_FOUND;
  if (samples == nullptr || *count < out.size()) {
    *count = static_cast<unsigned int>(out.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = static_cast<unsigned int>(out.size());
  std::copy(out.begin(), out.end(), samples);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, int* mode) {
  FAKE_GUARD("nvmlDeviceGetComputeMode", d);
  FakeDevice* dev = AsDevice(d);
  if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = dev->compute_mode;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int* current,
                                                                         unsigned int* pending) {
  FAKE_GUARD("nvmlDeviceGetMigMode", d);
  FakeDevice* dev = AsDevice(d);
  if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (dev->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = static_cast<unsigned int>(dev->mig_mode);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d,
                                                                                   unsigned int* count) {
  FAKE_GUARD("nvmlDeviceGetMaxMigDeviceCount", d);
  FakeDevice* dev = AsDevice(d);
  if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = dev->mig_mode == 1 ? 7 : 0;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d,
                                                                                        unsigned int index,
                                                                                        nvmlDevice_t* mig) {
  FAKE_GUARD("nvmlDeviceGetMigDeviceHandleByIndex", d);
  FakeDevice* dev = AsDevice(d);
  if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (auto& m : dev->migs) {
    if (m->slot == index) {
      *mig = reinterpret_cast<nvmlDevice_t>(m.get());
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int* id) {
  FAKE_GUARD("nvmlDeviceGetGpuInstanceId", d);
  FakeMig* mig = AsMig(d);
  if (mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *id = mig->gi_id;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t d, unsigned int id,
                                                                                 nvmlGpuInstance_t* gi) {
  FAKE_GUARD("nvmlDeviceGetGpuInstanceById", d);
  FakeDevice* dev = AsDevice(d);
  if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (auto& m : dev->migs) {
    if (m->gi_id == id) {
      *gi = reinterpret_cast<nvmlGpuInstance_t>(&m->gi);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi,
                                                                           nvmlGpuInstanceInfo_t* info) {
  FAKE_GUARD("nvmlGpuInstanceGetInfo", nullptr);
  FakeMig* mig = reinterpret_cast<FakeGpuInstance*>(gi)->mig;
  info->device = reinterpret_cast<nvmlDevice_t>(mig->parent);
  info->id = mig->gi_id;
  info->profileId = mig->profile_id;
  info->placement = {mig->start, mig->size};
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(
    nvmlDevice_t d, unsigned int selector, nvmlGpuInstanceProfileInfo_v2_t* info) {
  FAKE_GUARD("nvmlDeviceGetGpuInstanceProfileInfoV", d);
  FakeDevice* dev = AsDevice(d);
  if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != kNvmlGpuInstanceProfileInfoV2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (dev->mig_mode != 1) return NVML_ERROR_NOT_SUPPORTED;
  for (const FakeProfile& p : dev->profiles) {
    if (p.selector == selector) {
      info->id = p.id;
      CopyString(p.name, info->name, sizeof(info->name));
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

#ifdef FAKE_NVML_R615
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t d,
                                                                                 nvmlSetMemoryLimits_v1_t* limits) {
  FAKE_GUARD("nvmlDeviceSetMemoryLimits_v1", d);
  if (AsMig(d) != nullptr) return NVML_ERROR_NOT_SUPPORTED;  // "MIG handles are rejected"
  if (AsDevice(d) == nullptr || limits == nullptr || limits->nameSpace == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  struct stat st {};
  if (stat(limits->nameSpace, &st) != 0 || !S_ISDIR(st.st_mode)) return NVML_ERROR_NOT_FOUND;
  state->limits[UuidOf(d) + "|" + limits->nameSpace] = {limits->softLimit, limits->hardLimit};
  if (!state->limits_log.empty()) {
    std::ofstream log(state->limits_log, std::ios::app);
    log << Json{{"uuid", UuidOf(d)},
                {"cgroup", limits->nameSpace},
                {"soft", limits->softLimit},
                {"hard", limits->hardLimit}}
               .dump()
        << "\n";
  }
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t d,
                                                                                 nvmlGetMemoryLimits_v1_t* limits) {
  FAKE_GUARD("nvmlDeviceGetMemoryLimits_v1", d);
  if (AsMig(d) != nullptr) return NVML_ERROR_NOT_SUPPORTED;
  if (AsDevice(d) == nullptr || limits == nullptr || limits->nameSpace == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto it = state->limits.find(UuidOf(d) + "|" + limits->nameSpace);
  if (it == state->limits.end()) return NVML_ERROR_NOT_SUPPORTED;  // observed for unset cgroups
  limits->softLimit = it->second.soft;
  limits->hardLimit = it->second.hard;
  limits->currentUsed = 0;
  return NVML_SUCCESS;
}
#endif

}  // extern "C"
