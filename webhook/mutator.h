// The admission logic of gpupack-webhook: AdmissionReview (admission.k8s.io/v1) in, AdmissionReview
// out. No sockets; the HTTPS routes (webhook/routes.h) only move bytes and count outcomes.
//
// For a pod CREATE that asks for a gpupack resource in any container (translate::PodAsksForGpupack), the
// review is validated (translate::ParsePodRequest plus the webhook-only checks below) and answered with
// a JSONPatch that
//   - sets spec.schedulerName to the configured gpupack scheduler (unless the pod names another
//     non-default scheduler and the config allows custom names), and
//   - gives every gpupack container (app and init) the env of api::kAllContainerEnvKeys, each read
//     through the downward API from exactly api::ContainerAnnotationKey(init, index, key), the
//     annotations the extender writes on the Binding. These entries go first in the env list
//     (so the user's later entries can reference them as $(NAME)); user entries with the same
//     names are removed, so a workload cannot raise its own cap; other entries keep their order.
// Every other review (other resources, operations, pods without gpupack resources) is allowed
// unchanged.
//
// Thread safety: Review is const and keeps no state; call it from any number of threads.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "webhook/config.h"

namespace gpupack::webhook {

// The metric label of one answered review.
enum class Outcome {
  kPatched,  // allowed with a patch
  kSkipped,  // allowed unchanged: nothing for gpupack to do
  kDenied,   // refused: the pod's gpupack request is invalid or not allowed
  kError,    // the review could not be processed (failure policy applied, or a malformed body)
};
std::string_view OutcomeName(Outcome outcome);

struct ReviewResult {
  Outcome outcome = Outcome::kError;
  // 200 for every answer the API server can act on; 400 when the body is not an
  // admission.k8s.io/v1 AdmissionReview with a request.uid at all.
  int http_status = 200;
  std::string body;  // an AdmissionReview JSON object, always well formed
};

class Mutator {
 public:
  explicit Mutator(Config config);

  // Answers one AdmissionReview request body. Never throws and never crashes on bad input.
  // Denials carry status.code 400 (invalid request: the message names the container and field)
  // or 403 (the pod tries to set what only the scheduler may: reserved annotations, nodeName).
  // Internal failures follow config.failure_policy: kFail denies with code 500, kIgnore allows
  // without a patch and with a warning.
  ReviewResult Review(std::string_view body) const;

  // The JSONPatch operations for one pod object (a JSON array, empty when nothing changes).
  // InvalidArgument or PermissionDenied, with the message a denial shows, when the pod's gpupack
  // request is refused. REQUIRES: translate::PodAsksForGpupack(pod).
  StatusOr<nlohmann::json> PatchFor(const nlohmann::json& pod) const;

 private:
  Status CheckWebhookRules(const nlohmann::json& pod) const;
  nlohmann::json SchedulerNamePatch(const nlohmann::json& spec) const;

  Config config_;
};

}  // namespace gpupack::webhook
