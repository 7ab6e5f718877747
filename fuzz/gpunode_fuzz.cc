// GPUNode objects, which any agent may write (RBAC cannot keep a DaemonSet pod to its own
// GPUNode): the extender's view of one, and the status decoder beneath it.
#include <chrono>

#include <nlohmann/json.hpp>

#include "api/gpunode.h"
#include "fuzz/fuzz_target.h"
#include "testing/fake_clock.h"
#include "translate/node_from_gpunode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  const nlohmann::json object = nlohmann::json::parse(gpupack::fuzz::Text(data, size), nullptr, false);
  if (object.is_discarded()) return 0;
  static const FakeClock clock;
  (void)translate::NodeFromGpuNode(object, std::chrono::seconds(120), clock);
  if (object.is_object() && object.contains("status")) (void)api::GpuNodeStatusFromJson(object["status"]);
  (void)api::ExcludedDevicesOfNode(object);
  return 0;
}
