// Long file: one class, TentativePlacement, whose steps (verdict, per-container picks, FGD and
// fill tallies, costs) share its state; split across files they would need that state exposed.
#include "placement/device_pick.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "model/rule_names.h"
#include "placement/compute_cost.h"
#include "placement/demand.h"

namespace gpupack::placement {
namespace {

Verdict ResourceVerdict(const NodeSummary& sum, const PodRequest& pod) {
  if (sum.free_cpu_milli >= 0 && pod.cpu_milli > sum.free_cpu_milli) {
    return Verdict::Reject(RejectReason::kInsufficientCpu, false, pod.cpu_milli, sum.free_cpu_milli);
  }
  if (sum.free_memory_bytes >= 0 && pod.memory_bytes > sum.free_memory_bytes) {
    return Verdict::Reject(RejectReason::kInsufficientMemory, false, pod.memory_bytes, sum.free_memory_bytes);
  }
  return Verdict::Fits();
}

// The checks the summary answers, so a fitting node's Node object is never touched (cache
// misses on 5,000 nodes cost more than the arithmetic): Fits() or why the node cannot take the
// pod whatever its devices.
Verdict NodeVerdict(const Node& node, const NodeSummary& sum, const PodRequest& pod) {
  if (sum.stale) return Verdict::Reject(RejectReason::kNodeStale, true, 0, 0, node.stale_reason);
  if (pod.WantsDevices() && sum.device_count == 0) return Verdict::Reject(RejectReason::kNoDevices, true);
  if (pod.spread_across_nodes && !pod.spread_key.empty()) {
    for (const Device& d : node.devices) {
      for (const DeviceShare& s : d.shares) {
        if (s.spread_key != pod.spread_key || s.pod_uid == pod.uid) continue;
        return Verdict::Reject(RejectReason::kExcludedByRule, true, 0, 0,
                               "node already runs " + s.pod_key + " with the same " +
                                   std::string(model::kRuleSpreadKey) + " \"" + pod.spread_key + "\" and " +
                                   std::string(model::kRuleSpreadScope) + " is node");
      }
    }
  }
  return ResourceVerdict(sum, pod);
}

// Why a demand cannot be placed on the node in its current tentative state. Distinguishes what
// no amount of eviction fixes (unresolvable) from a shortage of free memory / devices / compute.
// `free_compute` null: compute is not short anywhere (NodeSummary::compute_slack).
Verdict ShortageVerdict(const Node& node, const MiB* free, const bool* empty, const int16_t* free_compute,
                        const Demand& demand, const PlacementOptions& o) {
  int sort_matching = 0, matching = 0, large_enough = 0, usable_now = 0, memory_now = 0;
  std::array<int, static_cast<int>(Rule::kCount)> refused{};
  MiB largest_capacity = 0, largest_free = 0;
  int compute_need = 0, largest_compute = 0;
  const int n = static_cast<int>(node.devices.size());
  for (int g = 0; g < n; ++g) {
    const Device& d = node.devices[g];
    if (!d.healthy || !SortMatches(d, demand)) continue;
    ++sort_matching;
    if (const Rule rule = FailedRule(d, demand, o); rule != Rule::kNone) {
      ++refused[static_cast<int>(rule)];
      continue;
    }
    ++matching;
    largest_capacity = std::max(largest_capacity, DeviceUsableMiB(d, o));
    if (demand.mem == 0 || DeviceUsableMiB(d, o) >= demand.mem) ++large_enough;
    largest_free = std::max(largest_free, free[g]);
    const bool exclusive = TakesExclusively(d, demand);
    const bool ok = exclusive ? empty[g] && (demand.mem == 0 || free[g] >= demand.mem) : free[g] >= demand.mem;
    if (!ok) continue;
    ++memory_now;
    if (free_compute != nullptr && free_compute[g] < ComputeNeedPct(d, demand, exclusive)) {
      compute_need = std::max(compute_need, ComputeNeedPct(d, demand, exclusive));
      largest_compute = std::max<int>(largest_compute, free_compute[g]);
      continue;
    }
    ++usable_now;
  }
  if (sort_matching == 0) {
    // A hard-isolation pod on a node whose GPUs' caps are not enforced: say why they are not.
    const bool unenforced = demand.hard_isolation && !node.memory_unenforced_reason.empty();
    return Verdict::Reject(RejectReason::kNoMatchingDevice, true, 0, 0,
                           DescribeSort(demand) + (unenforced ? "; " + node.memory_unenforced_reason : ""));
  }
  const std::string rules = DescribeRules(refused, demand, o);
  if (matching == 0) {
    return Verdict::Reject(RejectReason::kExcludedByRule, true, 0, 0,
                           "no device left for " + DescribeSort(demand) + ": " + rules);
  }
  if (large_enough == 0) return Verdict::Reject(RejectReason::kDeviceTooSmall, true, demand.mem, largest_capacity);
  if (large_enough < demand.count) {
    return Verdict::Reject(RejectReason::kTooFewMatchingDevices, true, demand.count, large_enough,
                           DescribeSort(demand) + (rules.empty() ? "" : " (" + rules + ")"));
  }
  if (memory_now >= demand.count) {
    // The memory is there; the compute shares are not.
    return Verdict::Reject(RejectReason::kInsufficientDeviceCompute, false, compute_need, largest_compute,
                           demand.count == 1 ? "" : std::to_string(demand.count) + " devices");
  }
  if (demand.mem == 0) return Verdict::Reject(RejectReason::kInsufficientEmptyDevices, false, demand.count, usable_now);
  if (demand.count == 1)
    return Verdict::Reject(RejectReason::kInsufficientDeviceMemory, false, demand.mem, largest_free);
  return Verdict::Reject(RejectReason::kInsufficientDevices, false, demand.count, usable_now,
                         std::to_string(demand.mem) + " MiB");
}

// One candidate device for one pick, and what taking it costs.
struct Pick {
  int slot = -1;  // -1: no device can take the demand
  double cost = 0;
  double fgd_delta = 0;
  int64_t loss = 0;
  double loss_mib = 0;
  MiB new_free = 0;
  int compute = 0;  // the share the pick reserves (tracked only where compute can be short)
};

// The node as the pod's picks so far leave it, and the costs they add up to. Lives on the
// stack: the hot loop allocates nothing per node. Only the first n device entries and cols.n
// spec entries of its arrays are used; they are left uninitialised beyond that so a node costs
// what it has, not what the maximum is.
class TentativePlacement {
 public:
  TentativePlacement(const EvaluationInputs& in, NodeScore& out, Placement* placement);
  // Places one container with its demand. False when it cannot: out.verdict says why and the
  // placement is empty.
  bool PlaceContainer(const ContainerRequest& c, const Demand& demand, ContainerPlacement* cp);
  // Sets out.cost (and FGD's fill, reservation and completion costs) for the whole placement.
  void FinishCost();

 private:
  void StartFgd();
  bool ReuseHeldDevices(const ContainerRequest& c, const Demand& demand, ContainerPlacement* cp) const;
  // `taken` bit g: the container already has device g.
  Pick BestDevice(const Demand& demand, uint64_t taken) const;
  // The same in two dimensions (compute_mode_): every device the memory and the compute share
  // fit, priced by its completion loss, then the two-dimensional ΔF, under FGD.
  Pick BestDeviceWithCompute(const Demand& demand, uint64_t taken) const;
  bool SameStateSeen(const std::array<int, kMaxDevicesPerNode>& seen, int seen_n, int g, const Demand& demand,
                     bool exclusive) const;
  Pick Candidate(int g, const Demand& demand, bool exclusive) const;
  // Device g's Device::capacity_mib, from the summary on a node of one device size.
  MiB CapacityOf(int g) const {
    return sum_.device_capacity >= 0 ? sum_.device_capacity : node_.devices[g].capacity_mib;
  }
  void Take(const Pick& pick, const Demand& demand, ContainerPlacement* cp);
  void TakeFgd(const Pick& pick);
  void TakeFill(const Pick& pick);
  double FillCost() const;

  const Node& node_;
  const NodeSummary& sum_;
  const PodRequest& pod_;
  const Columns& cols_;
  const PlacementOptions& options_;
  const CompletionValue& completion_;
  NodeScore& out_;
  Placement* const placement_;  // null: the caller wants the score only
  const int n_;
  // The pod may choose its own device and node policies (gpupack.io/device-policy, node-policy);
  // FGD's tallies are kept when either is FGD. Without an override both are the cluster's.
  const PolicyKind device_kind_;
  const PolicyKind node_kind_;
  const bool fgd_;
  WorkState st_;
  uint64_t pod_holds_ = 0;                       // bit g: the pod already got device g
  std::array<MiB, kMaxDevicesPerNode> pod_cap_;  // the pod's cap on each such device
  // The per-spec tallies start as the summary's; copied into st_ only when a pick changes them.
  const int16_t* tally_usable_;
  const MiB* tally_unusable_;
  uint64_t cpu_short_ = 0;
  // FGD cost = (F after the pod's CPU) − F + Σ ΔF of each device pick. The CPU part is zero
  // unless the pod's CPU pushes the node below some spec's CPU.
  double fgd_cost_ = 0;
  uint64_t feasible_ = 0;
  // The fill tallies after the picks so far; copied from the summary at the first pick (on the
  // fast path below, only those of the specs in multi_whole_).
  std::array<int32_t, kMaxTypicalSpecs> fill_empty_devices_;
  std::array<MiB, kMaxTypicalSpecs> fill_usable_free_;
  const int32_t* fill_empty_devices_now_;
  const MiB* fill_usable_free_now_;
  // Off the fast path: the first pick, applied by FillCost on the fly instead of to a copy of the
  // tallies (a later pick copies them and applies both). A pick that matches no spec changes no
  // tally, so a match of 0 stands for none pending.
  FillMove pending_move_;
  MiB fill_total_free_;
  // Usable memory only shrinks with picks, so CPU and host memory ample for the node as it is
  // stay ample after: then U_n(m) is the usable memory itself, F̂ = W·R − Σ_m p_m·U_n(m), and ΔF̂
  // needs no tallies, only Σ p_m·Δusable_m (FillPick) — except for whole specs of several
  // devices, whose usable memory rounds down to whole copies: only their tallies are followed.
  bool fill_fast_ = false;
  const uint64_t multi_whole_;
  bool multi_whole_tallied_ = false;
  double fill_used_delta_ = 0;
  const bool with_completion_;
  double completion_loss_ = 0;
  const bool constrained_;
  int picks_left_;
  // Two dimensions: the pod or a typical shape names a compute share, so FGD's ΔF is the
  // two-dimensional one (compute_cost.h). F̂ and the completion value still measure memory alone:
  // they rank before ΔF as in one dimension (RankOf), and ΔF then tells apart the picks that
  // strand compute.
  const bool compute_mode_;
  // The devices' free compute is followed: in compute_mode_, or where a share on the node
  // reserves more compute than its memory's share, so a memory-only pick can find it short.
  const bool track_compute_;
  std::array<int16_t, kMaxDevicesPerNode> free_compute_;
  std::array<int16_t, kMaxDevicesPerNode> pod_compute_;  // the pod's share on each device it holds
  // Constructed only in compute_mode_ under FGD: its per-device array would otherwise be
  // initialised on every node's evaluation.
  std::optional<ComputeFragmentation> compute_fgd_;
};

bool InComputeMode(const EvaluationInputs& in) { return in.cols.any_compute || in.pod.wants_compute; }

TentativePlacement::TentativePlacement(const EvaluationInputs& in, NodeScore& out, Placement* placement)
    : node_(in.node),
      sum_(in.sum),
      pod_(*in.pod.pod),
      cols_(in.cols),
      options_(in.options),
      completion_(in.completion),
      out_(out),
      placement_(placement),
      n_(in.sum.device_count),
      device_kind_(in.pod.pod->device_policy.value_or(in.policy_kind)),
      node_kind_(in.pod.pod->node_policy.value_or(in.policy_kind)),
      fgd_(device_kind_ == PolicyKind::kFgd || node_kind_ == PolicyKind::kFgd),
      tally_usable_(in.sum.usable()),
      tally_unusable_(in.sum.unusable_free()),
      fill_empty_devices_now_(in.sum.fill_empty_devices()),
      fill_usable_free_now_(in.sum.fill_usable_free()),
      fill_total_free_(in.sum.total_free),
      multi_whole_(in.cols.multi_whole),
      with_completion_(device_kind_ == PolicyKind::kFgd && !in.completion.empty()),
      constrained_(in.pod.constrained),
      picks_left_(in.pod.picks),
      compute_mode_(InComputeMode(in)),
      track_compute_(compute_mode_ || !in.sum.compute_slack) {
  for (int g = 0; g < n_; ++g) {
    st_.free[g] = sum_.devices()[g].free;
    st_.empty[g] = sum_.devices()[g].empty;
  }
  if (track_compute_) {
    for (int g = 0; g < n_; ++g) free_compute_[g] = sum_.devices()[g].free_compute;
  }
  st_.total_free = sum_.total_free;
  st_.free_cpu = sum_.free_cpu_milli < 0 ? -1 : sum_.free_cpu_milli - pod_.cpu_milli;
  st_.free_mem = sum_.free_memory_bytes < 0 ? -1 : sum_.free_memory_bytes - pod_.memory_bytes;
  cpu_short_ = fgd_ ? CpuShortMask(cols_, st_.free_cpu) : 0;
  if (fgd_) StartFgd();
  fill_fast_ = (st_.free_cpu < 0 || st_.free_cpu >= sum_.fill_cpu_ample) &&
               (st_.free_mem < 0 || st_.free_mem >= sum_.fill_memory_ample);
}

// F's change from the pod's CPU alone, before any device pick.
void TentativePlacement::StartFgd() {
  if (compute_mode_) {
    std::array<ComputeDevice, kMaxDevicesPerNode> devices;
    for (int g = 0; g < n_; ++g) {
      devices[g] = ComputeDeviceOf(sum_.devices()[g], CapacityOf(g));
    }
    compute_fgd_.emplace();
    compute_fgd_->Start(cols_, devices.data(), n_, cpu_short_,
                        ComputeFragmentation::SummaryHasTallies(cols_, sum_) ? &sum_ : nullptr);
    if (cpu_short_ != sum_.cpu_short) fgd_cost_ = compute_fgd_->Value() - compute_fgd_->ValueWith(sum_.cpu_short);
    return;
  }
  if (cpu_short_ != sum_.cpu_short) {
    WorkState cpu_only;  // the node's devices as they are, with the pod's CPU taken
    std::copy_n(sum_.usable(), cols_.n, cpu_only.usable.begin());
    std::copy_n(sum_.unusable_free(), cols_.n, cpu_only.unusable_free.begin());
    cpu_only.total_free = sum_.total_free;
    fgd_cost_ = Fragmentation(cols_, cpu_only, cpu_short_) - sum_.fragmentation;
  }
  feasible_ = sum_.satisfied & ~cpu_short_;
}

bool TentativePlacement::PlaceContainer(const ContainerRequest& c, const Demand& demand, ContainerPlacement* cp) {
  uint64_t taken = 0;
  if (c.init && ReuseHeldDevices(c, demand, cp)) return true;

  // Only the device columns are needed to explain a failure, as the container found them. Its
  // own picks change them only before its later rounds: copy them only for a container that
  // picks several devices (most pick one).
  std::array<MiB, kMaxDevicesPerNode> free_copy;
  std::array<bool, kMaxDevicesPerNode> empty_copy;
  std::array<int16_t, kMaxDevicesPerNode> compute_copy;
  const MiB* free_before = st_.free.data();
  const bool* empty_before = st_.empty.data();
  const int16_t* compute_before = track_compute_ ? free_compute_.data() : nullptr;
  if (c.device_count > 1) {
    std::copy_n(st_.free.begin(), n_, free_copy.begin());
    std::copy_n(st_.empty.begin(), n_, empty_copy.begin());
    free_before = free_copy.data();
    empty_before = empty_copy.data();
    if (track_compute_) {
      std::copy_n(free_compute_.begin(), n_, compute_copy.begin());
      compute_before = compute_copy.data();
    }
  }
  for (int round = 0; round < c.device_count; ++round) {
    const Pick pick = BestDevice(demand, taken);
    if (pick.slot < 0) {
      // Report the shortage as the container found the node, not after its own partial picks.
      out_.verdict = ShortageVerdict(node_, free_before, empty_before, compute_before, demand, options_);
      if (placement_ != nullptr) placement_->containers.clear();
      return false;
    }
    Take(pick, demand, cp);
    taken |= uint64_t{1} << pick.slot;
  }
  return true;
}

// An init container reuses devices the pod already holds when k of them carry enough of the
// pod's cap. True when it did (and `cp`, if any, names them).
bool TentativePlacement::ReuseHeldDevices(const ContainerRequest& c, const Demand& demand,
                                          ContainerPlacement* cp) const {
  std::array<int, kMaxDevicesPerNode> held;
  int held_n = 0;
  for (int g = 0; g < n_; ++g) {
    if (!((pod_holds_ >> g) & 1) || !SortMatches(node_.devices[g], demand)) continue;
    const bool ok = c.mem_per_device_mib == 0 ? pod_cap_[g] >= DeviceUsableMiB(node_.devices[g], options_)
                                              : pod_cap_[g] >= c.mem_per_device_mib;
    // A share of its own must be within the pod's (a proportional one is, with the memory).
    if (ok && (demand.compute == 0 || pod_compute_[g] >= demand.compute)) held[held_n++] = g;
  }
  if (held_n < c.device_count) return false;
  if (cp != nullptr) {
    cp->within_pod_devices = true;
    cp->mem_per_device_mib = c.mem_per_device_mib;
    cp->mem_limit_per_device_mib = c.mem_limit_per_device_mib;
    for (int i = 0; i < c.device_count; ++i) {
      cp->device_slots.push_back(held[i]);
      cp->compute_pct.push_back(ComputeNeedPct(node_.devices[held[i]], demand, c.mem_per_device_mib == 0));
      if (c.mem_per_device_mib == 0) cp->mem_per_device_mib = std::max(cp->mem_per_device_mib, pod_cap_[held[i]]);
    }
  }
  return true;
}

// The device the next pick takes: the least completion loss, then the least cost; the first
// such device in slot order. The loss is one table lookup and ranks first, so FGD's ΔF is
// computed only for a device whose loss does not already lose to the best so far.
Pick TentativePlacement::BestDevice(const Demand& demand, uint64_t taken) const {
  if (compute_mode_) return BestDeviceWithCompute(demand, taken);
  DeltaEvaluator delta(cols_, sum_, st_, tally_usable_, tally_unusable_, feasible_);
  Pick best;
  // Devices in identical states give identical costs: evaluate each state once. Before the pod's
  // first pick, the summary knows them for a pod without device rules, on a node where memory
  // alone decides (its twins may differ in compute).
  const bool distinct_known = !constrained_ && pod_holds_ == 0 && !track_compute_;
  const uint64_t every = FirstBits(n_);
  std::array<int, kMaxDevicesPerNode> seen;
  int seen_n = 0;
  for (uint64_t bits = (distinct_known ? sum_.distinct : every) & ~taken; bits != 0; bits &= bits - 1) {
    const int g = std::countr_zero(bits);
    // Unconstrained demands never read the Device: the summary has all they need (an
    // unhealthy device has no free memory and is never empty).
    if (constrained_ && !Allowed(node_.devices[g], demand, options_)) continue;
    const bool exclusive = constrained_ ? TakesExclusively(node_.devices[g], demand) : demand.mem == 0;
    if (exclusive) {
      if (!st_.empty[g] || (demand.mem > 0 && st_.free[g] < demand.mem)) continue;
    } else if (st_.free[g] < demand.mem) {
      continue;
    }
    const int compute = track_compute_ ? ComputeNeedPct(node_.devices[g], demand, exclusive) : 0;
    if (track_compute_ && compute > free_compute_[g]) continue;
    if (!distinct_known) {
      if (SameStateSeen(seen, seen_n, g, demand, exclusive)) continue;
      seen[seen_n++] = g;
    }
    Pick candidate = Candidate(g, demand, exclusive);
    candidate.compute = compute;
    if (best.slot >= 0 && candidate.loss > best.loss) continue;
    if (device_kind_ == PolicyKind::kFgd) {
      candidate.fgd_delta = delta.Delta(g, candidate.new_free);
      candidate.cost = candidate.fgd_delta;
    }
    if (best.slot < 0 || candidate.loss < best.loss || candidate.cost < best.cost) best = candidate;
  }
  // Under another device policy, FGD's tallies are still followed when the node policy is FGD.
  if (best.slot >= 0 && fgd_ && device_kind_ != PolicyKind::kFgd)
    best.fgd_delta = delta.Delta(best.slot, best.new_free);
  return best;
}

Pick TentativePlacement::BestDeviceWithCompute(const Demand& demand, uint64_t taken) const {
  Pick best;
  // Under FGD, a device in the same state as one already evaluated, taken the same way, has the
  // same ΔF and cannot beat it (ties keep the first).
  std::array<int, kMaxDevicesPerNode> seen;
  std::array<bool, kMaxDevicesPerNode> seen_exclusive;
  int seen_n = 0;
  for (int g = 0; g < n_; ++g) {
    if ((taken >> g) & 1) continue;
    // Unconstrained demands read the Device no more than in BestDevice (an unhealthy device has no
    // free memory and is never empty), and its capacity from the summary where it has it.
    if (constrained_ && !Allowed(node_.devices[g], demand, options_)) continue;
    const bool exclusive = constrained_ ? TakesExclusively(node_.devices[g], demand) : demand.mem == 0;
    if (exclusive ? !st_.empty[g] || (demand.mem > 0 && st_.free[g] < demand.mem) : st_.free[g] < demand.mem) continue;
    const int compute = ComputeNeedPct(CapacityOf(g), demand, exclusive);
    if (compute > free_compute_[g]) continue;
    if (device_kind_ == PolicyKind::kFgd) {
      const ComputeDevice& state = compute_fgd_->device(g);
      bool twin = false;
      for (int i = 0; i < seen_n && !twin; ++i) {
        twin = seen_exclusive[i] == exclusive && ComputeFragmentation::SameState(compute_fgd_->device(seen[i]), state);
      }
      if (twin) continue;
      seen[seen_n] = g;
      seen_exclusive[seen_n++] = exclusive;
    }
    Pick candidate = Candidate(g, demand, exclusive);
    candidate.compute = compute;
    const int new_compute = free_compute_[g] - compute;
    if (best.slot >= 0 && candidate.loss > best.loss) continue;
    if (device_kind_ == PolicyKind::kFgd) {
      candidate.fgd_delta = compute_fgd_->Delta(g, candidate.new_free, new_compute);
      candidate.cost = candidate.fgd_delta;
    }
    if (best.slot < 0 || candidate.loss < best.loss || candidate.cost < best.cost) best = candidate;
  }
  if (best.slot >= 0 && fgd_ && device_kind_ != PolicyKind::kFgd)
    best.fgd_delta = compute_fgd_->Delta(best.slot, best.new_free, free_compute_[best.slot] - best.compute);
  return best;
}

bool TentativePlacement::SameStateSeen(const std::array<int, kMaxDevicesPerNode>& seen, int seen_n, int g,
                                       const Demand& demand, bool exclusive) const {
  // Cost depends only on (free, empty, spec match, completion table) and whether the pick is
  // exclusive. Free memory tells most states apart: compare it first.
  const MiB free = st_.free[g];
  const NodeSummary::DeviceSlot& slot = sum_.devices()[g];
  for (int i = 0; i < seen_n; ++i) {
    const int h = seen[i];
    if (st_.free[h] != free) continue;
    if (st_.empty[h] == st_.empty[g] && sum_.devices()[h].spec_match == slot.spec_match &&
        sum_.devices()[h].completion_table == slot.completion_table &&
        exclusive == (constrained_ ? TakesExclusively(node_.devices[h], demand) : demand.mem == 0)) {
      return true;
    }
  }
  return false;
}

// Taking device g, before FGD's ΔF: its new free memory, its completion loss under FGD, its cost
// under binpack (least left over) or spread (most left over).
Pick TentativePlacement::Candidate(int g, const Demand& demand, bool exclusive) const {
  Pick p;
  p.slot = g;
  p.new_free = exclusive ? 0 : st_.free[g] - demand.mem;
  if (device_kind_ == PolicyKind::kFgd) {
    // An exclusive pick takes the whole device, whatever the slices on offer: no loss to
    // rank by (across device sizes it would only prefer the smallest device, against
    // the pods pinned to it, which the reservation prices later in the ranking).
    if (with_completion_ && !exclusive) {
      const NodeSummary::DeviceSlot& slot = sum_.devices()[g];
      const double value_before =
          st_.free[g] == slot.free ? slot.completion_value : completion_.Value(slot.completion_table, st_.free[g]);
      p.loss_mib = value_before - completion_.Value(slot.completion_table, p.new_free);
      // Whole MiB: distinct losses differ by far more, equal ones by float noise only. The loss
      // is ≥ 0 up to float noise, so truncation is the floor there.
      const double level = p.loss_mib + 1e-6;
      p.loss = level >= 0 ? static_cast<int64_t>(level) : static_cast<int64_t>(std::floor(level));
    }
  } else if (device_kind_ == PolicyKind::kBinpack) {
    p.cost = static_cast<double>(p.new_free);  // best fit: least left over
  } else {
    p.cost = -static_cast<double>(p.new_free);  // worst fit: most left over
  }
  return p;
}

void TentativePlacement::Take(const Pick& pick, const Demand& demand, ContainerPlacement* cp) {
  const int best = pick.slot;
  --picks_left_;
  if (compute_mode_) {
    if (fgd_) {
      fgd_cost_ += pick.fgd_delta;
      // The tallies only matter for later picks, as in TakeFgd.
      if (picks_left_ > 0) compute_fgd_->Apply(best, pick.new_free, free_compute_[best] - pick.compute);
      TakeFill(pick);
      completion_loss_ += pick.loss_mib;
    }
    fill_total_free_ += pick.new_free - st_.free[best];
    st_.total_free += pick.new_free - st_.free[best];
    st_.free[best] = pick.new_free;
    st_.empty[best] = false;
  } else if (fgd_) {
    TakeFgd(pick);
  } else {
    st_.total_free += pick.new_free - st_.free[best];
    st_.free[best] = pick.new_free;
    st_.empty[best] = false;
  }
  const Device& d = node_.devices[best];
  const bool exclusive = TakesExclusively(d, demand);
  const MiB cap = exclusive && demand.mem == 0 ? d.capacity_mib : demand.mem;
  // Untracked, the share is only written into the placement.
  const int compute = track_compute_ || cp == nullptr ? pick.compute : ComputeNeedPct(d, demand, exclusive);
  if (track_compute_) free_compute_[best] = static_cast<int16_t>(free_compute_[best] - compute);
  const bool held = (pod_holds_ >> best) & 1;
  pod_cap_[best] = (held ? pod_cap_[best] : 0) + cap;
  pod_compute_[best] = static_cast<int16_t>((held ? pod_compute_[best] : 0) + compute);
  pod_holds_ |= uint64_t{1} << best;
  if (cp != nullptr) {
    cp->device_slots.push_back(best);
    cp->compute_pct.push_back(compute);
    cp->mem_per_device_mib = cap;
    cp->mem_limit_per_device_mib = demand.ceiling > cap ? demand.ceiling : 0;
    cp->exclusive = exclusive;
  }
}

// FGD's tallies after a pick: its ΔF and completion loss, the fill tallies, and the per-spec
// state that later picks' ΔF reads.
void TentativePlacement::TakeFgd(const Pick& pick) {
  const int best = pick.slot;
  fgd_cost_ += pick.fgd_delta;
  completion_loss_ += pick.loss_mib;
  TakeFill(pick);
  fill_total_free_ += pick.new_free - st_.free[best];
  // The state only matters for later picks.
  if (picks_left_ <= 0) return;
  if (tally_usable_ != st_.usable.data()) {
    std::copy_n(sum_.usable(), cols_.n, st_.usable.begin());
    std::copy_n(sum_.unusable_free(), cols_.n, st_.unusable_free.begin());
    tally_usable_ = st_.usable.data();
    tally_unusable_ = st_.unusable_free.data();
  }
  ChangeDevice(cols_, sum_, st_, best, pick.new_free);
  feasible_ = 0;
  for (int m = 0; m < cols_.n; ++m) {
    feasible_ |= static_cast<uint64_t>(!((cpu_short_ >> m) & 1) && st_.usable[m] >= cols_.count[m]) << m;
  }
}

void TentativePlacement::TakeFill(const Pick& pick) {
  const int best = pick.slot;
  const uint64_t match = sum_.devices()[best].spec_match;
  if (fill_fast_) {
    fill_used_delta_ +=
        FillPick(cols_, match & ~multi_whole_, st_.free[best], st_.empty[best], pick.new_free, nullptr, nullptr);
    if ((match & multi_whole_) != 0) {
      if (!multi_whole_tallied_) {
        for (uint64_t bits = multi_whole_; bits != 0; bits &= bits - 1) {
          const int m = std::countr_zero(bits);
          fill_empty_devices_[m] = sum_.fill_empty_devices()[m];
          fill_usable_free_[m] = sum_.fill_usable_free()[m];
        }
        multi_whole_tallied_ = true;
      }
      FillPick(cols_, match & multi_whole_, st_.free[best], st_.empty[best], pick.new_free, fill_empty_devices_.data(),
               fill_usable_free_.data());
    }
  } else if (pending_move_.match == 0 && fill_empty_devices_now_ != fill_empty_devices_.data()) {
    // The first pick: FillCost applies it on the fly, so the tallies need no copy.
    pending_move_ = FillMove{match, st_.free[best], st_.empty[best], pick.new_free};
  } else {
    if (fill_empty_devices_now_ != fill_empty_devices_.data()) {
      std::copy_n(sum_.fill_empty_devices(), cols_.n_device, fill_empty_devices_.begin());
      std::copy_n(sum_.fill_usable_free(), cols_.n_device, fill_usable_free_.begin());
      fill_empty_devices_now_ = fill_empty_devices_.data();
      fill_usable_free_now_ = fill_usable_free_.data();
      FillPick(cols_, pending_move_.match, pending_move_.old_free, pending_move_.old_empty, pending_move_.new_free,
               fill_empty_devices_.data(), fill_usable_free_.data());
      pending_move_ = FillMove{};
    }
    FillPick(cols_, match, st_.free[best], st_.empty[best], pick.new_free, fill_empty_devices_.data(),
             fill_usable_free_.data());
  }
}

// ΔF̂ of the whole placement.
double TentativePlacement::FillCost() const {
  if (!fill_fast_) {
    return FillFragmentation(cols_, fill_empty_devices_now_, fill_usable_free_now_, st_.free_cpu, st_.free_mem,
                             fill_total_free_, pending_move_) -
           sum_.fill_fragmentation;
  }
  double fill_used_delta = fill_used_delta_;
  for (uint64_t bits = multi_whole_tallied_ ? multi_whole_ : 0; bits != 0; bits &= bits - 1) {
    const int m = std::countr_zero(bits);
    fill_used_delta +=
        cols_.weight[m] *
        static_cast<double>(WholeCopiesFree(fill_usable_free_[m], fill_empty_devices_[m], cols_.count[m]) -
                            WholeCopiesFree(sum_.fill_usable_free()[m], sum_.fill_empty_devices()[m], cols_.count[m]));
  }
  return cols_.total_weight * static_cast<double>(fill_total_free_ - sum_.total_free) - fill_used_delta;
}

void TentativePlacement::FinishCost() {
  if (node_kind_ == PolicyKind::kFgd) {
    out_.cost = fgd_cost_;
    out_.fill_cost = FillCost();
    out_.reservation_cost = sum_.reservation_tightness * static_cast<double>(sum_.total_free - fill_total_free_);
    out_.completion_loss = completion_loss_;
  } else if (!pod_.WantsDevices()) {
    out_.cost = 0;  // CPU-only pods: neutral under the simple policies
  } else {
    // With FGD tallies the state stops tracking after the last pick; the fill tally does not.
    const MiB total_after = fgd_ ? fill_total_free_ : st_.total_free;
    out_.cost =
        node_kind_ == PolicyKind::kBinpack ? static_cast<double>(total_after) : -static_cast<double>(total_after);
  }
}

}  // namespace

PreparedPod::PreparedPod(const PodRequest& request)
    : pod(&request),
      constrained(!DemandOfContainer(request, ContainerRequest{}).Unconstrained() || request.Burstable()) {
  const auto& containers = request.containers;
  order.resize(containers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const auto& ca = containers[a];
    const auto& cb = containers[b];
    if (ca.init != cb.init) return !ca.init;
    auto key = [](const ContainerRequest& c) {
      return c.mem_per_device_mib == 0 ? std::numeric_limits<MiB>::max() : c.mem_per_device_mib;
    };
    if (key(ca) != key(cb)) return key(ca) > key(cb);
    return a < b;
  });
  demands.reserve(order.size());
  for (int i : order) demands.push_back(DemandOfContainer(request, containers[i]));
  for (const auto& c : containers) picks += c.device_count;
  wants_compute = request.WantsCompute();
}

void EvaluatePlacement(const EvaluationInputs& in, NodeScore& out, Placement* placement) {
  const PodRequest& pod = *in.pod.pod;
  out.verdict = NodeVerdict(in.node, in.sum, pod);
  if (!out.verdict.fits()) return;
  TentativePlacement tentative(in, out, placement);
  const int containers = static_cast<int>(in.pod.order.size());
  if (placement != nullptr) placement->containers.resize(containers);
  for (int oi = 0; oi < containers; ++oi) {
    const ContainerRequest& c = pod.containers[in.pod.order[oi]];
    ContainerPlacement* cp = placement != nullptr ? &placement->containers[oi] : nullptr;
    if (cp != nullptr) {
      cp->container = c.name;
      cp->container_index = c.index;
      cp->init = c.init;
    }
    if (!tentative.PlaceContainer(c, in.pod.demands[oi], cp)) return;
  }
  tentative.FinishCost();
}

}  // namespace gpupack::placement
