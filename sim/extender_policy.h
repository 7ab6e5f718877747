// The simulator's HTTP mode: each pod goes through a running gpupack-extender exactly as
// kube-scheduler uses it (nodeCacheCapable: true):
//   1. kube-scheduler's own filter: NodeResourcesFit on CPU and host memory;
//   2. POST {url}/filter with the Pod JSON (resources.limits gpupack.io/gpu-memory, gpupack.io/gpu,
//      annotations for model/kind/profile/isolation) and the surviving NodeNames;
//   3. POST {url}/prioritize; total = score × weight × 10 (the profile's own score plugins are
//      taken as disabled, as in the FGD paper's runs); the highest total wins, ties at random;
//   4. POST {url}/bind.
// The extender picks the devices at bind and does not return them; the simulator mirrors the
// choice with the same decision module (placement::Decision, default options) and placement core on
// the bound node, fed the same binds. If the extender is configured otherwise the mirrored device
// may differ; node choice, which dominates packing, is the extender's.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "sim/policy.h"

namespace gpupack::sim {

// `url` is e.g. "http://127.0.0.1:8888" or "http://host:port/prefix".
StatusOr<std::unique_ptr<SimPolicy>> MakeExtenderPolicy(const std::string& url, int weight);

// The v1.Pod kube-scheduler would send for `request`, named `name`: its annotations are what each
// row of api::PodAnnotations() writes for it, so the extender reads back the same request.
nlohmann::json PodJson(const model::PodRequest& request, const std::string& name);

}  // namespace gpupack::sim
