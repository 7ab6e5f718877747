// Pod objects as the extender and the webhook read them: resources, annotations, containers.
// What parses writes annotations (api::WritePodAnnotations) that parse again on the same pod.
#include <nlohmann/json.hpp>

#include "api/pod_annotations.h"
#include "fuzz/fuzz_target.h"
#include "translate/pod_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  nlohmann::json pod = nlohmann::json::parse(fuzz::Text(data, size), nullptr, false);
  if (pod.is_discarded()) return 0;
  const StatusOr<model::PodRequest> parsed = translate::ParsePodRequest(pod);
  if (!parsed.ok()) return 0;
  nlohmann::json rewritten = pod;
  rewritten["metadata"]["annotations"] = api::WritePodAnnotations(*parsed);
  FUZZ_CHECK(translate::ParsePodRequest(rewritten).ok());
  return 0;
}
