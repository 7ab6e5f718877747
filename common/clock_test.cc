#include "common/clock.h"

#include <gtest/gtest.h>

namespace gpupack {
namespace {

using std::chrono::seconds;

TEST(SystemClockTest, WaitUntilReturnsAtOnceWhenDoneOrPastTheDeadline) {
  const SystemClock& clock = SystemClock::Instance();
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  EXPECT_TRUE(clock.WaitUntil(lock, cv, clock.Now() + std::chrono::hours(1), [] { return true; }));
  EXPECT_FALSE(clock.WaitUntil(lock, cv, clock.Now() - seconds(1), [] { return false; }));
  EXPECT_TRUE(lock.owns_lock());
}

}  // namespace
}  // namespace gpupack
