#include "common/rfc3339.h"

#include <gtest/gtest.h>

namespace gpupack {
namespace {

TEST(Rfc3339, ParsesZonesAndFractionsAndFormatsUtcSeconds) {
  auto t = ParseRfc3339("2027-01-15T08:00:00Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->time_since_epoch(), std::chrono::nanoseconds(std::chrono::seconds(1'800'000'000)));
  auto z = ParseRfc3339("2027-01-15T10:00:00.5+02:00");
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->time_since_epoch(),
            std::chrono::nanoseconds(std::chrono::seconds(1'800'000'000)) + std::chrono::milliseconds(500));
  for (const char* bad : {"", "2027-01-15", "2027-01-15T08:00:00", "2027-13-15T08:00:00Z", "2027-01-15T08:00:00+0200",
                          "2027-01-15T08:00:00.Z", "20x7-01-15T08:00:00Z"}) {
    EXPECT_FALSE(ParseRfc3339(bad).ok()) << bad;
  }
  EXPECT_EQ(FormatRfc3339(*t), "2027-01-15T08:00:00Z");
}

}  // namespace
}  // namespace gpupack
