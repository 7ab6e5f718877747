#include "sim/policy.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "placement/decision.h"
#include "placement/placement.h"

namespace gpupack::sim {

model::PodRequest ArrivalRequest(const SimPod& pod) {
  model::PodRequest request = *pod.request;
  request.name = pod.name;
  request.uid = pod.name;
  return request;
}

uint64_t Rng::Below(uint64_t n) {
  // Rejection sampling: the largest multiple of n that fits keeps every residue equally likely.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t r;
  do {
    r = engine_();
  } while (r >= limit);
  return r % n;
}

namespace {

// Whole devices: the first k empty devices by index (AllocateExclusiveGpuId).
bool FirstEmpty(const ClusterState& s, int n, const Demand& d, std::vector<int>& slots) {
  slots.clear();
  const int devices = static_cast<int>(s.nodes()[n].devices.size());
  for (int g = 0; g < devices && static_cast<int>(slots.size()) < d.device_count; ++g) {
    if (s.DeviceFits(n, g, d)) slots.push_back(g);
  }
  return static_cast<int>(slots.size()) == d.device_count;
}

// Shared devices: the k devices with the least free memory that fit (ties: lowest index).
bool BestFitDevices(const ClusterState& s, int n, const Demand& d, std::vector<int>& slots) {
  slots.clear();
  const auto& devs = s.nodes()[n].devices;
  for (int g = 0; g < static_cast<int>(devs.size()); ++g) {
    if (s.DeviceFits(n, g, d)) slots.push_back(g);
  }
  if (static_cast<int>(slots.size()) < d.device_count) return false;
  std::stable_sort(slots.begin(), slots.end(), [&](int a, int b) { return devs[a].free < devs[b].free; });
  slots.resize(d.device_count);
  return true;
}

bool DefaultDevices(const ClusterState& s, int n, const Demand& d, std::vector<int>& slots) {
  if (d.device_count == 0) {
    slots.clear();
    return true;
  }
  return d.whole() ? FirstEmpty(s, n, d, slots) : BestFitDevices(s, n, d, slots);
}

enum class Baseline { kRandom, kDotProd, kClustering, kPacking, kBestFit, kFgd };

class BaselinePolicy final : public SimPolicy {
 public:
  explicit BaselinePolicy(Baseline kind) : kind_(kind) {}

  Status Start(const ClusterState&, const std::vector<model::Node>&, std::span<const int> rank) override {
    rank_.assign(rank.begin(), rank.end());
    return Status::Ok();
  }

  StatusOr<std::optional<Choice>> Choose(const ClusterState& s, const SimPod& pod, Rng& rng) override {
    const Demand& d = pod.demand;
    const int nodes = static_cast<int>(s.nodes().size());
    if (kind_ == Baseline::kRandom) return ChooseRandom(s, d, rng);
    int best = -1;
    int64_t best_score = 0;
    Choice choice;
    for (int n = 0; n < nodes; ++n) {
      if (!s.Fits(n, d)) continue;
      const int64_t score = Score(s, n, d);
      if (best < 0 || score > best_score || (score == best_score && rank_[n] < rank_[best])) {
        best = n;
        best_score = score;
        if (kind_ == Baseline::kFgd) choice.slots = scratch_;
      }
    }
    if (best < 0) return std::optional<Choice>();
    choice.node = best;
    if (kind_ != Baseline::kFgd) DefaultDevices(s, best, d, choice.slots);
    return std::optional<Choice>(std::move(choice));
  }

  void Committed(const SimPod&, const Choice&) override {}

 private:
  StatusOr<std::optional<Choice>> ChooseRandom(const ClusterState& s, const Demand& d, Rng& rng) {
    feasible_.clear();
    for (int n = 0; n < static_cast<int>(s.nodes().size()); ++n) {
      if (s.Fits(n, d)) feasible_.push_back(n);
    }
    if (feasible_.empty()) return std::optional<Choice>();
    Choice choice;
    choice.node = feasible_[rng.Below(feasible_.size())];
    if (d.device_count == 1 && !d.whole()) {
      // Reservoir sampling over the devices with room, as the artifact's random GPU selector.
      int seen = 0;
      const int devices = static_cast<int>(s.nodes()[choice.node].devices.size());
      for (int g = 0; g < devices; ++g) {
        if (!s.DeviceFits(choice.node, g, d)) continue;
        ++seen;
        if (rng.Below(seen) == 0) choice.slots = {g};
      }
    } else {
      DefaultDevices(s, choice.node, d, choice.slots);
    }
    return std::optional<Choice>(std::move(choice));
  }

  int64_t Score(const ClusterState& s, int n, const Demand& d) {
    const SimNode& node = s.nodes()[n];
    const double cpu_norm = static_cast<double>(s.max_node_cpu());
    const double gpu_norm = static_cast<double>(s.max_node_capacity());
    const double cpu_free = static_cast<double>(std::min<int64_t>(node.cpu_free, s.max_node_cpu()));
    const double asked = static_cast<double>(s.ArrivedOf(d));
    switch (kind_) {
      case Baseline::kDotProd: {
        const double dot = (cpu_free / cpu_norm) * (static_cast<double>(d.cpu_milli) / cpu_norm) +
                           (static_cast<double>(node.total_free) / gpu_norm) * (asked / gpu_norm);
        return static_cast<int64_t>(100.0 * (1.0 - dot / 2.0));
      }
      case Baseline::kBestFit: {
        // Min–max normalisation over nodes is monotone and injective on 0..100, so the ranking
        // of these integer scores is the artifact's.
        const double raw = 0.5 * (cpu_free - static_cast<double>(d.cpu_milli)) / cpu_norm +
                           0.5 * (static_cast<double>(node.total_free) - asked) / gpu_norm;
        return static_cast<int64_t>(100.0 * (1.0 - raw));
      }
      case Baseline::kClustering: {
        if (d.device_count == 0) return 0;
        const int64_t cap = s.max_node_capacity();
        const int64_t fill = 25 * (cap - node.total_free) / cap;
        const int tag = d.whole() ? d.device_count : 0;
        auto it = node.tags.find(tag);
        if (it != node.tags.end() && it->second > 0) return fill + (node.tags.size() == 1 ? 75 : 50);
        return fill + (node.tags.empty() ? 25 : 0);
      }
      case Baseline::kPacking:
        return PackingScore(s, n, d);
      case Baseline::kFgd:
        return FgdNodeScore(s, n, d);
      case Baseline::kRandom:
        break;
    }
    return 0;
  }

  int64_t PackingScore(const ClusterState& s, int n, const Demand& d) {
    if (d.device_count == 0) return 0;
    const auto& devs = s.nodes()[n].devices;
    const int count = static_cast<int>(devs.size());
    int fully_free = 0;
    for (const SimDevice& dev : devs) {
      if (!dev.exclusive && dev.shares == 0 && dev.free == dev.capacity) ++fully_free;
    }
    if (fully_free == count) return std::max<int64_t>(33 - count, count);
    order_.resize(count);
    for (int g = 0; g < count; ++g) order_[g] = g;
    std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) { return devs[a].free < devs[b].free; });
    int need = d.device_count;
    int fresh = 0;
    int64_t free_ratio = 0;
    for (int g : order_) {
      if (need == 0) break;
      if (!s.DeviceFits(n, g, d)) continue;
      --need;
      if (devs[g].free == devs[g].capacity) ++fresh;
      free_ratio += devs[g].free * 100 / std::max<MiB>(1, devs[g].capacity);
    }
    if (fresh > 0) return std::max<int64_t>(50 - fresh, 33);
    return std::max<int64_t>(100 - free_ratio / 10, 50);
  }

  // FGD: the best integer score over the candidate devices (first index on equal scores); the
  // devices that earn it go to scratch_ so the bind uses them.
  int64_t FgdNodeScore(const ClusterState& s, int n, const Demand& d) {
    const double before = s.NodeFragmentation(n);
    if (d.device_count == 0) {
      scratch_.clear();
      return placement::FgdScoreLevel(s.FragmentationAfter(n, d, {}) - before, s.unit_mib());
    }
    if (d.whole() || d.device_count > 1) {
      DefaultDevices(s, n, d, scratch_);
      return placement::FgdScoreLevel(s.FragmentationAfter(n, d, scratch_) - before, s.unit_mib());
    }
    const auto& devs = s.nodes()[n].devices;
    int64_t best = std::numeric_limits<int64_t>::min();
    int best_slot = -1;
    for (int g = 0; g < static_cast<int>(devs.size()); ++g) {
      if (!s.DeviceFits(n, g, d)) continue;
      bool duplicate = false;
      for (int h = 0; h < g && !duplicate; ++h) {
        duplicate = devs[h].free == devs[g].free && devs[h].shares == devs[g].shares && devs[h].type == devs[g].type &&
                    s.DeviceFits(n, h, d);
      }
      if (duplicate) continue;
      const int slot[1] = {g};
      const int64_t score = placement::FgdScoreLevel(s.FragmentationAfter(n, d, slot) - before, s.unit_mib());
      if (score > best) {
        best = score;
        best_slot = g;
      }
    }
    scratch_.assign(1, best_slot);
    return best;
  }

  Baseline kind_;
  std::vector<int> rank_;
  std::vector<int> feasible_;
  std::vector<int> order_;
  std::vector<int> scratch_;
};

// The two-dimensional baselines (docs/simulator.md, "Compute"), on each device's free memory and
// free compute as fractions of the device:
//  * "drf": best fit on the dominant share. The pod's dominant resource on a device is the one it
//    asks the larger fraction of (memory or compute); the device, and the node, where the least of
//    that resource is left after the pod wins.
//  * "tetris": the alignment score of Tetris (Grandl et al., SIGCOMM '14): the dot product of the
//    pod's demand and the free resources, CPU as a fraction of the largest node's and each device's
//    memory and compute as fractions of the device; the largest wins.
// Whole-device and multi-device pods take the default devices (the first empty ones, or best fit
// by memory); ties go to the seed's node order.
class VectorPolicy final : public SimPolicy {
 public:
  explicit VectorPolicy(bool tetris) : tetris_(tetris) {}

  Status Start(const ClusterState&, const std::vector<model::Node>&, std::span<const int> rank) override {
    rank_.assign(rank.begin(), rank.end());
    return Status::Ok();
  }

  StatusOr<std::optional<Choice>> Choose(const ClusterState& s, const SimPod& pod, Rng&) override {
    const Demand& d = pod.demand;
    Choice best;
    double best_score = 0;
    std::vector<int> slots;
    for (int n = 0; n < static_cast<int>(s.nodes().size()); ++n) {
      if (!s.Fits(n, d)) continue;
      const double score = NodeScore(s, n, d, slots);
      if (best.node < 0 || score > best_score || (score == best_score && rank_[n] < rank_[best.node])) {
        best.node = n;
        best.slots = slots;
        best_score = score;
      }
    }
    if (best.node < 0) return std::optional<Choice>();
    return std::optional<Choice>(std::move(best));
  }

  void Committed(const SimPod&, const Choice&) override {}

 private:
  // Higher is better; `slots` gets the devices that earn it.
  double NodeScore(const ClusterState& s, int n, const Demand& d, std::vector<int>& slots) const {
    const SimNode& node = s.nodes()[n];
    const double cpu_norm = static_cast<double>(s.max_node_cpu());
    const double cpu_free = static_cast<double>(std::min<int64_t>(node.cpu_free, s.max_node_cpu()));
    const double cpu_align = (static_cast<double>(d.cpu_milli) / cpu_norm) * (cpu_free / cpu_norm);
    if (d.device_count != 1 || d.whole()) {
      DefaultDevices(s, n, d, slots);
      double score = tetris_ ? cpu_align : 0;
      for (int g : slots) score += DeviceScore(node.devices[g], d);
      return score;
    }
    double best = -1e300;
    slots.assign(1, -1);
    for (int g = 0; g < static_cast<int>(node.devices.size()); ++g) {
      if (!s.DeviceFits(n, g, d)) continue;
      const double score = DeviceScore(node.devices[g], d);
      if (score > best) {
        best = score;
        slots[0] = g;
      }
    }
    return best + (tetris_ ? cpu_align : 0);
  }

  double DeviceScore(const SimDevice& dev, const Demand& d) const {
    const double capacity = static_cast<double>(std::max<MiB>(1, dev.capacity));
    const double mem = d.whole() ? 1.0 : static_cast<double>(d.mem_per_device) / capacity;
    const double compute = ClusterState::ComputeNeed(dev, d) / 100.0;
    const double free_mem = static_cast<double>(dev.free) / capacity;
    const double free_compute = dev.compute_free / 100.0;
    if (tetris_) return mem * free_mem + compute * free_compute;
    // DRF best fit: the least of the dominant resource left (negated: higher is better).
    return -(mem >= compute ? free_mem - mem : free_compute - compute);
  }

  bool tetris_;
  std::vector<int> rank_;
};

// gpupack's own placement, exactly as the extender runs it: the decision module (placement::Decision)
// learns the typical workload from the pods as they arrive and rebuilds the policy when its
// schedule says (Decision::Observe) from the cluster as it is; each node is ranked by placement::RankOf, its tie-break
// rank the extender's (placement::NodeTieBreakRank with the default salt 0), and the lowest key wins (nodes with equal
// keys, possible only with exact costs: the lower tie-break rank). The variants are other placement::DecisionOptions,
// a pinned workload, or other placement::PlacementOptions (the per-process overhead).
class CorePolicy final : public SimPolicy {
 public:
  CorePolicy(model::PolicyKind kind, placement::DecisionOptions options,
             std::optional<placement::TypicalWorkload> pinned, placement::PlacementOptions placement)
      : kind_(kind), options_(options), pinned_(std::move(pinned)), placement_(placement) {}

  Status Start(const ClusterState&, const std::vector<model::Node>& nodes,
               std::span<const int> /*seed_rank*/) override {
    decision_.emplace(pinned_ ? placement::Decision::Pinned(kind_, placement_, options_, *pinned_)
                              : placement::Decision(kind_, placement_, options_));
    nodes_ = nodes;
    // The extender refreshes once as soon as it knows the cluster (its first filter).
    RefreshPolicy();
    order_.clear();
    for (const model::Node& node : nodes_) order_.push_back(NodeOrderOf(node));
    return Status::Ok();
  }

  StatusOr<std::optional<Choice>> Choose(const ClusterState& s, const SimPod& pod, Rng&) override {
    // The extender counts a pod when kube-scheduler first asks about it, before ranking it, and at
    // an early refresh the pods waiting with it; a pod whose CPU or host memory no node has room
    // for is never asked about.
    if (!s.AnyHostFits(pod.demand)) return std::optional<Choice>();
    const auto waiting = [&pod] {
      std::vector<model::PodRequest> requests;
      requests.reserve(pod.waiting.size());
      for (const SimPod& w : pod.waiting) requests.push_back(ArrivalRequest(w));
      return requests;
    };
    if (decision_->Observe(ArrivalRequest(pod), waiting)) RefreshPolicy();
    // The compact filter is the same fit; it only saves the core the infeasible nodes.
    const int best = CoreRankFirst(*decision_, kind_, *policy_, nodes_, summaries_, order_, *pod.request,
                                   [&](int n) { return s.Fits(n, pod.demand); });
    if (best < 0) return std::optional<Choice>();
    // Only the winner's devices are needed; Evaluate makes the same choice Score costed.
    model::Placement best_placement = policy_->Evaluate(nodes_[best], summaries_[best], *pod.request).placement;
    Choice choice;
    choice.node = best;
    for (const auto& cp : best_placement.containers) {
      if (!cp.init) choice.slots.insert(choice.slots.end(), cp.device_slots.begin(), cp.device_slots.end());
    }
    pending_ = std::move(best_placement);
    return std::optional<Choice>(std::move(choice));
  }

  void Committed(const SimPod& pod, const Choice& choice) override {
    model::Node& node = nodes_[choice.node];
    Status st = placement::ApplyPlacement(node, *pod.request, pending_, policy_->options());
    GPUPACK_CHECK(st.ok());
    summaries_[choice.node] = policy_->Summarize(node);
  }

 private:
  void RefreshPolicy() {
    policy_.emplace(decision_->Refresh([&](const std::function<void(const model::Node&)>& visit) {
      for (const model::Node& node : nodes_) visit(node);
    }));
    summaries_.resize(nodes_.size());
    for (size_t n = 0; n < nodes_.size(); ++n) summaries_[n] = policy_->Summarize(nodes_[n]);
  }

  model::PolicyKind kind_;
  placement::DecisionOptions options_;
  std::optional<placement::TypicalWorkload> pinned_;
  placement::PlacementOptions placement_;
  std::optional<placement::Decision> decision_;
  std::optional<placement::Policy> policy_;
  std::vector<model::Node> nodes_;
  std::vector<placement::NodeSummary> summaries_;
  std::vector<NodeOrder> order_;
  model::Placement pending_;
};

}  // namespace

NodeOrder NodeOrderOf(const model::Node& node) {
  return NodeOrder{placement::NodeTieBreakRank(node.name, 0), placement::GpuCount(node)};
}

int CoreRankFirst(const placement::Decision& decision, model::PolicyKind kind, const placement::Policy& policy,
                  std::span<const model::Node> nodes, std::span<const placement::NodeSummary> summaries,
                  std::span<const NodeOrder> order, const model::PodRequest& pod,
                  const std::function<bool(int)>& admits) {
  placement::DecisionOptions options = decision.options();
  options.fgd_levels = kind == model::PolicyKind::kFgd && options.fgd_levels;
  const model::MiB unit = decision.unit_mib();
  int best = -1;
  placement::RankKey best_key;
  const placement::PreparedPod prepared(pod);
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (!admits(n)) continue;
    const placement::NodeScore score = policy.Score(nodes[n], summaries[n], prepared);
    if (!score.verdict.fits()) continue;
    const placement::RankKey key =
        placement::RankOf({score.cost, score.fill_cost, score.reservation_cost, score.completion_loss,
                           order[n].tie_break_rank, order[n].gpu_count},
                          unit, options, pod.node_policy, decision.fewer_gpus_first());
    if (best < 0 || key < best_key || (key == best_key && order[n].tie_break_rank < order[best].tie_break_rank)) {
      best = n;
      best_key = key;
    }
  }
  return best;
}

std::vector<std::string> PolicyNames() {
  return {"gpupack",
          "gpupack-nocompletion",
          "gpupack-nofill",
          "gpupack-noreserve",
          "gpupack-pinned",
          "gpupack-exact",
          "gpupack-pinned-exact",
          "gpupack-binpack",
          "gpupack-spread",
          "gpupack-overhead",
          "random",
          "dotprod",
          "clustering",
          "packing",
          "bestfit",
          "fgd",
          "drf",
          "tetris"};
}

StatusOr<std::unique_ptr<SimPolicy>> MakePolicy(std::string_view name, const placement::TypicalWorkload& typical,
                                                OverheadVariant overhead) {
  // gpupack is the decision module's defaults; each variant changes one of its options.
  auto make = [](model::PolicyKind kind, placement::DecisionOptions options,
                 std::optional<placement::TypicalWorkload> pinned = std::nullopt,
                 placement::PlacementOptions placement = {}) {
    return std::unique_ptr<SimPolicy>(new CorePolicy(kind, options, std::move(pinned), placement));
  };
  const placement::DecisionOptions defaults;
  placement::DecisionOptions variant = defaults;
  if (name == "gpupack") return make(model::PolicyKind::kFgd, defaults);
  if (name == "gpupack-exact" || name == "gpupack-pinned-exact") variant.fgd_levels = false;
  if (name == "gpupack-nocompletion") variant.rank_by_completion = false;
  if (name == "gpupack-nofill") variant.rank_by_fill = false;
  if (name == "gpupack-noreserve") variant.reserve_scarce_capacity = false;
  if (name == "gpupack-exact" || name == "gpupack-nocompletion" || name == "gpupack-nofill" ||
      name == "gpupack-noreserve") {
    return make(model::PolicyKind::kFgd, variant);
  }
  if (name == "gpupack-pinned" || name == "gpupack-pinned-exact") {
    variant.refresh_pods = 0;
    return make(model::PolicyKind::kFgd, variant, typical);
  }
  if (name == "gpupack-binpack") return make(model::PolicyKind::kBinpack, defaults);
  if (name == "gpupack-spread") return make(model::PolicyKind::kSpread, defaults);
  if (name == "gpupack-overhead") {
    placement::PlacementOptions charged;
    charged.process_overhead = overhead.mode;
    charged.process_overhead_mib = overhead.mib;
    return make(model::PolicyKind::kFgd, defaults, std::nullopt, charged);
  }
  static const std::pair<const char*, Baseline> kBaselines[] = {
      {"random", Baseline::kRandom},   {"dotprod", Baseline::kDotProd}, {"clustering", Baseline::kClustering},
      {"packing", Baseline::kPacking}, {"bestfit", Baseline::kBestFit}, {"fgd", Baseline::kFgd}};
  for (const auto& [label, kind] : kBaselines) {
    if (name == label) return std::unique_ptr<SimPolicy>(new BaselinePolicy(kind));
  }
  if (name == "drf" || name == "tetris") return std::unique_ptr<SimPolicy>(new VectorPolicy(name == "tetris"));
  std::string known;
  for (const auto& p : PolicyNames()) known += (known.empty() ? "" : ", ") + p;
  return Status::InvalidArgument("unknown policy \"" + std::string(name) + "\" (known: " + known + ")");
}

}  // namespace gpupack::sim
