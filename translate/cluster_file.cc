#include "translate/cluster_file.h"

#include <cstdio>
#include <map>
#include <set>

#include "common/file.h"
#include "common/input_check.h"
#include "common/quantity.h"
#include "model/model.h"

namespace gpupack::translate {
namespace {

uint64_t Fnv1a(std::string_view s, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string UuidFrom(std::string_view prefix, std::string_view key) {
  uint64_t a = Fnv1a(key, 0x9e3779b97f4a7c15ULL), b = Fnv1a(key, 0xc2b2ae3d27d4eb4fULL);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return std::string(prefix) + buf;
}

// Prefixes the line of `at` to an error that already names its field.
Status AtLine(const YAML::Node& at, const Status& status) {
  if (status.ok()) return status;
  return Status(status.code(), YamlLine(at) + status.message());
}

Status CheckKeys(const YAML::Node& map, const std::string& where, std::initializer_list<const char*> allowed) {
  if (!map.IsMap()) return YamlFieldError(map, where, "want a mapping");
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) return YamlFieldError(kv.first, where, "unknown key \"" + key + "\"");
  }
  return Status::Ok();
}

StatusOr<std::string> Scalar(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) return YamlFieldError(n, where, "want a scalar");
  return n.as<std::string>();
}

StatusOr<model::MiB> MiBField(const YAML::Node& map, const char* key, const std::string& where, bool required) {
  const YAML::Node v = map[key];
  if (!v) {
    if (required) return YamlFieldError(map, where, std::string("missing \"") + key + "\"");
    return model::MiB{0};
  }
  GPUPACK_ASSIGN_OR_RETURN(std::string text, Scalar(v, where + "." + key));
  auto bytes = ParseBytes(text, where + "." + key);
  if (!bytes.ok()) return AtLine(v, bytes.status());
  return (*bytes + (1 << 20) - 1) >> 20;
}

StatusOr<bool> BoolField(const YAML::Node& map, const char* key, const std::string& where, bool def) {
  const YAML::Node v = map[key];
  if (!v) return def;
  GPUPACK_ASSIGN_OR_RETURN(std::string text, Scalar(v, where + "." + key));
  if (text == "true") return true;
  if (text == "false") return false;
  return YamlFieldError(v, where + "." + key, "want true or false, got \"" + text + "\"");
}

StatusOr<int64_t> IntField(const YAML::Node& map, const char* key, const std::string& where, int64_t def) {
  const YAML::Node v = map[key];
  if (!v) return def;
  GPUPACK_ASSIGN_OR_RETURN(std::string text, Scalar(v, where + "." + key));
  auto count = ParseCount(text, where + "." + key);
  if (!count.ok()) return AtLine(v, count.status());
  return *count;
}

// A device cannot have more in use than it has: the agent would publish usedMiB > memoryMiB.
Status CheckUsed(const YAML::Node& map, const std::string& where, model::MiB used, model::MiB memory,
                 const char* what) {
  if (used <= memory) return Status::Ok();
  return YamlFieldError(
      map["used"], where + ".used",
      std::to_string(used) + " MiB is more than the " + what + "'s memory (" + std::to_string(memory) + " MiB)");
}

}  // namespace

std::string GeneratedGpuUuid(std::string_view node, int index) {
  return UuidFrom("GPU-", std::string(node) + "/" + std::to_string(index));
}
std::string GeneratedMigUuid(std::string_view node, int gpu_index, int instance) {
  return UuidFrom("MIG-", std::string(node) + "/" + std::to_string(gpu_index) + "/" + std::to_string(instance));
}

StatusOr<model::Node> ParseNodeEntry(const YAML::Node& entry, const std::string& where) {
  GPUPACK_RETURN_IF_ERROR(CheckKeys(entry, where, {"name", "cpu", "memory", "labels", "gpus"}));
  model::Node node;
  if (!entry["name"]) return YamlFieldError(entry, where, "missing \"name\"");
  GPUPACK_ASSIGN_OR_RETURN(node.name, Scalar(entry["name"], where + ".name"));
  GPUPACK_RETURN_IF_ERROR(AtLine(entry["name"], CheckDns1123Subdomain(node.name, where + ".name")));
  if (entry["cpu"]) {
    GPUPACK_ASSIGN_OR_RETURN(std::string t, Scalar(entry["cpu"], where + ".cpu"));
    auto cpu = ParseMilliValue(t, where + ".cpu");
    if (!cpu.ok()) return AtLine(entry["cpu"], cpu.status());
    node.cpu_milli = *cpu;
  }
  if (entry["memory"]) {
    GPUPACK_ASSIGN_OR_RETURN(std::string t, Scalar(entry["memory"], where + ".memory"));
    auto bytes = ParseBytes(t, where + ".memory");
    if (!bytes.ok()) return AtLine(entry["memory"], bytes.status());
    node.memory_bytes = *bytes;
  }
  if (const YAML::Node labels = entry["labels"]) {
    if (!labels.IsMap()) return YamlFieldError(labels, where + ".labels", "want a mapping");
    for (const auto& kv : labels) {
      if (!kv.second.IsScalar())
        return YamlFieldError(kv.second, where + ".labels." + kv.first.as<std::string>(), "want a string");
      node.labels[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
  }
  const YAML::Node gpus = entry["gpus"];
  if (gpus && !gpus.IsSequence()) return YamlFieldError(gpus, where + ".gpus", "want a list");
  int index = 0;
  for (size_t i = 0; gpus && i < gpus.size(); ++i) {
    const std::string gw = where + ".gpus[" + std::to_string(i) + "]";
    const YAML::Node g = gpus[i];
    GPUPACK_RETURN_IF_ERROR(
        CheckKeys(g, gw, {"model", "memory", "count", "used", "uuid", "healthy", "hardIsolation", "mig"}));
    if (!g["model"]) return YamlFieldError(g, gw, "missing \"model\"");
    GPUPACK_ASSIGN_OR_RETURN(std::string model, Scalar(g["model"], gw + ".model"));
    GPUPACK_ASSIGN_OR_RETURN(model::MiB memory, MiBField(g, "memory", gw, true));
    if (memory <= 0) return YamlFieldError(g["memory"], gw + ".memory", "must be positive");
    GPUPACK_ASSIGN_OR_RETURN(int64_t count, IntField(g, "count", gw, 1));
    if (count < 1 || count > model::kMaxDevicesPerNode) {
      return YamlFieldError(g["count"], gw + ".count", "must be 1.." + std::to_string(model::kMaxDevicesPerNode));
    }
    GPUPACK_ASSIGN_OR_RETURN(model::MiB used, MiBField(g, "used", gw, false));
    GPUPACK_ASSIGN_OR_RETURN(bool healthy, BoolField(g, "healthy", gw, true));
    GPUPACK_ASSIGN_OR_RETURN(bool hard, BoolField(g, "hardIsolation", gw, false));
    std::string uuid;
    if (g["uuid"]) {
      if (count != 1) return YamlFieldError(g["uuid"], gw + ".uuid", "only allowed with count 1");
      GPUPACK_ASSIGN_OR_RETURN(uuid, Scalar(g["uuid"], gw + ".uuid"));
    }
    const YAML::Node mig = g["mig"];
    if (mig && !mig.IsSequence()) return YamlFieldError(mig, gw + ".mig", "want a list");
    if (!mig || mig.size() == 0) GPUPACK_RETURN_IF_ERROR(CheckUsed(g, gw, used, memory, "GPU"));
    for (int64_t c = 0; c < count; ++c, ++index) {
      std::string gpu_uuid = uuid.empty() ? GeneratedGpuUuid(node.name, index) : uuid;
      if (!mig || mig.size() == 0) {
        model::Device d;
        d.uuid = gpu_uuid;
        d.index = index;
        d.model = model;
        d.capacity_mib = memory;
        d.used_mib = used;
        d.healthy = healthy;
        d.hard_isolation = hard;
        node.devices.push_back(std::move(d));
        continue;
      }
      model::MiB mig_total = 0;
      for (size_t j = 0; j < mig.size(); ++j) {
        const std::string mw = gw + ".mig[" + std::to_string(j) + "]";
        const YAML::Node m = mig[j];
        GPUPACK_RETURN_IF_ERROR(CheckKeys(m, mw, {"profile", "memory", "uuid", "used", "gpuInstanceId", "placement"}));
        model::Device d;
        d.kind = model::DeviceKind::kMig;
        d.index = index;
        d.model = model;
        d.parent_uuid = gpu_uuid;
        d.healthy = healthy;
        d.hard_isolation = true;
        if (!m["profile"]) return YamlFieldError(m, mw, "missing \"profile\"");
        GPUPACK_ASSIGN_OR_RETURN(d.mig_profile, Scalar(m["profile"], mw + ".profile"));
        GPUPACK_ASSIGN_OR_RETURN(d.capacity_mib, MiBField(m, "memory", mw, true));
        if (d.capacity_mib <= 0) return YamlFieldError(m["memory"], mw + ".memory", "must be positive");
        GPUPACK_ASSIGN_OR_RETURN(d.used_mib, MiBField(m, "used", mw, false));
        GPUPACK_RETURN_IF_ERROR(CheckUsed(m, mw, d.used_mib, d.capacity_mib, "MIG instance"));
        mig_total += d.capacity_mib;
        if (m["uuid"]) {
          if (count != 1) return YamlFieldError(m["uuid"], mw + ".uuid", "only allowed with count 1");
          GPUPACK_ASSIGN_OR_RETURN(d.uuid, Scalar(m["uuid"], mw + ".uuid"));
        } else {
          d.uuid = GeneratedMigUuid(node.name, index, static_cast<int>(j));
        }
        GPUPACK_ASSIGN_OR_RETURN(int64_t gi, IntField(m, "gpuInstanceId", mw, static_cast<int64_t>(j)));
        d.gpu_instance_id = static_cast<int>(gi);
        if (const YAML::Node p = m["placement"]) {
          GPUPACK_RETURN_IF_ERROR(CheckKeys(p, mw + ".placement", {"start", "size"}));
          GPUPACK_ASSIGN_OR_RETURN(int64_t start, IntField(p, "start", mw + ".placement", -1));
          GPUPACK_ASSIGN_OR_RETURN(int64_t size, IntField(p, "size", mw + ".placement", -1));
          d.placement_start = static_cast<int>(start);
          d.placement_size = static_cast<int>(size);
        }
        node.devices.push_back(std::move(d));
      }
      if (mig_total > memory) {
        return YamlFieldError(mig, gw + ".mig",
                              "instances total " + std::to_string(mig_total) + " MiB, more than the GPU's " +
                                  std::to_string(memory) + " MiB");
      }
    }
  }
  if (node.devices.size() > static_cast<size_t>(model::kMaxDevicesPerNode)) {
    return YamlFieldError(entry, where,
                          std::to_string(node.devices.size()) + " devices, at most " +
                              std::to_string(model::kMaxDevicesPerNode) + " per node");
  }
  return node;
}

StatusOr<std::vector<model::Node>> ParseClusterYaml(std::string_view yaml_text) {
  StatusOr<YAML::Node> parsed = ParseYamlStrict(yaml_text);
  if (!parsed.ok()) return parsed.status().WithContext("cluster file");
  const YAML::Node root = *parsed;
  try {
    GPUPACK_RETURN_IF_ERROR(CheckKeys(root, "cluster file", {"nodes"}));
    const YAML::Node nodes = root["nodes"];
    if (!nodes || !nodes.IsSequence())
      return YamlFieldError(nodes ? nodes : root, "cluster file", "\"nodes\" must be a list");
    // Nothing could ever be placed: refuse rather than serve or replay an empty cluster.
    if (nodes.size() == 0) return YamlFieldError(nodes, "cluster file", "\"nodes\" is empty; list at least one node");
    std::vector<model::Node> out;
    std::map<std::string, int> names;  // node name → its entry
    std::set<std::string> uuids;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const std::string where = "nodes[" + std::to_string(i) + "]";
      GPUPACK_ASSIGN_OR_RETURN(model::Node node, ParseNodeEntry(nodes[i], where));
      auto [first, fresh] = names.emplace(node.name, static_cast<int>(i));
      if (!fresh) {
        return YamlFieldError(
            nodes[i]["name"], where + ".name",
            "duplicate node \"" + node.name + "\" (also nodes[" + std::to_string(first->second) + "])");
      }
      for (const auto& d : node.devices) {
        if (!uuids.insert(d.uuid).second)
          return YamlFieldError(nodes[i], where, "duplicate device uuid \"" + d.uuid + "\"");
      }
      out.push_back(std::move(node));
    }
    return out;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("cluster file: ") + e.what());
  }
}

StatusOr<std::vector<model::Node>> LoadClusterFile(const std::string& path) {
  GPUPACK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path, "cluster file"));
  auto nodes = ParseClusterYaml(text);
  if (!nodes.ok()) return nodes.status().WithContext(path);
  return nodes;
}

}  // namespace gpupack::translate
