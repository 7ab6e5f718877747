// The placement library is arithmetic on the model's values (model/model.h): these declarations
// bring the model's names into namespace placement so the engine's code and its tests use them
// unqualified. Every placement header that speaks of devices, nodes or pods includes this one
// instead of model/model.h.
#pragma once

#include "model/model.h"

namespace gpupack::placement {

using model::ContainerPlacement;
using model::ContainerRequest;
using model::Device;
using model::DeviceKind;
using model::DeviceKindPreference;
using model::DeviceShare;
using model::GpuModelMatches;
using model::kMaxDevicesPerNode;
using model::MiB;
using model::Node;
using model::Placement;
using model::PodRequest;
using model::PolicyKind;

}  // namespace gpupack::placement
