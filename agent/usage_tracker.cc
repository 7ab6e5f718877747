#include "agent/usage_tracker.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace gpupack::agent {

int UsageHistogram::BucketOf(model::MiB used_mib) {
  if (used_mib <= 0) return 0;
  // The 1e-9 keeps exact powers of 2^(1/16) (1, 2, 4 MiB, …) in their own bucket despite rounding.
  const double scaled = kBucketsPerDoubling * std::log2(static_cast<double>(used_mib));
  const int bucket = 1 + static_cast<int>(std::ceil(scaled - 1e-9));
  return std::min(bucket, kBuckets - 1);
}

model::MiB UsageHistogram::UpperEdgeMiB(int bucket) {
  if (bucket <= 0) return 0;
  return static_cast<model::MiB>(std::ceil(std::exp2(static_cast<double>(bucket - 1) / kBucketsPerDoubling) - 1e-9));
}

void UsageHistogram::Add(model::MiB used_mib) {
  ++counts_[BucketOf(used_mib)];
  ++count_;
  max_ = std::max(max_, used_mib);
}

model::MiB UsageHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * static_cast<double>(count_))));
  int64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) return std::min(UpperEdgeMiB(b), max_);
  }
  return max_;
}

void UsageTracker::Observe(const std::vector<ContainerCap>& caps, const std::vector<PodInfo>& pods,
                           const api::GpuNodeStatus& status, Clock::TimePoint now) {
  std::map<std::string, model::MiB> device_memory;
  for (const api::GpuNodeDevice& d : status.devices) {
    device_memory[d.uuid] = d.memory_mib;
    for (const api::GpuNodeMigInstance& m : d.mig_instances) device_memory[m.uuid] = m.memory_mib;
  }
  std::map<std::string, const PodInfo*> live;
  for (const PodInfo& pod : pods) {
    if (pod.gpupack && !pod.terminating) live[pod.uid] = &pod;
  }
  // This pass's sample per container: the busiest device's use.
  struct Sample {
    model::MiB used = 0, cap = 0, smallest_device = 0;
    int devices = 0;
  };
  std::map<std::pair<std::string, std::string>, Sample> samples;
  for (const ContainerCap& c : caps) {
    if (!c.running || live.count(c.pod_uid) == 0) continue;
    Sample& s = samples[{c.pod_uid, c.container}];
    const model::MiB memory = device_memory[c.device];
    s.used = std::max(s.used, c.used_mib);
    s.cap = std::max(s.cap, c.cap_mib);
    s.smallest_device = s.devices == 0 ? memory : std::min(s.smallest_device, memory);
    ++s.devices;
  }
  for (const auto& [key, s] : samples) {
    auto [it, inserted] = tracked_.try_emplace(key);
    api::GpuNodeContainerUsage& about = it->second.about;
    if (inserted) {
      const PodInfo& pod = *live[key.first];
      about.pod_uid = pod.uid;
      about.pod = pod.Key();
      about.container = key.second;
      about.workload_kind = pod.workload.kind;
      about.workload_name = pod.workload.name;
      about.since = now;
    }
    about.devices = s.devices;
    about.device_memory_mib = s.smallest_device;
    about.cap_mib = s.cap;
    it->second.histogram.Add(s.used);
  }
  std::erase_if(tracked_, [&](const auto& entry) { return live.count(entry.first.first) == 0; });
}

std::vector<api::GpuNodeContainerUsage> UsageTracker::Report() const {
  std::vector<api::GpuNodeContainerUsage> out;
  for (const auto& [key, t] : tracked_) {
    api::GpuNodeContainerUsage u = t.about;
    u.peak_mib = t.histogram.max();
    u.p95_mib = t.histogram.Quantile(0.95);
    u.p99_mib = t.histogram.Quantile(0.99);
    u.samples = t.histogram.count();
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.pod, a.container, a.pod_uid) < std::tie(b.pod, b.container, b.pod_uid);
  });
  if (out.size() > kMaxReported) out.resize(kMaxReported);
  return out;
}

}  // namespace gpupack::agent
