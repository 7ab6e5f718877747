#include "api/pod_annotations.h"

#include <algorithm>
#include <cctype>

#include "api/annotations.h"
#include "common/quantity.h"

namespace gpupack::api {
namespace {

using model::PodRequest;

std::string Quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::string Join(const std::vector<std::string>& parts, char separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : std::string(1, separator)) + part;
  return out;
}

std::optional<std::string> JoinedOrDefault(const std::vector<std::string>& parts, char separator) {
  if (parts.empty()) return std::nullopt;
  return Join(parts, separator);
}

// "a|b" split at `separator` into parts trimmed of spaces and tabs; nullopt when a part is empty.
std::optional<std::vector<std::string>> SplitTrimmed(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find(separator, start);
    std::string_view part = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    const size_t first = part.find_first_not_of(" \t");
    if (first == std::string_view::npos) return std::nullopt;
    part = part.substr(first);
    parts.emplace_back(part.substr(0, part.find_last_not_of(" \t") + 1));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

// Model names separated by '|', refused when one is empty.
StatusOr<std::vector<std::string>> ReadModels(const PodAnnotation& self, std::string_view value) {
  std::optional<std::vector<std::string>> models = SplitTrimmed(value, '|');
  if (!models) return self.Refuse(value);
  return *std::move(models);
}

// A part of `excluded` that is also in `allowed`, refused naming both annotations.
Status CheckDisjoint(const std::vector<std::string>& excluded, std::string_view excluded_name,
                     const std::vector<std::string>& allowed, std::string_view allowed_name) {
  for (const std::string& part : excluded) {
    if (std::find(allowed.begin(), allowed.end(), part) != allowed.end()) {
      return Status::InvalidArgument("annotation " + std::string(excluded_name) + ": " + Quoted(part) + " is also in " +
                                     std::string(allowed_name));
    }
  }
  return Status::Ok();
}

// GPU or MIG UUIDs as NVML prints them, "GPU-…" or "MIG-…", separated by commas.
StatusOr<std::vector<std::string>> ReadUuids(const PodAnnotation& self, std::string_view value) {
  GPUPACK_ASSIGN_OR_RETURN(std::vector<std::string> uuids, SplitAnnotationList(value, ',', self.name, "UUID"));
  for (const std::string& u : uuids) {
    const bool prefixed = u.rfind("GPU-", 0) == 0 || u.rfind("MIG-", 0) == 0;
    if (!prefixed || u.size() < 5 || u.find_first_of(" \t|;\"'") != std::string::npos) return self.Refuse(u);
  }
  return uuids;
}

constexpr std::pair<std::string_view, model::PolicyKind> kPolicyNames[] = {
    {"binpack", model::PolicyKind::kBinpack}, {"spread", model::PolicyKind::kSpread}, {"fgd", model::PolicyKind::kFgd}};

// "default" (or "") leaves the cluster's policy: nullopt.
StatusOr<std::optional<model::PolicyKind>> ReadPolicy(const PodAnnotation& self, std::string_view value) {
  if (value == "default" || value.empty()) return std::optional<model::PolicyKind>();
  for (const auto& [name, kind] : kPolicyNames) {
    if (value == name) return std::optional<model::PolicyKind>(kind);
  }
  return self.Refuse(value);
}

std::optional<std::string> WritePolicy(const std::optional<model::PolicyKind>& policy) {
  if (!policy) return std::nullopt;
  for (const auto& [name, kind] : kPolicyNames) {
    if (*policy == kind) return std::string(name);
  }
  return std::nullopt;
}

// A Kubernetes label value: 1–63 of [A-Za-z0-9._-], alphanumeric at both ends.
bool IsLabelValue(std::string_view v) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (v.empty() || v.size() > 63 || !alnum(v.front()) || !alnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(), [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// The per-container annotations the extender writes at bind: exactly what ContainerAnnotationKey
// makes, decided by regenerating the key from its parsed index.
bool IsContainerAnnotationKey(std::string_view key) {
  if (key.substr(0, kGpupackPrefix.size()) != kGpupackPrefix) return false;
  std::string_view rest = key.substr(kGpupackPrefix.size());
  if (rest.size() < 2 || (rest[0] != 'c' && rest[0] != 'i')) return false;
  size_t digits = 1;
  while (digits < rest.size() && digits < 8 && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 1) return false;
  const int index = std::stoi(std::string(rest.substr(1, digits - 1)));
  for (ContainerEnvKey env_key : kAllContainerEnvKeys) {
    if (ContainerAnnotationKey(rest[0] == 'i', index, env_key) == key) return true;
  }
  return false;
}

// The names of the pod's gpupack containers, "main, warmup", for messages.
std::string ContainerNames(const PodRequest& request) {
  std::string out;
  for (const model::ContainerRequest& c : request.containers) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

// gpupack.io/gpu-memory-limit: one entry per container, "QUANTITY" alone for a pod with one
// gpupack container, else "NAME=QUANTITY"; each the container's total over its devices, like its
// gpupack.io/gpu-memory, and at least that. Read after the containers (ParsePodRequest) and after
// gpupack.io/isolation.
Status ReadMemoryLimit(const PodAnnotation& self, std::string_view value, PodRequest& request) {
  const std::string prefix = "annotation " + std::string(self.name) + ": ";
  if (request.hard_isolation) {
    return Status::InvalidArgument(prefix + "conflicts with " + std::string(kAnnotationIsolation) +
                                   ": hard, which holds a container to its gpupack.io/gpu-memory (no burst above "
                                   "it); drop one of the two");
  }
  GPUPACK_ASSIGN_OR_RETURN(std::vector<std::string> entries, SplitAnnotationList(value, ',', self.name, "entry"));
  std::vector<std::string> named;
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    std::string name = eq == std::string::npos ? std::string() : entry.substr(0, eq);
    std::string quantity = eq == std::string::npos ? entry : entry.substr(eq + 1);
    name.erase(name.find_last_not_of(" \t") + 1);
    quantity.erase(0, quantity.find_first_not_of(" \t"));
    if (eq != std::string::npos && name.empty()) return self.Refuse(entry);
    model::ContainerRequest* container = nullptr;
    if (name.empty()) {
      if (request.containers.size() != 1) {
        return Status::InvalidArgument(prefix + Quoted(entry) + " names no container, but the pod has " +
                                       std::to_string(request.containers.size()) + " gpupack containers (" +
                                       ContainerNames(request) + "): write NAME=QUANTITY for each one that may burst");
      }
      container = &request.containers.front();
    } else {
      for (model::ContainerRequest& c : request.containers) {
        if (c.name == name) container = &c;
      }
      if (container == nullptr) {
        return Status::InvalidArgument(
            prefix + Quoted(name) + " is not a container of this pod that asks for gpupack.io/gpu-memory (" +
            (request.containers.empty() ? std::string("it has none") : "the pod's are: " + ContainerNames(request)) +
            ")");
      }
    }
    if (std::find(named.begin(), named.end(), container->name) != named.end()) {
      return Status::InvalidArgument(prefix + "names container " + Quoted(container->name) + " twice");
    }
    named.push_back(container->name);
    if (container->whole_device()) {
      return Status::InvalidArgument(prefix + "container " + Quoted(container->name) +
                                     " takes whole devices (gpupack.io/gpu without gpupack.io/gpu-memory), which "
                                     "it holds all of already; a ceiling is for a gpupack.io/gpu-memory share");
    }
    StatusOr<int64_t> total = ParseMemoryMiBCeil(quantity, self.name);
    if (!total.ok()) return self.Refuse(entry);
    const int64_t k = container->device_count;
    const model::MiB per_device = (*total + k - 1) / k;  // split evenly, rounded up, as gpu-memory is
    if (per_device < container->mem_per_device_mib) {
      return Status::InvalidArgument(prefix + "container " + Quoted(container->name) + ": " + Quoted(quantity) +
                                     " is below its gpupack.io/gpu-memory of " +
                                     std::to_string(k * container->mem_per_device_mib) +
                                     " MiB; the ceiling is the most it may use, at least what it is guaranteed");
    }
    container->mem_limit_per_device_mib = per_device > container->mem_per_device_mib ? per_device : 0;
  }
  return Status::Ok();
}

std::optional<std::string> WriteMemoryLimit(const PodRequest& request) {
  std::vector<std::string> entries;
  for (const model::ContainerRequest& c : request.containers) {
    if (!c.burstable()) continue;
    const std::string total = std::to_string(c.device_count * c.mem_limit_per_device_mib) + "Mi";
    entries.push_back(request.containers.size() == 1 ? total : c.name + "=" + total);
  }
  return JoinedOrDefault(entries, ',');
}

using Writer = AnnotationWriter;

// The table. Each user row reads a value into the request and writes it back; the rows above a
// row have been read when it is (mig-profile sees device-kind, the exclusions their allow lists).
constexpr PodAnnotation kPodAnnotations[] = {
    {.name = kAnnotationDeviceKind,
     .workload_key = "deviceKind",
     .refusal = "is not gpu, mig or any",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       if (value == "gpu") {
         request.device_kind = model::DeviceKindPreference::kGpu;
       } else if (value == "mig") {
         request.device_kind = model::DeviceKindPreference::kMig;
       } else if (value == "any" || value.empty()) {
         request.device_kind = model::DeviceKindPreference::kAny;
       } else {
         return self.Refuse(value);
       }
       return Status::Ok();
     },
     .write = [](const PodRequest& request) -> std::optional<std::string> {
       if (request.device_kind == model::DeviceKindPreference::kGpu) return "gpu";
       if (request.device_kind == model::DeviceKindPreference::kMig) return "mig";
       return std::nullopt;
     }},
    {.name = kAnnotationMigProfile,
     .workload_key = "migProfile",
     .refusal = "is not a MIG profile name like 1g.10gb",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       if (value.empty()) return Status::Ok();
       // Profiles look like "1g.10gb", "3g.40gb", "1g.10gb+me", "1c.2g.20gb".
       if (value.find('g') == value.npos || value.find('.') == value.npos ||
           value.find_first_of(" \t,|") != value.npos) {
         return self.Refuse(value);
       }
       if (request.device_kind == model::DeviceKindPreference::kGpu) {
         return Status::InvalidArgument("annotation " + std::string(self.name) + " " + Quoted(value) +
                                        " conflicts with " + std::string(kAnnotationDeviceKind) + ": gpu");
       }
       request.mig_profile = std::string(value);
       request.device_kind = model::DeviceKindPreference::kMig;
       return Status::Ok();
     },
     .write = [](const PodRequest& request) -> std::optional<std::string> {
       if (request.mig_profile.empty()) return std::nullopt;
       return request.mig_profile;
     }},
    {.name = kAnnotationGpuModel,
     .workload_key = "gpuModel",
     .refusal = "has an empty model name",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       GPUPACK_ASSIGN_OR_RETURN(request.gpu_models, ReadModels(self, value));
       return Status::Ok();
     },
     .write = [](const PodRequest& request) { return JoinedOrDefault(request.gpu_models, '|'); }},
    {.name = kAnnotationIsolation,
     .workload_key = "isolation",
     .refusal = "is not hard or best-effort",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       if (value != "hard" && value != "best-effort") return self.Refuse(value);
       request.hard_isolation = value == "hard";
       return Status::Ok();
     },
     .write = [](const PodRequest& request) -> std::optional<std::string> {
       if (!request.hard_isolation) return std::nullopt;
       return "hard";
     }},
    {.name = kAnnotationGpuModelExclude,
     .workload_key = "gpuModelExclude",
     .refusal = "has an empty model name",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       GPUPACK_ASSIGN_OR_RETURN(request.excluded_gpu_models, ReadModels(self, value));
       return CheckDisjoint(request.excluded_gpu_models, self.name, request.gpu_models, kAnnotationGpuModel);
     },
     .write = [](const PodRequest& request) { return JoinedOrDefault(request.excluded_gpu_models, '|'); }},
    {.name = kAnnotationGpuUuids,
     .workload_key = "gpuUuids",
     .refusal = "is not a device UUID like GPU-3f2a… or MIG-9c1b… (separate several with commas)",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       GPUPACK_ASSIGN_OR_RETURN(request.gpu_uuids, ReadUuids(self, value));
       return Status::Ok();
     },
     .write = [](const PodRequest& request) { return JoinedOrDefault(request.gpu_uuids, ','); }},
    {.name = kAnnotationGpuUuidsExclude,
     .workload_key = "gpuUuidsExclude",
     .refusal = "is not a device UUID like GPU-3f2a… or MIG-9c1b… (separate several with commas)",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       GPUPACK_ASSIGN_OR_RETURN(request.excluded_gpu_uuids, ReadUuids(self, value));
       return CheckDisjoint(request.excluded_gpu_uuids, self.name, request.gpu_uuids, kAnnotationGpuUuids);
     },
     .write = [](const PodRequest& request) { return JoinedOrDefault(request.excluded_gpu_uuids, ','); }},
    {.name = kAnnotationNodePolicy,
     .workload_key = "nodePolicy",
     .refusal = "is not binpack, spread, fgd or default",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       GPUPACK_ASSIGN_OR_RETURN(request.node_policy, ReadPolicy(self, value));
       return Status::Ok();
     },
     .write = [](const PodRequest& request) { return WritePolicy(request.node_policy); }},
    {.name = kAnnotationDevicePolicy,
     .workload_key = "devicePolicy",
     .refusal = "is not binpack, spread, fgd or default",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       GPUPACK_ASSIGN_OR_RETURN(request.device_policy, ReadPolicy(self, value));
       return Status::Ok();
     },
     .write = [](const PodRequest& request) { return WritePolicy(request.device_policy); }},
    {.name = kAnnotationSpreadKey,
     .workload_key = "spreadKey",
     .refusal = "is not 1-63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       if (!IsLabelValue(value)) return self.Refuse(value);
       request.spread_key = std::string(value);
       return Status::Ok();
     },
     .write = [](const PodRequest& request) -> std::optional<std::string> {
       if (request.spread_key.empty()) return std::nullopt;
       return request.spread_key;
     }},
    {.name = kAnnotationSpreadScope,
     .workload_key = "spreadScope",
     .refusal = "is not device or node",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       if (value != "device" && value != "node") return self.Refuse(value);
       if (request.spread_key.empty()) {
         return Status::InvalidArgument("annotation " + std::string(self.name) + " needs " +
                                        std::string(kAnnotationSpreadKey));
       }
       request.spread_across_nodes = value == "node";
       return Status::Ok();
     },
     .write = [](const PodRequest& request) -> std::optional<std::string> {
       if (!request.spread_across_nodes) return std::nullopt;
       return "node";
     }},
    {.name = kAnnotationGpuMemoryLimit,
     .workload_key = "gpuMemoryLimit",
     .refusal = "is not a quantity like 16Gi, or NAME=QUANTITY naming a container",
     .read = ReadMemoryLimit,
     .write = WriteMemoryLimit},
    {.name = kAnnotationMovable,
     .workload_key = "movable",
     .refusal = "is not true or false",
     .read = [](const PodAnnotation& self, std::string_view value, PodRequest& request) -> Status {
       if (value != "true" && value != "false") return self.Refuse(value);
       request.movable = value == "true";
       return Status::Ok();
     },
     .write = [](const PodRequest& request) -> std::optional<std::string> {
       if (!request.movable) return std::nullopt;
       return "true";
     }},
    // Read by translate::ParsePodRequest with the containers it names ("c0,i1"), whose
    // gpupack.io/gpu-memory the webhook added to a whole-device request for the namespace's quota.
    {.name = kAnnotationWholeDeviceCharge,
     .writer = Writer::kWebhook,
     .purpose = "it marks the quota charge it adds to whole-device requests"},
    {.name = kAnnotationAllocation,
     .writer = Writer::kScheduler,
     .purpose = "it records the device and memory cap chosen at bind"},
    {.name = "gpupack.io/c<i>-… and gpupack.io/i<i>-…",
     .writer = Writer::kScheduler,
     .purpose = "it records the device and memory cap chosen at bind",
     .matches = IsContainerAnnotationKey},
};

}  // namespace

Status PodAnnotation::Refuse(std::string_view value) const {
  return Status::InvalidArgument("annotation " + std::string(name) + ": " + Quoted(value) + " " + std::string(refusal));
}

std::span<const PodAnnotation> PodAnnotations() { return kPodAnnotations; }

const PodAnnotation* FindPodAnnotation(std::string_view key) {
  for (const PodAnnotation& row : kPodAnnotations) {
    if (row.Matches(key)) return &row;
  }
  return nullptr;
}

std::span<const std::string_view> UserAnnotationNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const PodAnnotation& row : kPodAnnotations) {
      if (row.writer == Writer::kUser) out.push_back(row.name);
    }
    return out;
  }();
  return names;
}

std::map<std::string, std::string> WritePodAnnotations(const model::PodRequest& request) {
  std::map<std::string, std::string> out;
  for (const PodAnnotation& row : kPodAnnotations) {
    if (row.write == nullptr) continue;
    if (std::optional<std::string> value = row.write(request)) out.emplace(row.name, *std::move(value));
  }
  return out;
}

StatusOr<std::vector<std::string>> SplitAnnotationList(std::string_view text, char separator,
                                                       std::string_view annotation, std::string_view what) {
  std::optional<std::vector<std::string>> parts = SplitTrimmed(text, separator);
  if (!parts) {
    return Status::InvalidArgument("annotation " + std::string(annotation) + ": " + Quoted(text) + " has an empty " +
                                   std::string(what));
  }
  return *std::move(parts);
}

}  // namespace gpupack::api
