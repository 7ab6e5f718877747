#include "testing/fake_clock.h"

#include <thread>

#include <gtest/gtest.h>

namespace gpupack {
namespace {

using std::chrono::seconds;

// A fake wait ends when the clock reaches its deadline, not before, and not by real time.
TEST(FakeClockTest, AWaitEndsWhenTheClockReachesItsDeadline) {
  FakeClock clock;
  const Clock::TimePoint deadline = clock.Now() + seconds(10);
  std::mutex mu;
  std::condition_variable cv;
  bool ended = false;
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    EXPECT_FALSE(clock.WaitUntil(lock, cv, deadline, [] { return false; }));
    EXPECT_GE(clock.Now(), deadline);
    ended = true;
  });
  clock.AwaitWaitsBegun(1);
  clock.Advance(seconds(9));
  clock.Advance(seconds(1));
  waiter.join();
  EXPECT_TRUE(ended);
}

// done() ends a fake wait without the clock moving; several waits on one clock are independent.
TEST(FakeClockTest, DoneEndsAWaitAndOtherWaitsGoOn) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool stop_first = false;
  std::thread first([&] {
    std::unique_lock lock(mu);
    EXPECT_TRUE(clock.WaitUntil(lock, cv, clock.Now() + std::chrono::hours(1), [&] { return stop_first; }));
  });
  std::thread second([&] {
    std::unique_lock lock(mu);
    EXPECT_FALSE(clock.WaitUntil(lock, cv, clock.Now() + seconds(5), [] { return false; }));
  });
  clock.AwaitWaitsBegun(2);
  {
    std::lock_guard lock(mu);
    stop_first = true;
  }
  cv.notify_all();
  first.join();
  clock.Advance(seconds(5));
  second.join();
}

}  // namespace
}  // namespace gpupack
