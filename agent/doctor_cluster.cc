#include "agent/doctor_cluster.h"

#include <map>
#include <set>

#include "api/gpunode.h"

namespace gpupack::agent {
namespace {

std::string NameOf(const nlohmann::json& object) {
  const nlohmann::json* name = nullptr;
  if (auto m = object.find("metadata"); m != object.end() && m->is_object()) {
    if (auto n = m->find("name"); n != m->end() && n->is_string()) name = &*n;
  }
  return name ? name->get<std::string>() : "";
}

std::string Describe(const api::GpuNodeCondition* c, std::string_view type) {
  if (c == nullptr) return std::string(type) + " not reported";
  return std::string(type) + " " + (c->status ? "True" : "False") + " (" + c->reason + ")";
}

}  // namespace

ClusterDoctorResult ClusterDoctor(const std::vector<nlohmann::json>& agent_pods,
                                  const std::vector<nlohmann::json>& gpunodes, bool require_memory_enforced) {
  std::map<std::string, const nlohmann::json*> by_node;
  for (const nlohmann::json& g : gpunodes) by_node[NameOf(g)] = &g;
  std::set<std::string> nodes;
  for (const nlohmann::json& pod : agent_pods) {
    const nlohmann::json spec = pod.value("spec", nlohmann::json::object());
    if (spec.contains("nodeName") && spec["nodeName"].is_string()) nodes.insert(spec["nodeName"].get<std::string>());
  }
  ClusterDoctorResult result;
  auto fail = [&result](const std::string& node, const std::string& why) {
    result.lines.push_back("fail " + node + ": " + why);
    result.ok = false;
  };
  if (nodes.empty()) fail("(cluster)", "no agent pod is scheduled on any node");
  for (const std::string& node : nodes) {
    auto it = by_node.find(node);
    if (it == by_node.end()) {
      fail(node, "no GPUNode: the agent has not reported (kubectl logs of its pod say why)");
      continue;
    }
    const nlohmann::json status = it->second->value("status", nlohmann::json::object());
    StatusOr<api::GpuNodeStatus> parsed = api::GpuNodeStatusFromJson(status);
    if (!parsed.ok()) {
      fail(node, "GPUNode status unreadable: " + parsed.status().message());
      continue;
    }
    const api::GpuNodeCondition* memory = api::FindCondition(parsed->conditions, api::kConditionMemoryEnforced);
    const api::GpuNodeCondition* compute = api::FindCondition(parsed->conditions, api::kConditionComputeEnforced);
    if (memory == nullptr || compute == nullptr) {
      fail(node, "GPUNode carries no doctor conditions: the agent predates the doctor, upgrade it");
      continue;
    }
    const std::string summary = Describe(memory, api::kConditionMemoryEnforced) + ", " +
                                Describe(compute, api::kConditionComputeEnforced) +
                                (memory->status ? "" : ": " + memory->message);
    if (require_memory_enforced && !memory->status) {
      fail(node, summary);
    } else {
      result.lines.push_back("ok " + node + ": " + summary);
    }
  }
  return result;
}

}  // namespace gpupack::agent
