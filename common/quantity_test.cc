#include "common/quantity.h"

#include <gtest/gtest.h>

namespace gpupack {
namespace {

struct MiBCase {
  const char* text;
  int64_t mib;
};

// Every suffix family, rounded up to whole MiB (1 MiB = 1,048,576 bytes).
TEST(Quantity, MemoryToMiB) {
  const MiBCase cases[] = {
      {"8Gi", 8192},  // 8 * 1024
      {"8192Mi", 8192},
      {"1Ti", 1024 * 1024},
      {"0.5Gi", 512},
      {"1.5Gi", 1536},
      {"500M", 477},  // 500e6 / 1048576 = 476.84 → 477
      {"1G", 954},    // 1e9 / 1048576 = 953.67 → 954
      {"1k", 1},      // 1000 bytes → 1 MiB (rounded up)
      {"1Ki", 1},
      {"1048576", 1},  // plain bytes
      {"1048577", 2},
      {"1e9", 954},  // exponent form, same as 1G
      {"1E9", 954},
      {"2.5e9", 2385},  // 2.5e9 / 1048576 = 2384.19 → 2385
      {"1Pi", int64_t{1} << 30},
      {"1Ei", int64_t{1} << 40},
      {"1P", 953674317},  // 1e15 / 1048576 = 953674316.4 → 953674317
      {"1T", 953675},     // 1e12 / 1048576 = 953674.3 → 953675
      {"+4Gi", 4096},
      {".5Gi", 512},
      {"1.Gi", 1024},
      {"8000000m", 1},  // 8000 bytes in milli-bytes
  };
  for (const auto& c : cases) {
    auto v = ParseMemoryMiBCeil(c.text, "gpu-memory");
    ASSERT_TRUE(v.ok()) << c.text << ": " << v.status();
    EXPECT_EQ(*v, c.mib) << c.text;
  }
}

TEST(Quantity, RejectsGarbageWithAMessage) {
  const char* bad[] = {"",       "Gi",  "8 Gi", "8GB",  "8gi",
                       "1..5Gi", "abc", "8Gii", "1e",   "1e+",
                       "1ex",    "-",   ".",    "1e99", "99999999999999999999999999999999Gi",
                       "10Ei"};
  for (const char* text : bad) {
    auto v = ParseMemoryMiBCeil(text, "gpupack.io/gpu-memory");
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(v.status().message().find("gpupack.io/gpu-memory"), std::string::npos) << v.status();
  }
}

TEST(Quantity, ZeroAndNegativeMemoryAreRefused) {
  EXPECT_NE(ParseMemoryMiBCeil("0", "m").status().message().find("must be positive"), std::string::npos);
  EXPECT_NE(ParseMemoryMiBCeil("0Gi", "m").status().message().find("must be positive"), std::string::npos);
  EXPECT_NE(ParseMemoryMiBCeil("-1Gi", "m").status().message().find("negative"), std::string::npos);
}

TEST(Quantity, MilliValues) {
  EXPECT_EQ(*ParseMilliValue("500m", "cpu"), 500);
  EXPECT_EQ(*ParseMilliValue("2", "cpu"), 2000);
  EXPECT_EQ(*ParseMilliValue("1.5", "cpu"), 1500);
  EXPECT_EQ(*ParseMilliValue("0.0001", "cpu"), 1);  // rounded up, as Kubernetes does
  EXPECT_EQ(*ParseMilliValue("0", "cpu"), 0);
  EXPECT_EQ(*ParseMilliValue("64", "cpu"), 64000);
}

TEST(Quantity, Counts) {
  EXPECT_EQ(*ParseCount("2", "gpupack.io/gpu"), 2);
  EXPECT_EQ(*ParseCount("0", "gpupack.io/gpu"), 0);
  EXPECT_EQ(*ParseCount("1k", "gpupack.io/gpu"), 1000);
  EXPECT_FALSE(ParseCount("1.5", "gpupack.io/gpu").ok());
  EXPECT_FALSE(ParseCount("500m", "gpupack.io/gpu").ok());
  EXPECT_FALSE(ParseCount("-1", "gpupack.io/gpu").ok());
}

TEST(Quantity, Bytes) {
  EXPECT_EQ(*ParseBytes("16Gi", "memory"), int64_t{16} << 30);
  EXPECT_EQ(*ParseBytes("1500m", "memory"), 2);  // 1.5 bytes → 2
  EXPECT_EQ(*ParseBytes("7Ei", "memory"), int64_t{7} << 60);
  EXPECT_FALSE(ParseBytes("8Ei", "memory").ok());  // 2^63 does not fit int64
}

}  // namespace
}  // namespace gpupack
