// When a node's inventory is too old to place pods on: its agent's last heartbeat against
// heartbeatTTL, judged when a pod is evaluated (not when the report arrives), so that a node
// goes stale even if nothing about it changes.
//
// Thread safety: immutable; every method may be called concurrently.
#pragma once

#include <chrono>
#include <optional>

#include "common/clock.h"
#include "placement/verdict.h"

namespace gpupack::extender {

class Staleness {
 public:
  // `ttl` zero (or negative): nodes never go stale.
  explicit Staleness(std::chrono::nanoseconds ttl) : ttl_(ttl) {}

  // False when Verdict is always nullopt, so a caller judging thousands of nodes can skip it.
  bool expires() const { return ttl_.count() > 0; }
  // A kNodeStale verdict when `heartbeat` is more than the TTL before `now`; nullopt when it is
  // fresh, or nullopt (never reported: a node without an agent, such as a standalone one).
  std::optional<placement::Verdict> Verdict(const std::optional<Clock::TimePoint>& heartbeat,
                                            Clock::TimePoint now) const;

 private:
  const std::chrono::nanoseconds ttl_;
};

}  // namespace gpupack::extender
