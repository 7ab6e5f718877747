// The doctor across a cluster (gpupack-agent --doctor --cluster, the chart's `helm test`): every
// agent pod runs the node doctor on its node each pass and reports the verdicts as its GPUNode's
// conditions (agent/doctor.h); this reads them back for every node that runs an agent and says
// which nodes enforce what, and which did not report at all.
//
// Thread safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpupack::agent {

struct ClusterDoctorResult {
  std::vector<std::string> lines;  // one per agent node: "<ok|fail> <node>: …"
  bool ok = true;                  // no line is a failure
};

// `agent_pods`: the agent DaemonSet's pods (their spec.nodeName); `gpunodes`: every GPUNode. A node
// fails when its GPUNode is missing or malformed, or carries no doctor conditions (an agent older
// than the doctor); with `require_memory_enforced`, also when its MemoryEnforced is False. A pod
// not yet scheduled is skipped.
ClusterDoctorResult ClusterDoctor(const std::vector<nlohmann::json>& agent_pods,
                                  const std::vector<nlohmann::json>& gpunodes, bool require_memory_enforced);

}  // namespace gpupack::agent
