#include "placement/placement.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "model/rule_names.h"

namespace gpupack::placement {

MiB DeviceUsableMiB(const Device& d, const PlacementOptions& o) {
  return std::max<MiB>(0, d.capacity_mib - o.reserve_mib_per_device);
}

namespace {

// A device demand in the shape both typical specs and pod containers share.
struct Demand {
  int count = 0;                 // distinct devices
  MiB mem = 0;                   // per device; 0 = whole device
  DeviceKindPreference kind = DeviceKindPreference::kAny;
  const std::string* mig_profile = nullptr;         // empty or null = any
  const std::vector<std::string>* models = nullptr; // null or empty = any
  bool hard_isolation = false;
  // The pod's device rules (pods only; specs have none). Null or empty = no rule.
  const std::vector<std::string>* uuids = nullptr;
  const std::vector<std::string>* excluded_uuids = nullptr;
  const std::vector<std::string>* excluded_models = nullptr;
  const std::string* spread_key = nullptr;
  const std::string* pod_uid = nullptr;
  // No kind, profile, model, isolation or device rule: every device's sort matches, and only the
  // summary's free memory decides (it already counts unhealthy and excluded devices as full).
  bool Unconstrained() const {
    auto none = [](const auto* p) { return p == nullptr || p->empty(); };
    return kind == DeviceKindPreference::kAny && none(mig_profile) && none(models) && !hard_isolation &&
           none(uuids) && none(excluded_uuids) && none(excluded_models) && none(spread_key);
  }
};

// Whether a device may take new shares at all: healthy and not excluded by the administrator.
bool InPool(const Device& d) { return d.healthy && !d.excluded; }

bool ModelMatches(const std::string& model, const std::vector<std::string>* wanted) {
  if (wanted == nullptr || wanted->empty()) return true;
  for (const auto& w : *wanted) {
    if (GpuModelMatches(w, model)) return true;
  }
  return false;
}

// Kind, profile and model: whether the device is of a sort the demand accepts at all.
bool SortMatches(const Device& d, const Demand& demand) {
  if (demand.Unconstrained()) return true;
  if (demand.mig_profile != nullptr && !demand.mig_profile->empty()) {
    if (d.kind != DeviceKind::kMig || d.mig_profile != *demand.mig_profile) return false;
  } else if (demand.kind == DeviceKindPreference::kGpu && d.kind != DeviceKind::kGpu) {
    return false;
  } else if (demand.kind == DeviceKindPreference::kMig && d.kind != DeviceKind::kMig) {
    return false;
  }
  if (demand.hard_isolation && d.kind == DeviceKind::kGpu && !d.hard_isolation) return false;
  return ModelMatches(d.model, demand.models);
}

// The device rules of a pod, in the order a rejection lists them.
enum class Rule : uint8_t { kNone, kModelExclude, kUuidAllow, kUuidExclude, kAdminExcluded, kSpreadKey, kCount };

bool NamesDevice(const Device& d, const std::vector<std::string>& uuids) {
  for (const std::string& u : uuids) {
    if (u == d.uuid || (!d.parent_uuid.empty() && u == d.parent_uuid)) return true;
  }
  return false;
}

// The first rule that keeps a device of a matching sort from the demand (kNone: allowed).
Rule FailedRule(const Device& d, const Demand& demand) {
  if (demand.excluded_models != nullptr && !demand.excluded_models->empty() &&
      ModelMatches(d.model, demand.excluded_models)) {
    return Rule::kModelExclude;
  }
  if (demand.uuids != nullptr && !demand.uuids->empty() && !NamesDevice(d, *demand.uuids)) return Rule::kUuidAllow;
  if (demand.excluded_uuids != nullptr && NamesDevice(d, *demand.excluded_uuids)) return Rule::kUuidExclude;
  if (d.excluded) return Rule::kAdminExcluded;
  if (demand.spread_key != nullptr && !demand.spread_key->empty()) {
    for (const DeviceShare& s : d.shares) {
      if (s.spread_key == *demand.spread_key && s.pod_uid != *demand.pod_uid) return Rule::kSpreadKey;
    }
  }
  return Rule::kNone;
}

// Healthy, of a sort the demand accepts, and allowed by every rule: a device the pod may use.
bool Allowed(const Device& d, const Demand& demand) {
  return d.healthy && SortMatches(d, demand) && FailedRule(d, demand) == Rule::kNone;
}

// "2 devices excluded by gpupack.io/gpu-uuids-exclude, 1 holds a pod with gpupack.io/spread-key
// \"web\"": why devices of a matching sort were refused, one clause per rule.
std::string DescribeRules(const std::array<int, static_cast<int>(Rule::kCount)>& refused, const Demand& demand) {
  std::string out;
  for (int r = 1; r < static_cast<int>(Rule::kCount); ++r) {
    const int n = refused[r];
    if (n == 0) continue;
    const std::string devices = std::to_string(n) + (n == 1 ? " device " : " devices ");
    std::string clause;
    switch (static_cast<Rule>(r)) {
      case Rule::kModelExclude: clause = devices + "of a model excluded by " + std::string(model::kRuleGpuModelExclude); break;
      case Rule::kUuidAllow: clause = devices + "not allowed by " + std::string(model::kRuleGpuUuids); break;
      case Rule::kUuidExclude: clause = devices + "excluded by " + std::string(model::kRuleGpuUuidsExclude); break;
      case Rule::kAdminExcluded:
        clause = devices + "taken out of the pool by the administrator (node annotation " +
                 std::string(model::kRuleNodeExcludedDevices) + ")";
        break;
      case Rule::kSpreadKey:
        clause = devices + (n == 1 ? "holds" : "hold") + " a pod with the same " + std::string(model::kRuleSpreadKey) +
                 " \"" + *demand.spread_key + "\"";
        break;
      default: break;
    }
    out += (out.empty() ? "" : ", ") + clause;
  }
  return out;
}

// Whole-device demands, and hard isolation on a MIG instance, take the device exclusively.
bool TakesExclusively(const Device& d, const Demand& demand) {
  return demand.mem == 0 || (demand.hard_isolation && d.kind == DeviceKind::kMig);
}

Demand DemandOfSpec(const TypicalSpec& s) {
  Demand d;
  d.count = s.device_count;
  d.mem = s.mem_per_device_mib;
  d.kind = s.device_kind;
  d.mig_profile = &s.mig_profile;
  d.models = &s.gpu_models;
  return d;
}

Demand DemandOfContainer(const PodRequest& pod, const ContainerRequest& c) {
  Demand d;
  d.count = c.device_count;
  d.mem = c.mem_per_device_mib;
  d.kind = pod.device_kind;
  d.mig_profile = &pod.mig_profile;
  d.models = &pod.gpu_models;
  d.hard_isolation = pod.hard_isolation;
  d.uuids = &pod.gpu_uuids;
  d.excluded_uuids = &pod.excluded_gpu_uuids;
  d.excluded_models = &pod.excluded_gpu_models;
  d.spread_key = &pod.spread_key;
  d.pod_uid = &pod.uid;
  return d;
}

// The mutable part of a node during a tentative placement. Lives on the stack: the hot loop
// allocates nothing per node.
struct WorkState {
  std::array<MiB, kMaxDevicesPerNode> free;
  std::array<bool, kMaxDevicesPerNode> empty;
  std::array<int16_t, kMaxTypicalSpecs> usable;
  std::array<MiB, kMaxTypicalSpecs> unusable_free;
  MiB total_free;
  int64_t free_cpu;
  int64_t free_mem;
};

// The columns a fragmentation computation needs; a view of Policy::SpecColumns.
struct Columns {
  int n;
  const MiB* mem;
  const int32_t* count;
  const double* weight;
  int n_fractional = 0;
  int n_device = 0;
  double total_weight = 0;
  // Only the fill fragmentation reads these.
  const int64_t* cpu = nullptr;
  const double* inv_cpu = nullptr;
  const int64_t* host_memory = nullptr;
  const double* inv_host_memory = nullptr;
};

// ⌊a / b⌋ for a ≥ 0, b > 0 as a multiplication by the precomputed 1/b: the hot loop cannot
// afford a division per spec. The epsilon absorbs the rounding of 1/b, which is far below the
// distance 1/b from any exact quotient to the next integer for the sizes involved (< 2^31).
inline int64_t FloorDiv(int64_t a, double inverse) {
  return static_cast<int64_t>(static_cast<double>(a) * inverse + 1e-9);
}

// F̂_n(M) of a state (NodeEvaluation::fill_cost): Σ_m p_m · (R_n − U_n(m)). `free_cpu` and
// `free_memory` (host memory, bytes) < 0 mean unlimited.
double FillFragmentation(const Columns& c, const int32_t* empty_devices, const MiB* usable_free, int64_t free_cpu,
                         int64_t free_memory, MiB total_free) {
  double f = 0;
  for (int m = 0; m < c.n; ++m) {
    MiB used = 0;
    if (m < c.n_device && usable_free[m] > 0) {
      // Copies of m the CPU and the host memory can feed; without a limit, as many as the devices hold.
      int64_t fed = free_cpu >= 0 && c.cpu[m] > 0 ? FloorDiv(free_cpu, c.inv_cpu[m]) : int64_t{1} << 40;
      if (free_memory >= 0 && c.host_memory[m] > 0) fed = std::min(fed, FloorDiv(free_memory, c.inv_host_memory[m]));
      if (c.mem[m] > 0) {
        used = std::min<MiB>(usable_free[m], fed * c.count[m] * c.mem[m]);
      } else {
        // Whole devices: k copies take k·count of the empty devices, each with its free memory.
        const int64_t devices = std::min<int64_t>(empty_devices[m] / c.count[m], fed) * c.count[m];
        used = usable_free[m] * devices / empty_devices[m];
      }
    }
    f += c.weight[m] * static_cast<double>(total_free - std::min(used, total_free));
  }
  return f;
}

// Moves one device's contribution to the fill tallies from (old_free, old_empty) to new_free (no
// longer empty). Null tallies are skipped. Returns Σ_m p_m · Δusable_m: while the node's CPU
// feeds every spec and no whole spec needs several devices, U_n(m) = usable_m and so
// ΔF̂ = W·ΔR − that sum.
double FillPick(const Columns& c, uint64_t match, MiB old_free, bool old_empty, MiB new_free, int32_t* empty_devices,
                MiB* usable_free) {
  double weighted = 0;
  for (uint64_t bits = match & ((c.n_device >= 64 ? ~uint64_t{0} : (uint64_t{1} << c.n_device) - 1)); bits != 0;
       bits &= bits - 1) {
    const int m = std::countr_zero(bits);
    MiB delta = 0;
    if (c.mem[m] > 0) {
      delta = (new_free >= c.mem[m] ? new_free : 0) - (old_free >= c.mem[m] ? old_free : 0);
    } else if (old_empty) {
      delta = -old_free;
      if (empty_devices != nullptr) empty_devices[m] -= 1;
    }
    if (usable_free != nullptr) usable_free[m] += delta;
    weighted += c.weight[m] * static_cast<double>(delta);
  }
  return weighted;
}

// U_n(m) of a whole spec of `count` devices when the CPU feeds every copy: the free memory of
// the empty devices that whole copies take (FillFragmentation's rounding).
MiB WholeCopiesFree(MiB usable_free, int32_t empty_devices, int32_t count) {
  if (usable_free <= 0 || empty_devices <= 0) return 0;
  return usable_free * ((empty_devices / count) * count) / empty_devices;
}

// The free amount of one resource (CPU, or host memory), of which spec m needs need[m] per copy
// (0: none), from which the node feeds every device spec all the device memory it could use.
int64_t FillAmple(const Columns& c, const int32_t* empty_devices, const MiB* usable_free, const int64_t* need) {
  int64_t ample = 0;
  for (int m = 0; m < c.n_device; ++m) {
    if (need[m] <= 0 || usable_free[m] <= 0) continue;
    const int64_t copies = c.mem[m] > 0 ? (usable_free[m] + c.count[m] * c.mem[m] - 1) / (c.count[m] * c.mem[m])
                                        : empty_devices[m] / c.count[m];
    ample = std::max(ample, copies * need[m]);
  }
  return ample;
}

inline bool UsableFor(MiB spec_mem, MiB free, bool empty) { return spec_mem == 0 ? empty : free >= spec_mem; }

// F_n(M) of a state. `cpu_short` has bit m set when the node's free CPU is below spec m's.
double Fragmentation(const Columns& c, const WorkState& st, uint64_t cpu_short) {
  double f = 0;
  for (int m = 0; m < c.n; ++m) {
    const bool infeasible = ((cpu_short >> m) & 1) || st.usable[m] < c.count[m];
    f += c.weight[m] * static_cast<double>(infeasible ? st.total_free : st.unusable_free[m]);
  }
  return f;
}

// Moves device `slot` from (free, empty) to (new_free, not empty), updating the per-spec tallies.
void ChangeDevice(const Columns& c, const NodeSummary& sum, WorkState& st, int slot, MiB new_free) {
  const MiB old_free = st.free[slot];
  const bool old_empty = st.empty[slot];
  const uint64_t match = sum.devices[slot].spec_match;
  for (int m = 0; m < c.n; ++m) {
    const bool matched = (match >> m) & 1;
    const bool was = matched && UsableFor(c.mem[m], old_free, old_empty);
    const bool now = matched && c.mem[m] != 0 && new_free >= c.mem[m];
    st.usable[m] = static_cast<int16_t>(st.usable[m] + now - was);
    st.unusable_free[m] += (now ? 0 : new_free) - (was ? 0 : old_free);
  }
  st.total_free += new_free - old_free;
  st.free[slot] = new_free;
  st.empty[slot] = false;
}

// Evaluates ΔF = F(after one device change) − F(now) in O(log M + specs whose usability
// flips), instead of O(M): for a spec that neither gains nor loses the device, F moves by
// exactly w·Δf unless the spec stays satisfied with the device usable before and after, when
// it moves by 0. Those specs are a prefix of the memory-sorted fractional specs, summed once per
// device match mask. Valid until the state changes.
class DeltaEvaluator {
 public:
  // `feasible` bit m: spec m is satisfied in `st` (enough usable devices and CPU).
  // The per-spec tallies come from `usable` / `unusable_free` (the summary's until the first
  // pick changes them, so the common single-pick case copies nothing).
  DeltaEvaluator(const Columns& c, const NodeSummary& sum, const WorkState& st, const int16_t* usable,
                 const MiB* unusable_free, uint64_t cpu_short, uint64_t feasible)
      : c_(c), sum_(sum), st_(st), usable_(usable), unusable_free_(unusable_free), cpu_short_(cpu_short),
        feasible_(feasible) {}

  double Delta(int slot, MiB new_free) {
    const MiB old_free = st_.free[slot];
    const MiB df = new_free - old_free;
    const NodeSummary::DeviceSlot& device = sum_.devices[slot];
    const uint64_t match = device.spec_match;
    // Specs [ub_new, ub_old) could use the device before and cannot after: walk down from
    // ub_old (precomputed in the summary while the device is unchanged) over exactly those.
    const MiB* mem = c_.mem;
    const int ub_old = old_free == device.free
                           ? device.fractional_fit
                           : static_cast<int>(std::upper_bound(mem, mem + c_.n_fractional, old_free) - mem);
    double flips = 0;
    int ub_new = ub_old;
    while (ub_new > 0 && mem[ub_new - 1] > new_free) {
      --ub_new;
      if ((match >> ub_new) & 1) flips += Flip(ub_new, new_free, df);
    }
    double delta = static_cast<double>(df) * (c_.total_weight - Prefix(match, ub_new)) + flips;
    if (st_.empty[slot]) {
      for (int m = c_.n_fractional; m < c_.n_device; ++m) {
        if ((match >> m) & 1) delta += Flip(m, new_free, df);
      }
    }
    return delta;
  }

 private:
  // Spec m loses the device: its exact change, minus the w·Δf already counted for it.
  double Flip(int m, MiB new_free, MiB df) const {
    const bool before = (feasible_ >> m) & 1;
    const bool after = !((cpu_short_ >> m) & 1) && usable_[m] - 1 >= c_.count[m];
    const MiB frag_before = before ? unusable_free_[m] : st_.total_free;
    const MiB frag_after = after ? unusable_free_[m] + new_free : st_.total_free + df;
    return c_.weight[m] * static_cast<double>(frag_after - frag_before - df);
  }

  // Σ weight of fractional specs j < upto that the mask matches and that are satisfied. Prefix
  // sums are kept per mask and extended only as far as a query needs.
  double Prefix(uint64_t match, int upto) {
    if (match == sum_.prefix_mask && feasible_ == (sum_.satisfied & ~sum_.cpu_short)) return sum_.satisfied_prefix[upto];
    int slot = -1;
    for (int i = 0; i < cached_; ++i) {
      if (masks_[i] == match) slot = i;
    }
    if (slot < 0) {
      slot = cached_ < kCache ? cached_++ : 0;
      masks_[slot] = match;
      filled_[slot] = 0;
      prefixes_[slot][0] = 0;
    }
    auto& p = prefixes_[slot];
    const uint64_t bits = match & feasible_;
    for (int m = filled_[slot]; m < upto; ++m) p[m + 1] = p[m] + (((bits >> m) & 1) ? c_.weight[m] : 0.0);
    filled_[slot] = std::max(filled_[slot], upto);
    return p[upto];
  }

  static constexpr int kCache = 4;
  const Columns& c_;
  const NodeSummary& sum_;
  const WorkState& st_;
  const int16_t* usable_;
  const MiB* unusable_free_;
  const uint64_t cpu_short_;
  const uint64_t feasible_;
  int cached_ = 0;
  std::array<uint64_t, kCache> masks_;
  std::array<int, kCache> filled_;
  std::array<std::array<double, kMaxTypicalSpecs + 1>, kCache> prefixes_;
};

uint64_t CpuShortMask(const Columns& c, const int64_t* cpu, int64_t free_cpu, int64_t max_cpu) {
  if (free_cpu < 0 || free_cpu >= max_cpu) return 0;
  uint64_t mask = 0;
  for (int m = 0; m < c.n; ++m) mask |= static_cast<uint64_t>(free_cpu < cpu[m]) << m;
  return mask;
}

Verdict ResourceVerdict(const NodeSummary& sum, const PodRequest& pod) {
  if (sum.free_cpu_milli >= 0 && pod.cpu_milli > sum.free_cpu_milli) {
    return Verdict::Reject(RejectReason::kInsufficientCpu, false, pod.cpu_milli, sum.free_cpu_milli);
  }
  if (sum.free_memory_bytes >= 0 && pod.memory_bytes > sum.free_memory_bytes) {
    return Verdict::Reject(RejectReason::kInsufficientMemory, false, pod.memory_bytes, sum.free_memory_bytes);
  }
  return Verdict::Fits();
}

std::string DescribeSort(const Demand& d) {
  std::string out;
  if (d.mig_profile != nullptr && !d.mig_profile->empty()) {
    out = "MIG profile " + *d.mig_profile;
  } else if (d.kind == DeviceKindPreference::kGpu) {
    out = "device kind gpu";
  } else if (d.kind == DeviceKindPreference::kMig) {
    out = "device kind mig";
  } else {
    out = "any device";
  }
  if (d.models != nullptr && !d.models->empty()) {
    out += ", model ";
    for (size_t i = 0; i < d.models->size(); ++i) out += (i ? "|" : "") + (*d.models)[i];
  }
  if (d.hard_isolation) out += ", hard isolation";
  return out;
}

// Why a demand cannot be placed on the node in its current tentative state. Distinguishes what
// no amount of eviction fixes (unresolvable) from a shortage of free memory / devices.
Verdict ShortageVerdict(const Node& node, const MiB* free, const bool* empty, const Demand& demand,
                        const PlacementOptions& o) {
  int sort_matching = 0, matching = 0, large_enough = 0, usable_now = 0;
  std::array<int, static_cast<int>(Rule::kCount)> refused{};
  MiB largest_capacity = 0, largest_free = 0;
  const int n = static_cast<int>(node.devices.size());
  for (int g = 0; g < n; ++g) {
    const Device& d = node.devices[g];
    if (!d.healthy || !SortMatches(d, demand)) continue;
    ++sort_matching;
    if (const Rule rule = FailedRule(d, demand); rule != Rule::kNone) {
      ++refused[static_cast<int>(rule)];
      continue;
    }
    ++matching;
    largest_capacity = std::max(largest_capacity, DeviceUsableMiB(d, o));
    if (demand.mem == 0 || DeviceUsableMiB(d, o) >= demand.mem) ++large_enough;
    largest_free = std::max(largest_free, free[g]);
    bool ok = TakesExclusively(d, demand) ? empty[g] && (demand.mem == 0 || free[g] >= demand.mem)
                                          : free[g] >= demand.mem;
    if (ok) ++usable_now;
  }
  if (sort_matching == 0) return Verdict::Reject(RejectReason::kNoMatchingDevice, true, 0, 0, DescribeSort(demand));
  const std::string rules = DescribeRules(refused, demand);
  if (matching == 0) {
    return Verdict::Reject(RejectReason::kExcludedByRule, true, 0, 0, "no device left for " + DescribeSort(demand) + ": " + rules);
  }
  if (large_enough == 0) return Verdict::Reject(RejectReason::kDeviceTooSmall, true, demand.mem, largest_capacity);
  if (large_enough < demand.count) {
    return Verdict::Reject(RejectReason::kTooFewMatchingDevices, true, demand.count, large_enough,
                           DescribeSort(demand) + (rules.empty() ? "" : " (" + rules + ")"));
  }
  if (demand.mem == 0) return Verdict::Reject(RejectReason::kInsufficientEmptyDevices, false, demand.count, usable_now);
  if (demand.count == 1) return Verdict::Reject(RejectReason::kInsufficientDeviceMemory, false, demand.mem, largest_free);
  return Verdict::Reject(RejectReason::kInsufficientDevices, false, demand.count, usable_now,
                         std::to_string(demand.mem) + " MiB");
}

}  // namespace

StatusOr<PolicyKind> ParsePolicyKind(std::string_view name) {
  if (name == "fgd") return PolicyKind::kFgd;
  if (name == "binpack") return PolicyKind::kBinpack;
  if (name == "spread") return PolicyKind::kSpread;
  return Status::InvalidArgument("unknown policy \"" + std::string(name) + "\" (want fgd, binpack or spread)");
}

std::string_view PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kFgd: return "fgd";
    case PolicyKind::kBinpack: return "binpack";
    case PolicyKind::kSpread: return "spread";
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

bool CanHost(const Node& node, const TypicalSpec& spec, const PlacementOptions& options) {
  if (node.cpu_milli >= 0 && node.cpu_milli < spec.cpu_milli) return false;
  if (spec.device_count == 0) return true;
  const Demand demand = DemandOfSpec(spec);
  int matching = 0;
  for (const Device& d : node.devices) {
    if (!InPool(d) || !SortMatches(d, demand)) continue;
    if (spec.mem_per_device_mib > 0 && DeviceUsableMiB(d, options) < spec.mem_per_device_mib) continue;
    if (++matching == spec.device_count) return true;
  }
  return false;
}

MiB DeviceFreeMiB(const Device& d, const PlacementOptions& o) {
  if (!InPool(d)) return 0;
  MiB caps = 0;
  for (const auto& s : d.shares) {
    if (s.exclusive) return 0;
    caps += s.mem_mib;
  }
  MiB foreign = 0;
  if (o.count_foreign_usage) foreign = std::max<MiB>(0, d.used_mib - caps - o.reserve_mib_per_device);
  return std::max<MiB>(0, d.capacity_mib - o.reserve_mib_per_device - caps - foreign);
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
    if (m >= columns_.n_fractional && m < columns_.n_device && s.device_count > 1) columns_.multi_whole |= uint64_t{1} << m;
  }
}

NodeSummary Policy::Summarize(const Node& node) const {
  const Columns cols{columns_.n,           columns_.mem.data(),   columns_.count.data(),
                     columns_.weight.data(), columns_.n_fractional, columns_.n_device,
                     columns_.total_weight,  columns_.cpu.data(),   columns_.inv_cpu.data(),
                     columns_.host_memory.data(), columns_.inv_host_memory.data()};
  NodeSummary sum;
  const int n = std::min<int>(static_cast<int>(node.devices.size()), kMaxDevicesPerNode);
  sum.device_count = n;
  sum.stale = !node.stale_reason.empty();
  auto& slots = sum.devices;
  for (int g = 0; g < n; ++g) {
    const Device& d = node.devices[g];
    NodeSummary::DeviceSlot& slot = slots[g];
    slot.free = DeviceFreeMiB(d, options_);
    slot.empty = InPool(d) && d.shares.empty() && slot.free == DeviceUsableMiB(d, options_);
    sum.total_free += slot.free;
    slot.completion_table = static_cast<int16_t>(completion_.TableFor(DeviceUsableMiB(d, options_)));
    slot.fractional_fit =
        static_cast<int8_t>(std::upper_bound(cols.mem, cols.mem + cols.n_fractional, slot.free) - cols.mem);
    // Devices of one sort (model, kind, profile, size, health) match the same specs: a node's
    // GPUs are usually identical, so compute the mask once per sort.
    if (g > 0) {
      const Device& p = node.devices[g - 1];
      if (p.healthy == d.healthy && p.excluded == d.excluded && p.kind == d.kind && p.capacity_mib == d.capacity_mib &&
          p.hard_isolation == d.hard_isolation && p.model == d.model && p.mig_profile == d.mig_profile) {
        slot.spec_match = slots[g - 1].spec_match;
        continue;
      }
    }
    uint64_t mask = 0;
    for (int m = 0; m < cols.n; ++m) {
      const TypicalSpec& s = workload_.specs[m];
      if (s.device_count == 0 || !InPool(d)) continue;
      if (!SortMatches(d, DemandOfSpec(s))) continue;
      if (s.mem_per_device_mib > 0 && DeviceUsableMiB(d, options_) < s.mem_per_device_mib) continue;
      mask |= uint64_t{1} << m;
    }
    slot.spec_match = mask;
  }
  for (int m = 0; m < cols.n; ++m) {
    int16_t usable = 0;
    MiB unusable = 0;
    for (int g = 0; g < n; ++g) {
      const bool ok = ((slots[g].spec_match >> m) & 1) && UsableFor(cols.mem[m], slots[g].free, slots[g].empty);
      if (ok) ++usable; else unusable += slots[g].free;
    }
    sum.usable[m] = usable;
    sum.unusable_free[m] = unusable;
    sum.satisfied |= static_cast<uint64_t>(usable >= cols.count[m]) << m;
  }
  sum.free_cpu_milli = node.cpu_milli < 0 ? -1 : std::max<int64_t>(0, node.cpu_milli - node.requested_cpu_milli);
  sum.free_memory_bytes =
      node.memory_bytes < 0 ? -1 : std::max<int64_t>(0, node.memory_bytes - node.requested_memory_bytes);
  WorkState st;
  st.usable = sum.usable;
  st.unusable_free = sum.unusable_free;
  st.total_free = sum.total_free;
  sum.cpu_short = CpuShortMask(cols, columns_.cpu.data(), sum.free_cpu_milli, columns_.max_cpu);
  if (n > 0) {
    sum.prefix_mask = slots[0].spec_match;
    const uint64_t bits = sum.prefix_mask & sum.satisfied & ~sum.cpu_short;
    for (int m = 0; m < cols.n_fractional; ++m) {
      sum.satisfied_prefix[m + 1] = sum.satisfied_prefix[m] + (((bits >> m) & 1) ? cols.weight[m] : 0.0);
    }
  }
  sum.fragmentation = Fragmentation(cols, st, sum.cpu_short);
  for (int g = 0; g < n; ++g) {
    FillPick(cols, slots[g].spec_match, 0, false, slots[g].free, sum.fill_empty_devices.data(),
             sum.fill_usable_free.data());
    if (!slots[g].empty) continue;
    for (int m = cols.n_fractional; m < cols.n_device; ++m) {
      if (!((slots[g].spec_match >> m) & 1)) continue;
      ++sum.fill_empty_devices[m];
      sum.fill_usable_free[m] += slots[g].free;
    }
  }
  sum.fill_fragmentation = FillFragmentation(cols, sum.fill_empty_devices.data(), sum.fill_usable_free.data(),
                                             sum.free_cpu_milli, sum.free_memory_bytes, sum.total_free);
  sum.fill_cpu_ample = FillAmple(cols, sum.fill_empty_devices.data(), sum.fill_usable_free.data(), cols.cpu);
  sum.fill_memory_ample = FillAmple(cols, sum.fill_empty_devices.data(), sum.fill_usable_free.data(), cols.host_memory);
  sum.reservation_tightness = reservation_.Tightness(node);
  return sum;
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
  const Columns cols{columns_.n,           columns_.mem.data(),   columns_.count.data(),
                     columns_.weight.data(), columns_.n_fractional, columns_.n_device,
                     columns_.total_weight,  columns_.cpu.data(),   columns_.inv_cpu.data(),
                     columns_.host_memory.data(), columns_.inv_host_memory.data()};
  NodeEvaluation out;
  // The summary answers these, so a fitting node's Node object is never touched (cache misses
  // on 5,000 nodes cost more than the arithmetic).
  if (sum.stale) {
    out.verdict = Verdict::Reject(RejectReason::kNodeStale, true, 0, 0, node.stale_reason);
    return out;
  }
  if (pod.WantsDevices() && sum.device_count == 0) {
    out.verdict = Verdict::Reject(RejectReason::kNoDevices, true);
    return out;
  }
  if (pod.spread_across_nodes && !pod.spread_key.empty()) {
    for (const Device& d : node.devices) {
      for (const DeviceShare& s : d.shares) {
        if (s.spread_key != pod.spread_key || s.pod_uid == pod.uid) continue;
        out.verdict = Verdict::Reject(RejectReason::kExcludedByRule, true, 0, 0,
                                      "node already runs " + s.pod_key + " with the same " +
                                          std::string(model::kRuleSpreadKey) + " \"" + pod.spread_key + "\" and " +
                                          std::string(model::kRuleSpreadScope) + " is node");
        return out;
      }
    }
  }
  out.verdict = ResourceVerdict(sum, pod);
  if (!out.verdict.fits()) return out;

  const int n = sum.device_count;
  // The pod may choose its own device and node policies (gpupack.io/device-policy, node-policy);
  // FGD's tallies are kept when either is FGD. Without an override both are the cluster's.
  const PolicyKind device_kind = pod.device_policy.value_or(kind_);
  const PolicyKind node_kind = pod.node_policy.value_or(kind_);
  const bool fgd = device_kind == PolicyKind::kFgd || node_kind == PolicyKind::kFgd;
  // Only the first n device entries and cols.n spec entries of these arrays are used; they are
  // left uninitialised beyond that so a node costs what it has, not what the maximum is.
  WorkState st;
  std::array<bool, kMaxDevicesPerNode> pod_holds;  // devices this pod already got
  std::array<MiB, kMaxDevicesPerNode> pod_cap;     // the pod's cap on each such device
  for (int g = 0; g < n; ++g) {
    pod_holds[g] = false;
    pod_cap[g] = 0;
    st.free[g] = sum.devices[g].free;
    st.empty[g] = sum.devices[g].empty;
  }
  // The per-spec tallies start as the summary's; copied into st only when a pick changes them.
  const int16_t* tally_usable = sum.usable.data();
  const MiB* tally_unusable = sum.unusable_free.data();
  st.total_free = sum.total_free;
  st.free_cpu = sum.free_cpu_milli < 0 ? -1 : sum.free_cpu_milli - pod.cpu_milli;
  st.free_mem = sum.free_memory_bytes < 0 ? -1 : sum.free_memory_bytes - pod.memory_bytes;
  const uint64_t cpu_short = fgd ? CpuShortMask(cols, columns_.cpu.data(), st.free_cpu, columns_.max_cpu) : 0;
  // FGD cost = (F after the pod's CPU) − F + Σ ΔF of each device pick. The CPU part is zero
  // unless the pod's CPU pushes the node below some spec's CPU.
  double fgd_cost = 0;
  uint64_t feasible = 0;
  if (fgd) {
    if (cpu_short != sum.cpu_short) {
      WorkState cpu_only;  // the node's devices as they are, with the pod's CPU taken
      std::copy_n(sum.usable.begin(), cols.n, cpu_only.usable.begin());
      std::copy_n(sum.unusable_free.begin(), cols.n, cpu_only.unusable_free.begin());
      cpu_only.total_free = sum.total_free;
      fgd_cost = Fragmentation(cols, cpu_only, cpu_short) - sum.fragmentation;
    }
    feasible = sum.satisfied & ~cpu_short;
  }
  // The fill tallies after the picks so far; copied from the summary at the first pick (on the
  // fast path below, only those of the specs in columns_.multi_whole).
  std::array<int32_t, kMaxTypicalSpecs> fill_empty_devices;
  std::array<MiB, kMaxTypicalSpecs> fill_usable_free;
  const int32_t* fill_empty_devices_now = sum.fill_empty_devices.data();
  const MiB* fill_usable_free_now = sum.fill_usable_free.data();
  MiB fill_total_free = sum.total_free;
  // Usable memory only shrinks with picks, so CPU and host memory ample for the node as it is
  // stay ample after: then U_n(m) is the usable memory itself, F̂ = W·R − Σ_m p_m·U_n(m), and ΔF̂
  // needs no tallies, only Σ p_m·Δusable_m (FillPick) — except for whole specs of several
  // devices, whose usable memory rounds down to whole copies: only their tallies are followed.
  const bool fill_fast = (st.free_cpu < 0 || st.free_cpu >= sum.fill_cpu_ample) &&
                         (st.free_mem < 0 || st.free_mem >= sum.fill_memory_ample);
  const uint64_t multi_whole = columns_.multi_whole;
  bool multi_whole_tallied = false;
  double fill_used_delta = 0;
  const bool with_completion = device_kind == PolicyKind::kFgd && !completion_.empty();
  double completion_loss = 0;
  const bool constrained = !DemandOfContainer(pod, ContainerRequest{}).Unconstrained();
  int picks_left = 0;
  for (const auto& c : pod.containers) picks_left += c.device_count;

  // Largest demands first (whole devices, then by memory), app containers before init ones:
  // the hardest to place chooses first, like best-fit decreasing.
  constexpr int kMaxContainers = 64;
  std::array<int, kMaxContainers> order;
  const int containers = std::min<int>(static_cast<int>(pod.containers.size()), kMaxContainers);
  for (int i = 0; i < containers; ++i) order[i] = i;
  if (containers > 1) {
    std::sort(order.begin(), order.begin() + containers, [&](int a, int b) {
      const auto& ca = pod.containers[a];
      const auto& cb = pod.containers[b];
      if (ca.init != cb.init) return !ca.init;
      auto key = [](const ContainerRequest& c) {
        return c.mem_per_device_mib == 0 ? std::numeric_limits<MiB>::max() : c.mem_per_device_mib;
      };
      if (key(ca) != key(cb)) return key(ca) > key(cb);
      return a < b;
    });
  }

  if (want_placement) out.placement.containers.resize(containers);
  for (int oi = 0; oi < containers; ++oi) {
    const ContainerRequest& c = pod.containers[order[oi]];
    ContainerPlacement* cp = want_placement ? &out.placement.containers[oi] : nullptr;
    if (cp != nullptr) {
      cp->container = c.name;
      cp->container_index = c.index;
      cp->init = c.init;
    }
    const Demand demand = DemandOfContainer(pod, c);
    std::array<bool, kMaxDevicesPerNode> taken;
    std::fill_n(taken.begin(), n, false);

    if (c.init) {
      // Reuse devices the pod already holds when k of them carry enough of the pod's cap.
      std::array<int, kMaxDevicesPerNode> held;
      int held_n = 0;
      for (int g = 0; g < n; ++g) {
        if (!pod_holds[g] || !SortMatches(node.devices[g], demand)) continue;
        const bool ok = c.mem_per_device_mib == 0 ? pod_cap[g] >= DeviceUsableMiB(node.devices[g], options_)
                                                  : pod_cap[g] >= c.mem_per_device_mib;
        if (ok) held[held_n++] = g;
      }
      if (held_n >= c.device_count) {
        if (cp != nullptr) {
          cp->within_pod_devices = true;
          cp->mem_per_device_mib = c.mem_per_device_mib;
          for (int i = 0; i < c.device_count; ++i) {
            cp->device_slots.push_back(held[i]);
            if (c.mem_per_device_mib == 0) cp->mem_per_device_mib = std::max(cp->mem_per_device_mib, pod_cap[held[i]]);
          }
        }
        continue;
      }
    }

    // Only the device columns are needed to explain a failure, as the container found them. Its
    // own picks change them only before its later rounds: copy them only for a container that
    // picks several devices (most pick one).
    std::array<MiB, kMaxDevicesPerNode> free_copy;
    std::array<bool, kMaxDevicesPerNode> empty_copy;
    const MiB* free_before = st.free.data();
    const bool* empty_before = st.empty.data();
    if (c.device_count > 1) {
      std::copy_n(st.free.begin(), n, free_copy.begin());
      std::copy_n(st.empty.begin(), n, empty_copy.begin());
      free_before = free_copy.data();
      empty_before = empty_copy.data();
    }
    for (int round = 0; round < c.device_count; ++round) {
      DeltaEvaluator delta(cols, sum, st, tally_usable, tally_unusable, cpu_short, feasible);
      int best = -1;
      double best_cost = 0;
      double best_fgd_delta = 0;
      int64_t best_loss = 0;
      double best_loss_mib = 0;
      MiB best_new_free = 0;
      // Devices in identical states give identical costs: evaluate each state once.
      std::array<int, kMaxDevicesPerNode> seen;
      int seen_n = 0;
      for (int g = 0; g < n; ++g) {
        if (taken[g]) continue;
        // Unconstrained demands never read the Device: the summary has all they need (an
        // unhealthy device has no free memory and is never empty).
        if (constrained && !Allowed(node.devices[g], demand)) continue;
        const bool exclusive = constrained ? TakesExclusively(node.devices[g], demand) : demand.mem == 0;
        if (exclusive) {
          if (!st.empty[g] || (demand.mem > 0 && st.free[g] < demand.mem)) continue;
        } else if (st.free[g] < demand.mem) {
          continue;
        }
        bool duplicate = false;
        for (int i = 0; i < seen_n && !duplicate; ++i) {
          // Cost depends only on (free, empty, spec match) and whether the pick is exclusive.
          const int h = seen[i];
          duplicate = st.free[h] == st.free[g] && st.empty[h] == st.empty[g] &&
                      sum.devices[h].spec_match == sum.devices[g].spec_match &&
                      sum.devices[h].completion_table == sum.devices[g].completion_table &&
                      exclusive == (constrained ? TakesExclusively(node.devices[h], demand) : demand.mem == 0);
        }
        if (duplicate) continue;
        seen[seen_n++] = g;
        const MiB new_free = exclusive ? 0 : st.free[g] - demand.mem;
        double cost;
        double fgd_delta = 0;
        double loss_mib = 0;
        int64_t loss = 0;
        if (fgd) fgd_delta = delta.Delta(g, new_free);
        if (device_kind == PolicyKind::kFgd) {
          cost = fgd_delta;
          // An exclusive pick takes the whole device, whatever the slices on offer: no loss to
          // rank by (across device sizes it would only prefer the smallest device, against
          // the pods pinned to it, which the reservation prices later in the ranking).
          if (with_completion && !exclusive) {
            loss_mib = completion_.Loss(sum.devices[g].completion_table, st.free[g], new_free);
            // Whole MiB: distinct losses differ by far more, equal ones by float noise only.
            loss = static_cast<int64_t>(std::floor(loss_mib + 1e-6));
          }
        } else if (device_kind == PolicyKind::kBinpack) {
          cost = static_cast<double>(new_free);  // best fit: least left over
        } else {
          cost = -static_cast<double>(new_free);  // worst fit: most left over
        }
        if (best < 0 || loss < best_loss || (loss == best_loss && cost < best_cost)) {
          best = g;
          best_cost = cost;
          best_fgd_delta = fgd_delta;
          best_loss = loss;
          best_loss_mib = loss_mib;
          best_new_free = new_free;
        }
      }
      if (best < 0) {
        // Report the shortage as the container found the node, not after its own partial picks.
        out.verdict = ShortageVerdict(node, free_before, empty_before, demand, options_);
        out.placement.containers.clear();
        return out;
      }
      --picks_left;
      if (fgd) {
        fgd_cost += best_fgd_delta;
        completion_loss += best_loss_mib;
        const uint64_t match = sum.devices[best].spec_match;
        if (fill_fast) {
          fill_used_delta += FillPick(cols, match & ~multi_whole, st.free[best], st.empty[best], best_new_free, nullptr,
                                      nullptr);
          if ((match & multi_whole) != 0) {
            if (!multi_whole_tallied) {
              for (uint64_t bits = multi_whole; bits != 0; bits &= bits - 1) {
                const int m = std::countr_zero(bits);
                fill_empty_devices[m] = sum.fill_empty_devices[m];
                fill_usable_free[m] = sum.fill_usable_free[m];
              }
              multi_whole_tallied = true;
            }
            FillPick(cols, match & multi_whole, st.free[best], st.empty[best], best_new_free, fill_empty_devices.data(),
                     fill_usable_free.data());
          }
        } else {
          if (fill_empty_devices_now != fill_empty_devices.data()) {
            std::copy_n(sum.fill_empty_devices.begin(), cols.n_device, fill_empty_devices.begin());
            std::copy_n(sum.fill_usable_free.begin(), cols.n_device, fill_usable_free.begin());
            fill_empty_devices_now = fill_empty_devices.data();
            fill_usable_free_now = fill_usable_free.data();
          }
          FillPick(cols, match, st.free[best], st.empty[best], best_new_free, fill_empty_devices.data(),
                   fill_usable_free.data());
        }
        fill_total_free += best_new_free - st.free[best];
        // The state only matters for later picks.
        if (picks_left > 0) {
          if (tally_usable != st.usable.data()) {
            std::copy_n(sum.usable.begin(), cols.n, st.usable.begin());
            std::copy_n(sum.unusable_free.begin(), cols.n, st.unusable_free.begin());
            tally_usable = st.usable.data();
            tally_unusable = st.unusable_free.data();
          }
          ChangeDevice(cols, sum, st, best, best_new_free);
          feasible = 0;
          for (int m = 0; m < cols.n; ++m) {
            feasible |= static_cast<uint64_t>(!((cpu_short >> m) & 1) && st.usable[m] >= cols.count[m]) << m;
          }
        }
      } else {
        st.total_free += best_new_free - st.free[best];
        st.free[best] = best_new_free;
        st.empty[best] = false;
      }
      taken[best] = true;
      pod_holds[best] = true;
      const Device& d = node.devices[best];
      const bool exclusive = TakesExclusively(d, demand);
      const MiB cap = exclusive && demand.mem == 0 ? d.capacity_mib : demand.mem;
      pod_cap[best] += cap;
      if (cp != nullptr) {
        cp->device_slots.push_back(best);
        cp->mem_per_device_mib = cap;
        cp->exclusive = exclusive;
      }
    }
  }

  // Cost of the whole placement.
  if (node_kind == PolicyKind::kFgd) {
    out.cost = fgd_cost;
    if (fill_fast) {
      for (uint64_t bits = multi_whole_tallied ? multi_whole : 0; bits != 0; bits &= bits - 1) {
        const int m = std::countr_zero(bits);
        fill_used_delta +=
            cols.weight[m] *
            static_cast<double>(WholeCopiesFree(fill_usable_free[m], fill_empty_devices[m], cols.count[m]) -
                                WholeCopiesFree(sum.fill_usable_free[m], sum.fill_empty_devices[m], cols.count[m]));
      }
      out.fill_cost = cols.total_weight * static_cast<double>(fill_total_free - sum.total_free) - fill_used_delta;
    } else {
      out.fill_cost = FillFragmentation(cols, fill_empty_devices_now, fill_usable_free_now, st.free_cpu, st.free_mem,
                                        fill_total_free) -
                      sum.fill_fragmentation;
    }
    out.reservation_cost = sum.reservation_tightness * static_cast<double>(sum.total_free - fill_total_free);
    out.completion_loss = completion_loss;
  } else if (!pod.WantsDevices()) {
    out.cost = 0;  // CPU-only pods: neutral under the simple policies
  } else {
    // With FGD tallies the state stops tracking after the last pick; the fill tally does not.
    const MiB total_after = fgd ? fill_total_free : st.total_free;
    out.cost = node_kind == PolicyKind::kBinpack ? static_cast<double>(total_after) : -static_cast<double>(total_after);
  }
  out.verdict = Verdict::Fits();
  return out;
}

Status ApplyPlacement(Node& node, const PodRequest& pod, const Placement& placement, const PlacementOptions& options) {
  // Check everything first, so a failure leaves the node untouched.
  std::array<MiB, kMaxDevicesPerNode> add{};
  std::array<bool, kMaxDevicesPerNode> excl{};
  const int n = static_cast<int>(node.devices.size());
  for (const auto& cp : placement.containers) {
    if (cp.within_pod_devices) continue;
    for (int slot : cp.device_slots) {
      if (slot < 0 || slot >= n || slot >= kMaxDevicesPerNode) {
        return Status::FailedPrecondition("placement names device slot " + std::to_string(slot) + " but node " +
                                          node.name + " has " + std::to_string(n) + " devices");
      }
      add[slot] += cp.mem_per_device_mib;
      excl[slot] = excl[slot] || cp.exclusive;
    }
  }
  for (int g = 0; g < n && g < kMaxDevicesPerNode; ++g) {
    if (add[g] == 0 && !excl[g]) continue;
    const Device& d = node.devices[g];
    if (excl[g] && !d.shares.empty()) {
      return Status::FailedPrecondition("device " + d.uuid + " on " + node.name + " is no longer empty");
    }
    MiB free = DeviceFreeMiB(d, options);
    MiB need = excl[g] ? 0 : add[g];
    if (!excl[g] && need > free) {
      return Status::FailedPrecondition("device " + d.uuid + " on " + node.name + " has " + std::to_string(free) +
                                        " MiB free, placement needs " + std::to_string(need) + " MiB");
    }
  }
  for (const auto& cp : placement.containers) {
    if (cp.within_pod_devices) continue;
    for (int slot : cp.device_slots) {
      node.devices[slot].shares.push_back(
          DeviceShare{pod.uid, pod.Key(), cp.container, cp.mem_per_device_mib, cp.exclusive, pod.spread_key});
    }
  }
  node.requested_cpu_milli += pod.cpu_milli;
  node.requested_memory_bytes += pod.memory_bytes;
  return Status::Ok();
}

int RemovePod(Node& node, std::string_view pod_uid) {
  int removed = 0;
  for (auto& d : node.devices) {
    auto it = std::remove_if(d.shares.begin(), d.shares.end(), [&](const DeviceShare& s) { return s.pod_uid == pod_uid; });
    removed += static_cast<int>(d.shares.end() - it);
    d.shares.erase(it, d.shares.end());
  }
  return removed;
}

Status CheckLedgerInvariant(const Node& node) {
  for (const auto& d : node.devices) {
    MiB caps = 0;
    bool exclusive = false;
    for (const auto& s : d.shares) {
      caps += s.mem_mib;
      exclusive = exclusive || s.exclusive;
    }
    if (caps > d.capacity_mib) {
      return Status::Internal("device " + d.uuid + " on " + node.name + ": caps " + std::to_string(caps) +
                              " MiB exceed capacity " + std::to_string(d.capacity_mib) + " MiB");
    }
    if (exclusive && d.shares.size() > 1) {
      return Status::Internal("device " + d.uuid + " on " + node.name + " is held exclusively but has " +
                              std::to_string(d.shares.size()) + " shares");
    }
  }
  return Status::Ok();
}

}  // namespace gpupack::placement
