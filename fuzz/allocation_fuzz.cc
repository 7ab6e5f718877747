// The allocation annotation, which the extender writes at bind and every component reads back
// (the agent, the node-side injection, the extender rebuilding its ledger after a restart): what
// decodes encodes to a text that decodes to the same allocation.
#include "api/allocation.h"
#include "fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  const StatusOr<api::Allocation> decoded = api::DecodeAllocation(fuzz::Text(data, size));
  if (!decoded.ok()) return 0;
  const StatusOr<api::Allocation> again = api::DecodeAllocation(api::EncodeAllocation(*decoded));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *decoded);
  return 0;
}
