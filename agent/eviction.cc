#include "agent/eviction.h"

#include <set>

#include "common/log.h"

namespace gpupack::agent {
namespace {

std::string_view EventReason(std::string_view result) {
  if (result == kEvictionEvicted) return "GpupackForeignPodEvicted";
  if (result == kEvictionBlockedByPdb) return "GpupackEvictionBlocked";
  return "GpupackEvictionFailed";
}

}  // namespace

ForeignPodEvictions::ForeignPodEvictions(EvictionOptions options, PodEvictor* evictor, const Clock* clock)
    : options_(options), evictor_(evictor), clock_(clock) {}

EvictionAttempt ForeignPodEvictions::Evict(const PodInfo& pod, const api::GpuNodeAuditFinding& finding,
                                           Tracked* tracked) {
  const std::string again = "asking again in " + std::to_string(options_.interval.count()) + "s";
  EvictionAttempt attempt{pod.Key(), kEvictionFailed, ""};
  StatusOr<kube::EvictionAnswer> answer = evictor_->Evict(pod);
  if (!answer.ok()) {
    attempt.message = "eviction failed (" + answer.status().ToString() + "), " + again + ": " + finding.message;
  } else if (answer->evicted) {
    attempt.result = kEvictionEvicted;
    attempt.message = "evicted by gpupack-agent: " + finding.message;
  } else {
    attempt.result = kEvictionBlockedByPdb;
    attempt.message =
        "eviction refused by a PodDisruptionBudget (" + answer->message + "), " + again + ": " + finding.message;
  }
  GPUPACK_LOG(kWarning, "audit") << "pod " << attempt.pod << ": " << attempt.message;
  if (attempt.result != tracked->last_result) {
    Status s = evictor_->EmitPodWarning(pod, EventReason(attempt.result), attempt.message);
    if (!s.ok()) GPUPACK_LOG(kWarning, "audit") << "event not recorded: " << s;
  }
  tracked->last_attempt = clock_->Now();
  tracked->last_result = attempt.result;
  return attempt;
}

std::vector<EvictionAttempt> ForeignPodEvictions::Run(const std::vector<api::GpuNodeAuditFinding>& findings,
                                                      const std::vector<PodInfo>& pods) {
  std::vector<EvictionAttempt> attempts;
  if (!options_.enabled || evictor_ == nullptr) return attempts;
  const Clock::TimePoint now = clock_->Now();
  std::map<std::string, const PodInfo*> by_uid;
  for (const PodInfo& pod : pods) by_uid[pod.uid] = &pod;
  std::set<std::string> named;
  for (const api::GpuNodeAuditFinding& f : findings) {
    if (f.kind != api::kAuditForeignProcess) continue;
    auto pod = by_uid.find(f.pod_uid);
    if (f.pod_uid.empty() || pod == by_uid.end()) continue;  // a host process or an unknown pod: report only
    if (!named.insert(f.pod_uid).second) continue;           // one attempt per pod, whatever its processes
    Tracked& tracked = tracked_.try_emplace(f.pod_uid, Tracked{now, std::nullopt, {}}).first->second;
    if (pod->second->terminating) continue;  // already going away: evicted, deleted or finished
    if (now - tracked.first_seen < options_.interval) continue;
    if (tracked.last_attempt && now - *tracked.last_attempt < options_.interval) continue;
    attempts.push_back(Evict(*pod->second, f, &tracked));
  }
  // A pod no finding names any more starts over if a stray shows up in it again.
  std::erase_if(tracked_, [&](const auto& entry) { return named.count(entry.first) == 0; });
  return attempts;
}

}  // namespace gpupack::agent
