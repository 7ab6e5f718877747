#include "common/stop_signals.h"

#include <pthread.h>
#include <unistd.h>

#include <future>

#include <gtest/gtest.h>

namespace gpupack {
namespace {

// A SIGTERM sent to the process while a thread waits reaches the waiter, not the default action
// (which would end the test binary), including from a thread started after construction.
TEST(StopSignals, TheWaiterReceivesSigtermFromAThreadStartedLater) {
  StopSignals stop;
  std::future<int> received = std::async(std::launch::async, [&stop] { return stop.Wait(); });
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  EXPECT_EQ(received.get(), SIGTERM);
}

TEST(StopSignals, SigintToo) {
  StopSignals stop;
  ASSERT_EQ(kill(getpid(), SIGINT), 0);
  EXPECT_EQ(stop.Wait(), SIGINT);
}

}  // namespace
}  // namespace gpupack
