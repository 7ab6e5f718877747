// Which workload a pod belongs to, from its metadata (docs/recommendations.md "Workloads"): the
// controller among its ownerReferences, with a ReplicaSet that a Deployment made read back to the
// Deployment. A ReplicaSet's pods carry the label pod-template-hash, and a Deployment names its
// ReplicaSets "<deployment>-<pod-template-hash>", so the Deployment's name is the ReplicaSet's
// without that suffix: no read of the ReplicaSet is needed. Every other controller (StatefulSet,
// Job, DaemonSet, a ReplicaSet of its own, a custom kind) is the workload as named; a pod without
// a controller is its own workload ("Pod", its name), so a bare pod recreated under the same name
// keeps its history. A CronJob's Jobs are each a workload of their own.
//
// Thread safety: pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gpupack::translate {

struct WorkloadRef {
  std::string kind;  // "Deployment", "StatefulSet", "Job", …, "Pod"
  std::string name;

  bool operator==(const WorkloadRef&) const = default;
};

// Never fails: a pod without metadata is a Pod named "".
WorkloadRef WorkloadOfPod(const nlohmann::json& pod);

}  // namespace gpupack::translate
