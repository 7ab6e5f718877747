#include "placement/decision.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "placement/completion.h"

namespace gpupack::placement {

namespace {

// Capacity → total memory of the devices of that capacity.
using DeviceMemory = std::map<MiB, int64_t>;

void Tally(const Node& node, DeviceMemory& memory) {
  for (const Device& device : node.devices) {
    if (device.capacity_mib > 0) memory[device.capacity_mib] += device.capacity_mib;
  }
}

// Model → total memory of the devices of that model (those Tally counts).
void TallyModels(const Node& node, std::map<std::string, int64_t>& memory) {
  for (const Device& device : node.devices) {
    if (device.capacity_mib > 0) memory[device.model] += device.capacity_mib;
  }
}

// Adds the node to `largest` if it has at least as many GPUs as the kinds there (replacing them if
// more) and is of a kind not there yet. Nodes with fewer than two GPUs take no whole-node job
// that a one-GPU node could not.
void TallyLargest(const Node& node, std::vector<LargestNode>& largest) {
  const int gpus = GpuCount(node);
  if (gpus < 2 || (!largest.empty() && gpus < largest.front().gpus)) return;
  if (!largest.empty() && gpus > largest.front().gpus) largest.clear();
  const LargestNode kind{gpus, std::max<int64_t>(0, node.cpu_milli), std::max<int64_t>(0, node.memory_bytes)};
  if (std::find(largest.begin(), largest.end(), kind) == largest.end()) largest.push_back(kind);
}

MiB MostMemory(const DeviceMemory& memory, MiB fallback) {
  MiB best = fallback;
  int64_t most = 0;
  for (const auto& [capacity, total] : memory) {
    if (total >= most) {  // ascending capacities: ">=" gives ties to the larger
      best = capacity;
      most = total;
    }
  }
  return best;
}

}  // namespace

MiB TypicalDeviceMiB(std::span<const Node> nodes, MiB fallback) {
  DeviceMemory memory;
  for (const Node& node : nodes) Tally(node, memory);
  return MostMemory(memory, fallback);
}

int GpuCount(const Node& node) {
  int gpus = 0;
  for (const Device& device : node.devices) gpus += device.kind == DeviceKind::kGpu ? 1 : 0;
  return gpus;
}

bool RanksOnLevels(const DecisionOptions& options, std::optional<PolicyKind> pod_node_policy) {
  return options.fgd_levels && (!pod_node_policy || *pod_node_policy == PolicyKind::kFgd);
}

RankKey RankOf(const RankInputs& in, MiB unit_mib, const DecisionOptions& options,
               std::optional<PolicyKind> pod_node_policy, bool fewer_gpus_first) {
  if (!RanksOnLevels(options, pod_node_policy)) return RankKey{in.cost, 0};
  // The keys are small integers folded into one integer-valued double, exact in it: FGD levels
  // are −100..0; fill levels are clamped to ±500 (|ΔF̂| ≤ the node's free memory, ≤ 64 devices =
  // 128 half devices of the unit, plus the reservation price; the clamp only guards the
  // encoding); completion levels are thousandths of the unit device, clamped at 2^14 (16
  // devices' worth; whole-device pods lose the same on every device of a size anyway).
  const double level = -static_cast<double>(FgdScoreLevel(in.cost, unit_mib));
  const double fill_cost = (options.rank_by_fill ? in.fill_cost : 0.0) + in.reservation_cost;
  const double fill = static_cast<double>(std::clamp<int64_t>(FillLevel(fill_cost, unit_mib), -500, 500));
  // The tie is a 53-bit fraction, exact in a double: the node order's leading bits; or, with
  // fewer_gpus_first, the reservation price in 64ths of the unit device (6 bits, clamped: the fill
  // level holds it in half devices, too coarse to keep a scarce node for its pods among equals),
  // then the node's GPUs (6 bits, clamped), then the node order's leading bits.
  const auto six_bits = [](double x) { return static_cast<uint64_t>(std::clamp(x, 0.0, 63.0)); };
  const uint64_t tie_bits = fewer_gpus_first
                                ? six_bits(std::floor(64 * in.reservation_cost / static_cast<double>(unit_mib))) << 47 |
                                      six_bits(in.gpu_count) << 41 | in.tie_break_rank >> 23
                                : in.tie_break_rank >> 11;
  const double tie =
      options.fixed_tie_break ? static_cast<double>(tie_bits) / static_cast<double>(uint64_t{1} << 53) : 0.0;
  if (!options.rank_by_completion) {
    // (FGD level, fill level): levels 1024 apart, more than the fill levels span.
    return RankKey{level * 1024 + fill, tie};
  }
  // (completion level, fill level, FGD level): FGD levels shifted to 0..100 fit below one fill
  // step (128), and fill levels shifted to 12..1012 times 128 fit below one completion step
  // (2^17); the whole stays below 2^31.
  const double loss = static_cast<double>(
      std::clamp<int64_t>(CompletionLossLevel(in.completion_loss, unit_mib), 0, (int64_t{1} << 14) - 1));
  return RankKey{loss * (1 << 17) + (fill + 512) * 128 + (level + 100), tie};
}

namespace {
constexpr MiB kUnknownDeviceMiB = 81920;  // an 80 GB card, until the cluster is known

// Whether `workload` holds the same shapes as `shapes`, whatever their weights and order.
bool SameShapes(const TypicalWorkload& workload, const std::vector<TypicalSpec>& shapes) {
  if (workload.specs.size() != shapes.size()) return false;
  return std::all_of(workload.specs.begin(), workload.specs.end(), [&](const TypicalSpec& spec) {
    return std::any_of(shapes.begin(), shapes.end(), [&](const TypicalSpec& s) { return SameShape(s, spec); });
  });
}
}  // namespace

Decision::Decision(PolicyKind kind, PlacementOptions placement, DecisionOptions options,
                   std::optional<TypicalWorkload> prior)
    : kind_(kind),
      placement_(placement),
      options_(options),
      fixed_prior_(prior.has_value()),
      unit_mib_(options.device_mib > 0 ? options.device_mib : kUnknownDeviceMiB),
      prior_mib_(unit_mib_),
      learner_(prior ? std::move(*prior) : DefaultPriorWorkload(prior_mib_), options.half_life_pods, options.prior_pods,
               options.whole_gpu_prior_pods, options.coverage) {}

Decision Decision::Pinned(PolicyKind kind, PlacementOptions placement, DecisionOptions options,
                          TypicalWorkload workload) {
  Decision decision(kind, placement, options);
  decision.pinned_ = true;
  decision.pinned_workload_ = std::move(workload);
  return decision;
}

Policy Decision::InitialPolicy(MiB device_mib) const {
  return Policy(kind_, pinned_ ? pinned_workload_ : DefaultPriorWorkload(device_mib), placement_);
}

bool Decision::Observe(const PodRequest& pod, const WaitingPods& waiting) {
  if (!learning() || !Record(pod) || !RefreshDue()) return false;
  if (waiting && early()) {
    for (const PodRequest& w : waiting()) seen_waiting_ += Record(w) ? 1 : 0;
  }
  return true;
}

bool Decision::Record(const PodRequest& pod) {
  if (!pod.uid.empty()) {
    if (!counted_.insert(pod.uid).second) return false;
    counted_order_.push_back(pod.uid);
    if (counted_order_.size() > kCountedUids) {
      counted_.erase(counted_order_.front());
      counted_order_.pop_front();
    }
  }
  learner_.Observe(pod);
  ++seen_;
  ++since_refresh_;
  return true;
}

bool Decision::RefreshDue() const {
  const int64_t gap = std::clamp<int64_t>(seen_at_refresh_, 1, options_.refresh_pods);
  if (since_refresh_ >= gap) return true;
  return since_refresh_ >= std::max<int64_t>(1, gap / 8) && !SameShapes(learner_.Snapshot(), refreshed_shapes_);
}

Policy Decision::Refresh(const NodeVisitor& for_each_node) {
  since_refresh_ = 0;
  seen_at_refresh_ = seen_;
  // One pass over the nodes for the device size (unless configured) and, while the learner's
  // hedges can hold, each GPU model's share of the device memory and the kinds of node with the
  // most GPUs; the ranking then keeps larger nodes for later among equals (fewer_gpus_first).
  const bool tally_size = options_.device_mib <= 0;
  const bool window = learning() && learner_.hedge_window();
  fewer_gpus_first_ = window;
  if (tally_size || window) {
    DeviceMemory memory;
    std::map<std::string, int64_t> model_memory;
    std::vector<LargestNode> largest;
    for_each_node([&](const Node& node) {
      Tally(node, memory);
      if (window) {
        TallyModels(node, model_memory);
        TallyLargest(node, largest);
      }
    });
    if (tally_size) unit_mib_ = MostMemory(memory, kUnknownDeviceMiB);
    if (window) {
      learner_.SetLargestNodes(std::move(largest));
      int64_t total = 0;
      for (const auto& [capacity, mib] : memory) total += mib;
      std::vector<ClusterModel> models;
      for (const auto& [model, mib] : model_memory)
        models.push_back(ClusterModel{model, static_cast<double>(mib) / static_cast<double>(total)});
      learner_.SetClusterModels(std::move(models));
    }
  }
  refreshed_shapes_ = learner_.Snapshot().specs;
  if (unit_mib_ != prior_mib_ && !fixed_prior_) {
    prior_mib_ = unit_mib_;
    learner_.SetPrior(DefaultPriorWorkload(prior_mib_));
  }
  // Only the level ranking reads the reservation price and the completion loss (RankOf).
  const bool fgd = kind_ == PolicyKind::kFgd && options_.fgd_levels;
  const bool reserve = fgd && options_.reserve_scarce_capacity;
  const bool complete = fgd && options_.rank_by_completion;
  PolicyRefresh refresh = pinned_ ? PolicyRefresh(kind_, placement_, pinned_workload_, pinned_workload_,
                                                  pinned_workload_, reserve, complete)
                                  : PolicyRefresh(kind_, placement_, learner_, reserve, complete);
  if (reserve || complete) for_each_node([&](const Node& node) { refresh.AddNode(node); });
  return std::move(refresh).Build();
}

}  // namespace gpupack::placement
