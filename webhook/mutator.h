// The admission logic of gpupack-webhook: AdmissionReview (admission.k8s.io/v1) in, AdmissionReview
// out. No sockets; the HTTPS routes (webhook/routes.h) only move bytes and count outcomes.
//
// Every pod CREATE is reviewed, whatever it asks for, because GPU devices and caps must come only
// from the scheduler's allocation:
//   - an annotation only gpupack's components write (a row of api::PodAnnotations() whose writer
//     is the scheduler or the webhook: the allocation, the per-container keys, the whole-device
//     charge) is refused, naming its writer;
//   - a GPU device or cap variable that the pod's spec sets itself in any container (app, init,
//     ephemeral), webhook/device_env.h says which, is refused naming the container and the
//     variable, or with config.user_device_env kStrip removed, with a warning saying so.
// A pod that also asks for a gpupack resource in any container (translate::PodAsksForGpupack) is
// validated (translate::ParsePodRequest plus the webhook-only checks below) and patched so that it
//   - has spec.schedulerName set to the configured gpupack scheduler (unless the pod names another
//     non-default scheduler and the config allows custom names), and
//   - gives every gpupack container (app and init) the env of api::kAllContainerEnvKeys, each read
//     through the downward API from exactly api::ContainerAnnotationKey(init, index, key), the
//     annotations the extender writes on the Binding. These entries go first in the env list
//     (so the user's later entries can reference them as $(NAME)); other entries keep their order.
// A pods/ephemeralcontainers UPDATE (kubectl debug) gets the env review for the ephemeral
// containers it adds. Every other review (other resources, operations, subresources) is allowed
// unchanged.
//
// Thread safety: Review is const and keeps no state; call it from any number of threads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "webhook/config.h"

namespace gpupack::webhook {

// The metric label of one answered review.
enum class Outcome {
  kPatched,  // allowed with a patch
  kSkipped,  // allowed unchanged: nothing for gpupack to do
  kDenied,   // refused: the pod's gpupack request is invalid, or it sets what only gpupack may
  kError,    // the review could not be processed (failure policy applied, or a malformed body)
};
std::string_view OutcomeName(Outcome outcome);

// The answer to a pod that is admitted.
struct PodPatch {
  nlohmann::json ops = nlohmann::json::array();  // JSONPatch operations, empty when nothing changes
  std::vector<std::string> warnings;             // shown by kubectl: what was stripped
};

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
  // or 403 (the pod tries to set what only the scheduler may: reserved annotations, nodeName,
  // device or cap env).
  // Internal failures follow config.failure_policy: kFail denies with code 500, kIgnore allows
  // without a patch and with a warning.
  ReviewResult Review(std::string_view body) const;

  // What the webhook does to one pod object at CREATE. InvalidArgument or PermissionDenied, with
  // the message a denial shows, when the pod is refused.
  StatusOr<PodPatch> PatchFor(const nlohmann::json& pod) const;

  // The same for a pods/ephemeralcontainers update from `old_pod` to `pod`: only the ephemeral
  // containers `old_pod` does not have are reviewed (the others were reviewed when added, and the
  // API server refuses any change to them).
  StatusOr<PodPatch> EphemeralContainersPatchFor(const nlohmann::json& pod, const nlohmann::json& old_pod) const;

 private:
  nlohmann::json SchedulerNamePatch(const nlohmann::json& spec) const;
  // Reviews the env of `container`, spec.<list>[index] (webhook/device_env.h): refuses it, or
  // appends the op that writes the reviewed env when it differs. `own`: the env gpupack gives the
  // container, an empty array for one without gpupack resources.
  Status ReviewEnv(const nlohmann::json& container, std::string_view list, size_t index, const nlohmann::json& own,
                   PodPatch& patch) const;

  Config config_;
};

}  // namespace gpupack::webhook
