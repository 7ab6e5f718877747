// How a cluster backend plugs into the extender: it feeds the ClusterState (inventory and the
// allocations of existing pods), tells the extender when that view is complete, answers "what does
// this pod ask for" at bind time, and persists binds.
//
// Two implementations: StandaloneBackend (below: inventory from a cluster file, binds recorded in
// memory) and the Kubernetes backend in scheduler/cluster/ (informers on Pods and GPUNodes, the
// Binding API).
//
// Call order: Start once, then any number of LookupPod/Bind from any thread, then Stop once.
// Thread safety: LookupPod, Bind and Synced may be called concurrently.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/metric_family.h>

#include "common/status.h"
#include "model/model.h"
#include "scheduler/extender/cluster_state.h"

namespace gpupack::extender {

// The pod a bind names (ExtenderBindingArgs).
struct BindTarget {
  std::string ns;
  std::string name;
  std::string uid;
};

// A bound pod that defragmentation may move, the node it runs on, and the workload its
// controller makes it for ("ml/Deployment/web": what a move's cool-down is kept by, since the
// replacement is a new pod of the same workload).
struct MovablePodOnNode {
  model::PodRequest request;
  std::string node;
  std::string workload;
};

// What an eviction came to when the API server did not fail it.
struct EvictionOutcome {
  bool evicted = false;  // false: a PodDisruptionBudget allows no disruption now
  std::string message;   // the budget's refusal, as the API server words it
};

class ClusterBackend {
 public:
  virtual ~ClusterBackend() = default;

  // Begins feeding `state` (which must outlive the backend); may return before the initial
  // listing is complete. Returns an error if the backend cannot start at all (bad kubeconfig,
  // unreadable cluster file): the extender then exits.
  virtual Status Start(ClusterState& state) = 0;
  // True once the initial inventory and every existing allocation are in the state. Until then
  // /readyz fails and the verbs answer with an error (docs/kubernetes.md).
  virtual bool Synced() const = 0;
  // The request of a pod about to be bound, when the extender did not see it in a recent filter
  // or prioritize call. NotFound when the backend does not know the pod; InvalidArgument when its
  // request does not parse.
  virtual StatusOr<model::PodRequest> LookupPod(const BindTarget& pod) = 0;
  // Persists "pod runs on node" together with `annotations` (one atomic write on Kubernetes: the
  // Binding's metadata.annotations). Must be idempotent: OK when the pod is already bound to
  // `node`. An error means the pod is not bound; the extender then releases the reservation.
  virtual Status Bind(const BindTarget& pod, const std::string& node,
                      const std::map<std::string, std::string>& annotations) = 0;
  // Stops background work; no calls into the state after it returns.
  virtual void Stop() = 0;
  // The requests of the pods that hold devices now (bound, with an allocation), oldest first, so a
  // restarted or newly elected extender learns the running workload at once instead of starting
  // again from the prior. Meaningful once Synced(); pods whose request does not parse are left
  // out. Default: none (standalone starts with an empty ledger).
  virtual std::vector<model::PodRequest> HeldPodRequests() const { return {}; }
  // The requests of the gpupack pods waiting to be scheduled (not bound, not finished), oldest
  // first, with their UIDs: what kube-scheduler will ask about, so the learner counts it before it
  // is asked. Meaningful once Synced(). Default: none (standalone knows only what it is asked).
  virtual std::vector<model::PodRequest> WaitingPodRequests() const { return {}; }
  // The bound pods that defragmentation may move (docs/placement.md, "Defragmentation"): holding
  // an allocation, gpupack.io/movable "true", owned by a controller that recreates them elsewhere
  // (a Deployment's ReplicaSet, a ReplicaSet, a StatefulSet, a Job), not being deleted. Meaningful
  // once Synced(). Default: none (standalone binds pods it knows only by their requests).
  virtual std::vector<MovablePodOnNode> MovablePods() const { return {}; }
  // Evicts the pod (Kubernetes: the Eviction API with its UID as precondition, so budgets apply).
  // Default: FailedPrecondition, the backend cannot evict (standalone).
  virtual StatusOr<EvictionOutcome> EvictPod(const BindTarget& pod) {
    return Status::FailedPrecondition("this backend cannot evict " + pod.ns + "/" + pod.name +
                                      " (standalone mode has no cluster to evict from)");
  }
  // Whether this replica may act for the whole cluster now (defragmentation's evictions): it
  // holds the cluster's actor lease, renewed or taken for `ttl`, and no other replica does.
  // Default: true (standalone is one process).
  virtual StatusOr<bool> TakeActorLease(std::chrono::seconds /*ttl*/) { return true; }
  // Tells the pod's owner something about it (Kubernetes: an Event on the pod, asynchronously;
  // `warning` picks the Event's type). Default: nothing beyond the extender's own log line.
  virtual void ReportOnPod(const BindTarget& /*pod*/, bool /*warning*/, const std::string& /*reason*/,
                           const std::string& /*message*/) {}
  // The backend's own metric families (e.g. watch restarts, relists, sync age), collected at
  // scrape time for the extender's /metrics. None by default.
  virtual std::vector<prometheus::MetricFamily> Metrics() const { return {}; }
  // Why the backend cannot keep a guarantee it is configured to keep (e.g. the bind fence is
  // forbidden), in words for /readyz, which then fails; empty when all is well (the default).
  virtual std::string Problem() const { return ""; }
};

// Standalone mode (docs/cluster-file.md): the inventory is a fixed list of nodes (from the cluster
// file), synced at once; binds are recorded in memory; LookupPod knows nothing (the extender
// remembers requests from filter/prioritize).
class StandaloneBackend final : public ClusterBackend {
 public:
  explicit StandaloneBackend(std::vector<model::Node> nodes);

  Status Start(ClusterState& state) override;
  bool Synced() const override { return true; }
  StatusOr<model::PodRequest> LookupPod(const BindTarget& pod) override;
  Status Bind(const BindTarget& pod, const std::string& node,
              const std::map<std::string, std::string>& annotations) override;
  void Stop() override {}

  struct BindRecord {
    std::string node;
    std::map<std::string, std::string> annotations;
  };
  // Binds recorded so far, by pod UID.
  std::map<std::string, BindRecord> binds() const;

 private:
  std::vector<model::Node> nodes_;
  mutable std::mutex mu_;
  std::map<std::string, BindRecord> binds_;
};

}  // namespace gpupack::extender
