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

// The clock counts nanoseconds in an int64: 2^63 ns is 9,223,372,036.85 s either side of 1970. With
// room for a fraction below one second, the whole seconds accepted are ±9,223,372,035 s:
// 1677-09-21T00:12:45Z to 2262-04-11T23:47:15Z. A year RFC 3339 allows past either end
// (a GPUNode heartbeat of 3213, found by fuzz/gpunode_fuzz.cc) is an error, not a wrapped time.
TEST(Rfc3339, RefusesTimesTheClockCannotRepresent) {
  const auto last = ParseRfc3339("2262-04-11T23:47:15Z");
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->time_since_epoch(), std::chrono::nanoseconds(std::chrono::seconds(9'223'372'035)));
  const auto first = ParseRfc3339("1677-09-21T00:12:45.999Z");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->time_since_epoch(),
            std::chrono::nanoseconds(std::chrono::seconds(-9'223'372'035)) + std::chrono::milliseconds(999));
  for (const char* beyond : {"2262-04-11T23:47:16Z", "3213-12-02T07:00:00Z", "9999-12-31T23:59:59Z",
                             "1677-09-21T00:12:44Z", "0000-01-01T00:00:00Z"}) {
    const auto parsed = ParseRfc3339(beyond);
    ASSERT_FALSE(parsed.ok()) << beyond;
    EXPECT_NE(parsed.status().message().find("outside the years"), std::string::npos) << parsed.status();
  }
}

}  // namespace
}  // namespace gpupack
