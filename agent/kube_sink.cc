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
  if (kind == api::kAuditOverCompute) return "GpupackOverCompute";
  return "GpupackForeignProcess";
}

// A Warning event from gpupack-agent about `involved`, recorded in namespace `ns`.
kube::EventSpec Warning(std::string ns, Json involved, std::string reason, std::string message) {
  kube::EventSpec event;
  event.ns = std::move(ns);
  event.involved_object = std::move(involved);
  event.type = "Warning";
  event.reason = std::move(reason);
  event.message = std::move(message);
  event.reporting_component = "gpupack-agent";
  return event;
}

Json PodReference(const std::string& ns, const std::string& name, const std::string& uid) {
  return {{"kind", "Pod"}, {"apiVersion", "v1"}, {"namespace", ns}, {"name", name}, {"uid", uid}};
}

}  // namespace

Status KubeSink::WriteGpuNodeStatus(const std::string& node, const api::GpuNodeStatus& status) {
  auto written = client_->UpsertGpuNodeStatus(node, api::GpuNodeStatusToJson(status));
  return written.ok() ? Status::Ok() : written.status();
}

Status KubeSink::EnsureNodeCapacity(const std::string& node, const std::string& gpu_memory, int64_t gpus,
                                    int64_t gpu_compute) {
  GPUPACK_ASSIGN_OR_RETURN(Json current, client_->GetNode(node));
  const std::string memory_key(api::kResourceGpuMemory);
  const std::string gpu_key(api::kResourceGpu);
  const std::string compute_key(api::kResourceGpuCompute);
  const std::string gpu_count = std::to_string(gpus);
  const std::string compute = std::to_string(gpu_compute);
  bool up_to_date = true;
  for (const char* field : {"capacity", "allocatable"}) {
    up_to_date = up_to_date && Holds(current, field, memory_key, gpu_memory) &&
                 Holds(current, field, gpu_key, gpu_count) && Holds(current, field, compute_key, compute);
  }
  if (up_to_date) return Status::Ok();
  const Json resources = {{memory_key, gpu_memory}, {gpu_key, gpu_count}, {compute_key, compute}};
  auto patched =
      client_->PatchNodeStatus(node, Json{{"status", {{"capacity", resources}, {"allocatable", resources}}}});
  return patched.ok() ? Status::Ok() : patched.status();
}

Status KubeSink::EmitAuditEvent(const std::string& node, const api::GpuNodeAuditFinding& finding) {
  const size_t slash = finding.pod.find('/');
  if (slash == std::string::npos) {
    return client_->CreateEvent(Warning("default", {{"kind", "Node"}, {"apiVersion", "v1"}, {"name", node}},
                                        Reason(finding.kind), finding.message));
  }
  const std::string ns = finding.pod.substr(0, slash);
  return client_->CreateEvent(Warning(ns, PodReference(ns, finding.pod.substr(slash + 1), finding.pod_uid),
                                      Reason(finding.kind), finding.message));
}

StatusOr<kube::EvictionAnswer> KubeSink::Evict(const PodInfo& pod) {
  return client_->EvictPod(pod.ns, pod.name, pod.uid);
}

Status KubeSink::EmitPodWarning(const PodInfo& pod, std::string_view reason, const std::string& message) {
  return client_->CreateEvent(Warning(pod.ns, PodReference(pod.ns, pod.name, pod.uid), std::string(reason), message));
}

}  // namespace gpupack::agent
