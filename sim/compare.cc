#include "sim/compare.h"

#include <functional>
#include <memory>

#include "sim/extender_policy.h"
#include "sim/policy.h"

namespace gpupack::sim {

StatusOr<std::vector<PolicyRun>> RunPolicies(const Replayer& replayer, const std::vector<std::string>& names,
                                             const std::vector<uint64_t>& seeds, const std::string& extender_url,
                                             int extender_weight) {
  std::vector<PolicyRun> runs;
  for (const std::string& name : names) {
    std::function<StatusOr<std::unique_ptr<SimPolicy>>()> make;
    if (!extender_url.empty() && name == "extender") {
      make = [&]() { return MakeExtenderPolicy(extender_url, extender_weight); };
    } else {
      const OverheadVariant overhead = replayer.options().overhead;
      // An unknown name, before replaying.
      GPUPACK_RETURN_IF_ERROR(MakePolicy(name, replayer.typical(), overhead).status());
      make = [&, overhead]() { return MakePolicy(name, replayer.typical(), overhead); };
    }
    StatusOr<PolicyRun> run = replayer.Run(name, make, seeds);
    if (!run.ok()) return Status(run.status().code(), name + ": " + run.status().message());
    runs.push_back(std::move(*run));
  }
  return runs;
}

}  // namespace gpupack::sim
