// Long file: one class (the Kubernetes backend) whose informer handlers, bind fence and ledger
// rebuild share one lock; keeping them together keeps the lock protocol checkable in one place.
#include "scheduler/cluster/kube_backend.h"

#include <unistd.h>

#include <algorithm>
#include <future>
#include <iomanip>
#include <limits>
#include <set>
#include <sstream>

#include "api/annotations.h"
#include "api/gpunode.h"
#include "common/log.h"
#include "common/rfc3339.h"
#include "translate/allocation_ledger.h"
#include "translate/node_from_gpunode.h"
#include "translate/pod_request.h"
#include "translate/workload_owner.h"

namespace gpupack::cluster {
namespace {

using Json = nlohmann::json;
constexpr std::string_view kComponent = "kube-backend";
constexpr size_t kMaxQueuedEvents = 1000;
// A fresh read older than this cannot be in flight any more (the client's call deadline is far
// shorter), so older tombstones can go.
constexpr std::chrono::minutes kTombstoneTtl{10};
constexpr int kFenceAttempts = 8;
// A fence that could not work (RBAC, a missing namespace) is tried again after this long.
constexpr std::chrono::seconds kFenceRetryPeriod{60};
// A refused fence fails binds for this long in a row before it is taken for off: far longer than
// a restarted kube-apiserver takes to fill its RBAC caches, short enough that an install whose
// RBAC lacks the Leases still binds after a minute (loudly).
constexpr std::chrono::seconds kFenceRefusalGrace{60};
constexpr std::string_view kIntentsAnnotation = "gpupack.io/binds-in-flight";
// Staleness is judged by the ClusterState at evaluation time from the heartbeat it is given, so
// the conversion must not bake a verdict in.
constexpr std::chrono::seconds kNeverStale{std::numeric_limits<int32_t>::max()};

kube::EventSpec PodEvent(const extender::BindTarget& pod, std::string type, std::string reason, std::string message) {
  kube::EventSpec ev;
  ev.ns = pod.ns;
  ev.involved_object = {
      {"kind", "Pod"}, {"apiVersion", "v1"}, {"namespace", pod.ns}, {"name", pod.name}, {"uid", pod.uid}};
  ev.type = std::move(type);
  ev.reason = std::move(reason);
  ev.message = std::move(message);
  return ev;
}

std::string AllocationText(const Json& pod) {
  return kube::StringAt(pod, {"metadata", "annotations", std::string(api::kAnnotationAllocation).c_str()});
}

}  // namespace

StatusOr<std::optional<api::Allocation>> PodAllocation(const Json& pod) {
  const std::string phase = kube::StringAt(pod, {"status", "phase"});
  if (phase == "Succeeded" || phase == "Failed") return std::optional<api::Allocation>();
  if (kube::StringAt(pod, {"spec", "nodeName"}).empty()) return std::optional<api::Allocation>();
  const std::string text = AllocationText(pod);
  if (text.empty()) return std::optional<api::Allocation>();
  StatusOr<api::Allocation> alloc = api::DecodeAllocation(text);
  if (!alloc.ok())
    return alloc.status().WithContext("pod " + kube::ObjectKey(pod) + " annotation gpupack.io/allocation");
  return std::optional<api::Allocation>(std::move(alloc).value());
}

Status CheckNodeFits(const model::Node& node, const std::vector<Json>& pods, std::string_view our_uid,
                     const api::Allocation& ours, int ceiling_overcommit_pct) {
  struct Use {
    model::MiB mib = 0;
    model::MiB ceiling_mib = 0;
    int compute_pct = 0;
    bool exclusive = false;
    std::set<std::string> pods;
  };
  std::map<std::string, Use> use;
  std::set<std::string> ours_touches;
  auto add = [&](const api::Allocation& a, const std::string& uid, const std::string& key) {
    for (const auto& [uuid, share] : translate::AllocationShares(a, uid, key, &node)) {
      if (uid == our_uid) ours_touches.insert(uuid);
      Use& u = use[uuid];
      u.mib += share.mem_mib;
      u.ceiling_mib += share.CeilingMiB();
      u.compute_pct += share.compute_pct;
      u.exclusive = u.exclusive || share.exclusive;
      u.pods.insert(key);
    }
  };
  for (const Json& pod : pods) {
    const std::string uid = kube::StringAt(pod, {"metadata", "uid"});
    if (uid == our_uid) continue;
    auto alloc = PodAllocation(pod);
    if (!alloc.ok() || !alloc->has_value()) continue;  // undecodable annotations are not ours to judge here
    add(**alloc, uid, kube::ObjectKey(pod));
  }
  add(ours, std::string(our_uid), "(this bind)");
  for (const model::Device& d : node.devices) {
    // A device this bind leaves alone is not its to judge: one overbooked by others (a race of
    // replicas without a fence, a device that shrank) would otherwise refuse every bind onto the
    // node, on devices with room, for as long as those pods live.
    if (!ours_touches.count(d.uuid)) continue;
    auto it = use.find(d.uuid);
    if (it == use.end()) continue;
    const Use& u = it->second;
    const model::MiB ceiling_bound = d.capacity_mib * ceiling_overcommit_pct / 100;
    const bool over_ceilings = u.ceiling_mib > u.mib && u.ceiling_mib > ceiling_bound;
    const bool over = u.mib > d.capacity_mib || over_ceilings || u.compute_pct > model::kDeviceComputePct ||
                      (u.exclusive && u.pods.size() > 1);
    if (!over) continue;
    std::ostringstream msg;
    msg << "device " << d.uuid << " on node " << node.name << " would be overbooked (" << u.mib << " MiB of "
        << d.capacity_mib << ", ";
    if (over_ceilings) msg << u.ceiling_mib << " MiB of ceilings over the bound of " << ceiling_bound << " MiB, ";
    msg << u.compute_pct << " % compute" << (u.exclusive ? ", exclusive" : "") << ") by pods";
    for (const std::string& p : u.pods) msg << " " << p;
    msg << ": allocations the placement had not counted (another replica's binds, or a Binding that failed to "
           "answer yet landed); retry";
    return Status::Conflict(msg.str());
  }
  return Status::Ok();
}

namespace {

std::string ProcessIdentity() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "unknown-host") + "-" + std::to_string(getpid());
}

}  // namespace

KubeBackend::KubeBackend(std::unique_ptr<kube::Client> client, KubeBackendConfig config, const Clock& clock)
    : client_(std::move(client)),
      config_(std::move(config)),
      clock_(clock),
      identity_(config_.identity.empty() ? ProcessIdentity() : config_.identity) {}

KubeBackend::~KubeBackend() { Stop(); }

Status KubeBackend::Start(extender::ClusterState& state) {
  GPUPACK_CHECK(state_ == nullptr);
  // Calls on the bind path get a short deadline of their own, so that a slow API server fails a
  // bind within kube-scheduler's extender timeout instead of hanging it; lists keep `client_`'s.
  kube::RetryPolicy bind_policy;
  bind_policy.call_timeout = config_.bind_timeout / 2;
  bind_policy.max_attempts = 3;
  bind_policy.initial_backoff = std::chrono::milliseconds(50);
  bind_policy.max_backoff = std::chrono::milliseconds(400);
  bind_policy.idle_connections = std::max(bind_policy.idle_connections, config_.binds_in_flight + 8);
  GPUPACK_ASSIGN_OR_RETURN(bind_client_, kube::Client::Create(client_->config(), bind_policy, &clock_));
  state_ = &state;
  kube::InformerOptions gpu_opts = config_.informer;
  gpu_opts.ns.clear();
  gpu_opts.field_selector.clear();
  gpu_opts.label_selector.clear();
  gpunodes_ = std::make_unique<kube::Informer>(
      client_.get(), kube::GpuNodesResource(), gpu_opts,
      kube::InformerHandlers{[this](const Json& o) { OnGpuNode(o); },
                             [this](const Json&, const Json& o) { OnGpuNode(o); },
                             [this](const Json& o) {
                               state_->RemoveNode(kube::StringAt(o, {"metadata", "name"}));
                             },
                             nullptr},
      &clock_);
  kube::InformerOptions pod_opts = gpu_opts;
  // kube-scheduler's own pod informer selector: terminated pods hold no devices.
  pod_opts.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
  // Cache only the pods gpupack cares about (they ask for gpupack resources or hold an
  // allocation), without the fields it never reads: on a large cluster most pods are neither.
  pod_opts.transform = [](Json& pod) {
    if (!translate::PodAsksForGpupack(pod) && AllocationText(pod).empty()) return false;
    if (pod.contains("metadata") && pod["metadata"].is_object()) pod["metadata"].erase("managedFields");
    if (pod.contains("status") && pod["status"].is_object()) {
      pod["status"] = Json{{"phase", pod["status"].value("phase", "")}};
    }
    return true;
  };
  pods_ = std::make_unique<kube::Informer>(
      client_.get(), kube::PodsResource(), pod_opts,
      kube::InformerHandlers{[this](const Json& o) { OnPod(o); }, [this](const Json&, const Json& o) { OnPod(o); },
                             [this](const Json& o) { OnPodDeleted(o); }, nullptr},
      &clock_);
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = false;
  }
  if (config_.emit_events) event_thread_ = std::thread([this] { EventLoop(); });
  gpunodes_->Start();
  pods_->Start();
  return Status::Ok();
}

bool KubeBackend::Synced() const { return gpunodes_ && pods_ && gpunodes_->HasSynced() && pods_->HasSynced(); }

void KubeBackend::Stop() {
  if (pods_) pods_->Stop();
  if (gpunodes_) gpunodes_->Stop();
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  events_cv_.notify_all();
  if (event_thread_.joinable()) event_thread_.join();
}

void KubeBackend::OnGpuNode(const Json& gpunode) {
  StatusOr<model::Node> node = translate::NodeFromGpuNode(gpunode, kNeverStale, clock_);
  if (!node.ok()) {
    GPUPACK_LOG(kWarning, kComponent) << "ignoring GPUNode update: " << node.status();
    return;
  }
  std::optional<Clock::TimePoint> heartbeat;
  if (auto t = ParseRfc3339(kube::StringAt(gpunode, {"status", "heartbeatTime"})); t.ok())
    heartbeat = *t;
  else
    heartbeat = Clock::TimePoint{};  // never reported: as stale as it gets
  state_->UpsertNode(std::move(node).value(), heartbeat);
  if (config_.usage == nullptr) return;
  auto usage = api::GpuNodeUsageFromJson(gpunode.value("status", Json::object()));
  if (!usage.ok()) {
    GPUPACK_LOG(kWarning, kComponent) << "ignoring the observed use of GPUNode "
                                      << kube::StringAt(gpunode, {"metadata", "name"}) << ": " << usage.status();
    return;
  }
  config_.usage->Observe(*usage);
}

void KubeBackend::OnPod(const Json& pod) {
  const std::string uid = kube::StringAt(pod, {"metadata", "uid"});
  if (uid.empty()) return;
  auto alloc = PodAllocation(pod);
  if (!alloc.ok()) {
    GPUPACK_LOG(kWarning, kComponent) << alloc.status();
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.bad_annotations;
    return;
  }
  if (alloc->has_value()) {
    state_->UpsertPodAllocation(uid, kube::ObjectKey(pod), **alloc);
  } else if (!kube::StringAt(pod, {"spec", "nodeName"}).empty() ||
             kube::StringAt(pod, {"status", "phase"}) == "Succeeded" ||
             kube::StringAt(pod, {"status", "phase"}) == "Failed") {
    // Bound without an allocation, or terminated: it holds nothing. (An unbound pod may hold a
    // reservation of an in-flight bind, which must survive.)
    state_->RemovePod(uid);
  }
}

void KubeBackend::OnPodDeleted(const Json& pod) {
  const std::string uid = kube::StringAt(pod, {"metadata", "uid"});
  if (uid.empty()) return;
  std::lock_guard<std::mutex> l(tombstone_mu_);
  const auto now = clock_.Now();
  while (!tombstone_order_.empty() && now - tombstone_order_.front().first > kTombstoneTtl) {
    tombstones_.erase(tombstone_order_.front().second);
    tombstone_order_.pop_front();
  }
  tombstones_[uid] = now;
  tombstone_order_.emplace_back(now, uid);
  state_->RemovePod(uid);
}

bool KubeBackend::Tombstoned(const std::string& uid) const { return tombstones_.count(uid) > 0; }

std::vector<model::PodRequest> KubeBackend::PodRequestsWhere(const std::function<bool(const Json&)>& keep) const {
  struct Listed {
    Clock::TimePoint created;
    std::string key;
    model::PodRequest request;
  };
  std::vector<Listed> listed;
  if (!pods_) return {};
  for (const Json& pod : pods_->List()) {
    if (!keep(pod)) continue;
    StatusOr<model::PodRequest> request = translate::ParsePodRequest(pod, config_.max_devices_per_container);
    if (!request.ok()) continue;  // OnPod already counted and logged what is wrong with it
    StatusOr<Clock::TimePoint> created = ParseRfc3339(kube::StringAt(pod, {"metadata", "creationTimestamp"}));
    listed.push_back(
        Listed{created.ok() ? *created : Clock::TimePoint{}, kube::ObjectKey(pod), std::move(request).value()});
  }
  std::sort(listed.begin(), listed.end(), [](const Listed& a, const Listed& b) {
    return a.created != b.created ? a.created < b.created : a.key < b.key;
  });
  std::vector<model::PodRequest> out;
  out.reserve(listed.size());
  for (Listed& l : listed) out.push_back(std::move(l.request));
  return out;
}

std::vector<model::PodRequest> KubeBackend::HeldPodRequests() const {
  return PodRequestsWhere([](const Json& pod) {
    StatusOr<std::optional<api::Allocation>> alloc = PodAllocation(pod);
    return alloc.ok() && alloc->has_value();
  });
}

std::vector<model::PodRequest> KubeBackend::WaitingPodRequests() const {
  return PodRequestsWhere([](const Json& pod) {
    const std::string phase = kube::StringAt(pod, {"status", "phase"});
    return kube::StringAt(pod, {"spec", "nodeName"}).empty() && phase != "Succeeded" && phase != "Failed" &&
           kube::StringAt(pod, {"metadata", "deletionTimestamp"}).empty();
  });
}

std::vector<extender::MovablePodOnNode> KubeBackend::MovablePods() const {
  std::vector<extender::MovablePodOnNode> out;
  if (!pods_) return out;
  std::map<std::string, std::pair<std::string, std::string>> where;  // by UID: node and workload
  const std::vector<model::PodRequest> requests = PodRequestsWhere([&](const Json& pod) {
    // The annotation's own check first (only "true" opts in): most pods never opted in, and it
    // spares them the allocation's decoding and the owner's.
    if (kube::StringAt(pod, {"metadata", "annotations", std::string(api::kAnnotationMovable).c_str()}) != "true" ||
        !kube::StringAt(pod, {"metadata", "deletionTimestamp"}).empty()) {
      return false;
    }
    StatusOr<std::optional<api::Allocation>> alloc = PodAllocation(pod);
    if (!alloc.ok() || !alloc->has_value()) return false;
    const translate::WorkloadRef workload = translate::WorkloadOfPod(pod);
    const std::string& kind = workload.kind;
    if (kind != "Deployment" && kind != "ReplicaSet" && kind != "StatefulSet" && kind != "Job") return false;
    where[kube::StringAt(pod, {"metadata", "uid"})] = {
        kube::StringAt(pod, {"spec", "nodeName"}),
        kube::StringAt(pod, {"metadata", "namespace"}) + "/" + kind + "/" + workload.name};
    return true;
  });
  for (const model::PodRequest& request : requests) {
    if (!request.movable) continue;
    const auto& [node, workload] = where[request.uid];
    out.push_back(extender::MovablePodOnNode{request, node, workload});
  }
  return out;
}

StatusOr<bool> KubeBackend::TakeActorLease(std::chrono::seconds ttl) {
  constexpr std::string_view kLease = "gpupack-defrag";
  constexpr const char* kActing = "gpupack.io/acting";
  const std::string ns = FenceNamespace();
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  const std::string acting = Json{{"holder", identity_}, {"until", now + ttl.count()}}.dump();
  StatusOr<Json> got = bind_client_->Get(kube::LeasesResource(), ns, kLease);
  if (!got.ok() && got.status().code() != StatusCode::kNotFound) return got.status();
  if (!got.ok()) {
    StatusOr<Json> created =
        bind_client_->Create(kube::LeasesResource(), ns,
                             {{"apiVersion", "coordination.k8s.io/v1"},
                              {"kind", "Lease"},
                              {"metadata", {{"name", kLease}, {"namespace", ns}, {"annotations", {{kActing, acting}}}}},
                              {"spec", {{"holderIdentity", identity_}}}});
    if (created.ok()) return true;
    if (created.status().code() == StatusCode::kAlreadyExists) return false;  // another replica, first
    return created.status();
  }
  Json lease = std::move(got).value();
  const Json held = Json::parse(kube::StringAt(lease, {"metadata", "annotations", kActing}), nullptr, false);
  if (held.is_object() && held.value("holder", "") != identity_ && held.value("until", int64_t{0}) > now) return false;
  lease["metadata"]["annotations"][kActing] = acting;
  lease["spec"]["holderIdentity"] = identity_;
  StatusOr<Json> written = bind_client_->Update(kube::LeasesResource(), ns, lease);
  if (written.ok()) return true;
  if (written.status().code() == StatusCode::kConflict) return false;  // another replica wrote first
  return written.status();
}

StatusOr<extender::EvictionOutcome> KubeBackend::EvictPod(const extender::BindTarget& pod) {
  GPUPACK_ASSIGN_OR_RETURN(kube::EvictionAnswer answer, bind_client_->EvictPod(pod.ns, pod.name, pod.uid));
  return extender::EvictionOutcome{answer.evicted, answer.message};
}

void KubeBackend::ReportOnPod(const extender::BindTarget& pod, bool warning, const std::string& reason,
                              const std::string& message) {
  QueueEvent(PodEvent(pod, warning ? "Warning" : "Normal", reason, message));
}

StatusOr<model::PodRequest> KubeBackend::LookupPod(const extender::BindTarget& target) {
  std::optional<Json> pod;
  if (pods_) pod = pods_->Get(target.ns + "/" + target.name);
  if (!pod || kube::StringAt(*pod, {"metadata", "uid"}) != target.uid) {
    // Not seen yet (a watch lags a fresh pod): ask the API server.
    StatusOr<Json> fetched = bind_client_->GetPod(target.ns, target.name);
    if (!fetched.ok()) return fetched.status();
    pod = std::move(fetched).value();
  }
  if (!target.uid.empty() && kube::StringAt(*pod, {"metadata", "uid"}) != target.uid) {
    return Status::NotFound("pod " + target.ns + "/" + target.name + " has uid " +
                            kube::StringAt(*pod, {"metadata", "uid"}) + ", not " + target.uid + " (re-created)");
  }
  return translate::ParsePodRequest(*pod, config_.max_devices_per_container);
}

KubeBackend::NodeFence& KubeBackend::FenceOf(const std::string& node) {
  std::lock_guard<std::mutex> l(fences_mu_);
  std::unique_ptr<NodeFence>& f = fences_[node];
  if (!f) f = std::make_unique<NodeFence>();
  return *f;
}

namespace {

// The fence cannot be used at all: RBAC forbids it, or its namespace does not exist (a create
// answered NotFound).
bool FenceUnusable(const Status& s, bool creating) {
  return s.code() == StatusCode::kPermissionDenied || (creating && s.code() == StatusCode::kNotFound);
}

}  // namespace

StatusOr<Json> KubeBackend::ReadFence(const std::string& lease_ns, const std::string& lease_name, bool& unusable) {
  unusable = false;
  StatusOr<Json> got = bind_client_->Get(kube::LeasesResource(), lease_ns, lease_name);
  bool creating = false;
  if (!got.ok() && got.status().code() == StatusCode::kNotFound) {
    creating = true;
    got = bind_client_->Create(kube::LeasesResource(), lease_ns,
                               {{"apiVersion", "coordination.k8s.io/v1"},
                                {"kind", "Lease"},
                                {"metadata", {{"name", lease_name}, {"namespace", lease_ns}}},
                                {"spec", Json::object()}});
  }
  if (!got.ok()) unusable = FenceUnusable(got.status(), creating);
  return got;
}

bool KubeBackend::GoneOrBoundPerApi(const std::string& uid, const Json& intent, const std::string& node) {
  const std::string key = intent.value("pod", "");
  if (!pods_ || pods_->Get(key)) return false;  // the informer knows the pod: BoundHere decided
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return false;
  StatusOr<Json> pod = bind_client_->GetPod(key.substr(0, slash), key.substr(slash + 1));
  if (!pod.ok()) return pod.status().code() == StatusCode::kNotFound;  // gone: its Binding cannot land
  return kube::StringAt(*pod, {"metadata", "uid"}) != uid ||           // recreated: the intent's pod is gone
         kube::StringAt(*pod, {"spec", "nodeName"}) == node;           // bound: every later fresh read lists it
}

bool KubeBackend::BoundHere(const std::string& uid, const Json& intent, const std::string& node) const {
  if (!pods_) return false;
  std::optional<Json> pod = pods_->Get(intent.value("pod", ""));
  return pod && kube::StringAt(*pod, {"metadata", "uid"}) == uid && kube::StringAt(*pod, {"spec", "nodeName"}) == node;
}

StatusOr<kube::ListResult> KubeBackend::FreshReadOf(const std::string& node) {
  kube::ListOptions lo;
  lo.field_selector = "spec.nodeName=" + node;
  return bind_client_->List(kube::PodsResource(), "", lo);
}

KubeBackend::FenceRound KubeBackend::JoinFenceWrite(const std::string& node, const std::string& uid, Json intent) {
  NodeFence& fence = FenceOf(node);
  FenceWaiter me{uid, std::move(intent)};
  std::unique_lock<std::mutex> lock(fence.mu);
  fence.queue.push_back(&me);
  fence.cv.wait(lock, [&] { return me.done || !fence.writing; });
  if (me.done) return me.round;  // a writer took this intent along
  // Become the writer, for every bind queued by now (this one included).
  fence.writing = true;
  std::vector<FenceWaiter*> batch;
  batch.swap(fence.queue);
  std::optional<Json> lease = fence.lease;
  lock.unlock();
  FenceRound round = WriteFence(node, batch, lease);
  lock.lock();
  fence.lease = std::move(lease);
  for (FenceWaiter* waiter : batch) {
    waiter->round = round;
    waiter->done = true;
  }
  fence.writing = false;
  lock.unlock();
  fence.cv.notify_all();
  return me.round;
}

KubeBackend::FenceRound KubeBackend::WriteFence(const std::string& node, const std::vector<FenceWaiter*>& batch,
                                                std::optional<Json>& lease) {
  const std::string lease_name = "gpupack-fence-" + node;
  const std::string lease_ns = FenceNamespace();
  const std::string intents_key(kIntentsAnnotation);
  FenceRound round;
  // 1. The fence as this replica last wrote or read it (no round trip: the write below has its
  //    resourceVersion as precondition, so a fence that moved since makes it conflict), else read.
  if (!lease) {
    bool unusable = false;
    StatusOr<Json> got = ReadFence(lease_ns, lease_name, unusable);
    if (!got.ok()) {
      // A create that raced another replica's: read it again.
      round.outcome = unusable                                            ? FenceRound::kUnusable
                      : got.status().code() == StatusCode::kAlreadyExists ? FenceRound::kRetry
                                                                          : FenceRound::kFailed;
      round.status = got.status();
      return round;
    }
    lease = std::move(got).value();
  }
  // Intents of other pods that are still in flight count as if bound; an intent is dropped once
  // its pod is deleted, expired, or seen bound on the node by the informer, which proves the
  // Binding committed before this write, so that every later fresh read lists the pod.
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  std::set<std::string> ours;
  for (const FenceWaiter* waiter : batch) ours.insert(waiter->uid);
  Json in_flight = Json::object();
  Json stored = Json::parse(kube::StringAt(*lease, {"metadata", "annotations", intents_key.c_str()}), nullptr, false);
  if (stored.is_object()) {
    for (const auto& [uid, intent] : stored.items()) {
      if (ours.count(uid) || !intent.is_object()) continue;
      if (now_s - intent.value("at", int64_t{0}) > config_.intent_ttl.count()) continue;
      {
        std::lock_guard<std::mutex> tl(tombstone_mu_);
        if (Tombstoned(uid)) continue;  // deleted: its bind can no longer land
      }
      if (BoundHere(uid, intent, node)) continue;
      if (GoneOrBoundPerApi(uid, intent, node)) continue;
      in_flight[uid] = intent;
    }
  }
  for (const FenceWaiter* waiter : batch) {
    Json intent = waiter->intent;
    intent["at"] = now_s;
    in_flight[waiter->uid] = std::move(intent);
  }
  Json next = *lease;
  next["metadata"]["annotations"][intents_key] = in_flight.dump();
  // 2. One quorum read of the node's pods for the whole batch, sent after the fence version was
  //    taken and concurrently with the fence write (3), which it does not depend on.
  std::future<StatusOr<kube::ListResult>> listing =
      std::async(std::launch::async, [this, &node] { return FreshReadOf(node); });
  // 3. The batch's intents, with the fence's resourceVersion as precondition: of two replicas
  //    binding onto the node at once, one write conflicts and re-checks against the other's.
  StatusOr<Json> written = bind_client_->Update(kube::LeasesResource(), lease_ns, next);
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.fence_writes;
  }
  round.fresh = std::make_shared<StatusOr<kube::ListResult>>(listing.get());
  if (written.ok()) {
    lease = std::move(written).value();
    round.outcome = FenceRound::kWritten;
    round.in_flight = std::move(in_flight);
    return round;
  }
  lease.reset();
  round.status = written.status();
  if (FenceUnusable(written.status(), false)) {
    round.outcome = FenceRound::kUnusable;
  } else if (written.status().code() == StatusCode::kConflict || written.status().code() == StatusCode::kNotFound) {
    round.outcome = FenceRound::kRetry;  // the fence moved (or was deleted): read it again
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.fence_conflicts;
  } else {
    round.outcome = FenceRound::kFailed;
  }
  return round;
}

Status KubeBackend::FencedCheck(const extender::BindTarget& target, const std::string& node,
                                const std::string& allocation_text) {
  StatusOr<api::Allocation> ours = api::DecodeAllocation(allocation_text);
  if (!ours.ok()) return ours.status().WithContext("our own allocation annotation");
  Status last = Status::Unavailable("fence of node " + node + " is contended");
  const auto deadline = std::chrono::steady_clock::now() + config_.bind_timeout;
  for (int attempt = 0; attempt < kFenceAttempts; ++attempt) {
    if (attempt > 0 && std::chrono::steady_clock::now() > deadline) {
      return Status::DeadlineExceeded("fence of node " + node + ": bind budget spent: " + last.message());
    }
    const bool fencing = FenceActive();
    std::shared_ptr<const StatusOr<kube::ListResult>> fresh;  // a batch's is shared by its binds
    Json others = Json::object();                             // the intents in flight on the node, other than ours
    if (fencing) {
      FenceRound round =
          JoinFenceWrite(node, target.uid, {{"alloc", allocation_text}, {"pod", target.ns + "/" + target.name}});
      if (round.outcome == FenceRound::kUnusable) {
        if (FenceRefusalTransient()) {
          return Status::Unavailable("fence of node " + node + " refused (" + round.status.message() +
                                     "): a kube-apiserver that just started refuses until its RBAC caches fill; "
                                     "retry (refused for " +
                                     std::to_string(kFenceRefusalGrace.count()) +
                                     " s in a row, the fence is taken for off)");
        }
        FenceCannotWork(round.status, target);
        continue;  // fresh read and this replica's own binds only
      }
      if (round.outcome == FenceRound::kRetry) {
        last = round.status;
        continue;
      }
      if (round.outcome == FenceRound::kFailed) return round.status.WithContext("fence of node " + node);
      FenceWorks();
      fresh = std::move(round.fresh);
      others = std::move(round.in_flight);
      others.erase(target.uid);
    } else {
      others = LocalBindsOn(node, target.uid);  // before the read is sent: see kube_backend.h
      fresh = std::make_shared<StatusOr<kube::ListResult>>(FreshReadOf(node));
    }
    if (!fresh->ok()) {
      if (fencing) WithdrawIntent(node, target.uid);
      return fresh->status().WithContext("fresh read of node " + node + "'s pods before the bind");
    }
    const std::vector<Json>& fresh_pods = (*fresh)->items;
    int unseen = 0;
    std::set<std::string> listed;
    for (const Json& pod : fresh_pods) {
      const std::string uid = kube::StringAt(pod, {"metadata", "uid"});
      listed.insert(uid);
      if (uid.empty() || uid == target.uid) continue;
      auto alloc = PodAllocation(pod);
      if (!alloc.ok() || !alloc->has_value()) continue;
      std::lock_guard<std::mutex> tl(tombstone_mu_);
      if (!Tombstoned(uid) && state_->NodeOfPod(uid) != std::optional<std::string>(node)) {
        state_->UpsertPodAllocation(uid, kube::ObjectKey(pod), **alloc);
        ++unseen;
      }
    }
    // 4. Our allocation must fit beside the node's pods and the other binds in flight on it.
    std::vector<Json> holders = fresh_pods;
    for (const auto& [uid, intent] : others.items()) {
      if (listed.count(uid)) continue;
      holders.push_back({{"metadata",
                          {{"uid", uid},
                           {"namespace", "(in flight)"},
                           {"name", intent.value("pod", uid)},
                           {"annotations", {{std::string(api::kAnnotationAllocation), intent.value("alloc", "")}}}}},
                         {"spec", {{"nodeName", node}}}});
    }
    std::optional<Json> gpunode = gpunodes_ ? gpunodes_->Get(node) : std::nullopt;
    Status fits = Status::Ok();
    if (gpunode) {
      StatusOr<model::Node> inventory = translate::NodeFromGpuNode(*gpunode, kNeverStale, clock_);
      if (inventory.ok()) fits = CheckNodeFits(*inventory, holders, target.uid, *ours, config_.ceiling_overcommit_pct);
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      stats_.unseen_allocations += static_cast<uint64_t>(unseen);
      if (!fits.ok()) ++stats_.failover_conflicts;
    }
    if (!fits.ok() && fencing) WithdrawIntent(node, target.uid);  // so it blocks nobody
    return fits;
  }
  return Status::Unavailable("fence of node " + node + " stayed contended: " + last.message());
}

void KubeBackend::WithdrawIntent(const std::string& node, const std::string& uid) {
  if (!FenceActive()) return;
  const std::string lease_name = "gpupack-fence-" + node;
  const std::string key(kIntentsAnnotation);
  NodeFence& fence = FenceOf(node);
  // Takes the writer's turn, like a batch (JoinFenceWrite), so no write of this replica to the
  // node runs beside it.
  std::unique_lock<std::mutex> lock(fence.mu);
  fence.cv.wait(lock, [&] { return !fence.writing; });
  fence.writing = true;
  std::optional<Json> lease = fence.lease;
  lock.unlock();
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (!lease) {
      StatusOr<Json> got = bind_client_->Get(kube::LeasesResource(), FenceNamespace(), lease_name);
      if (!got.ok()) break;
      lease = std::move(got).value();
    }
    Json next = *lease;
    Json intents = Json::parse(kube::StringAt(next, {"metadata", "annotations", key.c_str()}), nullptr, false);
    if (!intents.is_object() || !intents.contains(uid)) break;
    intents.erase(uid);
    next["metadata"]["annotations"][key] = intents.dump();
    StatusOr<Json> written = bind_client_->Update(kube::LeasesResource(), FenceNamespace(), next);
    if (written.ok()) {
      lease = std::move(written).value();
      break;
    }
    lease.reset();
    if (written.status().code() != StatusCode::kConflict) break;
  }
  // Best effort: an intent left behind expires after intent_ttl.
  lock.lock();
  fence.lease = std::move(lease);
  fence.writing = false;
  lock.unlock();
  fence.cv.notify_all();
}

bool KubeBackend::FenceActive() const {
  if (!config_.fencing) return false;
  std::lock_guard<std::mutex> l(mu_);
  return fence_problem_.empty() || clock_.Now() - fence_problem_at_ >= kFenceRetryPeriod;
}

void KubeBackend::FenceCannotWork(const Status& why, const extender::BindTarget& target) {
  bool first = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    first = fence_problem_.empty();
    fence_problem_ = why.ToString();
    fence_problem_at_ = clock_.Now();
  }
  if (!first) return;  // retried after kFenceRetryPeriod and still broken: said already
  const std::string advice = FenceAdvice() +
                             "; until then binds keep only the fresh read, and two extender replicas can book one "
                             "device during a failover";
  GPUPACK_LOG(kError, kComponent) << "per-node bind fences cannot work (" << why << "); " << advice;
  QueueEvent(PodEvent(target, "Warning", "GpupackBindFenceOff",
                      "gpupack's bind fence cannot work (" + why.message() + "); " + advice));
}

std::string KubeBackend::FenceAdvice() const {
  return "grant get, create and update on leases in namespace " + FenceNamespace() + " (which must exist)";
}

bool KubeBackend::FenceRefusalTransient() {
  std::lock_guard<std::mutex> l(mu_);
  const Clock::TimePoint now = clock_.Now();
  if (!fence_refused_since_) fence_refused_since_ = now;
  return now - *fence_refused_since_ < kFenceRefusalGrace;
}

Json KubeBackend::LocalBindsOn(const std::string& node, const std::string& uid) const {
  Json out = Json::object();
  std::lock_guard<std::mutex> l(local_binds_mu_);
  auto it = local_binds_.find(node);
  if (it == local_binds_.end()) return out;
  for (const auto& [other, intent] : it->second) {
    if (other != uid) out[other] = intent;
  }
  return out;
}

void KubeBackend::FenceWorks() {
  std::lock_guard<std::mutex> l(mu_);
  fence_refused_since_.reset();
  if (fence_problem_.empty()) return;
  fence_problem_.clear();
  GPUPACK_LOG(kInfo, kComponent) << "per-node bind fences work again";
}

std::string KubeBackend::Problem() const {
  if (!config_.fencing) return "";
  std::lock_guard<std::mutex> l(mu_);
  if (fence_problem_.empty()) return "";
  return "bind fence off: " + fence_problem_ + "; " + FenceAdvice() + " (tried again every " +
         std::to_string(kFenceRetryPeriod.count()) + " s)";
}

std::string KubeBackend::FenceNamespace() const {
  return config_.fence_namespace.empty() ? client_->config().default_namespace : config_.fence_namespace;
}

bool KubeBackend::AlreadyBoundAsAsked(const extender::BindTarget& target, const std::string& node,
                                      const std::string& allocation_text) {
  StatusOr<Json> pod = bind_client_->GetPod(target.ns, target.name);
  if (!pod.ok()) return false;
  return kube::StringAt(*pod, {"metadata", "uid"}) == target.uid &&
         kube::StringAt(*pod, {"spec", "nodeName"}) == node && AllocationText(*pod) == allocation_text;
}

Status KubeBackend::Bind(const extender::BindTarget& target, const std::string& node,
                         const std::map<std::string, std::string>& annotations) {
  auto alloc_it = annotations.find(std::string(api::kAnnotationAllocation));
  const std::string allocation_text = alloc_it == annotations.end() ? "" : alloc_it->second;
  const bool checked = config_.fresh_read_before_bind && !allocation_text.empty();
  // Registered for the whole bind: until its Binding has answered, a later fresh read need not
  // list it.
  class LocalBind {
   public:
    LocalBind(KubeBackend& backend, const std::string& node, const extender::BindTarget& target,
              const std::string& allocation_text)
        : backend_(backend), node_(node), uid_(target.uid) {
      std::lock_guard<std::mutex> l(backend_.local_binds_mu_);
      backend_.local_binds_[node_][uid_] = Json{{"alloc", allocation_text}, {"pod", target.ns + "/" + target.name}};
    }
    LocalBind(const LocalBind&) = delete;
    LocalBind& operator=(const LocalBind&) = delete;
    ~LocalBind() {
      std::lock_guard<std::mutex> l(backend_.local_binds_mu_);
      auto it = backend_.local_binds_.find(node_);
      if (it == backend_.local_binds_.end()) return;  // a second bind of the same pod ended first
      it->second.erase(uid_);
      if (it->second.empty()) backend_.local_binds_.erase(it);
    }

   private:
    KubeBackend& backend_;
    const std::string& node_;
    const std::string& uid_;
  };
  std::optional<LocalBind> local;
  if (checked) {
    local.emplace(*this, node, target, allocation_text);
    Status fresh = FencedCheck(target, node, allocation_text);
    if (!fresh.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.bind_failures;
      return fresh;
    }
  }
  Status bound = bind_client_->CreateBinding(target.ns, target.name, target.uid, node, annotations);
  if (!bound.ok() && (bound.code() == StatusCode::kConflict || bound.code() == StatusCode::kUnavailable ||
                      bound.code() == StatusCode::kDeadlineExceeded)) {
    // Our own earlier attempt may have landed (a lost response, then a retry that met 409).
    if (AlreadyBoundAsAsked(target, node, allocation_text)) {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.idempotent_rebinds;
      bound = Status::Ok();
    }
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (bound.ok())
      ++stats_.binds;
    else
      ++stats_.bind_failures;
  }
  if (!bound.ok()) {
    if (checked) WithdrawIntent(node, target.uid);  // so it blocks nobody
    return bound;
  }
  if (config_.emit_events && !allocation_text.empty()) {
    std::ostringstream msg;
    msg << "gpupack assigned";
    if (auto a = api::DecodeAllocation(allocation_text); a.ok()) {
      for (const api::ContainerAllocation& c : a->containers) {
        msg << " " << c.name << ":";
        for (const api::AllocatedDevice& d : c.devices) msg << " " << d.uuid << " (" << d.mem_mib << " MiB cap)";
      }
    }
    msg << " on " << node;
    QueueEvent(PodEvent(target, "Normal", "GpupackAssigned", msg.str()));
  }
  return Status::Ok();
}

void KubeBackend::QueueEvent(kube::EventSpec event) {
  std::lock_guard<std::mutex> l(mu_);
  if (events_.size() >= kMaxQueuedEvents) {
    ++stats_.events_dropped;  // events are best effort; never slow a bind down for them
    return;
  }
  events_.push_back(std::move(event));
  events_cv_.notify_one();
}

void KubeBackend::EventLoop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    events_cv_.wait(l, [this] { return stopping_ || !events_.empty(); });
    if (stopping_) return;
    kube::EventSpec ev = std::move(events_.front());
    events_.pop_front();
    l.unlock();
    Status s = client_->CreateEvent(ev);
    if (!s.ok())
      GPUPACK_LOG(kDebug, kComponent) << "event for " << ev.ns << "/" << ev.involved_object.value("name", "") << ": "
                                      << s;
    l.lock();
  }
}

KubeBackendStats KubeBackend::stats() const {
  KubeBackendStats out;
  {
    std::lock_guard<std::mutex> l(mu_);
    out = stats_;
  }
  for (const kube::Informer* inf : {gpunodes_.get(), pods_.get()}) {
    if (inf == nullptr) continue;
    const kube::InformerStats s = inf->stats();
    out.watch_restarts += s.watch_restarts;
    out.relists += s.relists;
    if (out.last_event_time == Clock::TimePoint{} || s.last_event_time < out.last_event_time) {
      out.last_event_time = s.last_event_time;
    }
  }
  return out;
}

std::vector<prometheus::MetricFamily> KubeBackend::Metrics() const {
  std::vector<std::pair<std::string, kube::InformerStats>> per_resource;
  if (pods_) per_resource.emplace_back("pods", pods_->stats());
  if (gpunodes_) per_resource.emplace_back("gpunodes", gpunodes_->stats());
  auto family = [&](const char* name, prometheus::MetricType type, const char* help, auto value) {
    prometheus::MetricFamily out{name, help, type, {}};
    for (const auto& [resource, stats] : per_resource) {
      prometheus::ClientMetric& metric = out.metric.emplace_back();
      metric.label = {{"resource", resource}};
      (type == prometheus::MetricType::Counter ? metric.counter.value : metric.gauge.value) = value(stats);
    }
    return out;
  };
  return {family("gpupack_kube_watch_restarts_total", prometheus::MetricType::Counter,
                 "Watches started after the first, per informer.",
                 [](const kube::InformerStats& s) { return double(s.watch_restarts); }),
          family("gpupack_kube_relists_total", prometheus::MetricType::Counter,
                 "Lists after the first (410 Gone or errors), per informer.",
                 [](const kube::InformerStats& s) { return double(s.relists); }),
          family("gpupack_kube_last_sync_timestamp_seconds", prometheus::MetricType::Gauge,
                 "When the informer last received a list, an event or a bookmark (Unix seconds).",
                 [](const kube::InformerStats& s) {
                   return std::chrono::duration<double>(s.last_event_time.time_since_epoch()).count();
                 }),
          ConnectionsFamily(), FenceUpFamily()};
}

prometheus::MetricFamily KubeBackend::ConnectionsFamily() const {
  prometheus::MetricFamily out{"gpupack_kube_connections_opened_total",
                               "Connections opened to the API server (each a TLS handshake on https), per client.",
                               prometheus::MetricType::Counter,
                               {}};
  for (const auto& [name, client] : {std::pair{"bind", bind_client_.get()}, std::pair{"informers", client_.get()}}) {
    if (client == nullptr) continue;
    prometheus::ClientMetric& metric = out.metric.emplace_back();
    metric.label = {{"client", name}};
    metric.counter.value = double(client->connections_opened());
  }
  return out;
}

prometheus::MetricFamily KubeBackend::FenceUpFamily() const {
  prometheus::MetricFamily out{"gpupack_bind_fence_up",
                               "Whether binds are fenced per node against other extender replicas (1) or not (0).",
                               prometheus::MetricType::Gauge,
                               {}};
  out.metric.emplace_back().gauge.value = config_.fencing && Problem().empty() ? 1 : 0;
  return out;
}

StatusOr<std::unique_ptr<KubeBackend>> NewKubeBackend(const std::string& kubeconfig, KubeBackendConfig config) {
  GPUPACK_ASSIGN_OR_RETURN(kube::Config kc, kube::ConfigFromFlagOrCluster(kubeconfig));
  kube::RetryPolicy list_policy;
  list_policy.call_timeout = std::chrono::seconds(60);  // a first list of a large cluster takes a while
  GPUPACK_ASSIGN_OR_RETURN(std::unique_ptr<kube::Client> client, kube::Client::Create(std::move(kc), list_policy));
  return std::make_unique<KubeBackend>(std::move(client), std::move(config));
}

}  // namespace gpupack::cluster
