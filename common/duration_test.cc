#include "common/duration.h"

#include <gtest/gtest.h>

namespace gpupack {
namespace {

TEST(Duration, ParsesGoDurations) {
  EXPECT_EQ(*ParseDuration("1h30m"), std::chrono::minutes(90));
  EXPECT_EQ(*ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*ParseDuration("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_FALSE(ParseDuration("5").ok());
  EXPECT_FALSE(ParseDuration("5d").ok());
  EXPECT_FALSE(ParseDuration("").ok());
}

}  // namespace
}  // namespace gpupack
