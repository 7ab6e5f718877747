#include "scheduler/extender/maintainer.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace gpupack::extender {
namespace {

using std::chrono::milliseconds;

TEST(MaintainerTest, TicksEveryPeriod) {
  std::atomic<int> ticks{0};
  Maintainer maintainer([&] { ++ticks; }, milliseconds(5));
  const auto start = std::chrono::steady_clock::now();
  while (ticks.load() < 3 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  maintainer.Stop();
  EXPECT_GE(ticks.load(), 3);
}

// An hour-long period neither ticks within the test nor holds up Stop.
TEST(MaintainerTest, StopsPromptlyWithoutWaitingOutThePeriod) {
  std::atomic<int> ticks{0};
  const auto start = std::chrono::steady_clock::now();
  {
    Maintainer maintainer([&] { ++ticks; }, std::chrono::hours(1));
    std::this_thread::sleep_for(milliseconds(20));
  }  // the destructor stops it
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(ticks.load(), 0);
}

}  // namespace
}  // namespace gpupack::extender
