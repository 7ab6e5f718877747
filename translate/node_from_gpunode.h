// From the agent's report (a GPUNode object, api/gpunode.h) to the model's node: which devices
// the extender may place on, how hard their isolation is, and whether the report is fresh enough
// to place on at all. The staleness and isolation rules are decisions, so they live here rather
// than in the wire types.
#pragma once

#include <chrono>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/status.h"
#include "model/model.h"

namespace gpupack::translate {

// The model's view of a GPUNode object: one model::Device per whole GPU that is not in MIG
// mode and one per MIG instance (index = the parent GPU's index, model = the parent's model).
// hard_isolation: MIG instances always; whole GPUs when enforcement.mode is cgroup-dmem or
// cgroup-misc, unless the condition MemoryEnforced is False (memory_unenforced_reason then says why).
// hard_compute_isolation: whole GPUs whose computeEnforcement is mps-namespace (a MIG instance taken under hard
// isolation is taken whole, compute and all). A node whose heartbeat is missing or older than `heartbeat_ttl` at
// clock.Now() gets stale_reason "GPUNode heartbeat 312s old > TTL 120s" (or "GPUNode has no heartbeat").
// InvalidArgument for a missing metadata.name or a malformed status.
StatusOr<model::Node> NodeFromGpuNode(const nlohmann::json& gpunode, std::chrono::seconds heartbeat_ttl,
                                      const Clock& clock);

}  // namespace gpupack::translate
