#include "placement/workload.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>

namespace gpupack::placement {

void TypicalWorkload::Normalize() {
  specs.erase(std::remove_if(specs.begin(), specs.end(), [](const TypicalSpec& s) { return !(s.weight > 0); }),
              specs.end());
  std::stable_sort(specs.begin(), specs.end(),
                   [](const TypicalSpec& a, const TypicalSpec& b) { return a.weight > b.weight; });
  if (specs.size() > static_cast<size_t>(kMaxTypicalSpecs)) specs.resize(kMaxTypicalSpecs);
  double total = 0;
  for (const auto& s : specs) total += s.weight;
  for (auto& s : specs) s.weight /= total;
}

TypicalSpec SpecOfPod(const PodRequest& pod) {
  TypicalSpec spec;
  spec.cpu_milli = pod.cpu_milli;
  spec.memory_bytes = pod.memory_bytes;
  spec.device_kind = pod.device_kind;
  spec.mig_profile = pod.mig_profile;
  spec.gpu_models = pod.gpu_models;
  // The largest app container defines the shape (whole devices count as largest).
  const ContainerRequest* largest = nullptr;
  for (const auto& c : pod.containers) {
    if (c.init || c.device_count == 0) continue;
    auto size = [](const ContainerRequest& x) {
      return std::make_tuple(x.mem_per_device_mib == 0 ? INT64_MAX : x.mem_per_device_mib, x.device_count,
                             x.compute_pct);
    };
    if (largest == nullptr || size(c) > size(*largest)) largest = &c;
  }
  if (largest != nullptr) {
    spec.device_count = largest->device_count;
    spec.mem_per_device_mib = largest->mem_per_device_mib;
    spec.compute_pct = largest->compute_pct;
  }
  return spec;
}

bool SameShape(const TypicalSpec& a, const TypicalSpec& b) {
  return a.cpu_milli == b.cpu_milli && a.device_count == b.device_count &&
         a.mem_per_device_mib == b.mem_per_device_mib && a.compute_pct == b.compute_pct &&
         a.device_kind == b.device_kind && a.mig_profile == b.mig_profile && a.gpu_models == b.gpu_models;
}

namespace {
// The CPU of the prior's shapes and of the model hedge's: a pod's CPU is not known before one comes.
constexpr int64_t kPriorPodCpuMilli = 4000;

// Orders specs "larger first" on equal counts, as FGD's GetTypicalPods does (cpu, gpu share,
// device count, then the constraint text).
auto SpecKey(const TypicalSpec& s) {
  MiB mem = s.whole_device() ? INT64_MAX : s.mem_per_device_mib;
  std::string models;
  for (const auto& m : s.gpu_models) models += m + "|";
  return std::make_tuple(s.cpu_milli, mem, s.device_count, models, s.mig_profile, static_cast<int>(s.device_kind),
                         s.compute_pct);
}
}  // namespace

TypicalWorkload TypicalWorkloadFromPods(const std::vector<TypicalSpec>& pod_specs, double coverage) {
  struct Count {
    TypicalSpec spec;
    int64_t pods = 0;
    double memory = 0;  // Σ host memory bytes
  };
  std::map<decltype(SpecKey(TypicalSpec{})), Count> counts;
  for (const auto& s : pod_specs) {
    Count& entry = counts[SpecKey(s)];
    if (entry.pods == 0) entry.spec = s;
    ++entry.pods;
    entry.memory += static_cast<double>(s.memory_bytes);
  }
  std::vector<std::pair<TypicalSpec, int64_t>> sorted;
  sorted.reserve(counts.size());
  for (auto& [key, entry] : counts) {
    entry.spec.memory_bytes = static_cast<int64_t>(entry.memory / static_cast<double>(entry.pods));
    sorted.emplace_back(entry.spec, entry.pods);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return SpecKey(a.first) > SpecKey(b.first);
  });
  TypicalWorkload out;
  const double total = static_cast<double>(pod_specs.size());
  int64_t kept = 0;
  for (auto& [spec, count] : sorted) {
    if (total > 0 && static_cast<double>(kept) >= coverage * total) break;
    if (static_cast<int>(out.specs.size()) == kMaxTypicalSpecs) break;
    spec.weight = static_cast<double>(count);
    out.specs.push_back(spec);
    kept += count;
  }
  out.Normalize();
  return out;
}

TypicalWorkload DefaultPriorWorkload(MiB device_mib) {
  auto spec = [](int k, MiB mem, double w) {
    TypicalSpec s;
    s.cpu_milli = kPriorPodCpuMilli;
    s.device_count = k;
    s.mem_per_device_mib = mem;
    s.weight = w;
    return s;
  };
  TypicalWorkload w;
  const MiB d = std::max<MiB>(device_mib, 8);
  w.specs = {spec(1, 0, 0.30),     spec(1, d / 2, 0.20), spec(1, d / 4, 0.15),
             spec(1, d / 8, 0.10), spec(2, 0, 0.10),     spec(0, 0, 0.15)};
  w.Normalize();
  return w;
}

double WorkloadLearner::PriorShare(double prior_pods, double decay) {
  // The prior weighs prior_pods · (1 − decay) · m against the observed mass m: prior_pods pods
  // once m reaches its steady state 1 / (1 − decay), proportionally less before.
  const double weight_per_pod = prior_pods * (1.0 - decay);
  return weight_per_pod / (1.0 + weight_per_pod);
}

WorkloadLearner::WorkloadLearner(TypicalWorkload prior, double half_life_pods, double prior_pods,
                                 double whole_gpu_prior_pods, double coverage)
    : prior_(std::move(prior)),
      decay_(std::pow(2.0, -1.0 / std::max(1.0, half_life_pods))),
      prior_share_(PriorShare(std::max(0.0, prior_pods), decay_)),
      whole_gpu_prior_share_(PriorShare(std::max(0.0, whole_gpu_prior_pods), decay_)),
      coverage_(std::clamp(coverage, 1e-9, 1.0)) {
  prior_.Normalize();
}

void WorkloadLearner::SetPrior(TypicalWorkload prior) {
  prior_ = std::move(prior);
  prior_.Normalize();
}

void WorkloadLearner::SetClusterModels(std::vector<ClusterModel> models) {
  cluster_models_ = std::move(models);
  UpdateHedgedModels();
}

void WorkloadLearner::UpdateHedgedModels() {
  // A model some pod seen has named is asked for, and those pods stand for themselves.
  const auto named = [&](const std::string& model) {
    return std::any_of(named_models_.begin(), named_models_.end(),
                       [&](const std::string& wanted) { return GpuModelMatches(wanted, model); });
  };
  hedged_models_.clear();
  for (const ClusterModel& m : cluster_models_) {
    if (!m.model.empty() && m.memory_share < kMinorityModelShare && !named(m.model)) hedged_models_.push_back(m.model);
  }
}

void WorkloadLearner::Observe(const PodRequest& pod) {
  // Instead of decaying every bucket, grow the weight of new observations; renormalise the
  // storage scale before it can overflow.
  scale_ /= decay_;
  mass_ = mass_ * decay_ + 1.0;
  if (scale_ > 1e100) {
    for (auto& b : buckets_) {
      b.weight /= scale_;
      b.memory_weighted /= scale_;
    }
    scale_ = 1.0;
  }
  TypicalSpec spec = SpecOfPod(pod);
  // Whole GPUs, as the prior's whole shapes are (a whole MIG instance is a slice of one).
  const bool whole_gpus =
      spec.whole_device() && spec.device_kind != DeviceKindPreference::kMig && spec.mig_profile.empty();
  whole_gpu_mass_ = whole_gpu_mass_ * decay_ + (whole_gpus ? 1.0 : 0.0);
  pinned_mass_ = pinned_mass_ * decay_ + (spec.gpu_models.empty() ? 0.0 : 1.0);
  multi_gpu_mass_ = multi_gpu_mass_ * decay_ + (whole_gpus && spec.device_count >= 2 ? 1.0 : 0.0);
  // New names are rare (once per model asked for), so the hedged set is rebuilt here, off the
  // snapshot that the filter's path takes. Only the window's pods are read, which bounds the list.
  if (hedge_window() && !spec.gpu_models.empty()) {
    bool new_name = false;
    for (const std::string& wanted : spec.gpu_models) {
      if (std::find(named_models_.begin(), named_models_.end(), wanted) != named_models_.end()) continue;
      named_models_.push_back(wanted);
      new_name = true;
    }
    if (new_name) UpdateHedgedModels();
  }
  const double memory = static_cast<double>(spec.memory_bytes);
  for (auto& b : buckets_) {
    if (SameShape(b.spec, spec)) {
      b.weight += scale_;
      b.memory_weighted += scale_ * memory;
      return;
    }
  }
  buckets_.push_back(Bucket{std::move(spec), scale_, scale_ * memory});
  // Keep the histogram bounded: drop the lightest bucket once far beyond what a snapshot keeps.
  if (buckets_.size() > static_cast<size_t>(4 * kMaxTypicalSpecs)) {
    auto lightest = std::min_element(buckets_.begin(), buckets_.end(),
                                     [](const Bucket& a, const Bucket& b) { return a.weight < b.weight; });
    buckets_.erase(lightest);
  }
}

TypicalWorkload WorkloadLearner::Snapshot() const { return Snapshot(coverage_); }

TypicalWorkload WorkloadLearner::Snapshot(double coverage) const {
  std::vector<RankedShape> shapes = Blend();
  // The cut ranks shapes by the pods they stand for, larger first among equals (FGD's rule), then
  // in blend order. Each shape's key is built once, and the keys are sorted rather than the shapes.
  using Key = std::tuple<double, decltype(SpecKey(TypicalSpec{})), int>;
  std::vector<Key> order;
  order.reserve(shapes.size());
  for (int i = 0; i < static_cast<int>(shapes.size()); ++i)
    order.emplace_back(shapes[i].pods, SpecKey(shapes[i].spec), -i);
  std::sort(order.begin(), order.end(), std::greater<>());
  TypicalWorkload out;
  double covered = 0;
  for (const Key& key : order) {
    const int i = -std::get<2>(key);
    if (covered >= coverage || static_cast<int>(out.specs.size()) == kMaxTypicalSpecs) break;
    covered += shapes[i].spec.weight;
    out.specs.push_back(std::move(shapes[i].spec));
  }
  out.Normalize();
  return out;
}

TypicalWorkload WorkloadLearner::EveryShape() const {
  TypicalWorkload out;
  for (RankedShape& shape : Blend()) out.specs.push_back(std::move(shape.spec));
  // Heaviest first (stable: equal weights keep the prior-then-observation order).
  std::stable_sort(out.specs.begin(), out.specs.end(),
                   [](const TypicalSpec& a, const TypicalSpec& b) { return a.weight > b.weight; });
  return out;
}

std::vector<WorkloadLearner::RankedShape> WorkloadLearner::Blend() const {
  std::vector<RankedShape> out;
  out.reserve(prior_.specs.size() + buckets_.size());
  double observed_total = 0;
  for (const auto& b : buckets_) observed_total += b.weight;
  const double share = mass_ > 0 ? prior_share() : 1.0;
  // Weight of one pod observed now, in the blend (before normalising): the observed part, 1 − share,
  // spread over the decayed count of pods seen.
  const double pod_weight = mass_ > 0 ? (1.0 - share) / mass_ : 0.0;
  if (share > 0) {
    for (auto s : prior_.specs) {
      s.weight *= share;
      out.push_back(RankedShape{std::move(s), 0});
    }
  }
  if (hedge_window() && pinned_mass_ >= 0.5) {
    for (const std::string& model : hedged_models_) {
      TypicalSpec hedge;
      hedge.cpu_milli = kPriorPodCpuMilli;
      hedge.device_count = 1;
      hedge.gpu_models = {model};
      hedge.weight = kModelHedgeWeight * (pinned_mass_ / mass_) / static_cast<double>(hedged_models_.size());
      out.push_back(RankedShape{std::move(hedge), 0});
    }
  }
  if (hedge_window() && multi_gpu_mass_ >= 0.5 && !largest_nodes_.empty()) {
    const double weight = kNodeHedgeWeight * (multi_gpu_mass_ / mass_) * (1.0 - mass_ / kHedgePods) /
                          static_cast<double>(largest_nodes_.size());
    for (const LargestNode& node : largest_nodes_) {
      TypicalSpec hedge;
      hedge.cpu_milli = node.cpu_milli;
      hedge.device_count = node.gpus;
      hedge.memory_bytes = node.memory_bytes;
      hedge.weight = weight;
      out.push_back(RankedShape{std::move(hedge), 0});
    }
  }
  const size_t prior_count = out.size();
  if (observed_total > 0) {
    for (const auto& b : buckets_) {
      TypicalSpec s = b.spec;
      s.weight = (1.0 - share) * b.weight / observed_total;
      s.memory_bytes = static_cast<int64_t>(b.memory_weighted / b.weight);
      // Buckets are distinct shapes, so a bucket can only meet one of the prior's.
      const auto prior_end = out.begin() + static_cast<std::ptrdiff_t>(prior_count);
      auto same = std::find_if(out.begin(), prior_end, [&](const RankedShape& x) { return SameShape(x.spec, s); });
      if (same != prior_end) {
        // A shape of the prior, which carries no memory: the observed pods' memory stands.
        same->spec.weight += s.weight;
        same->spec.memory_bytes = s.memory_bytes;
      } else {
        out.push_back(RankedShape{std::move(s), 0});
      }
    }
  }
  double total = 0;
  for (const auto& x : out) total += x.spec.weight;
  for (auto& x : out) {
    // Pods are whole: the weight rounds to the pods it stands for, the prior's as the pods it
    // weighs now; with nothing observed the prior's weights rank as they are.
    x.pods = pod_weight > 0 ? static_cast<double>(std::llround(x.spec.weight / pod_weight)) : x.spec.weight;
    if (total > 0) x.spec.weight /= total;
  }
  return out;
}

}  // namespace gpupack::placement
