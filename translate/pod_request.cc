#include "translate/pod_request.h"

#include <algorithm>
#include <set>

#include "api/annotations.h"
#include "api/pod_annotations.h"
#include "common/quantity.h"

namespace gpupack::translate {
namespace {

using nlohmann::json;

const json* Child(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A quantity in the resource map as a string ("8Gi"); Kubernetes always serialises quantities
// as strings, but integers are accepted since hand-written JSON uses them.
StatusOr<std::string> QuantityText(const json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return Status::InvalidArgument(where + ": want a quantity string, got " + std::string(v.type_name()));
}

// Returns the resource's value from limits, else requests; both present must agree (Kubernetes
// requires requests == limits for extended resources).
StatusOr<std::optional<std::string>> ResourceValue(const json& container, std::string_view resource,
                                                   const std::string& where) {
  const json* resources = Child(container, "resources");
  if (resources == nullptr) return std::optional<std::string>();
  if (!resources->is_object()) return Status::InvalidArgument(where + ": resources must be an object");
  std::optional<std::string> limit, request;
  for (const char* section : {"limits", "requests"}) {
    const json* map = Child(*resources, section);
    if (map == nullptr) continue;
    if (!map->is_object()) return Status::InvalidArgument(where + ": resources." + section + " must be an object");
    auto it = map->find(std::string(resource));
    if (it == map->end() || it->is_null()) continue;
    GPUPACK_ASSIGN_OR_RETURN(std::string text,
                             QuantityText(*it, where + ": resources." + section + "[" + std::string(resource) + "]"));
    (std::string_view(section) == "limits" ? limit : request) = text;
  }
  if (limit && request && *limit != *request) {
    return Status::InvalidArgument(where + ": resources.limits[" + std::string(resource) + "] \"" + *limit +
                                   "\" and resources.requests \"" + *request + "\" disagree");
  }
  return limit ? limit : request;
}

bool IsGpupackName(std::string_view name) { return name.substr(0, api::kGpupackPrefix.size()) == api::kGpupackPrefix; }

bool Known(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A gpupack.io/ resource that is not one of kKnownResources, e.g. the typo gpupack.io/gpu-mem.
Status CheckResourceNames(const json& container, const std::string& where) {
  const json* resources = Child(container, "resources");
  if (resources == nullptr || !resources->is_object()) return Status::Ok();
  for (const char* section : {"limits", "requests"}) {
    const json* map = Child(*resources, section);
    if (map == nullptr || !map->is_object()) continue;
    for (const auto& item : map->items()) {
      if (IsGpupackName(item.key()) && !Known(api::kKnownResources, item.key())) {
        return Status::InvalidArgument(where + ": resources." + section + "[" + item.key() +
                                       "]: unknown gpupack resource; the resources are " +
                                       api::JoinNames(api::kKnownResources));
      }
    }
  }
  return Status::Ok();
}

// Host CPU (milli) and memory (bytes) a container requests, as the scheduler counts them:
// requests, or limits when requests are absent.
Status HostRequests(const json& container, const std::string& where, int64_t* cpu, int64_t* mem) {
  *cpu = 0;
  *mem = 0;
  for (const char* resource : {"cpu", "memory"}) {
    const json* resources = Child(container, "resources");
    if (resources == nullptr || !resources->is_object()) return Status::Ok();
    std::optional<std::string> text;
    for (const char* section : {"requests", "limits"}) {
      const json* map = Child(*resources, section);
      if (map == nullptr || !map->is_object()) continue;
      auto it = map->find(resource);
      if (it == map->end() || it->is_null()) continue;
      GPUPACK_ASSIGN_OR_RETURN(std::string t, QuantityText(*it, where + ": resources." + section + "." + resource));
      text = t;
      break;
    }
    if (!text) continue;
    std::string field = where + ": resources." + resource;
    if (std::string_view(resource) == "cpu") {
      GPUPACK_ASSIGN_OR_RETURN(*cpu, ParseMilliValue(*text, field));
    } else {
      GPUPACK_ASSIGN_OR_RETURN(*mem, ParseBytes(*text, field));
    }
  }
  return Status::Ok();
}

// gpupack.io/gpu-compute: a whole percent of each device's SMs, 1–100, beside a memory share
// (`with_memory`); a whole device has all its compute already.
StatusOr<int> ParseComputeShare(const std::string& text, bool with_memory, const std::string& where) {
  const std::string name(api::kResourceGpuCompute);
  StatusOr<int64_t> pct = ParseCount(text, where + ": " + name);
  if (!pct.ok() || *pct < 1 || *pct > model::kDeviceComputePct) {
    return Status::InvalidArgument(where + ": " + name + " \"" + text +
                                   "\" is not a whole percent of the device's SMs from 1 to 100");
  }
  if (!with_memory) {
    return Status::InvalidArgument(where + ": " + name + " needs " + std::string(api::kResourceGpuMemory) +
                                   " in the same container: it is a share of each device the memory is on (a whole "
                                   "device, " +
                                   std::string(api::kResourceGpu) + " alone, has all of its compute)");
  }
  return static_cast<int>(*pct);
}

// `charged`: the webhook added this container's gpupack.io/gpu-memory to a whole-device request
// for the namespace's quota (kAnnotationWholeDeviceCharge); the container still takes whole devices.
StatusOr<model::ContainerRequest> ParseContainer(const json& c, int index, bool init, int max_devices, bool charged) {
  model::ContainerRequest out;
  out.index = index;
  out.init = init;
  std::string list = init ? "spec.initContainers" : "spec.containers";
  if (!c.is_object()) return Status::InvalidArgument(list + "[" + std::to_string(index) + "] must be an object");
  const json* name = Child(c, "name");
  if (name != nullptr && !name->is_string()) {
    return Status::InvalidArgument(list + "[" + std::to_string(index) + "].name must be a string");
  }
  out.name = name ? name->get<std::string>() : "";
  std::string where = "container \"" + out.name + "\"";
  GPUPACK_RETURN_IF_ERROR(CheckResourceNames(c, where));
  GPUPACK_ASSIGN_OR_RETURN(auto memory, ResourceValue(c, api::kResourceGpuMemory, where));
  GPUPACK_ASSIGN_OR_RETURN(auto count, ResourceValue(c, api::kResourceGpu, where));
  GPUPACK_ASSIGN_OR_RETURN(auto compute, ResourceValue(c, api::kResourceGpuCompute, where));
  if (compute) {
    GPUPACK_ASSIGN_OR_RETURN(out.compute_pct, ParseComputeShare(*compute, memory.has_value() && !charged, where));
  }
  if (!memory && !count) return out;
  GPUPACK_ASSIGN_OR_RETURN(auto nvidia, ResourceValue(c, api::kResourceNvidiaGpu, where));
  if (nvidia) {
    return Status::InvalidArgument(where + ": asks for both " + std::string(api::kResourceNvidiaGpu) +
                                   " and gpupack resources; use one");
  }
  int64_t k = 1;
  if (count) {
    GPUPACK_ASSIGN_OR_RETURN(k, ParseCount(*count, where + ": " + std::string(api::kResourceGpu)));
    if (k <= 0)
      return Status::InvalidArgument(where + ": " + std::string(api::kResourceGpu) + " must be at least 1, got " +
                                     *count);
    if (k > max_devices) {
      return Status::InvalidArgument(where + ": " + std::string(api::kResourceGpu) + " " + *count +
                                     " exceeds the maximum of " + std::to_string(max_devices) +
                                     " devices per container");
    }
  }
  out.device_count = static_cast<int>(k);
  if (charged) {
    if (!count) {
      return Status::InvalidArgument(where + ": listed in " + std::string(api::kAnnotationWholeDeviceCharge) +
                                     " but asks for no " + std::string(api::kResourceGpu));
    }
    return out;  // whole devices; the memory is the quota's charge, not a cap
  }
  if (memory) {
    GPUPACK_ASSIGN_OR_RETURN(int64_t total,
                             ParseMemoryMiBCeil(*memory, where + ": " + std::string(api::kResourceGpuMemory)));
    out.mem_per_device_mib = (total + k - 1) / k;  // split evenly, rounded up to whole MiB
  }
  return out;
}

// The pod annotations, row by row of api::PodAnnotations() in its order: every gpupack.io/ name
// must be a row's, and each user row present reads its value.
Status ParseAnnotations(const json& pod, model::PodRequest* req) {
  const json* meta = Child(pod, "metadata");
  const json* ann = meta ? Child(*meta, "annotations") : nullptr;
  if (ann == nullptr) return Status::Ok();
  if (!ann->is_object()) return Status::InvalidArgument("metadata.annotations must be an object");
  for (const auto& item : ann->items()) {
    const std::string& key = item.key();
    if (IsGpupackName(key) && api::FindPodAnnotation(key) == nullptr) {
      return Status::InvalidArgument("metadata.annotations[\"" + key +
                                     "\"]: unknown gpupack annotation; the annotations a pod may set are " +
                                     api::JoinNames(api::UserAnnotationNames()));
    }
  }
  for (const api::PodAnnotation& row : api::PodAnnotations()) {
    if (row.read == nullptr) continue;
    auto it = ann->find(std::string(row.name));
    if (it == ann->end() || it->is_null()) continue;
    if (!it->is_string()) return Status::InvalidArgument("annotation " + std::string(row.name) + " must be a string");
    GPUPACK_RETURN_IF_ERROR(row.read(row, it->get_ref<const std::string&>(), *req));
  }
  return Status::Ok();
}

}  // namespace

bool PodAsksForGpupack(const json& pod) {
  const json* spec = Child(pod, "spec");
  if (spec == nullptr) return false;
  for (const char* list : {"containers", "initContainers"}) {
    const json* cs = Child(*spec, list);
    if (cs == nullptr || !cs->is_array()) continue;
    for (const auto& c : *cs) {
      const json* res = Child(c, "resources");
      if (res == nullptr) continue;
      for (const char* section : {"limits", "requests"}) {
        const json* map = Child(*res, section);
        if (map == nullptr || !map->is_object()) continue;
        // Any gpupack.io/ name, known or not: an unknown one is refused by ParsePodRequest
        // rather than passing as a pod that asks for nothing.
        for (const auto& item : map->items()) {
          if (IsGpupackName(item.key())) return true;
        }
      }
    }
  }
  return false;
}

StatusOr<model::PodRequest> ParsePodRequest(const json& pod, int max_devices_per_container) {
  if (!pod.is_object()) return Status::InvalidArgument("pod must be a JSON object");
  model::PodRequest req;
  if (const json* meta = Child(pod, "metadata")) {
    if (!meta->is_object()) return Status::InvalidArgument("metadata must be an object");
    for (auto [key, field] :
         {std::pair{"name", &req.name}, std::pair{"namespace", &req.ns}, std::pair{"uid", &req.uid}}) {
      const json* v = Child(*meta, key);
      if (v == nullptr) continue;
      if (!v->is_string()) return Status::InvalidArgument(std::string("metadata.") + key + " must be a string");
      *field = v->get<std::string>();
    }
  }
  const json* spec = Child(pod, "spec");
  if (spec == nullptr || !spec->is_object()) return Status::InvalidArgument("pod has no spec object");
  const json* containers = Child(*spec, "containers");
  if (containers == nullptr || !containers->is_array())
    return Status::InvalidArgument("spec.containers must be an array");

  std::set<std::string> charged;  // container keys "c0", "i1" of api::kAnnotationWholeDeviceCharge
  if (const json* meta = Child(pod, "metadata")) {
    const json* ann = Child(*meta, "annotations");
    if (ann != nullptr && ann->is_object()) {
      auto it = ann->find(std::string(api::kAnnotationWholeDeviceCharge));
      if (it != ann->end() && !it->is_null()) {
        if (!it->is_string())
          return Status::InvalidArgument("annotation " + std::string(api::kAnnotationWholeDeviceCharge) +
                                         " must be a string");
        GPUPACK_ASSIGN_OR_RETURN(std::vector<std::string> keys,
                                 api::SplitAnnotationList(it->get_ref<const std::string&>(), ',',
                                                          api::kAnnotationWholeDeviceCharge, "container key"));
        charged.insert(keys.begin(), keys.end());
      }
    }
  }
  int64_t app_cpu = 0, app_mem = 0, init_cpu = 0, init_mem = 0;
  for (bool init : {false, true}) {
    const json* list = init ? Child(*spec, "initContainers") : containers;
    if (list == nullptr) continue;
    if (!list->is_array()) return Status::InvalidArgument("spec.initContainers must be an array");
    int index = 0;
    for (const auto& c : *list) {
      const bool is_charged = charged.count((init ? "i" : "c") + std::to_string(index)) > 0;
      GPUPACK_ASSIGN_OR_RETURN(model::ContainerRequest cr,
                               ParseContainer(c, index, init, max_devices_per_container, is_charged));
      int64_t cpu = 0, mem = 0;
      GPUPACK_RETURN_IF_ERROR(HostRequests(c, "container \"" + cr.name + "\"", &cpu, &mem));
      if (init) {
        init_cpu = std::max(init_cpu, cpu);
        init_mem = std::max(init_mem, mem);
      } else {
        app_cpu += cpu;
        app_mem += mem;
      }
      if (cr.device_count > 0) req.containers.push_back(std::move(cr));
      ++index;
    }
  }
  req.cpu_milli = std::max(app_cpu, init_cpu);
  req.memory_bytes = std::max(app_mem, init_mem);
  if (const json* overhead = Child(*spec, "overhead")) {
    int64_t cpu = 0, mem = 0;
    GPUPACK_RETURN_IF_ERROR(HostRequests(json{{"resources", {{"requests", *overhead}}}}, "spec.overhead", &cpu, &mem));
    req.cpu_milli += cpu;
    req.memory_bytes += mem;
  }
  // spec.priority: the priority admission resolved from the pod's PriorityClass (absent: 0, as
  // kube-scheduler reads it).
  if (const json* priority = Child(*spec, "priority"); priority != nullptr && !priority->is_null()) {
    if (!priority->is_number_integer()) return Status::InvalidArgument("spec.priority must be an integer");
    req.priority = priority->get<int64_t>();
  }
  GPUPACK_RETURN_IF_ERROR(ParseAnnotations(pod, &req));
  return req;
}

}  // namespace gpupack::translate
