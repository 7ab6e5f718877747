#include "scheduler/extender/metrics.h"

#include <map>
#include <set>
#include <string_view>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "common/build_info_metric.h"
#include "model/model.h"
#include "scheduler/extender/cluster_state.h"

namespace gpupack::extender {

namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

prometheus::MetricFamily Gauge(std::string name, std::string help) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = prometheus::MetricType::Gauge;
  return family;
}

void AddSample(prometheus::MetricFamily& family, double value,
               std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

ExtenderMetrics::ExtenderMetrics(const ClusterState* state, bool per_device, const BuildInfo& build)
    : state_(state), per_device_(per_device), registry_(std::make_shared<prometheus::Registry>()) {
  requests_ = &prometheus::BuildCounter()
                   .Name("gpupack_extender_requests_total")
                   .Help(
                       "Extender verb requests by verb and result (ok, no_fit, error; a bind also bound_elsewhere, "
                       "bind_in_progress, node_stale).")
                   .Register(*registry_);
  durations_ = &prometheus::BuildHistogram()
                    .Name("gpupack_extender_request_duration_seconds")
                    .Help("Time to answer an extender verb, body decode to reply encode.")
                    .Register(*registry_);
  rejections_ = &prometheus::BuildCounter()
                     .Name("gpupack_filter_node_rejections_total")
                     .Help("Nodes the filter rejected, by reason.")
                     .Register(*registry_);
  expired_ = &prometheus::BuildCounter()
                  .Name("gpupack_reservations_expired_total")
                  .Help("Device reservations released because their bind never finished.")
                  .Register(*registry_)
                  .Add({});
  expired_holds_ = &prometheus::BuildCounter()
                        .Name("gpupack_filter_holds_expired_total")
                        .Help("Filter holds released because the pod's bind never came.")
                        .Register(*registry_)
                        .Add({});
  defrag_plans_ = &prometheus::BuildCounter()
                       .Name("gpupack_defrag_plans_total")
                       .Help("Defragmentation plans made for pods that fit nowhere, by outcome.")
                       .Register(*registry_);
  defrag_moves_ = &prometheus::BuildCounter()
                       .Name("gpupack_defrag_planned_moves_total")
                       .Help("Pod moves named by defragmentation plans.")
                       .Register(*registry_)
                       .Add({});
  defrag_evictions_ = &prometheus::BuildCounter()
                           .Name("gpupack_defrag_evictions_total")
                           .Help("Pods defragmentation evicted, or did not evict, by result.")
                           .Register(*registry_);
  auto& learned = prometheus::BuildCounter()
                      .Name("gpupack_learner_pods_total")
                      .Help(
                          "Pods counted into the workload learner, each UID once, by where first seen: asked, "
                          "waiting, held.")
                      .Register(*registry_);
  learned_pods_[static_cast<size_t>(LearnedFrom::kAsked)] = &learned.Add({{"source", "asked"}});
  learned_pods_[static_cast<size_t>(LearnedFrom::kWaiting)] = &learned.Add({{"source", "waiting"}});
  learned_pods_[static_cast<size_t>(LearnedFrom::kHeld)] = &learned.Add({{"source", "held"}});
  policy_refreshes_ = &prometheus::BuildCounter()
                           .Name("gpupack_policy_refreshes_total")
                           .Help("Rebuilds of the placement policy from the learned workload and the nodes.")
                           .Register(*registry_)
                           .Add({});
  // All three results from the start, so rates and ratios exist before the first conflict.
  auto& binds = prometheus::BuildCounter()
                    .Name("gpupack_bind_requests_total")
                    .Help(
                        "Bindings the backend wrote (API-server Binding on a cluster), by result: success, "
                        "conflict, error.")
                    .Register(*registry_);
  bind_success_ = &binds.Add({{"result", "success"}});
  bind_conflict_ = &binds.Add({{"result", "conflict"}});
  bind_error_ = &binds.Add({{"result", "error"}});
  ExportBuildInfo(*registry_, build);
}

ExtenderMetrics::~ExtenderMetrics() = default;

void ExtenderMetrics::ObserveRequest(std::string_view verb, std::string_view result, double seconds) {
  requests_->Add({{"verb", std::string(verb)}, {"result", std::string(result)}}).Increment();
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5, 5, 10};
  durations_->Add({{"verb", std::string(verb)}}, kBuckets).Observe(seconds);
}

void ExtenderMetrics::CountRejection(placement::RejectReason reason, int count) {
  if (count <= 0) return;
  rejections_->Add({{"reason", std::string(placement::RejectReasonLabel(reason))}}).Increment(count);
}

void ExtenderMetrics::CountBind(const Status& outcome) {
  if (outcome.ok()) {
    bind_success_->Increment();
  } else if (outcome.code() == StatusCode::kConflict) {
    bind_conflict_->Increment();
  } else {
    bind_error_->Increment();
  }
}

void ExtenderMetrics::CountExpiredHolds(int count) {
  if (count > 0) expired_holds_->Increment(count);
}

void ExtenderMetrics::CountDefragPlan(placement::DefragOutcome outcome, int moves) {
  defrag_plans_->Add({{"outcome", std::string(placement::DefragOutcomeLabel(outcome))}}).Increment();
  if (moves > 0) defrag_moves_->Increment(moves);
}

void ExtenderMetrics::CountDefragEviction(std::string_view result, int count) {
  if (count > 0) defrag_evictions_->Add({{"result", std::string(result)}}).Increment(count);
}

void ExtenderMetrics::CountLearnedPods(LearnedFrom source, int64_t count) {
  if (count > 0) learned_pods_[static_cast<size_t>(source)]->Increment(static_cast<double>(count));
}

void ExtenderMetrics::CountPolicyRefresh() { policy_refreshes_->Increment(); }

void ExtenderMetrics::CountExpiredReservations(int count) {
  if (count > 0) expired_->Increment(count);
}

void ExtenderMetrics::SetReady(bool ready) { ready_.store(ready); }

std::string ExtenderMetrics::Render() const { return prometheus::TextSerializer().Serialize(Collect()); }

std::vector<prometheus::MetricFamily> ExtenderMetrics::Collect() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  prometheus::MetricFamily ready =
      Gauge("gpupack_extender_ready", "1 when the cluster state is synced and verbs are served.");
  AddSample(ready, ready_.load() ? 1 : 0);
  families.push_back(std::move(ready));
  if (state_ != nullptr) {
    prometheus::MetricFamily nodes = Gauge("gpupack_nodes", "Nodes in the extender's GPU inventory.");
    prometheus::MetricFamily pods = Gauge("gpupack_pods", "Pods holding devices in the ledger (bound or reserved).");
    prometheus::MetricFamily reservations =
        Gauge("gpupack_reservations", "Device reservations in flight (bind started, not yet persisted).");
    prometheus::MetricFamily holds =
        Gauge("gpupack_filter_holds", "Pods whose filter passed one node and whose bind has not come yet.");
    prometheus::MetricFamily capacity = Gauge("gpupack_cluster_gpu_memory_bytes", "GPU memory of all devices.");
    prometheus::MetricFamily allocated =
        Gauge("gpupack_cluster_gpu_memory_allocated_bytes", "GPU memory caps allocated (bound and reserved).");
    prometheus::MetricFamily used =
        Gauge("gpupack_cluster_gpu_memory_used_bytes", "GPU memory in use as reported by the agents.");
    prometheus::MetricFamily frag =
        Gauge("gpupack_cluster_fragmentation_ratio",
              "Expected free GPU memory a typical pod could not use (FGD), over all free GPU memory.");
    prometheus::MetricFamily dev_capacity = Gauge("gpupack_gpu_memory_bytes", "GPU memory of one device.");
    prometheus::MetricFamily dev_allocated =
        Gauge("gpupack_gpu_memory_allocated_bytes", "GPU memory caps allocated on one device.");
    prometheus::MetricFamily dev_used =
        Gauge("gpupack_gpu_memory_used_bytes", "GPU memory in use on one device (agent report).");
    prometheus::MetricFamily dev_pods =
        Gauge("gpupack_gpu_pods", "Pods holding a share of one device (bound or reserved).");
    prometheus::MetricFamily node_frag =
        Gauge("gpupack_node_fragmented_gpu_memory_bytes",
              "Expected free GPU memory of the node a typical pod could not use (FGD).");
    prometheus::MetricFamily node_report =
        Gauge("gpupack_node_report_timestamp_seconds",
              "Heartbeat of the node's GPUNode as the extender last accepted it (Unix seconds; 0 = never reported).");
    prometheus::MetricFamily node_reserved =
        Gauge("gpupack_node_reservation_tightness",
              "Capacity reservation price per MiB a pod takes on the node (0 = not reserved; only nodes above 0).");
    prometheus::MetricFamily ns_allocated = Gauge(
        "gpupack_namespace_gpu_memory_allocated_bytes",
        "GPU memory caps allocated to the namespace's pods (bound and reserved; whole devices count their size).");
    prometheus::MetricFamily excluded = Gauge("gpupack_node_excluded_gpus",
                                              "Devices the administrator took out of gpupack's pool (node annotation "
                                              "gpupack.io/excluded-devices); only nodes above 0.");
    std::map<std::string, double> by_namespace;
    double total = 0, total_allocated = 0, total_used = 0, fragmented = 0, free = 0;
    state_->ForEachNode(
        [&](const model::Node& node, const placement::NodeSummary& summary, std::optional<Clock::TimePoint> heartbeat) {
          if (heartbeat) {  // nodes from a cluster file have none
            const std::chrono::duration<double> since_epoch = heartbeat->time_since_epoch();
            AddSample(node_report, since_epoch.count(), {{"node", node.name}});
          }
          fragmented += summary.fragmentation;
          AddSample(node_frag, summary.fragmentation * kBytesPerMiB, {{"node", node.name}});
          // Most nodes reserve nothing: only the few a constrained shape depends on get a series.
          if (summary.reservation_tightness > 0)
            AddSample(node_reserved, summary.reservation_tightness, {{"node", node.name}});
          free += static_cast<double>(summary.total_free);
          int excluded_here = 0;
          for (const model::Device& device : node.devices) {
            model::MiB caps = 0;
            for (const model::DeviceShare& share : device.shares) {
              caps += share.mem_mib;
              by_namespace[share.pod_key.substr(0, share.pod_key.find('/'))] += static_cast<double>(share.mem_mib);
            }
            excluded_here += device.excluded ? 1 : 0;
            total += static_cast<double>(device.capacity_mib);
            total_allocated += static_cast<double>(caps);
            total_used += static_cast<double>(device.used_mib);
            if (!per_device_) continue;
            std::vector<prometheus::ClientMetric::Label> labels = {
                {"node", node.name},
                {"gpu_uuid", device.uuid},
                {"gpu_index", std::to_string(device.index)},
                {"gpu_model", device.model},
                {"mig_profile", device.kind == model::DeviceKind::kMig ? device.mig_profile : std::string()}};
            AddSample(dev_capacity, static_cast<double>(device.capacity_mib) * kBytesPerMiB, labels);
            AddSample(dev_allocated, static_cast<double>(caps) * kBytesPerMiB, labels);
            AddSample(dev_used, static_cast<double>(device.used_mib) * kBytesPerMiB, labels);
            std::set<std::string_view> pod_uids;
            for (const model::DeviceShare& share : device.shares) pod_uids.insert(share.pod_uid);
            AddSample(dev_pods, static_cast<double>(pod_uids.size()), std::move(labels));
          }
          if (excluded_here > 0) AddSample(excluded, excluded_here, {{"node", node.name}});
        });
    for (const auto& [ns, mib] : by_namespace) AddSample(ns_allocated, mib * kBytesPerMiB, {{"namespace", ns}});
    AddSample(nodes, static_cast<double>(state_->NodeCount()));
    AddSample(pods, static_cast<double>(state_->PodCount()));
    AddSample(reservations, static_cast<double>(state_->ReservationCount()));
    AddSample(holds, static_cast<double>(state_->HoldCount()));
    AddSample(capacity, total * kBytesPerMiB);
    AddSample(allocated, total_allocated * kBytesPerMiB);
    AddSample(used, total_used * kBytesPerMiB);
    AddSample(frag, free > 0 ? fragmented / free : 0);
    for (auto* family : {&nodes, &pods, &reservations, &holds, &capacity, &allocated, &used, &frag, &node_frag,
                         &node_report, &node_reserved, &ns_allocated, &excluded}) {
      families.push_back(std::move(*family));
    }
    if (per_device_) {
      for (auto* family : {&dev_capacity, &dev_allocated, &dev_used, &dev_pods}) families.push_back(std::move(*family));
    }
  }
  return families;
}

}  // namespace gpupack::extender
