// The device ledger of a node: the shares placements add and pods' removal takes away, and the
// invariant no change may break.
#pragma once

#include <string_view>

#include "common/status.h"
#include "placement/node_summary.h"
#include "placement/vocabulary.h"

namespace gpupack::placement {

// Applies a placement to a node (adds the shares and the pod's CPU / memory requests). Returns FailedPrecondition,
// leaving the node unchanged, if it no longer fits (a concurrent change): the ledger invariants Σ caps ≤ capacity
// and Σ compute shares ≤ kDeviceComputePct are never broken.
Status ApplyPlacement(Node& node, const PodRequest& pod, const Placement& placement, const PlacementOptions& options);
// Removes every share of `pod_uid` from the node; returns how many were removed. The node's
// requested CPU / memory are the caller's to adjust (it knows the pod's requests).
int RemovePod(Node& node, std::string_view pod_uid);
// Σ caps ≤ capacity and Σ compute shares ≤ kDeviceComputePct on every device, and no device both
// exclusive and shared.
Status CheckLedgerInvariant(const Node& node);

}  // namespace gpupack::placement
