// Internal to placement/ (not for callers outside it): the work behind Policy::Evaluate and
// Score. The node-level checks first (stale, devices, spread scope, CPU and memory), then each
// container's device picks in turn (init containers reuse the pod's devices where they can),
// each pick the device the pod's device policy prices lowest, and last the cost of the whole
// placement under the pod's node policy.
#pragma once

#include <cstdint>

#include "placement/completion.h"
#include "placement/fgd_cost.h"
#include "placement/policy.h"

namespace gpupack::placement {

// What one evaluation reads: the node and its summary, the pod, and the policy's parts.
struct EvaluationInputs {
  const Node& node;
  const NodeSummary& sum;  // REQUIRES: the node's current summary under the same policy
  const PreparedPod& pod;
  const Columns& cols;
  const PlacementOptions& options;
  const CompletionValue& completion;
  PolicyKind policy_kind;  // the cluster's; the pod may override it for devices or nodes
};

// The verdict and costs of the pod on the node into `out` (REQUIRES: default-constructed), and
// with a `placement` the device choice that produced them (empty unless the pod fits).
void EvaluatePlacement(const EvaluationInputs& in, NodeScore& out, Placement* placement);

}  // namespace gpupack::placement
