// Decodes what a pod asks of gpupack from a core/v1 Pod object (as kube-scheduler sends it in
// ExtenderArgs.Pod, as the webhook sees it in an AdmissionReview, as the informer lists it).
#pragma once

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "model/model.h"

namespace gpupack::translate {

// True when any container (app or init) names a gpupack.io/ resource in its resources.limits or
// resources.requests, a known one (api::kKnownResources) or not (ParsePodRequest then refuses
// it). Never fails: a malformed pod simply does not ask.
bool PodAsksForGpupack(const nlohmann::json& pod);

// Parses the pod's gpupack request (docs/annotations.md) and its effective CPU / host-memory
// requests (Kubernetes rule: max(largest init container, sum of app containers) + overhead).
// Returns InvalidArgument with a message naming the container and field for: unparseable or
// non-positive quantities, gpupack.io/gpu of 0 or above `max_devices_per_container`, a limit and a
// request that disagree, gpupack.io/gpu-memory beside nvidia.com/gpu, a gpupack.io/ resource not in
// api::kKnownResources, and a gpupack.io/ annotation that is no row of api::PodAnnotations() (the
// message lists the user rows) or whose row refuses its value (e.g. mig-profile with device-kind
// gpu). What gpupack's components write passes: a bound pod parses again. A pod with no gpupack
// request yields a PodRequest whose containers is empty. Wrong JSON types anywhere are errors, not
// crashes.
StatusOr<model::PodRequest> ParsePodRequest(const nlohmann::json& pod, int max_devices_per_container = 16);

}  // namespace gpupack::translate
