// The webhook's configuration: which scheduler gpupack pods go to, what to do on an internal
// error and with device env a pod sets itself, and the limits it validates requests against. Loaded once at start-up
// from YAML (docs/webhook.md lists every key). Plain value; concurrent const access is safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace gpupack::webhook {

// What the webhook answers when it cannot process a review (a bug, or a pod object it cannot
// read). Mirrors the failurePolicy of the MutatingWebhookConfiguration, so one chart value sets
// both: kFail denies the pod (fail closed), kIgnore admits it without a patch (fail open).
enum class FailurePolicy { kFail, kIgnore };

// What the webhook does with GPU device and cap env (api::IsDeviceEnvName) that a pod's spec sets
// itself, in any container: kRefuse denies the pod naming the container and the variable; kStrip
// admits it with those entries removed (and a warning saying so). Devices and caps come only from
// the scheduler's allocation either way.
enum class UserDeviceEnvPolicy { kRefuse, kStrip };

struct Config {
  // spec.schedulerName given to every pod that asks for a gpupack resource.
  std::string scheduler_name = "gpupack-scheduler";
  // When true, a pod that names a scheduler other than "default-scheduler" keeps it (e.g. a
  // second gpupack profile); when false every gpupack pod is routed to `scheduler_name`.
  bool allow_custom_scheduler_name = false;
  FailurePolicy failure_policy = FailurePolicy::kFail;
  UserDeviceEnvPolicy user_device_env = UserDeviceEnvPolicy::kRefuse;
  // Largest gpupack.io/gpu a container may ask for.
  int max_devices_per_container = 16;
  // Largest per-device memory (MiB) any device in the cluster has; 0 = unknown, not checked.
  int64_t max_device_memory_mib = 0;
  // > 0: a container asking for whole devices (gpupack.io/gpu without gpu-memory) is given a
  // gpupack.io/gpu-memory request and limit of devices × this (MiB), and the pod the annotation
  // api::kAnnotationWholeDeviceCharge, so a ResourceQuota on requests.gpupack.io/gpu-memory counts
  // it (docs/annotations.md, "Quota"). At most the smallest device any node has, or kubelet's
  // admission would find the node's advertised gpupack.io/gpu-memory short. 0 = not charged.
  int64_t whole_device_charge_mib = 0;
  // How often a TLS handshake may look at the certificate files for a rotation.
  std::chrono::seconds cert_check_interval{10};
  // Threads that run reviews; connections do not hold one (server/http_server.h).
  int worker_threads = 4;
};

// Parses the YAML text of a config file. Every key is optional; unknown keys, wrong types and
// out-of-range values are InvalidArgument naming the key.
StatusOr<Config> ParseConfig(std::string_view yaml_text);

// Reads and parses `path`; NotFound when the file cannot be read.
StatusOr<Config> LoadConfig(const std::string& path);

std::string_view FailurePolicyName(FailurePolicy policy);
std::string_view UserDeviceEnvPolicyName(UserDeviceEnvPolicy policy);

}  // namespace gpupack::webhook
