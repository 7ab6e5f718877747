// kube-scheduler's request bodies: ExtenderArgs through both decoders (the general one in api/ and
// the fast one the filter and prioritize verbs use), which must agree on every input, and the
// bind and preempt arguments.
#include <nlohmann/json.hpp>

#include "api/extender_types.h"
#include "fuzz/fuzz_target.h"
#include "scheduler/extender/args_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  const std::string_view body = fuzz::Text(data, size);
  const StatusOr<api::ExtenderArgs> general = api::DecodeExtenderArgs(body);
  const StatusOr<api::ExtenderArgs> fast = extender::DecodeExtenderArgsFast(body);
  FUZZ_CHECK(general.ok() == fast.ok());
  if (general.ok()) {
    FUZZ_CHECK(general->pod == fast->pod);
    FUZZ_CHECK(general->node_names == fast->node_names);
    FUZZ_CHECK(general->nodes.has_value() == fast->nodes.has_value());
    if (general->nodes) {
      FUZZ_CHECK(general->nodes->size() == fast->nodes->size());
      for (size_t i = 0; i < general->nodes->size(); ++i) {
        FUZZ_CHECK((*general->nodes)[i].name == (*fast->nodes)[i].name);
        // The raw text is echoed as sent; both must denote the same object.
        FUZZ_CHECK(nlohmann::json::parse((*general->nodes)[i].raw, nullptr, false) ==
                   nlohmann::json::parse((*fast->nodes)[i].raw, nullptr, false));
      }
    }
  }
  (void)api::DecodeBindingArgs(body);
  (void)api::DecodePreemptionArgs(body);
  return 0;
}
