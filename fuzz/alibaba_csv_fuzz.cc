// The Alibaba trace's node and pod lists that gpupack-sim and the benchmarks read.
#include "fuzz/fuzz_target.h"
#include "sim/inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  const std::string_view csv = fuzz::Text(data, size);
  (void)sim::ParseAlibabaNodes(csv, "fuzz");
  (void)sim::ParseAlibabaPods(csv, "fuzz");
  return 0;
}
