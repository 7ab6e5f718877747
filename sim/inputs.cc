#include "sim/inputs.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "api/pod_annotations.h"
#include "common/file.h"
#include "common/input_check.h"
#include "common/quantity.h"
#include "translate/cluster_file.h"

namespace gpupack::sim {
namespace {

struct Field {
  std::string_view text;
  int column = 1;  // 1-based
};

struct CsvRow {
  int line = 0;
  std::vector<Field> fields;
};

std::vector<CsvRow> SplitCsv(std::string_view csv) {
  std::vector<CsvRow> rows;
  size_t pos = 0;
  int line = 0;
  while (pos < csv.size()) {
    size_t end = csv.find('\n', pos);
    if (end == std::string_view::npos) end = csv.size();
    std::string_view text = csv.substr(pos, end - pos);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    ++line;
    pos = end + 1;
    if (text.empty()) continue;
    CsvRow row;
    row.line = line;
    size_t start = 0;
    for (;;) {
      size_t comma = text.find(',', start);
      if (comma == std::string_view::npos) comma = text.size();
      row.fields.push_back(Field{text.substr(start, comma - start), static_cast<int>(start) + 1});
      if (comma == text.size()) break;
      start = comma + 1;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string At(const std::string& where, int line, int column) {
  return where + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

// Column positions by header name; missing required ones are an error naming the header line.
StatusOr<std::map<std::string, int>> Columns(const CsvRow& header, const std::vector<std::string>& required,
                                             const std::string& where) {
  std::map<std::string, int> cols;
  for (size_t i = 0; i < header.fields.size(); ++i) cols[std::string(header.fields[i].text)] = static_cast<int>(i);
  for (const auto& name : required) {
    if (!cols.count(name)) {
      return Status::InvalidArgument(At(where, header.line, 1) + "missing column \"" + name + "\"");
    }
  }
  return cols;
}

StatusOr<Field> Get(const CsvRow& row, int col, const std::string& name, const std::string& where) {
  if (col >= static_cast<int>(row.fields.size())) {
    const Field& last = row.fields.back();
    return Status::InvalidArgument(At(where, row.line, last.column + static_cast<int>(last.text.size())) +
                                   "missing value for column \"" + name + "\"");
  }
  return row.fields[col];
}

StatusOr<int64_t> Integer(const CsvRow& row, int col, const std::string& name, const std::string& where) {
  GPUPACK_ASSIGN_OR_RETURN(Field f, Get(row, col, name, where));
  int64_t v = 0;
  // At most 15 digits (below 10^15, far inside int64), checked before any digit is added up: a
  // longer field must not overflow on its way to being refused.
  bool ok = !f.text.empty() && f.text.size() <= 15;
  for (size_t i = 0; ok && i < f.text.size(); ++i) {
    const char c = f.text[i];
    ok = c >= '0' && c <= '9';
    if (ok) v = v * 10 + (c - '0');
  }
  if (!ok) {
    return Status::InvalidArgument(At(where, row.line, f.column) + name + ": \"" + std::string(f.text) +
                                   "\" is not a non-negative integer");
  }
  return v;
}

// The workload file's keys for a pod's name, count and size.
constexpr std::string_view kPodKeys[] = {"name", "count", "gpuMemory", "gpus", "cpu", "memory"};
// Its other keys are the workload keys of api::PodAnnotations(), whose values the rows read
// themselves.

std::string Mark(const std::string& where, const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  if (m.line < 0) return where + ": ";
  return At(where, m.line + 1, m.column + 1);
}

}  // namespace

StatusOr<std::vector<model::Node>> ParseAlibabaNodes(std::string_view csv, const std::string& where) {
  std::vector<CsvRow> rows = SplitCsv(csv);
  if (rows.empty()) return Status::InvalidArgument(where + ": empty node list");
  GPUPACK_ASSIGN_OR_RETURN(auto cols, Columns(rows[0], {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, where));
  std::vector<model::Node> nodes;
  std::map<std::string, int> seen;
  for (size_t r = 1; r < rows.size(); ++r) {
    const CsvRow& row = rows[r];
    model::Node node;
    GPUPACK_ASSIGN_OR_RETURN(Field name, Get(row, cols["sn"], "sn", where));
    if (name.text.empty()) return Status::InvalidArgument(At(where, row.line, name.column) + "sn: empty node name");
    node.name = std::string(name.text);
    if (seen.count(node.name)) {
      return Status::InvalidArgument(At(where, row.line, name.column) + "duplicate node \"" + node.name +
                                     "\" (first on line " + std::to_string(seen[node.name]) + ")");
    }
    seen[node.name] = row.line;
    GPUPACK_ASSIGN_OR_RETURN(node.cpu_milli, Integer(row, cols["cpu_milli"], "cpu_milli", where));
    GPUPACK_ASSIGN_OR_RETURN(int64_t mem_mib, Integer(row, cols["memory_mib"], "memory_mib", where));
    node.memory_bytes = mem_mib << 20;
    GPUPACK_ASSIGN_OR_RETURN(int64_t gpus, Integer(row, cols["gpu"], "gpu", where));
    GPUPACK_ASSIGN_OR_RETURN(Field model, Get(row, cols["model"], "model", where));
    if (gpus > 64) {
      return Status::InvalidArgument(At(where, row.line, row.fields[cols["gpu"]].column) +
                                     "gpu: " + std::to_string(gpus) + " GPUs on one node (at most 64)");
    }
    if (gpus > 0 && model.text.empty()) {
      return Status::InvalidArgument(At(where, row.line, model.column) + "model: empty for a node with GPUs");
    }
    for (int g = 0; g < gpus; ++g) {
      model::Device d;
      d.uuid = translate::GeneratedGpuUuid(node.name, g);
      d.index = g;
      d.model = std::string(model.text);
      d.capacity_mib = kTraceGpuMiB;
      node.devices.push_back(std::move(d));
    }
    nodes.push_back(std::move(node));
  }
  if (nodes.empty()) return Status::InvalidArgument(where + ": the node list has a header but no nodes");
  return nodes;
}

StatusOr<std::vector<model::PodRequest>> ParseAlibabaPods(std::string_view csv, const std::string& where) {
  std::vector<CsvRow> rows = SplitCsv(csv);
  if (rows.empty()) return Status::InvalidArgument(where + ": empty pod list");
  GPUPACK_ASSIGN_OR_RETURN(auto cols,
                           Columns(rows[0], {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}, where));
  const bool has_spec = cols.count("gpu_spec") > 0;
  std::vector<model::PodRequest> pods;
  pods.reserve(rows.size());
  for (size_t r = 1; r < rows.size(); ++r) {
    const CsvRow& row = rows[r];
    model::PodRequest pod;
    GPUPACK_ASSIGN_OR_RETURN(Field name, Get(row, cols["name"], "name", where));
    if (name.text.empty()) return Status::InvalidArgument(At(where, row.line, name.column) + "name: empty pod name");
    pod.ns = "default";
    pod.name = std::string(name.text);
    pod.uid = pod.name;
    GPUPACK_ASSIGN_OR_RETURN(pod.cpu_milli, Integer(row, cols["cpu_milli"], "cpu_milli", where));
    GPUPACK_ASSIGN_OR_RETURN(int64_t mem_mib, Integer(row, cols["memory_mib"], "memory_mib", where));
    pod.memory_bytes = mem_mib << 20;
    GPUPACK_ASSIGN_OR_RETURN(int64_t num_gpu, Integer(row, cols["num_gpu"], "num_gpu", where));
    GPUPACK_ASSIGN_OR_RETURN(int64_t gpu_milli, Integer(row, cols["gpu_milli"], "gpu_milli", where));
    if (num_gpu > 64) {
      return Status::InvalidArgument(At(where, row.line, row.fields[cols["num_gpu"]].column) +
                                     "num_gpu: " + std::to_string(num_gpu) + " is more than any node has (64)");
    }
    if (num_gpu > 0) {
      if (gpu_milli == 0) {
        return Status::InvalidArgument(At(where, row.line, row.fields[cols["gpu_milli"]].column) +
                                       "gpu_milli: 0 for a pod with num_gpu " + std::to_string(num_gpu));
      }
      model::ContainerRequest c;
      c.name = "main";
      c.device_count = static_cast<int>(num_gpu);
      // The artifact caps gpu_milli at 1000; a full GPU is a whole-device request.
      c.mem_per_device_mib = gpu_milli >= kTraceGpuMiB ? 0 : gpu_milli;
      pod.containers.push_back(c);
      if (has_spec && cols["gpu_spec"] < static_cast<int>(row.fields.size())) {
        std::string_view spec = row.fields[cols["gpu_spec"]].text;
        size_t start = 0;
        while (!spec.empty() && start <= spec.size()) {
          size_t bar = spec.find('|', start);
          if (bar == std::string_view::npos) bar = spec.size();
          if (bar > start) pod.gpu_models.emplace_back(spec.substr(start, bar - start));
          start = bar + 1;
        }
      }
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

StatusOr<std::vector<PodLifetime>> ParseAlibabaPodLifetimes(std::string_view csv, const std::string& where) {
  std::vector<CsvRow> rows = SplitCsv(csv);
  if (rows.empty()) return Status::InvalidArgument(where + ": empty pod list");
  GPUPACK_ASSIGN_OR_RETURN(auto cols, Columns(rows[0], {"name", "creation_time", "deletion_time"}, where));
  const bool has_qos = cols.count("qos") > 0;
  std::vector<PodLifetime> lives;
  lives.reserve(rows.size());
  for (size_t r = 1; r < rows.size(); ++r) {
    const CsvRow& row = rows[r];
    PodLifetime life;
    GPUPACK_ASSIGN_OR_RETURN(Field name, Get(row, cols["name"], "name", where));
    GPUPACK_ASSIGN_OR_RETURN(life.created_s, Integer(row, cols["creation_time"], "creation_time", where));
    GPUPACK_ASSIGN_OR_RETURN(life.deleted_s, Integer(row, cols["deletion_time"], "deletion_time", where));
    if (life.deleted_s < life.created_s) {
      return Status::InvalidArgument(At(where, row.line, row.fields[cols["deletion_time"]].column) + "pod \"" +
                                     std::string(name.text) + "\": deletion_time " + std::to_string(life.deleted_s) +
                                     " is before its creation_time " + std::to_string(life.created_s));
    }
    if (has_qos && cols["qos"] < static_cast<int>(row.fields.size()))
      life.qos = std::string(row.fields[cols["qos"]].text);
    lives.push_back(std::move(life));
  }
  return lives;
}

StatusOr<std::vector<model::PodRequest>> ParseWorkloadYaml(std::string_view text, const std::string& where) {
  StatusOr<YAML::Node> parsed = ParseYamlStrict(text);
  if (!parsed.ok()) return parsed.status().WithContext(where);
  const YAML::Node root = *parsed;
  if (!root.IsMap() || !root["pods"] || !root["pods"].IsSequence()) {
    return Status::InvalidArgument(where + ": expected a map with a \"pods\" list");
  }
  std::vector<model::PodRequest> pods;
  std::map<std::string, std::string> names;
  for (const YAML::Node& entry : root["pods"]) {
    if (!entry.IsMap()) return Status::InvalidArgument(Mark(where, entry) + "each pod must be a map");
    for (const auto& kv : entry) {
      const std::string key = kv.first.as<std::string>();
      const bool known = std::find(std::begin(kPodKeys), std::end(kPodKeys), key) != std::end(kPodKeys) ||
                         std::any_of(api::PodAnnotations().begin(), api::PodAnnotations().end(),
                                     [&](const api::PodAnnotation& row) { return row.workload_key == key; });
      if (!known) {
        return Status::InvalidArgument(Mark(where, kv.first) + "unknown key \"" + key + "\"");
      }
      if (!kv.second.IsScalar()) return Status::InvalidArgument(Mark(where, kv.second) + key + ": must be a scalar");
    }
    auto scalar = [&](std::string_view key) {
      const YAML::Node value = entry[std::string(key)];
      return value ? value.as<std::string>() : std::string();
    };
    const std::string name = scalar("name");
    if (name.empty()) return Status::InvalidArgument(Mark(where, entry) + "name: required");
    if (Status valid = CheckDns1123Subdomain(name, "name"); !valid.ok()) {
      return Status::InvalidArgument(Mark(where, entry["name"]) + valid.message());
    }
    model::PodRequest base;
    base.ns = "default";
    int64_t count = 1;
    if (entry["count"]) {
      auto c = ParseCount(scalar("count"), "count");
      if (!c.ok() || *c < 1 || *c > 1000000) {
        return Status::InvalidArgument(Mark(where, entry["count"]) + "count: want a whole number 1..1000000, got \"" +
                                       scalar("count") + "\"");
      }
      count = *c;
    }
    int64_t gpus = 0;
    if (entry["gpus"]) {
      auto g = ParseCount(scalar("gpus"), "gpus");
      if (!g.ok() || *g < 1 || *g > 64) {
        return Status::InvalidArgument(Mark(where, entry["gpus"]) + "gpus: want a whole number 1..64, got \"" +
                                       scalar("gpus") + "\"");
      }
      gpus = *g;
    }
    model::MiB per_device = 0;
    if (entry["gpuMemory"]) {
      auto mem = ParseMemoryMiBCeil(scalar("gpuMemory"), "gpuMemory");
      if (!mem.ok()) return Status::InvalidArgument(Mark(where, entry["gpuMemory"]) + mem.status().message());
      if (gpus == 0) gpus = 1;
      per_device = (*mem + gpus - 1) / gpus;
    }
    if (gpus > 0) {
      model::ContainerRequest c;
      c.name = "main";
      c.device_count = static_cast<int>(gpus);
      c.mem_per_device_mib = per_device;
      base.containers.push_back(c);
    }
    // The annotations' keys, read by their rows in the table's order after the container, as the
    // pod parser reads a pod's annotations, so the simulator accepts and refuses what the webhook
    // and the extender do, with their message after the position of the key's value.
    for (const api::PodAnnotation& row : api::PodAnnotations()) {
      if (row.workload_key.empty() || !entry[std::string(row.workload_key)]) continue;
      if (Status read = row.read(row, scalar(row.workload_key), base); !read.ok()) {
        return Status::InvalidArgument(Mark(where, entry[std::string(row.workload_key)]) + read.message());
      }
    }
    if (entry["cpu"]) {
      auto cpu = ParseMilliValue(scalar("cpu"), "cpu");
      if (!cpu.ok()) return Status::InvalidArgument(Mark(where, entry["cpu"]) + cpu.status().message());
      base.cpu_milli = *cpu;
    }
    if (entry["memory"]) {
      auto mem = ParseBytes(scalar("memory"), "memory");
      if (!mem.ok()) return Status::InvalidArgument(Mark(where, entry["memory"]) + mem.status().message());
      base.memory_bytes = *mem;
    }
    for (int64_t i = 0; i < count; ++i) {
      model::PodRequest pod = base;
      pod.name = count == 1 ? name : name + "-" + std::to_string(i);
      pod.uid = pod.name;
      auto [it, fresh] = names.emplace(pod.name, Mark(where, entry));
      if (!fresh) {
        return Status::InvalidArgument(Mark(where, entry) + "duplicate pod name \"" + pod.name + "\" (also at " +
                                       it->second.substr(0, it->second.size() - 2) + ")");
      }
      pods.push_back(std::move(pod));
    }
  }
  if (pods.empty()) return Status::InvalidArgument(where + ": the pods list is empty");
  return pods;
}

StatusOr<std::vector<model::Node>> LoadCluster(const std::string& path) {
  GPUPACK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, "input file"));
  if (text.rfind("sn,", 0) == 0) return ParseAlibabaNodes(text, path);
  // Parses the text already read (translate::LoadClusterFile would read the file a second time).
  StatusOr<std::vector<model::Node>> nodes = translate::ParseClusterYaml(text);
  if (!nodes.ok()) return nodes.status().WithContext(path);
  return nodes;
}

StatusOr<std::vector<model::PodRequest>> LoadWorkload(const std::string& path) {
  GPUPACK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, "input file"));
  if (text.rfind("name,", 0) == 0) return ParseAlibabaPods(text, path);
  return ParseWorkloadYaml(text, path);
}

StatusOr<TimedWorkload> LoadTimedWorkload(const std::string& path) {
  GPUPACK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, "input file"));
  if (text.rfind("name,", 0) != 0) {
    return Status::InvalidArgument(path +
                                   ": not an Alibaba pod CSV (a \"name,\" header): the timeline needs its "
                                   "creation_time and deletion_time");
  }
  TimedWorkload workload;
  GPUPACK_ASSIGN_OR_RETURN(workload.pods, ParseAlibabaPods(text, path));
  GPUPACK_ASSIGN_OR_RETURN(workload.lives, ParseAlibabaPodLifetimes(text, path));
  return workload;
}

std::string ClusterYaml(const std::vector<model::Node>& nodes) {
  std::ostringstream out;
  out << "nodes:\n";
  for (const auto& node : nodes) {
    out << "  - name: " << node.name << "\n";
    if (node.cpu_milli >= 0) out << "    cpu: \"" << node.cpu_milli << "m\"\n";
    if (node.memory_bytes >= 0) out << "    memory: \"" << node.memory_bytes << "\"\n";
    if (!node.labels.empty()) {
      out << "    labels: {";
      bool first = true;
      for (const auto& [key, value] : node.labels) {
        out << (first ? "" : ", ") << "\"" << key << "\": \"" << value << "\"";
        first = false;
      }
      out << "}\n";
    }
    if (node.devices.empty()) {
      out << "    gpus: []\n";
      continue;
    }
    out << "    gpus:\n";
    // A GPU in MIG mode is not a device itself: its instances are, grouped by parent.
    std::vector<std::string> parents;
    for (const auto& d : node.devices) {
      // What the placement reads of a device beyond its size: the reported usage, the health and
      // hard isolation (the GPU's, which its MIG instances share).
      const std::string state =
          (d.used_mib > 0 && d.kind == model::DeviceKind::kGpu ? ", used: " + std::to_string(d.used_mib) + "Mi"
                                                               : std::string()) +
          (d.healthy ? "" : ", healthy: false") +
          (d.hard_isolation && d.kind == model::DeviceKind::kGpu ? ", hardIsolation: true" : "");
      if (d.kind == model::DeviceKind::kGpu) {
        out << "      - {model: \"" << d.model << "\", memory: " << d.capacity_mib << "Mi, uuid: \"" << d.uuid << "\""
            << state << "}\n";
        continue;
      }
      if (std::find(parents.begin(), parents.end(), d.parent_uuid) != parents.end()) continue;
      parents.push_back(d.parent_uuid);
      // The parent's own memory is not kept in model::Node; the instances' sum is a valid lower bound.
      model::MiB parent_mib = 0;
      for (const auto& m : node.devices) {
        if (m.kind == model::DeviceKind::kMig && m.parent_uuid == d.parent_uuid) parent_mib += m.capacity_mib;
      }
      out << "      - {model: \"" << d.model << "\", memory: " << parent_mib << "Mi, uuid: \"" << d.parent_uuid << "\""
          << state << ", mig: [";
      bool first = true;
      for (const auto& m : node.devices) {
        if (m.kind != model::DeviceKind::kMig || m.parent_uuid != d.parent_uuid) continue;
        out << (first ? "" : ", ") << "{profile: \"" << m.mig_profile << "\", memory: " << m.capacity_mib
            << "Mi, uuid: \"" << m.uuid << "\"";
        if (m.used_mib > 0) out << ", used: " << m.used_mib << "Mi";
        if (m.gpu_instance_id >= 0) out << ", gpuInstanceId: " << m.gpu_instance_id;
        if (m.placement_start >= 0 && m.placement_size >= 0) {
          out << ", placement: {start: " << m.placement_start << ", size: " << m.placement_size << "}";
        }
        out << "}";
        first = false;
      }
      out << "]}\n";
    }
  }
  return out.str();
}

}  // namespace gpupack::sim
