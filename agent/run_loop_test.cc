#include "agent/run_loop.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "testing/fake_clock.h"

namespace gpupack::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Stall rule: unhealthy once the last pass ended more than 3 x poll + 30 s ago.
// poll 10 s: 3 x 10 + 30 = 60 s is still healthy, 61 s is not.
TEST(RunLoopTest, HealthReportsStallAfterThreePollsAndThirtySeconds) {
  FakeClock clock;
  RunLoop loop(RunLoopOptions{seconds(10), seconds(1)}, clock);
  EXPECT_EQ(loop.Health(), "");
  clock.Advance(seconds(60));
  EXPECT_EQ(loop.Health(), "");
  clock.Advance(seconds(1));
  EXPECT_EQ(loop.Health(), "agent loop stalled: last pass 61s ago");
}

// Runs a RunLoop on its own thread, counting passes, on a FakeClock: the loop's waits end only
// when the test advances the clock, so each step below is deterministic. The loop waits twice
// after each pass: pass k is followed by wait 2k - 1 (out the gap), then by wait 2k (until the poll
// interval or a pod change).
class LoopOnFakeClock {
 public:
  explicit LoopOnFakeClock(RunLoopOptions options)
      : loop(options, clock), runner([this] { loop.Run([this] { ++passes; }); }) {}
  ~LoopOnFakeClock() {
    loop.Stop();
    runner.join();
  }

  FakeClock clock;
  std::atomic<int> passes{0};
  RunLoop loop;
  std::thread runner;  // last: starts once the members above exist
};

// A pass resets the stall clock.
TEST(RunLoopTest, PassMakesHealthyAgain) {
  FakeClock clock;
  RunLoop loop(RunLoopOptions{seconds(10), milliseconds(1)}, clock);
  clock.Advance(seconds(120));
  EXPECT_NE(loop.Health(), "");
  std::thread runner([&] { loop.Run([] {}); });
  clock.AwaitWaitsBegun(1);  // the first pass is done
  EXPECT_EQ(loop.Health(), "");
  loop.Stop();
  runner.join();
}

// Without pod changes, the next pass comes one poll interval after the last one ended.
TEST(RunLoopTest, PassesComeEveryPollInterval) {
  LoopOnFakeClock t(RunLoopOptions{seconds(60), seconds(1)});
  t.clock.AwaitWaitsBegun(1);
  t.clock.Advance(seconds(1));  // the gap: the loop now waits for a pod change or the interval
  t.clock.AwaitWaitsBegun(2);
  t.clock.Advance(seconds(58));
  EXPECT_EQ(t.passes.load(), 1) << "a second short of the interval";
  t.clock.Advance(seconds(1));
  t.clock.AwaitWaitsBegun(3);
  EXPECT_EQ(t.passes.load(), 2);
}

// A pod change runs a pass as soon as the gap is over, long before the poll interval (60 s).
TEST(RunLoopTest, PodChangeRunsAnEarlyPass) {
  LoopOnFakeClock t(RunLoopOptions{seconds(60), seconds(1)});
  t.clock.AwaitWaitsBegun(1);
  t.loop.PodsChanged();
  t.clock.Advance(seconds(1));
  t.clock.AwaitWaitsBegun(3);
  EXPECT_EQ(t.passes.load(), 2);
}

// Pods changing without pause still get at most one early pass per gap: a change during the gap
// waits for its end.
TEST(RunLoopTest, EarlyPassesAreAtMostOnePerGap) {
  LoopOnFakeClock t(RunLoopOptions{seconds(60), milliseconds(250)});
  for (int pass = 1; pass <= 4; ++pass) {
    t.clock.AwaitWaitsBegun(uint64_t(2 * pass - 1));
    EXPECT_EQ(t.passes.load(), pass);
    t.loop.PodsChanged();
    t.clock.Advance(milliseconds(249));
    EXPECT_EQ(t.passes.load(), pass) << "within the gap";
    t.clock.Advance(milliseconds(1));
  }
}

// Stop ends a wait without the clock moving.
TEST(RunLoopTest, StopEndsTheWait) {
  FakeClock clock;
  RunLoop loop(RunLoopOptions{std::chrono::hours(1), seconds(1)}, clock);
  std::thread runner([&] { loop.Run([] {}); });
  clock.AwaitWaitsBegun(1);
  loop.Stop();
  runner.join();
}

}  // namespace
}  // namespace gpupack::agent
