// Which entries of one container's env a pod may keep. GPU devices and caps come only from the
// scheduler's allocation, so a device or cap variable (api::IsDeviceEnvName) that the pod's spec
// sets itself is the pod's to lose, in every container, whatever it asks for: a literal value, a
// $(VAR) reference, or any valueFrom (downward API, ConfigMap, Secret). Two kinds of entry under
// those names are not the pod's own choice of device and stay:
//   - a value that gives no device (api::GivesNoDevice: NVIDIA_VISIBLE_DEVICES "", "void", "none");
//   - exactly an entry of the env gpupack itself gives the container (`own`), as a pod object
//     that already went through the webhook carries it.
// envFrom cannot be judged here: its names are in ConfigMaps and Secrets (docs/security.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpupack::webhook {

struct ContainerEnvReview {
  // The env the container is admitted with: `own` first (so later entries can say $(NAME)), then
  // the pod's entries that stay, in their order. An entry of a name `own` sets is dropped even
  // when it gives no device, since the later of two entries wins in Kubernetes.
  nlohmann::json env;
  // The device or cap variables the pod set itself, in env order (a name once per entry).
  std::vector<std::string> refused;
};

// `env`: the container's env (a JSON array; anything else counts as empty). `own`: the env
// gpupack gives this container, an empty array for a container without gpupack resources.
ContainerEnvReview ReviewContainerEnv(const nlohmann::json& env, const nlohmann::json& own);

}  // namespace gpupack::webhook
