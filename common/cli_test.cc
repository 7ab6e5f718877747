#include "common/cli.h"

#include <gtest/gtest.h>

namespace gpupack {
namespace {

TEST(FailStartupTest, PrintsProgramAndMessageAndReturnsTwo) {
  ::testing::internal::CaptureStderr();
  const int status = FailStartup("gpupack-x", "--flag needs a value");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "gpupack-x: --flag needs a value\n");
  EXPECT_EQ(status, 2);
}

}  // namespace
}  // namespace gpupack
