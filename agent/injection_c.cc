#include "agent/injection_c.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/injection.h"
#include "agent/mps_namespace.h"

namespace {

using nlohmann::json;
namespace agent = gpupack::agent;

// Reads `key` of `in` into `out`; absent and null (Go's nil map and slice) leave it empty.
template <typename T>
void Field(const json& in, const char* key, T& out) {
  if (auto it = in.find(key); it != in.end() && !it->is_null()) it->get_to(out);
}

json Error(std::string message) { return {{"error", std::move(message)}}; }

// The MPS control daemon the request names, or nullopt when it names no server (namespaces off).
struct MpsRequest {
  std::optional<agent::MpsControl> control;
  std::string error;
};
MpsRequest MpsOf(const json& in) {
  agent::MpsControlOptions options;
  Field(in, "mpsServer", options.server);
  if (options.server.empty()) return {};
  Field(in, "mpsPipeDirectory", options.pipe_directory);
  if (options.pipe_directory.empty())
    return {std::nullopt, "mpsServer needs mpsPipeDirectory, the MPS daemon's pipe directory"};
  Field(in, "mpsControlBinary", options.binary);
  if (options.binary.empty()) options.binary = agent::MpsControlOptions().binary;
  int64_t budget_ms = 0;
  Field(in, "budgetMs", budget_ms);
  if (budget_ms > 0) options.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
  return {agent::MpsControl(std::move(options)), ""};
}

// The origin every request shares: the exempt namespaces and the MPS set-up.
agent::PodOrigin OriginOf(const json& in, const MpsRequest& mps) {
  agent::PodOrigin origin;
  Field(in, "exemptNamespaces", origin.exempt_namespaces);
  Field(in, "mpsPipeDirectory", origin.mps_pipe_directory);
  origin.mps_namespaces = mps.control.has_value();
  return origin;
}

// The ceiling of the namespace the decision gives `container` ({"namespace", "container",
// "annotations"} as the runtime hands it over), 0 for none: no devices, an exempt namespace, or an
// allocation that does not decode (refused at creation, so it holds none).
int NamespaceCeilingOf(const json& container, agent::PodOrigin origin) {
  std::map<std::string, std::string> annotations;
  std::string name;
  Field(container, "namespace", origin.pod_namespace);
  Field(container, "container", name);
  Field(container, "annotations", annotations);
  gpupack::StatusOr<agent::EnvAdjustment> decided = agent::DecideContainerEnv(origin, annotations, name, {});
  return decided.ok() ? decided->mps_namespace_percentage : 0;
}

json Decide(const json& in) {
  std::map<std::string, std::string> annotations;
  std::vector<std::string> env;
  std::string container, container_id;
  MpsRequest mps = MpsOf(in);
  if (!mps.error.empty()) return Error(mps.error);
  agent::PodOrigin origin = OriginOf(in, mps);
  Field(in, "namespace", origin.pod_namespace);
  Field(in, "annotations", annotations);
  Field(in, "env", env);
  Field(in, "container", container);
  Field(in, "containerId", container_id);
  gpupack::StatusOr<agent::EnvAdjustment> decided = agent::DecideContainerEnv(origin, annotations, container, env);
  if (!decided.ok()) return Error(decided.status().message());
  json answer = json::object();
  if (decided->mps_namespace_percentage > 0) {
    gpupack::StatusOr<std::string> pipe =
        agent::ProvisionMpsNamespace(*mps.control, container_id, decided->mps_namespace_percentage);
    if (!pipe.ok()) return Error(pipe.status().message());
    agent::JoinMpsNamespace(*decided, *pipe);
    answer["mpsNamespace"] = *agent::MpsNamespaceName(container_id);
  }
  json set = json::array();
  for (const auto& [name, value] : decided->set) set.push_back({name, value});
  answer["set"] = std::move(set);
  answer["mounts"] = decided->mounts;
  answer["exempt"] = decided->exempt;
  return answer;
}

json Release(const json& in) {
  std::string container_id;
  Field(in, "containerId", container_id);
  MpsRequest mps = MpsOf(in);
  if (!mps.error.empty()) return Error(mps.error);
  if (!mps.control) return json::object();  // namespaces off: nothing was provisioned
  // A container the decision gives no namespace has none to delete: the daemon is not asked.
  if (NamespaceCeilingOf(in, OriginOf(in, mps)) == 0) return json::object();
  gpupack::Status released = agent::ReleaseMpsNamespace(*mps.control, container_id);
  if (released.ok()) return json::object();
  json answer = Error(released.message());
  answer["retry"] =
      released.code() == gpupack::StatusCode::kUnavailable || released.code() == gpupack::StatusCode::kDeadlineExceeded;
  return answer;
}

json Reconcile(const json& in) {
  int default_percentage = 0;
  Field(in, "defaultPercentage", default_percentage);
  MpsRequest mps = MpsOf(in);
  if (!mps.error.empty()) return Error(mps.error);
  if (!mps.control) return {{"claims", 0}};
  const agent::PodOrigin origin = OriginOf(in, mps);
  std::vector<agent::MpsNamespaceClaim> claims;
  for (const json& c : in.value("containers", json::array())) {
    const int ceiling = NamespaceCeilingOf(c, origin);
    if (ceiling == 0) continue;
    std::string id, container, pod_namespace;
    Field(c, "containerId", id);
    gpupack::StatusOr<std::string> name = agent::MpsNamespaceName(id);
    if (!name.ok()) {
      Field(c, "container", container);
      Field(c, "namespace", pod_namespace);
      return Error("container " + container + " in " + pod_namespace + ": " + name.status().message());
    }
    claims.push_back({*name, ceiling});
  }
  gpupack::Status reconciled = agent::ReconcileMpsNamespaces(*mps.control, claims, default_percentage);
  if (!reconciled.ok()) return Error(reconciled.message());
  return {{"claims", claims.size()}};
}

// Parses the request, runs `handle`, and hands back the answer in malloc'd memory.
char* Answer(const char* request, size_t size, json (*handle)(const json&)) {
  std::string out;
  try {
    const json in = json::parse(std::string_view(request, size), nullptr, /*allow_exceptions=*/false);
    json answer;
    if (!in.is_object()) {
      answer = Error("the request is not a JSON object");
    } else {
      try {
        answer = handle(in);
      } catch (const json::exception& e) {
        answer = Error(std::string("malformed request: ") + e.what());
      }
    }
    out = answer.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception&) {
    return nullptr;  // std::bad_alloc: JSON type errors are answered above, dump replaces bad UTF-8
  }
  char* copy = static_cast<char*>(std::malloc(out.size() + 1));
  if (copy != nullptr) std::memcpy(copy, out.c_str(), out.size() + 1);
  return copy;
}

}  // namespace

extern "C" char* gpupack_decide_container_env(const char* request, size_t size) {
  return Answer(request, size, Decide);
}

extern "C" char* gpupack_release_mps_namespace(const char* request, size_t size) {
  return Answer(request, size, Release);
}

extern "C" char* gpupack_reconcile_mps_namespaces(const char* request, size_t size) {
  return Answer(request, size, Reconcile);
}
