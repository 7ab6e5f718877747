#include "scheduler/extender/maintainer.h"

#include <atomic>
#include <chrono>

#include <gtest/gtest.h>

#include "testing/fake_clock.h"

namespace gpupack::extender {
namespace {

using std::chrono::seconds;

// On a FakeClock the Maintainer's waits end only when the test advances it; it begins wait k + 1
// after tick k.
TEST(MaintainerTest, TicksEveryPeriod) {
  FakeClock clock;
  std::atomic<int> ticks{0};
  Maintainer maintainer([&] { ++ticks; }, clock, seconds(5));
  for (int tick = 1; tick <= 3; ++tick) {
    clock.AwaitWaitsBegun(uint64_t(tick));
    clock.Advance(seconds(4));
    EXPECT_EQ(ticks.load(), tick - 1) << "a second short of the period";
    clock.Advance(seconds(1));
    clock.AwaitWaitsBegun(uint64_t(tick + 1));
    EXPECT_EQ(ticks.load(), tick);
  }
}

// Stop ends the wait without the clock moving, and nothing ticks.
TEST(MaintainerTest, StopsWithoutWaitingOutThePeriod) {
  FakeClock clock;
  std::atomic<int> ticks{0};
  Maintainer maintainer([&] { ++ticks; }, clock, std::chrono::hours(1));
  clock.AwaitWaitsBegun(1);
  maintainer.Stop();
  EXPECT_EQ(ticks.load(), 0);
}

}  // namespace
}  // namespace gpupack::extender
