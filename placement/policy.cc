#include "placement/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "placement/demand.h"
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
  columns_ = Columns::Of(workload_.specs);
}

Columns Columns::Of(const std::vector<TypicalSpec>& specs) {
  Columns c;
  c.n = static_cast<int>(specs.size());
  for (const auto& s : specs) {
    if (s.device_count > 0 && s.mem_per_device_mib > 0) ++c.n_fractional;
    if (s.device_count > 0) ++c.n_device;
    c.total_weight += s.weight;
    c.max_cpu = std::max(c.max_cpu, s.cpu_milli);
  }
  for (int m = 0; m < c.n; ++m) {
    const TypicalSpec& s = specs[m];
    c.mem[m] = s.mem_per_device_mib;
    c.compute[m] = static_cast<int16_t>(s.compute_pct);
    c.any_compute = c.any_compute || (s.device_count > 0 && s.compute_pct > 0);
    if (m < c.n_fractional && s.compute_pct > 0) c.own_compute |= uint64_t{1} << m;
    // A CPU-only spec uses no device, so every idle device is a fragment for it (FGD): make it
    // never "satisfied".
    c.count[m] = s.device_count == 0 ? std::numeric_limits<int32_t>::max() : s.device_count;
    c.weight[m] = s.weight;
    c.cpu[m] = s.cpu_milli;
    c.inv_cpu[m] = s.cpu_milli > 0 ? 1.0 / static_cast<double>(s.cpu_milli) : 0.0;
    c.host_memory[m] = s.memory_bytes;
    c.inv_host_memory[m] = s.memory_bytes > 0 ? 1.0 / static_cast<double>(s.memory_bytes) : 0.0;
    if (m >= c.n_device) {
      c.cpu_only_weight += s.weight;
      continue;
    }
    c.host_memory_needed |= s.memory_bytes > 0;
    if (DemandOfSpec(s).Unconstrained()) c.any_sort |= uint64_t{1} << m;
    c.cpu_unneeded[m] = s.cpu_milli > 0 ? 0.0 : kUnneededCopies;
    c.host_memory_unneeded[m] = s.memory_bytes > 0 ? 0.0 : kUnneededCopies;
    if (m < c.n_fractional) {
      c.fill_mem[m] = static_cast<double>(s.mem_per_device_mib);
      c.copy_mib[m] = static_cast<double>(s.device_count) * static_cast<double>(s.mem_per_device_mib);
      c.fill_weight[m] = s.weight;
    } else {
      if (s.device_count > 1) c.multi_whole |= uint64_t{1} << m;
      c.whole_count[m] = s.device_count;
      c.whole_inv_count[m] = 1.0 / s.device_count;
      c.whole_weight[m] = s.weight;
    }
  }
  const MiB largest = c.n_fractional > 0 ? c.mem[c.n_fractional - 1] : 0;
  while ((largest >> c.fit_shift) >= Columns::kFitBuckets) ++c.fit_shift;
  c.fit_buckets = static_cast<int>(largest >> c.fit_shift) + 1;
  for (int b = 0, fit = 0; b < c.fit_buckets; ++b) {
    while (fit < c.n_fractional && c.mem[fit] < (MiB{b} << c.fit_shift)) ++fit;
    c.fit_start[b] = static_cast<int8_t>(fit);
  }
  return c;
}

NodeEvaluation Policy::Evaluate(const Node& node, const NodeSummary& sum, const PodRequest& pod) const {
  NodeScore score;
  Placement placement;
  EvaluatePlacement(Inputs(node, sum, PreparedPod(pod)), score, &placement);
  return NodeEvaluation{std::move(score.verdict), score.cost,          score.fill_cost, score.reservation_cost,
                        score.completion_loss,    std::move(placement)};
}

NodeScore Policy::Score(const Node& node, const NodeSummary& sum, const PreparedPod& pod) const {
  NodeScore score;
  EvaluatePlacement(Inputs(node, sum, pod), score, nullptr);
  return score;
}

EvaluationInputs Policy::Inputs(const Node& node, const NodeSummary& sum, const PreparedPod& pod) const {
  // A summary of another policy's specs would be read past its tallies.
  GPUPACK_CHECK(sum.spec_count == columns_.n && sum.fractional_count == columns_.n_fractional);
  return EvaluationInputs{node, sum, pod, columns_, options_, completion_, kind_};
}

}  // namespace gpupack::placement
