// AdmissionReviews, as the API server sends one for every pod created in the cluster: the webhook
// answers every body, and its answer is always a well-formed AdmissionReview.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.h"
#include "webhook/mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  static const webhook::Mutator mutator{webhook::Config{}};
  const webhook::ReviewResult result = mutator.Review(fuzz::Text(data, size));
  FUZZ_CHECK(result.http_status == 200 || result.http_status == 400);
  const nlohmann::json answer = nlohmann::json::parse(result.body, nullptr, false);
  FUZZ_CHECK(answer.is_object());
  return 0;
}
