// Node-side injection (docs/security.md "Node-side injection"): the GPU environment a container is
// created with, decided on the node from its pod's annotations when the runtime creates it, whatever
// the pod spec, an envFrom ConfigMap, the image or a skipped webhook put into its env.
//
// The NRI plugin (agent/nri/) hands this function what the runtime hands it at CreateContainer:
// the pod's annotations (kubelet copies them onto the sandbox), the container's Kubernetes name
// (containerd and CRI-O take it from the container's CRI metadata; unique among a pod's app, init
// and ephemeral containers) and its final env, so a restarted plugin decides exactly as before and
// keeps no state. This is the one place that decides which env a container
// gets; the plugin only applies it.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace gpupack::agent {

struct EnvAdjustment {
  // Variables to set, each replacing a variable of that name the env already has: first the
  // decided env, then every other device or cap variable (api::IsDeviceEnvName) of the env, in env
  // order and each once, set to a value that gives no device. Set rather than removed: NRI's
  // runtime side (containerd/nri pkg/adaptation, v0.12) hands a plugin's removal of a variable the
  // container already has to the plugins after it but not to the runtime, so only a set reaches
  // the container (agent/nri/plugin_test.go shows it).
  std::vector<std::pair<std::string, std::string>> set;
  // Host directories the runtime bind-mounts into the container at the same path: the node's MPS
  // pipe directory for a container with devices, so it reaches the MPS server without a hostPath
  // in the user's pod spec (PodSecurity baseline forbids one).
  std::vector<std::string> mounts;
  // The pod's namespace is exempt (PodOrigin): nothing is set.
  bool exempt = false;
  // With PodOrigin::mps_namespaces, an allocated container's MPS namespace ceiling (1..100, its
  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE); 0 for any other. The caller provisions the namespace
  // (agent/mps_namespace.h) and hands its pipe directory to JoinMpsNamespace; until then the
  // container has no pipe directory and must not be created.
  int mps_namespace_percentage = 0;

  bool operator==(const EnvAdjustment&) const = default;
};

// Where a pod comes from, and which namespaces keep the env their pods were created with.
struct PodOrigin {
  std::string pod_namespace;
  // GPU infrastructure that takes every GPU itself (the gpupack agent, NVIDIA's device plugin,
  // DCGM exporter) runs here, as the webhook's exempt namespaces (docs/security.md): their
  // containers are left as they are. A namespace label cannot reach the node, so it is a list.
  std::vector<std::string> exempt_namespaces;
  // The node's MPS control daemon's pipe directory (gpupack-nri --mps-pipe-directory; "" = no MPS):
  // an allocated container gets CUDA_MPS_PIPE_DIRECTORY = it and the directory mounted, so its
  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE reaches the server.
  std::string mps_pipe_directory;
  // MPS v3 (gpupack-nri --mps-server): an allocated container joins a namespace of its own,
  // capped at its share, instead of the server's pipe directory (EnvAdjustment::
  // mps_namespace_percentage), so its own setting can only lower the share.
  bool mps_namespaces = false;
};

// The adjustment for the container named `container` of a pod from `origin` with `annotations`,
// whose env is `env` ("NAME=value" entries, as the OCI spec holds them):
//   - a pod of an exempt namespace: nothing set;
//   - a container gpupack.io/allocation gives devices gets exactly the env the bind's annotations
//     carry for it, in api::kAllContainerEnvKeys order (api::AllocationAnnotations: the device
//     UUIDs, the per-device cap, the MPS memory limit string, the MPS active thread percentage from
//     the devices' computePct, the MPS client priority), with the soft limit the bind wrote
//     (api::SoftLimitMiB of its …-memory-request-mib annotation, the cap when that is missing or
//     out of range), and with origin.mps_pipe_directory set, CUDA_MPS_PIPE_DIRECTORY = it and the
//     directory in `mounts`, or with origin.mps_namespaces instead mps_namespace_percentage;
//   - any other container gets NVIDIA_VISIBLE_DEVICES=void (the toolkit then adds no device and
//     behaves as plain runc) unless every value it has gives no device (api::GivesNoDevice: "",
//     "void", "none"), which then stays;
//   - every other device or cap variable of the env is overridden: CUDA_VISIBLE_DEVICES of an
//     allocated container with its device UUIDs (what it sees anyway), any other with "" (for
//     CUDA_VISIBLE_DEVICES: no device). One whose every value gives no device stays
//     (CUDA_VISIBLE_DEVICES=-1 hides the GPUs a privileged container sees).
// InvalidArgument, naming the annotation, when gpupack.io/allocation is present but does not
// decode: the runtime then fails the container's creation with that message rather than start it
// on a decision nobody can read.
StatusOr<EnvAdjustment> DecideContainerEnv(const PodOrigin& origin,
                                           const std::map<std::string, std::string>& annotations,
                                           std::string_view container, std::span<const std::string> env);

// Gives an allocated container its MPS namespace: CUDA_MPS_PIPE_DIRECTORY = `pipe_directory`
// (replacing the override DecideContainerEnv set for a pipe directory the env had, else right
// after the allocation's variables) and the directory in `mounts`, the only one of the server's
// it sees.
void JoinMpsNamespace(EnvAdjustment& adjustment, std::string_view pipe_directory);

}  // namespace gpupack::agent
