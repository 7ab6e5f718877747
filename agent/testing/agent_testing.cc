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

FakeNvmlFlavour FakeNvmlFlavourOf(FakeDriver driver) {
  using Json = nlohmann::json;
  const Json whole = {{"uuid", "GPU-1"}, {"name", "NVIDIA H200"}, {"memoryMiB", 143771}};
  const Json mig = {{"uuid", "GPU-2"},
                    {"name", "NVIDIA H200"},
                    {"memoryMiB", 143771},
                    {"migMode", 1},
                    {"profiles", {{{"selector", 2}, {"id", 9}, {"name", "MIG 3g.71gb"}}}},
                    {"migInstances",
                     {{{"uuid", "MIG-1"}, {"gpuInstanceId", 1}, {"profileId", 9}, {"start", 0}, {"size", 4}},
                      {{"uuid", "MIG-2"}, {"gpuInstanceId", 2}, {"profileId", 9}, {"start", 4}, {"size", 4}}}}};
  Json empty_mig = mig;
  empty_mig["migInstances"] = Json::array();
  auto r615 = [](Json devices) {
    return Json{{"driverVersion", "615.20"}, {"cudaVersion", 13040}, {"devices", std::move(devices)}};
  };
  switch (driver) {
    case FakeDriver::kR580:
      return {GPUPACK_FAKE_NVML_R580,
              {{"driverVersion", "580.65.06"}, {"cudaVersion", 13000}, {"devices", Json::array({whole})}}};
    case FakeDriver::kR615:
      return {GPUPACK_FAKE_NVML_R615, r615(Json::array({whole}))};
    case FakeDriver::kR615LibraryWithoutCalls:
      return {GPUPACK_FAKE_NVML_R580, r615(Json::array({whole}))};
    case FakeDriver::kR615Mig:
      return {GPUPACK_FAKE_NVML_R615, r615(Json::array({whole, mig}))};
    case FakeDriver::kR615MigWithoutInstances:
      return {GPUPACK_FAKE_NVML_R615, r615(Json::array({empty_mig}))};
  }
  return {};
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
