// The cluster file (docs/cluster-file.md): YAML describing nodes and their GPUs, used by the
// standalone extender, the simulator and the agent's file backend.
//
//   nodes:
//     - name: gpu-a1
//       cpu: "64"
//       memory: 512Gi
//       labels: {zone: a}
//       gpus:
//         - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 4, used: 2Gi}
//         - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, mig: [{profile: 3g.40gb, memory: 40Gi}]}
//
// A GPU entry may carry `uuid` (only with count 1), `used`, `healthy`, and `hardIsolation`;
// a MIG entry may carry `uuid`, `used`, `gpuInstanceId`, `placement: {start, size}`. Missing UUIDs
// are generated deterministically from the node name and index ("GPU-<hash>"), so repeated loads
// agree. Device indexes count GPUs in file order per node.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/status.h"
#include "model/model.h"

namespace gpupack::translate {

// Errors name the file position ("nodes[3].gpus[1].memory: invalid quantity \"80GB\"..."),
// duplicate node names, duplicate UUIDs, unknown keys and missing required keys.
StatusOr<std::vector<model::Node>> ParseClusterYaml(std::string_view yaml_text);
StatusOr<std::vector<model::Node>> LoadClusterFile(const std::string& path);
// One node entry (the agent's file backend). `where` prefixes error messages.
StatusOr<model::Node> ParseNodeEntry(const YAML::Node& entry, const std::string& where);

// Deterministic UUIDs for devices the file does not name.
std::string GeneratedGpuUuid(std::string_view node, int index);
std::string GeneratedMigUuid(std::string_view node, int gpu_index, int instance);

}  // namespace gpupack::translate
