#include "scheduler/extender/config.h"

#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/duration.h"
#include "common/file.h"
#include "common/input_check.h"
#include "common/quantity.h"

namespace gpupack::extender {

namespace {

Status BadKey(const std::string& key, const std::string& what) {
  return Status::InvalidArgument("config key \"" + key + "\": " + what);
}

std::string Scalar(const YAML::Node& node) { return node.IsScalar() ? node.Scalar() : std::string(); }

Status ReadBool(const YAML::Node& node, const std::string& key, bool& out) {
  const std::string s = Scalar(node);
  if (s == "true") {
    out = true;
  } else if (s == "false") {
    out = false;
  } else {
    return BadKey(key, "expected true or false, got \"" + s + "\"");
  }
  return Status::Ok();
}

Status ReadDouble(const YAML::Node& node, const std::string& key, double lo, double hi, double& out) {
  const std::string s = Scalar(node);
  char* end = nullptr;
  const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
    return BadKey(key, "expected a number, got \"" + s + "\"");
  if (v < lo || v > hi) {
    std::ostringstream range;
    range << "must be between " << lo << " and " << hi << ", got " << s;
    return BadKey(key, range.str());
  }
  out = v;
  return Status::Ok();
}

template <typename Int>
Status ReadInt(const YAML::Node& node, const std::string& key, int64_t lo, int64_t hi, Int& out) {
  double v = 0;
  GPUPACK_RETURN_IF_ERROR(ReadDouble(node, key, static_cast<double>(lo), static_cast<double>(hi), v));
  if (v != std::floor(v)) return BadKey(key, "expected an integer, got \"" + Scalar(node) + "\"");
  out = static_cast<Int>(v);
  return Status::Ok();
}

Status ReadString(const YAML::Node& node, const std::string& key, std::string& out) {
  if (!node.IsScalar()) return BadKey(key, "expected a string");
  out = node.Scalar();
  return Status::Ok();
}

// A Kubernetes quantity of bytes, stored in MiB (rounded up) or bytes.
Status ReadBytes(const YAML::Node& node, const std::string& key, int64_t divisor, int64_t& out) {
  StatusOr<Quantity> q = Quantity::Parse(Scalar(node));
  if (!q.ok()) return BadKey(key, q.status().message());
  if (q->negative()) return BadKey(key, "must not be negative");
  StatusOr<int64_t> v = q->ScaledCeil(1, divisor);
  if (!v.ok()) return BadKey(key, v.status().message());
  out = *v;
  return Status::Ok();
}

Status ReadDurationKey(const YAML::Node& node, const std::string& key, std::chrono::nanoseconds& out) {
  StatusOr<std::chrono::nanoseconds> d = ParseDuration(Scalar(node));
  if (!d.ok()) return BadKey(key, d.status().message());
  out = *d;
  return Status::Ok();
}

Status ReadListen(const YAML::Node& node, const std::string& key, std::string& out) {
  GPUPACK_RETURN_IF_ERROR(ReadString(node, key, out));
  const size_t colon = out.rfind(':');
  if (colon == std::string::npos || colon + 1 == out.size() ||
      out.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return BadKey(key, "expected HOST:PORT, got \"" + out + "\"");
  }
  return Status::Ok();
}

using Reader = std::function<Status(const YAML::Node&, const std::string&, ExtenderConfig&)>;

Status ReadSection(const YAML::Node& node, const std::string& prefix, const std::map<std::string, Reader>& readers,
                   ExtenderConfig& config) {
  if (!node.IsMap()) return BadKey(prefix.empty() ? "(document)" : prefix, "expected a mapping");
  for (const auto& item : node) {
    const std::string name = item.first.as<std::string>();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    auto reader = readers.find(name);
    if (reader == readers.end())
      return Status::InvalidArgument(YamlLine(item.first) + BadKey(key, "unknown key").message());
    const Status read = reader->second(item.second, key, config);
    // A section's own error already carries the line of the key inside it.
    if (!read.ok() && !item.second.IsMap()) return Status::InvalidArgument(YamlLine(item.first) + read.message());
    GPUPACK_RETURN_IF_ERROR(read);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ExtenderConfig> ParseExtenderConfig(std::string_view yaml_text) {
  StatusOr<YAML::Node> parsed = ParseYamlStrict(yaml_text);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node doc = *parsed;
  ExtenderConfig config;
  if (doc.IsNull()) return config;  // an empty file: all defaults

  const std::map<std::string, Reader> workload = {
      {"halfLifePods", [](auto& n, auto& k, auto& c) { return ReadDouble(n, k, 1, 1e9, c.workload_half_life_pods); }},
      {"priorPods", [](auto& n, auto& k, auto& c) { return ReadDouble(n, k, 0, 1e9, c.workload_prior_pods); }},
      {"wholeGpuPriorPods",
       [](auto& n, auto& k, auto& c) { return ReadDouble(n, k, 0, 1e9, c.workload_whole_gpu_prior_pods); }},
      {"refreshPods", [](auto& n, auto& k, auto& c) { return ReadInt(n, k, 0, 1000000, c.workload_refresh_pods); }},
      {"coverage", [](auto& n, auto& k, auto& c) { return ReadDouble(n, k, 0.5, 1, c.workload_coverage); }},
  };
  const std::map<std::string, Reader> rightsizing = {
      {"headroom", [](auto& n, auto& k, auto& c) { return ReadDouble(n, k, 0, 1, c.rightsizing.headroom); }},
      {"minSamples", [](auto& n, auto& k, auto& c) { return ReadInt(n, k, 1, 100000000, c.rightsizing.min_samples); }},
      {"retention", [](auto& n, auto& k, auto& c) { return ReadDurationKey(n, k, c.usage_store.retention); }},
      {"maxWorkloads", [](auto& n, auto& k, auto& c) { return ReadInt(n, k, 1, 100000, c.usage_store.max_workloads); }},
  };
  const std::map<std::string, Reader> defragmentation = {
      {"mode",
       [](auto& n, auto& k, auto& c) {
         StatusOr<DefragMode> mode = ParseDefragMode(Scalar(n));
         if (!mode.ok()) return BadKey(k, mode.status().message());
         c.defrag.mode = *mode;
         return Status::Ok();
       }},
      {"replanAfter", [](auto& n, auto& k, auto& c) { return ReadDurationKey(n, k, c.defrag.replan_after); }},
      {"maxMoves", [](auto& n, auto& k, auto& c) { return ReadInt(n, k, 1, 8, c.defrag.planner.max_moves); }},
      {"maxMovesPerHour",
       [](auto& n, auto& k, auto& c) { return ReadInt(n, k, 1, 100000, c.defrag.max_moves_per_hour); }},
      {"cooldown", [](auto& n, auto& k, auto& c) { return ReadDurationKey(n, k, c.defrag.cooldown); }},
  };
  const std::map<std::string, Reader> tls = {
      {"certFile", [](auto& n, auto& k, auto& c) { return ReadString(n, k, c.tls_cert_file); }},
      {"keyFile", [](auto& n, auto& k, auto& c) { return ReadString(n, k, c.tls_key_file); }},
  };
  const std::map<std::string, Reader> top = {
      {"listen", [](auto& n, auto& k, auto& c) { return ReadListen(n, k, c.listen); }},
      {"metricsListen", [](auto& n, auto& k, auto& c) { return ReadListen(n, k, c.metrics_listen); }},
      {"prefix",
       [](auto& n, auto& k, auto& c) {
         GPUPACK_RETURN_IF_ERROR(ReadString(n, k, c.prefix));
         while (!c.prefix.empty() && c.prefix.back() == '/') c.prefix.pop_back();
         if (!c.prefix.empty() && c.prefix.front() != '/')
           return BadKey(k, "must start with \"/\", got \"" + c.prefix + "\"");
         return Status::Ok();
       }},
      {"policy",
       [](auto& n, auto& k, auto& c) {
         StatusOr<model::PolicyKind> kind = placement::ParsePolicyKind(Scalar(n));
         if (!kind.ok()) return BadKey(k, "expected fgd, binpack or spread, got \"" + Scalar(n) + "\"");
         c.policy = *kind;
         return Status::Ok();
       }},
      {"decisiveFilter", [](auto& n, auto& k, auto& c) { return ReadBool(n, k, c.decisive_filter); }},
      {"filterBandMiB", [](auto& n, auto& k, auto& c) { return ReadDouble(n, k, 0, 1e12, c.filter_band_mib); }},
      {"tieBreak",
       [](auto& n, auto& k, auto& c) {
         const std::string v = Scalar(n);
         if (v != "nodeOrder" && v != "random") return BadKey(k, "expected nodeOrder or random, got \"" + v + "\"");
         c.fixed_tie_break = v == "nodeOrder";
         return Status::Ok();
       }},
      {"tieBreakSeed",
       [](auto& n, auto& k, auto& c) {
         int64_t seed = 0;
         GPUPACK_RETURN_IF_ERROR(ReadInt(n, k, 0, int64_t{1} << 62, seed));
         c.tie_break_seed = static_cast<uint64_t>(seed);
         return Status::Ok();
       }},
      {"fgdScoreLevels", [](auto& n, auto& k, auto& c) { return ReadBool(n, k, c.fgd_score_levels); }},
      {"rankByFill", [](auto& n, auto& k, auto& c) { return ReadBool(n, k, c.rank_by_fill); }},
      {"reserveScarceCapacity", [](auto& n, auto& k, auto& c) { return ReadBool(n, k, c.reserve_scarce_capacity); }},
      {"rankByCompletion", [](auto& n, auto& k, auto& c) { return ReadBool(n, k, c.rank_by_completion); }},
      {"fgdScoreUnit",
       [](auto& n, auto& k, auto& c) {
         GPUPACK_RETURN_IF_ERROR(ReadBytes(n, k, 1 << 20, c.fgd_score_unit_mib));
         if (c.fgd_score_unit_mib < 1) return BadKey(k, "must be at least 1Mi");
         return Status::Ok();
       }},
      {"neutralNonGpuPods", [](auto& n, auto& k, auto& c) { return ReadBool(n, k, c.neutral_non_gpu_pods); }},
      {"reservePerDevice",
       [](auto& n, auto& k, auto& c) { return ReadBytes(n, k, 1 << 20, c.reserve_per_device_mib); }},
      {"requestGranularity",
       [](auto&, auto& k, auto&) {
         // Removed: learned shapes are exact now, and a bucket could only make shapes that fit
         // together look as if they did not (docs/placement.md, "The typical workload").
         return BadKey(k, "was removed: the workload learner keeps exact request sizes; delete the key");
       }},
      {"ceilingOvercommit",
       [](auto& n, auto& k, auto& c) {
         double ratio = 0;
         GPUPACK_RETURN_IF_ERROR(ReadDouble(n, k, 1, 100, ratio));
         c.ceiling_overcommit_pct = static_cast<int>(std::lround(ratio * 100));
         return Status::Ok();
       }},
      {"processOverhead",
       [](auto& n, auto& k, auto& c) {
         const std::string v = Scalar(n);
         if (v == "off" || v == "auto") {
           c.process_overhead =
               v == "off" ? placement::ProcessOverheadMode::kOff : placement::ProcessOverheadMode::kFamilyDefault;
           return Status::Ok();
         }
         if (Status bytes = ReadBytes(n, k, 1 << 20, c.process_overhead_mib); !bytes.ok()) {
           return BadKey(k, "expected off, auto or a quantity such as 512Mi, got \"" + v + "\"");
         }
         c.process_overhead = placement::ProcessOverheadMode::kFixed;
         return Status::Ok();
       }},
      {"heartbeatTTL", [](auto& n, auto& k, auto& c) { return ReadDurationKey(n, k, c.heartbeat_ttl); }},
      {"requestRatio",
       [](auto& n, auto& k, auto& c) {
         GPUPACK_RETURN_IF_ERROR(ReadDouble(n, k, 0, 1, c.request_ratio));
         if (c.request_ratio <= 0) return BadKey(k, "must be above 0");
         return Status::Ok();
       }},
      {"reservationTTL", [](auto& n, auto& k, auto& c) { return ReadDurationKey(n, k, c.reservation_ttl); }},
      {"filterHoldTTL", [](auto& n, auto& k, auto& c) { return ReadDurationKey(n, k, c.filter_hold_ttl); }},
      {"maxQueueWait", [](auto& n, auto& k, auto& c) { return ReadDurationKey(n, k, c.max_queue_wait); }},
      {"rememberedPods", [](auto& n, auto& k, auto& c) { return ReadInt(n, k, 0, 10000000, c.remembered_pods); }},
      {"rememberedTTL", [](auto& n, auto& k, auto& c) { return ReadDurationKey(n, k, c.remembered_ttl); }},
      {"maxBodyBytes",
       [](auto& n, auto& k, auto& c) {
         GPUPACK_RETURN_IF_ERROR(ReadBytes(n, k, 1, c.max_body_bytes));
         if (c.max_body_bytes < 1024) return BadKey(k, "must be at least 1Ki");
         return Status::Ok();
       }},
      {"threads", [](auto& n, auto& k, auto& c) { return ReadInt(n, k, 1, 256, c.threads); }},
      {"bindThreads", [](auto& n, auto& k, auto& c) { return ReadInt(n, k, 1, 1024, c.bind_threads); }},
      {"perDeviceMetrics", [](auto& n, auto& k, auto& c) { return ReadBool(n, k, c.per_device_metrics); }},
      {"maxDevicesPerContainer",
       [](auto& n, auto& k, auto& c) {
         return ReadInt(n, k, 1, model::kMaxDevicesPerNode, c.max_devices_per_container);
       }},
      {"workload", [&workload](auto& n, auto& k, auto& c) { return ReadSection(n, k, workload, c); }},
      {"tls", [&tls](auto& n, auto& k, auto& c) { return ReadSection(n, k, tls, c); }},
      {"defragmentation",
       [&defragmentation](auto& n, auto& k, auto& c) { return ReadSection(n, k, defragmentation, c); }},
      {"rightsizing", [&rightsizing](auto& n, auto& k, auto& c) { return ReadSection(n, k, rightsizing, c); }},
  };
  GPUPACK_RETURN_IF_ERROR(ReadSection(doc, "", top, config));
  if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
    return BadKey("tls", "certFile and keyFile must be given together");
  }
  return config;
}

placement::DecisionOptions DecisionOptionsOf(const ExtenderConfig& config) {
  placement::DecisionOptions options;
  options.device_mib = config.fgd_score_unit_mib;
  options.fgd_levels = config.fgd_score_levels;
  options.rank_by_completion = config.rank_by_completion;
  options.rank_by_fill = config.rank_by_fill;
  options.reserve_scarce_capacity = config.reserve_scarce_capacity;
  options.fixed_tie_break = config.fixed_tie_break;
  options.half_life_pods = config.workload_half_life_pods;
  options.prior_pods = config.workload_prior_pods;
  options.whole_gpu_prior_pods = config.workload_whole_gpu_prior_pods;
  options.coverage = config.workload_coverage;
  options.refresh_pods = config.workload_refresh_pods;
  return options;
}

placement::PlacementOptions PlacementOptionsOf(const ExtenderConfig& config) {
  placement::PlacementOptions options;
  options.reserve_mib_per_device = config.reserve_per_device_mib;
  options.ceiling_overcommit_pct = config.ceiling_overcommit_pct;
  options.process_overhead = config.process_overhead;
  options.process_overhead_mib = config.process_overhead_mib;
  return options;
}

Status CheckConfigAgainstCluster(const ExtenderConfig& config, const std::vector<model::Node>& nodes) {
  if (config.reserve_per_device_mib <= 0) return Status::Ok();
  for (const model::Node& node : nodes) {
    for (const model::Device& device : node.devices) {
      if (device.capacity_mib > config.reserve_per_device_mib) continue;
      return BadKey("reservePerDevice", std::to_string(config.reserve_per_device_mib) +
                                            " MiB is not less than the memory of device " +
                                            std::to_string(device.index) + " (" + device.model + ", " +
                                            std::to_string(device.capacity_mib) + " MiB) of node " + node.name +
                                            ": nothing would ever fit on it");
    }
  }
  return Status::Ok();
}

StatusOr<ExtenderConfig> LoadExtenderConfig(const std::string& path) {
  GPUPACK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path, "config file"));
  StatusOr<ExtenderConfig> config = ParseExtenderConfig(text);
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

}  // namespace gpupack::extender
