#include "scheduler/extender/staleness.h"

#include <cstdint>
#include <string>

namespace gpupack::extender {

std::optional<placement::Verdict> Staleness::Verdict(const std::optional<Clock::TimePoint>& heartbeat,
                                                     Clock::TimePoint now) const {
  if (!expires() || !heartbeat) return std::nullopt;
  const auto age = SaturatingElapsed(*heartbeat, now);
  if (age <= ttl_) return std::nullopt;
  // In whole seconds from each point's own count: exact where the saturated age is not.
  const int64_t age_s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count() -
                        std::chrono::duration_cast<std::chrono::seconds>(heartbeat->time_since_epoch()).count();
  const int64_t ttl_s = std::chrono::duration_cast<std::chrono::seconds>(ttl_).count();
  // Preemption cannot refresh a heartbeat, so the node is unresolvable for this pod.
  return placement::Verdict::Reject(
      placement::RejectReason::kNodeStale, /*unresolvable=*/true, ttl_s, age_s,
      "GPUNode heartbeat " + std::to_string(age_s) + "s old > TTL " + std::to_string(ttl_s) + "s");
}

}  // namespace gpupack::extender
