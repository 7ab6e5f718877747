#include "agent/testing/agent_testing.h"

#include <cstdlib>

#include "common/status.h"

namespace gpupack::agent::testing {

void SetFakeNvmlState(const TempDir& dir, const nlohmann::json& state) {
  const std::string file = dir.WriteFile("fake-nvml-state.json", state.dump());
  GPUPACK_CHECK(setenv("GPUPACK_FAKE_NVML_STATE", file.c_str(), 1) == 0);
}

std::string SystemdContainerPath(const std::string& pod_uid, const std::string& container_id) {
  std::string underscored = pod_uid;
  for (char& c : underscored) {
    if (c == '-') c = '_';
  }
  return "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + underscored + ".slice/cri-containerd-" +
         container_id + ".scope";
}

}  // namespace gpupack::agent::testing
