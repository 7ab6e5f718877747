#include "agent/run_loop.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

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

// A pass resets the stall clock.
TEST(RunLoopTest, PassMakesHealthyAgain) {
  FakeClock clock;
  std::atomic<int> passes{0};
  RunLoop loop(RunLoopOptions{seconds(10), milliseconds(1)}, clock);
  clock.Advance(seconds(120));
  EXPECT_NE(loop.Health(), "");
  std::thread runner([&] { loop.Run([&] { ++passes; }); });
  while (passes.load() == 0) std::this_thread::sleep_for(milliseconds(1));
  loop.Stop();
  runner.join();
  EXPECT_EQ(loop.Health(), "");
}

// A pod change runs a pass long before the poll interval (60 s) is up, and Stop returns promptly.
TEST(RunLoopTest, PodChangeRunsAnEarlyPass) {
  std::atomic<int> passes{0};
  RunLoop loop(RunLoopOptions{seconds(60), milliseconds(10)}, SystemClock::Instance());
  const auto start = std::chrono::steady_clock::now();
  std::thread runner([&] { loop.Run([&] { ++passes; }); });
  while (passes.load() == 0) std::this_thread::sleep_for(milliseconds(1));
  loop.PodsChanged();
  while (passes.load() < 2 && std::chrono::steady_clock::now() - start < seconds(20)) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  loop.Stop();
  runner.join();
  EXPECT_EQ(passes.load(), 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20));
}

// Pods changing without pause still get at most one early pass per gap: over 1 s with a 250 ms
// gap that is the first pass + at most 1000 / 250 = 4 more (one of slack for scheduling).
TEST(RunLoopTest, EarlyPassesAreAtMostOnePerGap) {
  std::atomic<int> passes{0};
  std::atomic<bool> done{false};
  RunLoop loop(RunLoopOptions{seconds(60), milliseconds(250)}, SystemClock::Instance());
  std::thread runner([&] { loop.Run([&] { ++passes; }); });
  std::thread churn([&] {
    while (!done.load()) loop.PodsChanged();
  });
  std::this_thread::sleep_for(seconds(1));
  done = true;
  churn.join();
  loop.Stop();
  runner.join();
  EXPECT_GE(passes.load(), 2);
  EXPECT_LE(passes.load(), 6);
}

}  // namespace
}  // namespace gpupack::agent
