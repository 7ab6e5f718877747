#include "scheduler/extender/staleness.h"

#include <gtest/gtest.h>

namespace gpupack::extender {
namespace {

const Clock::TimePoint kNow{std::chrono::seconds(1'800'000'000)};

TEST(Staleness, ANodeGoesStaleOnlyPastTheTtl) {
  const Staleness staleness(std::chrono::seconds(120));
  EXPECT_TRUE(staleness.expires());
  // Reported 120 s ago: exactly the TTL, still fresh; 121 s ago: stale.
  EXPECT_FALSE(staleness.Verdict(kNow - std::chrono::seconds(120), kNow).has_value());
  std::optional<placement::Verdict> stale = staleness.Verdict(kNow - std::chrono::seconds(121), kNow);
  ASSERT_TRUE(stale.has_value());
  EXPECT_EQ(stale->reason, placement::RejectReason::kNodeStale);
  EXPECT_TRUE(stale->unresolvable) << "preemption cannot refresh a heartbeat";
  EXPECT_EQ(stale->need, 120);
  EXPECT_EQ(stale->have, 121);
  EXPECT_EQ(stale->Message(), "node inventory is stale: GPUNode heartbeat 121s old > TTL 120s");
}

// A heartbeat 319 years old (an agent's junk "1707-12-02T07:00:00Z"): the nanosecond age does not
// fit in 64 bits, and before saturating it wrapped to a negative age, so the node looked fresh
// (found by fuzz_gpunode).
TEST(Staleness, AHeartbeatCenturiesOldIsStaleNotFresh) {
  const Staleness staleness(std::chrono::seconds(120));
  const Clock::TimePoint y1707{std::chrono::seconds(-8'270'528'400)};  // 1707-12-02T07:00:00Z
  std::optional<placement::Verdict> stale = staleness.Verdict(y1707, kNow);
  ASSERT_TRUE(stale.has_value());
  EXPECT_EQ(stale->have, 1'800'000'000 + 8'270'528'400);
  // And the other way: a heartbeat centuries ahead is not stale.
  EXPECT_FALSE(staleness.Verdict(Clock::TimePoint{std::chrono::seconds(9'000'000'000)}, y1707).has_value());
}

TEST(Staleness, NodesWithoutHeartbeatsOrWithoutATtlNeverGoStale) {
  EXPECT_FALSE(Staleness(std::chrono::seconds(120)).Verdict(std::nullopt, kNow).has_value());
  const Staleness never(std::chrono::seconds(0));
  EXPECT_FALSE(never.expires());
  EXPECT_FALSE(never.Verdict(kNow - std::chrono::hours(24), kNow).has_value());
}

}  // namespace
}  // namespace gpupack::extender
