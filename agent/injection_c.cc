#include "agent/injection_c.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/injection.h"

namespace {

using nlohmann::json;

json Decide(const char* request, size_t size) {
  const json in = json::parse(std::string_view(request, size), nullptr, /*allow_exceptions=*/false);
  if (!in.is_object()) return {{"error", "the request is not a JSON object"}};
  gpupack::agent::PodOrigin origin;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> env;
  std::string container;
  try {
    // Absent and null (Go's nil map and slice) are both empty.
    if (auto it = in.find("namespace"); it != in.end() && !it->is_null()) it->get_to(origin.pod_namespace);
    if (auto it = in.find("exemptNamespaces"); it != in.end() && !it->is_null()) it->get_to(origin.exempt_namespaces);
    if (auto it = in.find("mpsPipeDirectory"); it != in.end() && !it->is_null()) it->get_to(origin.mps_pipe_directory);
    if (auto it = in.find("annotations"); it != in.end() && !it->is_null()) it->get_to(annotations);
    if (auto it = in.find("env"); it != in.end() && !it->is_null()) it->get_to(env);
    if (auto it = in.find("container"); it != in.end() && !it->is_null()) it->get_to(container);
  } catch (const json::exception& e) {
    return {{"error", std::string("malformed request: ") + e.what()}};
  }
  gpupack::StatusOr<gpupack::agent::EnvAdjustment> decided =
      gpupack::agent::DecideContainerEnv(origin, annotations, container, env);
  if (!decided.ok()) return {{"error", decided.status().message()}};
  json set = json::array();
  for (const auto& [name, value] : decided->set) set.push_back({name, value});
  return {{"set", std::move(set)}, {"mounts", decided->mounts}, {"exempt", decided->exempt}};
}

}  // namespace

extern "C" char* gpupack_decide_container_env(const char* request, size_t size) {
  std::string out;
  try {
    out = Decide(request, size).dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception&) {
    return nullptr;  // std::bad_alloc: every JSON access above is checked, dump replaces bad UTF-8
  }
  char* copy = static_cast<char*>(std::malloc(out.size() + 1));
  if (copy != nullptr) std::memcpy(copy, out.c_str(), out.size() + 1);
  return copy;
}
