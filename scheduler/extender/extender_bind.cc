// The extender's bind and preempt verbs (extender.h): bind reserves (taking over the filter's
// hold), writes the allocation through the backend and confirms or releases; preempt keeps the
// nodes where the victims free room on real devices.
#include <set>

#include "api/allocation.h"
#include "common/log.h"
#include "scheduler/extender/extender.h"
#include "scheduler/extender/verb_support.h"

namespace gpupack::extender {

namespace {

using verbs::kNotSynced;
using verbs::LogDecision;
using verbs::PlainError;
using verbs::VerbTimer;

// "main:GPU-a#0,GPU-b#1 sidecar:MIG-c#2" and the per-device caps, "8192MiB" or "8192MiB,4096MiB".
std::pair<std::string, std::string> DevicesAndCaps(const api::Allocation& allocation) {
  std::string devices, caps;
  std::set<model::MiB> seen;
  for (const api::ContainerAllocation& c : allocation.containers) {
    if (c.within_pod || c.devices.empty()) continue;
    if (!devices.empty()) devices += ' ';
    devices += (c.name.empty() ? std::string(c.init ? "init" : "c") + std::to_string(c.index) : c.name) + ':';
    for (size_t i = 0; i < c.devices.size(); ++i) {
      devices += (i ? "," : "") + c.devices[i].uuid + "#" + std::to_string(c.devices[i].index);
      const std::string cap = c.exclusive ? std::string("whole") : std::to_string(c.devices[i].mem_mib) + "MiB";
      if (seen.insert(c.exclusive ? -1 : c.devices[i].mem_mib).second) caps += (caps.empty() ? "" : ",") + cap;
    }
  }
  return {devices, caps};
}

}  // namespace

Reply Extender::Bind(std::string_view body) {
  VerbTimer timer(metrics_, "bind");
  auto error = [](std::string message) { return Reply{200, api::EncodeBindingResult({std::move(message)})}; };
  StatusOr<api::ExtenderBindingArgs> args = api::DecodeBindingArgs(body);
  if (!args.ok()) return error(args.status().message());
  if (args->pod_uid.empty()) return error("ExtenderBindingArgs.PodUID is empty");
  if (args->node.empty()) return error("ExtenderBindingArgs.Node is empty");
  if (!Ready()) return error(kNotSynced);
  const BindTarget target{args->pod_namespace, args->pod_name, args->pod_uid};
  const std::string pod_key = target.ns + "/" + target.name;

  std::optional<model::PodRequest> request = Recall(target.uid);
  if (!request) {
    StatusOr<model::PodRequest> looked_up = backend_.LookupPod(target);
    if (!looked_up.ok()) return error("cannot bind pod " + pod_key + ": " + looked_up.status().message());
    request = std::move(looked_up).value();
  }
  request->uid = target.uid;
  if (request->ns.empty()) request->ns = target.ns;
  if (request->name.empty()) request->name = target.name;

  // Reserves the pod on the node. When it is refused, or the UID already holds the node (a
  // repeated bind), there is nothing to bind: `done` then holds the reply. A refusal is counted
  // and logged under its own name, so that a lost race (no_fit) is not mistaken for a duplicate
  // bind or a stale node.
  std::optional<Reply> done;
  auto reserve = [&]() -> std::optional<Reservation> {
    StatusOr<ReserveVerdict> verdict = state_.Reserve(*request, args->node);
    if (!verdict.ok() || !verdict->reserved()) {
      const std::string_view label = verdict.ok() ? ReserveRefusalLabel(verdict->refusal) : "error";
      const std::string& why = verdict.ok() ? verdict->message : verdict.status().message();
      timer.set_result(label);
      LogDecision(pod_key, "", "", "", "not bound to " + args->node + " (" + std::string(label) + "): " + why);
      done = error(why);
      return std::nullopt;
    }
    if (verdict->reservation.repeated) {
      timer.set_result("ok");
      done = Reply{200, api::EncodeBindingResult({})};
      return std::nullopt;
    }
    return std::move(verdict->reservation);
  };

  if (!request->WantsDevices()) {
    // No devices, so no annotations. Where gpupack knows the node's CPU and memory (standalone
    // cluster files), the pod's requests still count: they are CPU that GPU pods will lack.
    bool reserved = false;
    if (state_.TracksHostResources(args->node)) {
      if (!reserve()) return *done;
      reserved = true;
    }
    const Status bound = backend_.Bind(target, args->node, {});
    if (metrics_ != nullptr) metrics_->CountBind(bound);
    if (!bound.ok()) {
      if (reserved) state_.Release(target.uid);
      return error(bound.ToString());
    }
    if (reserved) state_.Confirm(target.uid);
    LogDecision(pod_key, args->node, "", "", "bound (the pod asks for no GPU)");
    Learn(*request);
    timer.set_result("ok");
    return Reply{200, api::EncodeBindingResult({})};
  }
  const std::optional<Reservation> reservation = reserve();
  if (!reservation) return *done;
  const Status bound =
      backend_.Bind(target, args->node, api::AllocationAnnotations(reservation->allocation, options_.request_ratio));
  if (metrics_ != nullptr) metrics_->CountBind(bound);
  if (!bound.ok()) {
    state_.Release(target.uid);
    GPUPACK_LOG(kWarning, "extender") << "bind of " << pod_key << " to " << args->node << " failed: " << bound;
    return error("binding pod " + pod_key + " to node " + args->node + " failed: " + bound.ToString());
  }
  state_.Confirm(target.uid);
  const auto [devices, caps] = DevicesAndCaps(reservation->allocation);
  LogDecision(pod_key, args->node, devices, caps,
              "bound (policy " + std::string(placement::PolicyKindName(state_.policy()->kind())) + ")");
  Learn(*request);
  timer.set_result("ok");
  return Reply{200, api::EncodeBindingResult({})};
}

Reply Extender::Preempt(std::string_view body) {
  VerbTimer timer(metrics_, "preempt");
  if (!Ready()) return PlainError(503, kNotSynced);
  StatusOr<api::ExtenderPreemptionArgs> args = api::DecodePreemptionArgs(body);
  if (!args.ok()) return PlainError(400, args.status().message());
  api::ExtenderPreemptionResult result;
  StatusOr<model::PodRequest> pod = ParsePod(args->pod);
  if (pod.ok()) {
    for (auto& [node, victims] : args->victims) {
      // kube-scheduler rejects a kept node without victims, and the extender cannot choose
      // victims itself (it does not know pod priorities), so such nodes are dropped.
      if (victims.pod_uids.empty()) continue;
      if (!pod->WantsDevices()) {
        result.node_name_to_meta_victims.emplace(node, std::move(victims));
        continue;
      }
      const std::set<std::string> uids(victims.pod_uids.begin(), victims.pod_uids.end());
      std::optional<placement::NodeEvaluation> evaluation = state_.EvaluateWithout(node, *pod, uids);
      // Keep the node only where evicting exactly these victims makes room on real devices.
      if (evaluation && evaluation->verdict.fits()) result.node_name_to_meta_victims.emplace(node, std::move(victims));
    }
  }
  timer.set_result(result.node_name_to_meta_victims.empty() && !args->victims.empty() ? "no_fit" : "ok");
  return Reply{200, api::EncodePreemptionResult(result)};
}

}  // namespace gpupack::extender
