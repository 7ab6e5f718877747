#include "webhook/config.h"

#include <yaml-cpp/yaml.h>

#include "common/file.h"
#include "common/input_check.h"
#include "common/quantity.h"

namespace gpupack::webhook {
namespace {

constexpr std::string_view kKnownKeys[] = {
    "schedulerName",   "allowCustomSchedulerName", "failurePolicy", "userDeviceEnv",    "maxDevicesPerContainer",
    "maxDeviceMemory", "certCheckIntervalSeconds", "workerThreads", "wholeDeviceCharge"};

std::string KeyList() {
  std::string out;
  for (std::string_view key : kKnownKeys) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

// Reads a scalar as T; yaml-cpp throws on a mismatch, which we turn into a message naming `key`.
template <typename T>
StatusOr<T> Scalar(const YAML::Node& node, std::string_view key, std::string_view expected) {
  if (!node.IsScalar()) {
    return Status::InvalidArgument("config key " + std::string(key) + ": expected " + std::string(expected));
  }
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument("config key " + std::string(key) + ": expected " + std::string(expected) +
                                   ", got \"" + node.Scalar() + "\"");
  }
}

StatusOr<int> IntInRange(const YAML::Node& node, std::string_view key, int lo, int hi) {
  GPUPACK_ASSIGN_OR_RETURN(int value, Scalar<int>(node, key, "an integer"));
  if (value < lo || value > hi) {
    return Status::InvalidArgument("config key " + std::string(key) + ": " + std::to_string(value) + " is outside [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return value;
}

Status ApplyKey(const std::string& key, const YAML::Node& value, Config& config) {
  if (key == "schedulerName") {
    GPUPACK_ASSIGN_OR_RETURN(config.scheduler_name, Scalar<std::string>(value, key, "a string"));
    // The name kube-scheduler's profile must carry: a DNS-1123 subdomain, as every object name.
    GPUPACK_RETURN_IF_ERROR(CheckDns1123Subdomain(config.scheduler_name, "config key schedulerName"));
  } else if (key == "allowCustomSchedulerName") {
    GPUPACK_ASSIGN_OR_RETURN(config.allow_custom_scheduler_name, Scalar<bool>(value, key, "true or false"));
  } else if (key == "failurePolicy") {
    GPUPACK_ASSIGN_OR_RETURN(std::string policy, Scalar<std::string>(value, key, "Fail or Ignore"));
    if (policy == "Fail") {
      config.failure_policy = FailurePolicy::kFail;
    } else if (policy == "Ignore") {
      config.failure_policy = FailurePolicy::kIgnore;
    } else {
      return Status::InvalidArgument("config key failurePolicy: expected Fail or Ignore, got \"" + policy + "\"");
    }
  } else if (key == "userDeviceEnv") {
    GPUPACK_ASSIGN_OR_RETURN(std::string policy, Scalar<std::string>(value, key, "Refuse or Strip"));
    if (policy == "Refuse") {
      config.user_device_env = UserDeviceEnvPolicy::kRefuse;
    } else if (policy == "Strip") {
      config.user_device_env = UserDeviceEnvPolicy::kStrip;
    } else {
      return Status::InvalidArgument("config key userDeviceEnv: expected Refuse or Strip, got \"" + policy + "\"");
    }
  } else if (key == "maxDevicesPerContainer") {
    GPUPACK_ASSIGN_OR_RETURN(config.max_devices_per_container, IntInRange(value, key, 1, 1024));
  } else if (key == "maxDeviceMemory") {
    GPUPACK_ASSIGN_OR_RETURN(std::string text, Scalar<std::string>(value, key, "a quantity such as 80Gi"));
    GPUPACK_ASSIGN_OR_RETURN(config.max_device_memory_mib, ParseMemoryMiBCeil(text, "config key maxDeviceMemory"));
  } else if (key == "wholeDeviceCharge") {
    GPUPACK_ASSIGN_OR_RETURN(std::string text, Scalar<std::string>(value, key, "a quantity such as 16Gi"));
    GPUPACK_ASSIGN_OR_RETURN(config.whole_device_charge_mib, ParseMemoryMiBCeil(text, "config key wholeDeviceCharge"));
  } else if (key == "certCheckIntervalSeconds") {
    GPUPACK_ASSIGN_OR_RETURN(int seconds, IntInRange(value, key, 0, 86400));
    config.cert_check_interval = std::chrono::seconds(seconds);
  } else if (key == "workerThreads") {
    GPUPACK_ASSIGN_OR_RETURN(config.worker_threads, IntInRange(value, key, 1, 1024));
  } else {
    return Status::InvalidArgument("unknown config key \"" + key + "\" (known: " + KeyList() + ")");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Config> ParseConfig(std::string_view yaml_text) {
  GPUPACK_ASSIGN_OR_RETURN(YAML::Node root, ParseYamlStrict(yaml_text));
  Config config;
  if (root.IsNull()) return config;  // an empty file means all defaults
  if (!root.IsMap()) return Status::InvalidArgument("config must be a YAML mapping of keys");
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) return Status::InvalidArgument("config keys must be strings");
    const Status applied = ApplyKey(entry.first.Scalar(), entry.second, config);
    if (!applied.ok()) return Status::InvalidArgument(YamlLine(entry.first) + applied.message());
  }
  return config;
}

StatusOr<Config> LoadConfig(const std::string& path) {
  GPUPACK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path, "config file"));
  StatusOr<Config> config = ParseConfig(text);
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

std::string_view FailurePolicyName(FailurePolicy policy) { return policy == FailurePolicy::kFail ? "Fail" : "Ignore"; }

std::string_view UserDeviceEnvPolicyName(UserDeviceEnvPolicy policy) {
  return policy == UserDeviceEnvPolicy::kRefuse ? "Refuse" : "Strip";
}

}  // namespace gpupack::webhook
