#include "scheduler/extender/backend.h"

namespace gpupack::extender {

StandaloneBackend::StandaloneBackend(std::vector<model::Node> nodes) : nodes_(std::move(nodes)) {}

Status StandaloneBackend::Start(ClusterState& state) {
  for (model::Node& node : nodes_) state.UpsertNode(std::move(node));
  nodes_.clear();
  return Status::Ok();
}

StatusOr<model::PodRequest> StandaloneBackend::LookupPod(const BindTarget& pod) {
  return Status::NotFound("standalone mode knows pod " + pod.ns + "/" + pod.name +
                          " only from a recent filter or prioritize call, and there was none");
}

Status StandaloneBackend::Bind(const BindTarget& pod, const std::string& node,
                               const std::map<std::string, std::string>& annotations) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = binds_.try_emplace(pod.uid, BindRecord{node, annotations});
  if (!inserted && it->second.node != node) {
    return Status::FailedPrecondition("pod " + pod.ns + "/" + pod.name + " is already bound to node " +
                                      it->second.node);
  }
  return Status::Ok();
}

std::map<std::string, StandaloneBackend::BindRecord> StandaloneBackend::binds() const {
  std::lock_guard lock(mu_);
  return binds_;
}

}  // namespace gpupack::extender
