// Between the extender's decision and its wire record: a placement (device slots on a model node)
// becomes the allocation written on the Binding (api/allocation.h), and an allocation read back
// from a pod becomes the ledger shares it holds on the node's devices, which is how a restarted
// extender rebuilds its ledger.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/allocation.h"
#include "model/model.h"

namespace gpupack::translate {

// The allocation a placement describes on `node` (slots resolved to UUIDs).
// REQUIRES: every slot in `placement` indexes node.devices.
api::Allocation AllocationFromPlacement(const model::Node& node, const model::Placement& placement);

// The ledger entries an allocation puts on the node's devices: for each device UUID, the shares.
// Used to rebuild the ledger from pods listed from the API server. Containers within_pod add none.
// A device without "computePct" (an allocation from before compute shares) reserves its memory's
// share (ProportionalComputePct) of that device's capacity on `node`, or none without the node.
std::vector<std::pair<std::string, model::DeviceShare>> AllocationShares(const api::Allocation& allocation,
                                                                         std::string_view pod_uid,
                                                                         std::string_view pod_key,
                                                                         const model::Node* node = nullptr);

}  // namespace gpupack::translate
