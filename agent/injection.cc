#include "agent/injection.h"

#include <algorithm>

#include "api/allocation.h"
#include "api/annotations.h"
#include "common/quantity.h"

namespace gpupack::agent {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

std::string_view NameOf(std::string_view entry) { return entry.substr(0, entry.find('=')); }

std::string_view ValueOf(std::string_view entry) {
  const size_t eq = entry.find('=');
  return eq == std::string_view::npos ? std::string_view() : entry.substr(eq + 1);
}

// The env the bind's annotations carry for `c`, in api::kAllContainerEnvKeys order: derived from
// the allocation as the bind derives it, with the soft limit the bind wrote.
Env AllocatedEnv(const api::Allocation& allocation, const api::ContainerAllocation& c,
                 const std::map<std::string, std::string>& annotations) {
  api::Allocation own;
  own.containers = {c};
  own.mps_client_priority = allocation.mps_client_priority;
  std::map<std::string, std::string> derived = api::AllocationAnnotations(own);
  const std::string request_key = api::ContainerAnnotationKey(c.init, c.index, api::ContainerEnvKey::kMemoryRequestMiB);
  model::MiB written = 0;
  if (auto it = annotations.find(request_key); it != annotations.end()) {
    StatusOr<int64_t> mib = ParseCount(it->second, request_key);
    if (mib.ok()) written = *mib;
  }
  derived[request_key] = std::to_string(api::SoftLimitMiB(written, c.devices.front()));
  Env env;
  for (api::ContainerEnvKey key : api::kAllContainerEnvKeys) {
    env.emplace_back(api::ContainerEnvName(key), derived.at(api::ContainerAnnotationKey(c.init, c.index, key)));
  }
  return env;
}

// True when every entry of `name` in `env` gives no device (api::GivesNoDevice), and there is one.
bool OnlyNoDevice(std::span<const std::string> env, std::string_view name) {
  bool seen = false;
  for (std::string_view entry : env) {
    if (NameOf(entry) != name) continue;
    if (!api::GivesNoDevice(name, ValueOf(entry))) return false;
    seen = true;
  }
  return seen;
}

}  // namespace

StatusOr<EnvAdjustment> DecideContainerEnv(const PodOrigin& origin,
                                           const std::map<std::string, std::string>& annotations,
                                           std::string_view container, std::span<const std::string> env) {
  EnvAdjustment out;
  const std::vector<std::string>& exempt = origin.exempt_namespaces;
  out.exempt = std::find(exempt.begin(), exempt.end(), origin.pod_namespace) != exempt.end();
  if (out.exempt) return out;
  std::string devices;  // the allocated container's UUIDs, empty for any other
  if (auto it = annotations.find(std::string(api::kAnnotationAllocation)); it != annotations.end()) {
    StatusOr<api::Allocation> allocation = api::DecodeAllocation(it->second);
    if (!allocation.ok()) {
      return Status::InvalidArgument(std::string(api::kAnnotationAllocation) + ": " + allocation.status().message());
    }
    for (const api::ContainerAllocation& c : allocation->containers) {
      if (c.name != container || c.devices.empty()) continue;
      out.set = AllocatedEnv(*allocation, c, annotations);
      devices = out.set.front().second;  // NVIDIA_VISIBLE_DEVICES, first in kAllContainerEnvKeys
      if (origin.mps_namespaces) {
        out.mps_namespace_percentage = api::ActiveThreadPercentage(c);
      } else if (!origin.mps_pipe_directory.empty()) {
        out.set.emplace_back(api::kEnvCudaMpsPipeDirectory, origin.mps_pipe_directory);
        out.mounts.push_back(origin.mps_pipe_directory);
      }
    }
  }
  if (devices.empty() && !OnlyNoDevice(env, api::kEnvNvidiaVisibleDevices)) {
    out.set.emplace_back(api::kEnvNvidiaVisibleDevices, "void");
  }
  auto decided = [&](std::string_view name) {
    return std::any_of(out.set.begin(), out.set.end(), [&](const auto& kv) { return kv.first == name; });
  };
  for (std::string_view entry : env) {
    const std::string_view name = NameOf(entry);
    if (!api::IsDeviceEnvName(name) || decided(name) || OnlyNoDevice(env, name)) continue;
    out.set.emplace_back(name, name == api::kEnvCudaVisibleDevices ? devices : "");
  }
  return out;
}

void JoinMpsNamespace(EnvAdjustment& adjustment, std::string_view pipe_directory) {
  auto& set = adjustment.set;
  auto it =
      std::find_if(set.begin(), set.end(), [](const auto& kv) { return kv.first == api::kEnvCudaMpsPipeDirectory; });
  if (it != set.end()) {
    it->second = pipe_directory;
  } else {
    const size_t allocated = std::min(set.size(), std::size(api::kAllContainerEnvKeys));
    set.emplace(set.begin() + allocated, api::kEnvCudaMpsPipeDirectory, pipe_directory);
  }
  adjustment.mounts.emplace_back(pipe_directory);
}

}  // namespace gpupack::agent
