// The scalar parsers every file, flag and object goes through: Kubernetes quantities, counts,
// durations, RFC 3339 times, the simulator's seed ranges.
#include "common/duration.h"
#include "common/quantity.h"
#include "common/rfc3339.h"
#include "fuzz/fuzz_target.h"
#include "sim/replay.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  const std::string_view text = fuzz::Text(data, size);
  if (const StatusOr<int64_t> mib = ParseMemoryMiBCeil(text, "fuzz"); mib.ok()) FUZZ_CHECK(*mib > 0);
  if (const StatusOr<int64_t> bytes = ParseBytes(text, "fuzz"); bytes.ok()) FUZZ_CHECK(*bytes >= 0);
  if (const StatusOr<int64_t> milli = ParseMilliValue(text, "fuzz"); milli.ok()) FUZZ_CHECK(*milli >= 0);
  if (const StatusOr<int64_t> count = ParseCount(text, "fuzz"); count.ok()) FUZZ_CHECK(*count >= 0);
  (void)ParseDuration(text);
  (void)ParseRfc3339(text);
  (void)sim::ParseSeeds(text);
  return 0;
}
