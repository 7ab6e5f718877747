// The node-side injection's decision through its C entry (agent/injection_c.h), as the NRI plugin
// calls it on every container the runtime creates: the pod's annotations and the container's env
// come from the pod spec, an envFrom and the image, so from the user. The answer is one JSON
// object, an error or a decision; a decision sets each variable and mounts each directory once, an
// exempt pod gets nothing, and a container of any other pod keeps no device or cap variable of its
// own that gives a device: each is set by the decision (what a container gets comes from the
// scheduler's allocation, never from its spec).
#include <cstdlib>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/injection_c.h"
#include "api/annotations.h"
#include "fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  using nlohmann::json;
  // A request that names an MPS server runs the control CLI it names: not for a fuzzer to choose.
  // That path is tested against the stand-in CLI (agent/mps_namespace_test.cc).
  const json request = json::parse(fuzz::Text(data, size), nullptr, /*allow_exceptions=*/false);
  if (request.is_object() && request.contains("mpsServer")) return 0;
  char* answer = gpupack_decide_container_env(reinterpret_cast<const char*>(data), size);
  FUZZ_CHECK(answer != nullptr);
  const json out = json::parse(answer, nullptr, /*allow_exceptions=*/false);
  std::free(answer);
  FUZZ_CHECK(out.is_object());
  if (out.contains("error")) {
    FUZZ_CHECK(out.size() == 1 && out["error"].is_string() && !out["error"].get_ref<const std::string&>().empty());
    return 0;
  }
  FUZZ_CHECK(out.size() == 3 && out["set"].is_array() && out["mounts"].is_array() && out["exempt"].is_boolean());
  std::set<std::string> set;
  for (const json& pair : out["set"]) {
    FUZZ_CHECK(pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string());
    FUZZ_CHECK(set.insert(pair[0].get<std::string>()).second);
  }
  std::set<std::string> mounts;
  for (const json& mount : out["mounts"])
    FUZZ_CHECK(mount.is_string() && mounts.insert(mount.get<std::string>()).second);
  if (out["exempt"].get<bool>()) {
    FUZZ_CHECK(set.empty() && out["mounts"].empty());
    return 0;
  }
  // The request decoded (else the answer is an error), so its env is null, absent or strings.
  FUZZ_CHECK(request.is_object());
  const auto env = request.find("env");
  if (env == request.end() || env->is_null()) return 0;
  for (const json& entry : *env) {
    const std::string& text = entry.get_ref<const std::string&>();
    const size_t eq = text.find('=');
    const std::string name = text.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : text.substr(eq + 1);
    if (api::IsDeviceEnvName(name) && !api::GivesNoDevice(name, value)) FUZZ_CHECK(set.count(name) == 1);
  }
  return 0;
}
