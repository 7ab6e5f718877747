// Replays several policies on one prepared cluster and workload, for gpupack-sim's table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/replay.h"

namespace gpupack::sim {

// Each of `names` in order over `seeds`: "extender" through the running extender at
// `extender_url` (when that is non-empty) with `extender_weight`, any other name in process
// (MakePolicy). Fails with MakePolicy's message for an unknown name, or "NAME: why" when a replay
// fails.
StatusOr<std::vector<PolicyRun>> RunPolicies(const Replayer& replayer, const std::vector<std::string>& names,
                                             const std::vector<uint64_t>& seeds, const std::string& extender_url,
                                             int extender_weight);

}  // namespace gpupack::sim
