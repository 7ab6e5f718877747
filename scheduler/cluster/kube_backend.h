// The extender's Kubernetes backend: the ClusterState is rebuilt from the API server (GPUNode
// objects for inventory, gpupack.io/allocation annotations on pods for the ledger) and kept
// current by informers; binds are Binding objects that carry the allocation annotations, so the
// node and the device decision land on the pod in one atomic write.
//
// Failover safety (docs/kubernetes.md, docs/design.md): kube-scheduler's leader election gives no
// fencing, so a newly active extender may not yet have seen the last binds of the previous one,
// and the previous one's binds may still be in flight. Before every bind to node N this backend
//   1. takes N's fence, a coordination.k8s.io Lease "gpupack-fence-N" whose annotation
//      gpupack.io/binds-in-flight lists binds in flight on N (pod UID → allocation, time), as
//      this replica last wrote or read it (read only when it has none, or the last write failed);
//   2. re-reads N's pods from the API server (a quorum list with fieldSelector=spec.nodeName=N),
//      concurrently with step 3, and records any allocation it had not seen;
//   3. writes its own intent into the fence with the fence's resourceVersion as a precondition,
//      so that of two replicas binding onto N at once one write conflicts and re-checks (from 1,
//      reading the fence);
//   4. refuses the bind (Conflict, withdrawing its intent) if its allocation does not fit beside
//      those pods and the unexpired intents of other pods; the extender releases its reservation
//      and kube-scheduler retries the pod against the corrected ledger;
//   5. posts the Binding.
// An intent is dropped by the next fence write once the pod informer shows its pod bound on N (its
// Binding committed before that write, so every later fresh read lists it), once its pod is
// deleted (seen by the watch, or, for a pod the informer does not know, by a GET), or after
// `intent_ttl`. Binds of this replica to N share steps 1–3: one write at a time
// carries the intents of every bind that queued for it, with one fresh read for them all (each
// bind's step 4 counts the others' intents too); binds to different nodes never wait for each
// other. When the fence cannot work (RBAC
// forbids leases, or the namespace does not exist) binds keep steps 2 and 4, and the backend says
// so loudly: Problem() (so /readyz), the gpupack_bind_fence_up metric, an error log and a Warning
// Event on the pod; the fence is tried again every minute. Step 4 then counts this replica's own
// binds in flight on N in place of the fence's intents (taken before the fresh read is sent, so
// of two overlapping binds the later one sees the earlier: the ledger they were placed from may
// lack a pod whose Binding failed to answer yet landed). A refused fence fails the bind
// (Unavailable; kube-scheduler retries) until the refusals have lasted a minute in a row, and only
// then is taken for off: a kube-apiserver that just restarted answers 403 until its RBAC caches
// fill, and unfenced binds in that failover window are how replicas overbook a device.
//
// Idempotent binds: a Binding whose response was lost (timeout, 5xx after commit) is retried by
// the client; the retry's 409 "already assigned" is turned into success when the pod is bound to
// the same node with the same allocation annotation.
//
// Thread safety: as ClusterBackend (LookupPod, Bind, Synced, stats concurrently).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/allocation.h"
#include "common/clock.h"
#include "common/status.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "placement/placement.h"
#include "scheduler/extender/backend.h"
#include "scheduler/extender/cluster_state.h"
#include "scheduler/extender/usage_store.h"

namespace gpupack::cluster {

struct KubeBackendConfig {
  int max_devices_per_container = 16;
  // Re-read the node's pods before each bind (failover safety). Off only for benchmarks.
  bool fresh_read_before_bind = true;
  // With the fresh read: also serialise binds per node across replicas through a Lease.
  bool fencing = true;
  std::string fence_namespace;          // empty: the client's namespace (in-cluster: the pod's)
  std::chrono::seconds intent_ttl{60};  // longer than any Binding call can take
  // Budget for the API calls of one bind (fence, fresh read, Binding); each call gets half of it.
  // Below kube-scheduler's extender httpTimeout (the chart's default is 5s).
  std::chrono::milliseconds bind_timeout{4000};
  // Binds that may run at once (the extender's bindThreads): the bind path keeps as many idle
  // connections to the API server as they need, plus the fence writes and fresh reads beside them.
  int binds_in_flight = 32;
  // The extender's ceilingOvercommit: the bind's check keeps Σ ceilings per device within this
  // percent of its memory against other replicas' binds too.
  int ceiling_overcommit_pct = placement::kDefaultCeilingOvercommitPct;
  // Emit a Normal event on the pod naming the chosen devices and caps (asynchronously).
  bool emit_events = true;
  // Where each GPUNode's observed use goes (docs/recommendations.md); null = nowhere. Must outlive
  // the backend.
  extender::WorkloadUsageStore* usage = nullptr;
  kube::InformerOptions informer;  // ns/selectors are set by the backend
  // This replica in the defragmentation lease (TakeActorLease); empty: "<host>-<pid>".
  std::string identity;
};

struct KubeBackendStats {
  uint64_t watch_restarts = 0;
  uint64_t relists = 0;
  uint64_t binds = 0;
  uint64_t bind_failures = 0;
  uint64_t idempotent_rebinds = 0;  // 409 turned into success: our own earlier write had landed
  uint64_t failover_conflicts = 0;  // binds refused by the fresh read (unseen allocations)
  uint64_t fence_conflicts = 0;     // fence writes that lost a race and re-checked
  uint64_t fence_writes = 0;        // fence writes sent (one carries every bind queued for it)
  uint64_t unseen_allocations = 0;  // allocations learnt from fresh reads before the watch
  uint64_t bad_annotations = 0;     // pods whose gpupack.io/allocation did not decode
  uint64_t events_dropped = 0;
  Clock::TimePoint last_event_time{};  // oldest of the two informers' last list/event/bookmark
};

// The allocation a pod holds, if it is bound and carries a valid gpupack.io/allocation and is not
// Succeeded or Failed. InvalidArgument (naming the pod) when the annotation does not decode.
StatusOr<std::optional<api::Allocation>> PodAllocation(const nlohmann::json& pod);

// Checks that `ours` fits on `node` together with every allocation in `pods` (other UIDs than
// `our_uid`): per device, Σ caps ≤ capacity, Σ ceilings (a share's limitMiB, else its cap) ≤
// capacity × ceiling_overcommit_pct / 100 when some share has a ceiling, and an exclusive share is
// alone. Conflict naming the device and the pods otherwise. Only the devices `ours` takes a share
// of are judged; devices unknown to `node` are ignored (the ledger keeps them).
Status CheckNodeFits(const model::Node& node, const std::vector<nlohmann::json>& pods, std::string_view our_uid,
                     const api::Allocation& ours, int ceiling_overcommit_pct = placement::kDefaultCeilingOvercommitPct);

class KubeBackend final : public extender::ClusterBackend {
 public:
  KubeBackend(std::unique_ptr<kube::Client> client, KubeBackendConfig config,
              const Clock& clock = SystemClock::Instance());
  ~KubeBackend() override;

  Status Start(extender::ClusterState& state) override;
  bool Synced() const override;
  StatusOr<model::PodRequest> LookupPod(const extender::BindTarget& pod) override;
  // From the pod informer's cache, by metadata.creationTimestamp (then namespace/name).
  std::vector<model::PodRequest> HeldPodRequests() const override;
  // The same cache's unbound, unfinished pods that are not being deleted, in the same order.
  std::vector<model::PodRequest> WaitingPodRequests() const override;
  // From the same cache, in the same order.
  std::vector<extender::MovablePodOnNode> MovablePods() const override;
  // The Lease "gpupack-defrag" in the fence namespace, its annotation gpupack.io/acting naming the
  // holder (host and process) and until when: taken when absent, expired or this replica's, by a
  // write with the Lease's resourceVersion as precondition, so two replicas never both win.
  StatusOr<bool> TakeActorLease(std::chrono::seconds ttl) override;
  // POST pods/{name}/eviction through the bind client, the pod's UID its precondition.
  StatusOr<extender::EvictionOutcome> EvictPod(const extender::BindTarget& pod) override;
  // A Normal or Warning Event on the pod (queued, like the bind's).
  void ReportOnPod(const extender::BindTarget& pod, bool warning, const std::string& reason,
                   const std::string& message) override;
  Status Bind(const extender::BindTarget& pod, const std::string& node,
              const std::map<std::string, std::string>& annotations) override;
  void Stop() override;

  KubeBackendStats stats() const;
  // Informer health, with the names of docs/metrics.md: gpupack_kube_watch_restarts_total,
  // gpupack_kube_relists_total and gpupack_kube_last_sync_timestamp_seconds, each with
  // resource="pods"|"gpunodes". Collected for the extender's /metrics.
  // Plus gpupack_kube_connections_opened_total (client="bind"|"informers") and gpupack_bind_fence_up.
  std::vector<prometheus::MetricFamily> Metrics() const override;
  // Why binds are not fenced although the config asks for it (empty when they are).
  std::string Problem() const override;

 private:
  void OnPod(const nlohmann::json& pod);
  // The requests of the cached pods `keep` accepts whose request parses, oldest first.
  std::vector<model::PodRequest> PodRequestsWhere(const std::function<bool(const nlohmann::json&)>& keep) const;
  void OnPodDeleted(const nlohmann::json& pod);
  void OnGpuNode(const nlohmann::json& gpunode);
  // What one write to a node's fence came to, for every bind it carried.
  struct FenceRound {
    enum Outcome { kWritten, kRetry, kUnusable, kFailed } outcome = kFailed;
    Status status;                                            // why, unless kWritten
    nlohmann::json in_flight;                                 // kWritten: the intents written (UID → intent)
    std::shared_ptr<const StatusOr<kube::ListResult>> fresh;  // the fresh read sent with the write
  };
  // A bind waiting for a write of its node's fence to carry its intent.
  struct FenceWaiter {
    std::string uid;
    nlohmann::json intent;  // {"alloc", "pod"}; the writer stamps "at"
    bool done = false;      // GUARDED_BY(NodeFence::mu)
    FenceRound round;       // GUARDED_BY(NodeFence::mu); set when done
  };
  // A node's fence as this replica last wrote or read it. One write at a time per node: the
  // writer carries the intents of every bind queued when it starts (group commit), so binds to
  // one node share round trips instead of queueing for one write each.
  struct NodeFence {
    std::mutex mu;
    std::condition_variable cv;           // signalled when a write ends
    bool writing = false;                 // GUARDED_BY(mu); a write (or a withdrawal) is out
    std::vector<FenceWaiter*> queue;      // GUARDED_BY(mu); binds waiting for the next write
    std::optional<nlohmann::json> lease;  // GUARDED_BY(mu); nullopt: read it before writing
  };
  NodeFence& FenceOf(const std::string& node);
  // GETs the fence Lease, creating it when missing. `unusable`: the error says the fence cannot
  // work (forbidden, or no such namespace).
  StatusOr<nlohmann::json> ReadFence(const std::string& lease_ns, const std::string& lease_name, bool& unusable);
  // True when the pod informer shows the intent's pod (same UID) bound on `node`.
  bool BoundHere(const std::string& uid, const nlohmann::json& intent, const std::string& node) const;
  // For an intent whose pod the informer does not know (an extender started after the pod was
  // deleted, or before its watch caught up): a quorum GET shows the pod gone, recreated under
  // another UID, or bound on `node`. Each proves the intent's Binding cannot land unseen.
  bool GoneOrBoundPerApi(const std::string& uid, const nlohmann::json& intent, const std::string& node);
  // Step 2: a quorum list of the node's pods on the bind client.
  StatusOr<kube::ListResult> FreshReadOf(const std::string& node);
  // Queues the bind's intent for the node's next fence write, performing that write itself when no
  // other bind of this replica is writing; returns the write's round.
  FenceRound JoinFenceWrite(const std::string& node, const std::string& uid, nlohmann::json intent);
  // Steps 1–3 for a batch: the fence version `lease` (read when nullopt; updated to the written
  // version, reset when the write failed), one fresh read, one write with every batch intent.
  FenceRound WriteFence(const std::string& node, const std::vector<FenceWaiter*>& batch,
                        std::optional<nlohmann::json>& lease);
  // Steps 1–4 above.
  Status FencedCheck(const extender::BindTarget& pod, const std::string& node, const std::string& allocation_text);
  std::string FenceNamespace() const;
  // Removes a bind's intent from the node's fence (best effort).
  void WithdrawIntent(const std::string& node, const std::string& uid);
  // Fencing is configured and not found unusable within the last retry period.
  bool FenceActive() const;
  // The fence was refused (`FenceRound::kUnusable`) for less than kFenceRefusalGrace in a row
  // (since the last fence write that succeeded): maybe a restarting API server's, not yet taken
  // for a missing permission.
  bool FenceRefusalTransient();
  // This replica's binds in flight on `node` (registered by Bind for its whole run), other than
  // `uid`'s, as fence intents (UID → {"alloc", "pod"}).
  nlohmann::json LocalBindsOn(const std::string& node, const std::string& uid) const;
  // Records why the fence cannot work; the first time, logs it and queues a Warning Event on `pod`.
  void FenceCannotWork(const Status& why, const extender::BindTarget& pod);
  // A fence write succeeded: clears a recorded problem.
  void FenceWorks();
  std::string FenceAdvice() const;
  prometheus::MetricFamily ConnectionsFamily() const;
  prometheus::MetricFamily FenceUpFamily() const;
  // After a failed Binding: true when the pod is in fact bound to `node` with `allocation_text`.
  bool AlreadyBoundAsAsked(const extender::BindTarget& pod, const std::string& node,
                           const std::string& allocation_text);
  void QueueEvent(kube::EventSpec event);
  void EventLoop();

  // Pods the watch reported deleted, so that a fresh read that raced with the deletion cannot
  // bring a deleted pod's allocation back. REQUIRES: tombstone_mu_ held.
  bool Tombstoned(const std::string& uid) const;

  std::unique_ptr<kube::Client> client_;       // informers, events
  std::unique_ptr<kube::Client> bind_client_;  // the bind path, with short deadlines
  const KubeBackendConfig config_;
  const Clock& clock_;
  const std::string identity_;  // this replica in the defragmentation lease (config_.identity)
  extender::ClusterState* state_ = nullptr;
  std::unique_ptr<kube::Informer> gpunodes_;
  std::unique_ptr<kube::Informer> pods_;

  // Serialises "tombstone + remove" (watch) against "check tombstone + upsert" (fresh read).
  mutable std::mutex tombstone_mu_;
  std::unordered_map<std::string, Clock::TimePoint> tombstones_;
  std::deque<std::pair<Clock::TimePoint, std::string>> tombstone_order_;

  std::mutex fences_mu_;
  std::map<std::string, std::unique_ptr<NodeFence>> fences_;  // GUARDED_BY(fences_mu_)

  mutable std::mutex mu_;
  KubeBackendStats stats_;
  std::string fence_problem_;                            // GUARDED_BY(mu_); empty: the fence works (or is untried)
  Clock::TimePoint fence_problem_at_{};                  // GUARDED_BY(mu_)
  std::optional<Clock::TimePoint> fence_refused_since_;  // GUARDED_BY(mu_); refusals in a row since

  mutable std::mutex local_binds_mu_;
  // node → UID → intent: binds of this replica between the start of their check and their
  // Binding's answer.
  std::map<std::string, std::map<std::string, nlohmann::json>> local_binds_;  // GUARDED_BY(local_binds_mu_)
  std::deque<kube::EventSpec> events_;
  bool stopping_ = false;
  std::condition_variable events_cv_;
  std::thread event_thread_;
};

// Builds the backend from a kubeconfig path (empty: in-cluster) — the factory that
// scheduler/extender/backend.h declares.
StatusOr<std::unique_ptr<KubeBackend>> NewKubeBackend(const std::string& kubeconfig, KubeBackendConfig config);

}  // namespace gpupack::cluster
