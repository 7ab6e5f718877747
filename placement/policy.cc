#include "placement/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "placement/device_pick.h"
#include "placement/fgd_cost.h"

namespace gpupack::placement {

StatusOr<PolicyKind> ParsePolicyKind(std::string_view name) {
  if (name == "fgd") return PolicyKind::kFgd;
  if (name == "binpack") return PolicyKind::kBinpack;
  if (name == "spread") return PolicyKind::kSpread;
  return Status::InvalidArgument("unknown policy \"" + std::string(name) + "\" (want fgd, binpack or spread)");
}

std::string_view PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kFgd:
      return "fgd";
    case PolicyKind::kBinpack:
      return "binpack";
    case PolicyKind::kSpread:
      return "spread";
  }
  return "?";
}

PolicyRefresh::PolicyRefresh(PolicyKind kind, PlacementOptions options, TypicalWorkload typical,
                             const TypicalWorkload& every_shape, const TypicalWorkload& frequent_shapes, bool reserve,
                             bool complete)
    : kind_(kind), options_(options), typical_(std::move(typical)) {
  if (reserve) reservation_.emplace(every_shape, options_);
  if (complete) completion_.emplace(frequent_shapes, options_);
}

PolicyRefresh::PolicyRefresh(PolicyKind kind, PlacementOptions options, const WorkloadLearner& learner, bool reserve,
                             bool complete)
    : PolicyRefresh(kind, options, learner.Snapshot(), reserve ? learner.EveryShape() : TypicalWorkload{},
                    complete ? learner.Snapshot(1.0) : TypicalWorkload{}, reserve, complete) {}

void PolicyRefresh::AddNode(const Node& node) {
  if (reservation_) reservation_->AddNode(node);
  if (completion_) completion_->AddNode(node);
}

Policy PolicyRefresh::Build() && {
  return Policy(kind_, std::move(typical_), options_,
                reservation_ ? std::move(*reservation_).Build() : CapacityReservation(),
                completion_ ? std::move(*completion_).Build() : CompletionValue());
}

int64_t FgdScoreLevel(double delta_mib, MiB unit_mib) {
  GPUPACK_CHECK(unit_mib > 0);
  const double x = -delta_mib / static_cast<double>(unit_mib);
  return static_cast<int64_t>(100.0 / (1.0 + std::exp(-x)));
}

int64_t FillLevel(double fill_cost_mib, MiB unit_mib) {
  // The epsilon keeps rounding noise from flipping an exact boundary (ΔF̂ is a difference of
  // sums of MiB·p products, and whole multiples of half a device are common).
  return static_cast<int64_t>(std::floor(2.0 * fill_cost_mib / static_cast<double>(unit_mib) + 1e-9));
}

uint64_t NodeTieBreakRank(std::string_view node_name, uint64_t salt) {
  uint64_t h = 1469598103934665603ULL ^ (salt * 0x9e3779b97f4a7c15ULL);
  for (unsigned char c : node_name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  // Finalise (splitmix64) so names that differ only in the last characters spread evenly.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

Policy::Policy(PolicyKind kind, TypicalWorkload workload, PlacementOptions options, CapacityReservation reservation,
               CompletionValue completion)
    : kind_(kind),
      workload_(std::move(workload)),
      options_(options),
      reservation_(std::move(reservation)),
      completion_(std::move(completion)) {
  workload_.Normalize();
  auto rank = [](const TypicalSpec& s) { return s.device_count == 0 ? 2 : (s.mem_per_device_mib == 0 ? 1 : 0); };
  std::stable_sort(workload_.specs.begin(), workload_.specs.end(), [&](const TypicalSpec& a, const TypicalSpec& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return rank(a) == 0 && a.mem_per_device_mib < b.mem_per_device_mib;
  });
  columns_.n = static_cast<int>(workload_.specs.size());
  for (const auto& s : workload_.specs) {
    if (rank(s) == 0) ++columns_.n_fractional;
    if (rank(s) <= 1) ++columns_.n_device;
    columns_.total_weight += s.weight;
    columns_.max_cpu = std::max(columns_.max_cpu, s.cpu_milli);
  }
  for (int m = 0; m < columns_.n; ++m) {
    const TypicalSpec& s = workload_.specs[m];
    columns_.mem[m] = s.mem_per_device_mib;
    // A CPU-only spec uses no device, so every idle device is a fragment for it (FGD): make it
    // never "satisfied".
    columns_.count[m] = s.device_count == 0 ? std::numeric_limits<int32_t>::max() : s.device_count;
    columns_.cpu[m] = s.cpu_milli;
    columns_.inv_cpu[m] = s.cpu_milli > 0 ? 1.0 / static_cast<double>(s.cpu_milli) : 0.0;
    columns_.host_memory[m] = s.memory_bytes;
    columns_.inv_host_memory[m] = s.memory_bytes > 0 ? 1.0 / static_cast<double>(s.memory_bytes) : 0.0;
    columns_.weight[m] = s.weight;
    if (m >= columns_.n_fractional && m < columns_.n_device && s.device_count > 1)
      columns_.multi_whole |= uint64_t{1} << m;
  }
}

Columns Policy::ColumnsView() const {
  return Columns{columns_.n,
                 columns_.mem.data(),
                 columns_.count.data(),
                 columns_.weight.data(),
                 columns_.n_fractional,
                 columns_.n_device,
                 columns_.total_weight,
                 columns_.cpu.data(),
                 columns_.inv_cpu.data(),
                 columns_.host_memory.data(),
                 columns_.inv_host_memory.data()};
}

NodeEvaluation Policy::Evaluate(const Node& node, const NodeSummary& sum, const PodRequest& pod) const {
  return EvaluateImpl(node, sum, pod, true);
}

NodeScore Policy::Score(const Node& node, const NodeSummary& sum, const PodRequest& pod) const {
  NodeEvaluation e = EvaluateImpl(node, sum, pod, false);
  return NodeScore{std::move(e.verdict), e.cost, e.fill_cost, e.reservation_cost, e.completion_loss};
}

NodeEvaluation Policy::EvaluateImpl(const Node& node, const NodeSummary& sum, const PodRequest& pod,
                                    bool want_placement) const {
  // A summary of another policy's specs would be read past its tallies.
  GPUPACK_CHECK(sum.spec_count == columns_.n);
  const Columns cols = ColumnsView();
  return EvaluatePlacement(
      EvaluationInputs{node, sum, pod, cols, options_, completion_, kind_, columns_.max_cpu, columns_.multi_whole},
      want_placement);
}

}  // namespace gpupack::placement
