#include "agent/testing/agent_testing.h"

#include <cstdlib>

#include "api/allocation.h"
#include "api/annotations.h"
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

nlohmann::json RunningPodJson(const std::string& uid, const std::string& name,
                              const std::vector<TestContainer>& containers,
                              const std::vector<std::pair<std::string, model::MiB>>& devices,
                              const std::string& request_mib) {
  using Json = nlohmann::json;
  Json pod = {{"metadata", {{"uid", uid}, {"namespace", "ml"}, {"name", name}, {"annotations", Json::object()}}},
              {"spec", {{"containers", Json::array()}}},
              {"status", {{"phase", "Running"}, {"containerStatuses", Json::array()}}}};
  for (const TestContainer& c : containers) {
    pod["spec"]["containers"].push_back({{"name", c.name}});
    Json state = c.running ? Json{{"running", Json::object()}} : Json{{"terminated", Json::object()}};
    pod["status"]["containerStatuses"].push_back(
        {{"name", c.name}, {"containerID", "containerd://" + c.id}, {"state", state}});
  }
  if (!devices.empty()) {
    api::Allocation a;
    a.node = "n1";
    api::ContainerAllocation ca;
    ca.name = containers[0].name;
    ca.index = 0;
    for (const auto& [uuid, mib] : devices) {
      api::AllocatedDevice d;
      d.uuid = uuid;
      d.mem_mib = mib;
      if (uuid.rfind("MIG-", 0) == 0) {
        d.parent_uuid = "GPU-2";
        d.profile = "3g.20gb";
      }
      ca.devices.push_back(d);
    }
    a.containers.push_back(ca);
    pod["metadata"]["annotations"][std::string(api::kAnnotationAllocation)] = api::EncodeAllocation(a);
  }
  if (!request_mib.empty()) {
    pod["metadata"]["annotations"][api::ContainerAnnotationKey(false, 0, api::ContainerEnvKey::kMemoryRequestMiB)] =
        request_mib;
  }
  return pod;
}

}  // namespace gpupack::agent::testing
