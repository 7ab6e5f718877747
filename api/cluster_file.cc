#include "api/cluster_file.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "common/quantity.h"
#include "scheduler/core/placement.h"

namespace gpupack::api {
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

Status CheckKeys(const YAML::Node& map, const std::string& where, std::initializer_list<const char*> allowed) {
  if (!map.IsMap()) return Status::InvalidArgument(where + ": want a mapping");
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) return Status::InvalidArgument(where + ": unknown key \"" + key + "\"");
  }
  return Status::Ok();
}

StatusOr<std::string> Scalar(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) return Status::InvalidArgument(where + ": want a scalar");
  return n.as<std::string>();
}

StatusOr<core::MiB> MiBField(const YAML::Node& map, const char* key, const std::string& where, bool required) {
  const YAML::Node v = map[key];
  if (!v) {
    if (required) return Status::InvalidArgument(where + ": missing \"" + key + "\"");
    return core::MiB{0};
  }
  GPUPACK_ASSIGN_OR_RETURN(std::string text, Scalar(v, where + "." + key));
  auto bytes = ParseBytes(text, where + "." + key);
  if (!bytes.ok()) return bytes.status();
  return (*bytes + (1 << 20) - 1) >> 20;
}

StatusOr<bool> BoolField(const YAML::Node& map, const char* key, const std::string& where, bool def) {
  const YAML::Node v = map[key];
  if (!v) return def;
  GPUPACK_ASSIGN_OR_RETURN(std::string text, Scalar(v, where + "." + key));
  if (text == "true") return true;
  if (text == "false") return false;
  return Status::InvalidArgument(where + "." + key + ": want true or false, got \"" + text + "\"");
}

StatusOr<int64_t> IntField(const YAML::Node& map, const char* key, const std::string& where, int64_t def) {
  const YAML::Node v = map[key];
  if (!v) return def;
  GPUPACK_ASSIGN_OR_RETURN(std::string text, Scalar(v, where + "." + key));
  return ParseCount(text, where + "." + key);
}

}  // namespace

std::string GeneratedGpuUuid(std::string_view node, int index) {
  return UuidFrom("GPU-", std::string(node) + "/" + std::to_string(index));
}
std::string GeneratedMigUuid(std::string_view node, int gpu_index, int instance) {
  return UuidFrom("MIG-", std::string(node) + "/" + std::to_string(gpu_index) + "/" + std::to_string(instance));
}

StatusOr<core::Node> ParseNodeEntry(const YAML::Node& entry, const std::string& where) {
  GPUPACK_RETURN_IF_ERROR(CheckKeys(entry, where, {"name", "cpu", "memory", "labels", "gpus"}));
  core::Node node;
  if (!entry["name"]) return Status::InvalidArgument(where + ": missing \"name\"");
  GPUPACK_ASSIGN_OR_RETURN(node.name, Scalar(entry["name"], where + ".name"));
  if (node.name.empty()) return Status::InvalidArgument(where + ".name: empty");
  if (entry["cpu"]) {
    GPUPACK_ASSIGN_OR_RETURN(std::string t, Scalar(entry["cpu"], where + ".cpu"));
    GPUPACK_ASSIGN_OR_RETURN(node.cpu_milli, ParseMilliValue(t, where + ".cpu"));
  }
  if (entry["memory"]) {
    GPUPACK_ASSIGN_OR_RETURN(std::string t, Scalar(entry["memory"], where + ".memory"));
    GPUPACK_ASSIGN_OR_RETURN(node.memory_bytes, ParseBytes(t, where + ".memory"));
  }
  if (const YAML::Node labels = entry["labels"]) {
    if (!labels.IsMap()) return Status::InvalidArgument(where + ".labels: want a mapping");
    for (const auto& kv : labels) node.labels[kv.first.as<std::string>()] = kv.second.as<std::string>();
  }
  const YAML::Node gpus = entry["gpus"];
  if (gpus && !gpus.IsSequence()) return Status::InvalidArgument(where + ".gpus: want a list");
  int index = 0;
  for (size_t i = 0; gpus && i < gpus.size(); ++i) {
    const std::string gw = where + ".gpus[" + std::to_string(i) + "]";
    const YAML::Node g = gpus[i];
    GPUPACK_RETURN_IF_ERROR(CheckKeys(g, gw, {"model", "memory", "count", "used", "uuid", "healthy", "hardIsolation", "mig"}));
    if (!g["model"]) return Status::InvalidArgument(gw + ": missing \"model\"");
    GPUPACK_ASSIGN_OR_RETURN(std::string model, Scalar(g["model"], gw + ".model"));
    GPUPACK_ASSIGN_OR_RETURN(core::MiB memory, MiBField(g, "memory", gw, true));
    if (memory <= 0) return Status::InvalidArgument(gw + ".memory: must be positive");
    GPUPACK_ASSIGN_OR_RETURN(int64_t count, IntField(g, "count", gw, 1));
    if (count < 1 || count > core::kMaxDevicesPerNode) {
      return Status::InvalidArgument(gw + ".count: must be 1.." + std::to_string(core::kMaxDevicesPerNode));
    }
    GPUPACK_ASSIGN_OR_RETURN(core::MiB used, MiBField(g, "used", gw, false));
    GPUPACK_ASSIGN_OR_RETURN(bool healthy, BoolField(g, "healthy", gw, true));
    GPUPACK_ASSIGN_OR_RETURN(bool hard, BoolField(g, "hardIsolation", gw, false));
    std::string uuid;
    if (g["uuid"]) {
      if (count != 1) return Status::InvalidArgument(gw + ".uuid: only allowed with count 1");
      GPUPACK_ASSIGN_OR_RETURN(uuid, Scalar(g["uuid"], gw + ".uuid"));
    }
    const YAML::Node mig = g["mig"];
    if (mig && !mig.IsSequence()) return Status::InvalidArgument(gw + ".mig: want a list");
    for (int64_t c = 0; c < count; ++c, ++index) {
      std::string gpu_uuid = uuid.empty() ? GeneratedGpuUuid(node.name, index) : uuid;
      if (!mig || mig.size() == 0) {
        core::Device d;
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
      core::MiB mig_total = 0;
      for (size_t j = 0; j < mig.size(); ++j) {
        const std::string mw = gw + ".mig[" + std::to_string(j) + "]";
        const YAML::Node m = mig[j];
        GPUPACK_RETURN_IF_ERROR(CheckKeys(m, mw, {"profile", "memory", "uuid", "used", "gpuInstanceId", "placement"}));
        core::Device d;
        d.kind = core::DeviceKind::kMig;
        d.index = index;
        d.model = model;
        d.parent_uuid = gpu_uuid;
        d.healthy = healthy;
        d.hard_isolation = true;
        if (!m["profile"]) return Status::InvalidArgument(mw + ": missing \"profile\"");
        GPUPACK_ASSIGN_OR_RETURN(d.mig_profile, Scalar(m["profile"], mw + ".profile"));
        GPUPACK_ASSIGN_OR_RETURN(d.capacity_mib, MiBField(m, "memory", mw, true));
        if (d.capacity_mib <= 0) return Status::InvalidArgument(mw + ".memory: must be positive");
        GPUPACK_ASSIGN_OR_RETURN(d.used_mib, MiBField(m, "used", mw, false));
        mig_total += d.capacity_mib;
        if (m["uuid"]) {
          if (count != 1) return Status::InvalidArgument(mw + ".uuid: only allowed with count 1");
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
        return Status::InvalidArgument(gw + ".mig: instances total " + std::to_string(mig_total) +
                                       " MiB, more than the GPU's " + std::to_string(memory) + " MiB");
      }
    }
  }
  if (node.devices.size() > static_cast<size_t>(core::kMaxDevicesPerNode)) {
    return Status::InvalidArgument(where + ": " + std::to_string(node.devices.size()) + " devices, at most " +
                                   std::to_string(core::kMaxDevicesPerNode) + " per node");
  }
  return node;
}

StatusOr<std::vector<core::Node>> ParseClusterYaml(std::string_view yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("cluster file is not valid YAML: ") + e.what());
  }
  try {
    GPUPACK_RETURN_IF_ERROR(CheckKeys(root, "cluster file", {"nodes"}));
    const YAML::Node nodes = root["nodes"];
    if (!nodes || !nodes.IsSequence()) return Status::InvalidArgument("cluster file: \"nodes\" must be a list");
    std::vector<core::Node> out;
    std::set<std::string> names, uuids;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const std::string where = "nodes[" + std::to_string(i) + "]";
      GPUPACK_ASSIGN_OR_RETURN(core::Node node, ParseNodeEntry(nodes[i], where));
      if (!names.insert(node.name).second) return Status::InvalidArgument(where + ".name: duplicate node \"" + node.name + "\"");
      for (const auto& d : node.devices) {
        if (!uuids.insert(d.uuid).second) return Status::InvalidArgument(where + ": duplicate device uuid \"" + d.uuid + "\"");
      }
      out.push_back(std::move(node));
    }
    return out;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("cluster file: ") + e.what());
  }
}

StatusOr<std::vector<core::Node>> LoadClusterFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot open cluster file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto nodes = ParseClusterYaml(ss.str());
  if (!nodes.ok()) return nodes.status().WithContext(path);
  return nodes;
}

}  // namespace gpupack::api
