// The YAML an operator or a user hands gpupack: the cluster file, the simulator's workload file,
// the extender's and the webhook's config files.
#include <string>

#include "fuzz/fuzz_target.h"
#include "scheduler/extender/config.h"
#include "sim/inputs.h"
#include "translate/cluster_file.h"
#include "webhook/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  const std::string_view text = fuzz::Text(data, size);
  (void)translate::ParseClusterYaml(text);
  (void)sim::ParseWorkloadYaml(text, "fuzz");
  (void)extender::ParseExtenderConfig(text);
  (void)webhook::ParseConfig(text);
  return 0;
}
