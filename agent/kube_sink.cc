#include "agent/kube_sink.h"

#include "api/annotations.h"

namespace gpupack::agent {
namespace {

using Json = nlohmann::json;

bool Holds(const Json& node, const char* field, const std::string& key, const std::string& value) {
  const Json* status = node.contains("status") ? &node["status"] : nullptr;
  if (status == nullptr || !status->is_object() || !status->contains(field)) return false;
  const Json& list = (*status)[field];
  return list.is_object() && list.contains(key) && list[key].is_string() && list[key].get<std::string>() == value;
}

std::string Reason(const std::string& kind) {
  if (kind == api::kAuditOverCap) return "GpupackOverCap";
  if (kind == api::kAuditUnenforced) return "GpupackCapNotEnforced";
  return "GpupackForeignProcess";
}

}  // namespace

Status KubeSink::WriteGpuNodeStatus(const std::string& node, const api::GpuNodeStatus& status) {
  auto written = client_->UpsertGpuNodeStatus(node, api::GpuNodeStatusToJson(status));
  return written.ok() ? Status::Ok() : written.status();
}

Status KubeSink::EnsureNodeCapacity(const std::string& node, const std::string& gpu_memory, int64_t gpus) {
  GPUPACK_ASSIGN_OR_RETURN(Json current, client_->GetNode(node));
  const std::string memory_key(api::kResourceGpuMemory);
  const std::string gpu_key(api::kResourceGpu);
  const std::string gpu_count = std::to_string(gpus);
  bool up_to_date = true;
  for (const char* field : {"capacity", "allocatable"}) {
    up_to_date =
        up_to_date && Holds(current, field, memory_key, gpu_memory) && Holds(current, field, gpu_key, gpu_count);
  }
  if (up_to_date) return Status::Ok();
  const Json resources = {{memory_key, gpu_memory}, {gpu_key, gpu_count}};
  auto patched =
      client_->PatchNodeStatus(node, Json{{"status", {{"capacity", resources}, {"allocatable", resources}}}});
  return patched.ok() ? Status::Ok() : patched.status();
}

Status KubeSink::EmitAuditEvent(const std::string& node, const api::GpuNodeAuditFinding& finding) {
  kube::EventSpec event;
  const size_t slash = finding.pod.find('/');
  if (slash != std::string::npos) {
    event.ns = finding.pod.substr(0, slash);
    event.involved_object = {{"kind", "Pod"},
                             {"apiVersion", "v1"},
                             {"namespace", event.ns},
                             {"name", finding.pod.substr(slash + 1)},
                             {"uid", finding.pod_uid}};
  } else {
    event.ns = "default";
    event.involved_object = {{"kind", "Node"}, {"apiVersion", "v1"}, {"name", node}};
  }
  event.type = "Warning";
  event.reason = Reason(finding.kind);
  event.message = finding.message;
  event.reporting_component = "gpupack-agent";
  return client_->CreateEvent(event);
}

}  // namespace gpupack::agent
