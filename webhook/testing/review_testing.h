// Test helpers for the webhook's admission logic: the captured reviews of webhook/testdata, pods
// built in the test, and a review asked of a Mutator with its answer decoded (the JSONPatch too).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "webhook/mutator.h"

namespace gpupack::webhook::testing {

// The uid of the captured reviews' request, which every answer must repeat.
inline constexpr const char* kCapturedUid = "3f5c2f6e-9b1d-4a8e-a7f0-5b2d8c1e4a90";

// A review of webhook/testdata by file name.
nlohmann::json LoadReview(const std::string& name);
// The captured Deployment pod's review. Its server container sets NVIDIA_GPU_MEMORY_LIMIT and
// NVIDIA_VISIBLE_DEVICES itself, which the default config refuses; the admissible one is the same
// review without those two entries.
nlohmann::json CapturedDeploymentReview();
nlohmann::json AdmissibleDeploymentReview();
// The captured review with `pod` as its object.
nlohmann::json ReviewOf(nlohmann::json pod);

// A container asking for `memory` of gpupack.io/gpu-memory; a pod "ml/p" of `containers`.
nlohmann::json GpuContainer(const std::string& name, const std::string& memory);
nlohmann::json PodWith(nlohmann::json containers);

Config StripConfig();  // the defaults, with user device env stripped instead of refused

struct Answer {
  ReviewResult result;
  nlohmann::json response;  // the "response" object of the AdmissionReview answered
  nlohmann::json patch;     // the decoded JSONPatch, or null
};
// Asks `mutator` to review `review`, expecting a well-formed AdmissionReview answer.
Answer Ask(const Mutator& mutator, const nlohmann::json& review);
// The review's pod with the answer's patch applied.
nlohmann::json PatchedPod(const nlohmann::json& review, const Answer& answer);

struct Denial {
  int code;
  std::string message;
};
// Reviews `pod` (in the captured review), expecting a denial.
Denial DenialOf(const Mutator& mutator, const nlohmann::json& pod);

}  // namespace gpupack::webhook::testing
