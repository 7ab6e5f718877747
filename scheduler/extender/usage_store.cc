#include "scheduler/extender/usage_store.h"

#include <algorithm>
#include <cmath>

namespace gpupack::extender {

WorkloadUsageStore::WorkloadUsageStore(UsageStoreOptions options, const Clock& clock)
    : options_(options), clock_(clock) {}

void WorkloadUsageStore::Observe(const std::vector<api::GpuNodeContainerUsage>& usage) {
  const Clock::TimePoint now = clock_.Now();
  std::lock_guard<std::mutex> lock(mu_);
  for (const api::GpuNodeContainerUsage& u : usage) {
    if (u.workload_name.empty() || u.device_memory_mib <= 0) continue;
    const std::string ns = u.pod.substr(0, u.pod.find('/'));
    Workload& w = workloads_[Key{ns, u.workload_kind, u.workload_name, u.container}];
    placement::ObservedUse o;
    o.request_mib = u.cap_mib;
    o.peak_mib = u.peak_mib;
    o.p99_mib = u.p99_mib;
    o.samples = u.samples;
    o.device_memory_mib = u.device_memory_mib;
    o.devices = std::max(1, u.devices);
    w.pods[u.pod_uid] = PodEntry{o, now};
    w.seen = now;
    if (w.pods.size() > options_.max_pods) {
      auto oldest = std::min_element(w.pods.begin(), w.pods.end(),
                                     [](const auto& a, const auto& b) { return a.second.seen < b.second.seen; });
      w.pods.erase(oldest);
    }
  }
  PruneLocked(now);
}

void WorkloadUsageStore::PruneLocked(Clock::TimePoint now) {
  for (auto it = workloads_.begin(); it != workloads_.end();) {
    std::erase_if(it->second.pods, [&](const auto& p) { return now - p.second.seen > options_.retention; });
    it = it->second.pods.empty() ? workloads_.erase(it) : std::next(it);
  }
  while (workloads_.size() > options_.max_workloads) {
    auto oldest = std::min_element(workloads_.begin(), workloads_.end(),
                                   [](const auto& a, const auto& b) { return a.second.seen < b.second.seen; });
    workloads_.erase(oldest);
  }
}

api::RecommendationReport WorkloadUsageStore::Recommend(const placement::RightsizingOptions& options) {
  api::RecommendationReport report;
  report.headroom_percent = static_cast<int>(std::lround(options.headroom * 100));
  report.min_share_mib = options.min_share_mib;
  std::lock_guard<std::mutex> lock(mu_);
  PruneLocked(clock_.Now());
  for (const auto& [key, w] : workloads_) {
    std::vector<placement::ObservedUse> pods;
    for (const auto& [uid, entry] : w.pods) pods.push_back(entry.observed);
    const placement::ObservedUse seen = placement::CombineObserved(pods);
    const placement::Recommendation r = placement::Recommend(seen, options);
    api::WorkloadRecommendation out;
    std::tie(out.ns, out.workload_kind, out.workload_name, out.container) = key;
    out.pods = seen.pods;
    out.samples = seen.samples;
    out.devices = seen.devices;
    out.device_memory_mib = seen.device_memory_mib;
    out.request_mib = seen.request_mib;
    out.peak_mib = seen.peak_mib;
    out.p99_mib = seen.p99_mib;
    out.guaranteed_mib = r.guaranteed_mib;
    out.ceiling_mib = r.ceiling_mib;
    out.granule_mib = r.granule_mib;
    out.fit_now = r.fit_now;
    out.fit_recommended = r.fit_recommended;
    out.verdict = std::string(placement::RightsizingVerdictName(r.verdict));
    out.reason = r.reason;
    report.recommendations.push_back(std::move(out));
  }
  return report;
}

size_t WorkloadUsageStore::workloads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return workloads_.size();
}

}  // namespace gpupack::extender
