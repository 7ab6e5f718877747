#include "common/status.h"

#include <gtest/gtest.h>

namespace gpupack {
namespace {

TEST(Status, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(Status, ErrorCarriesCodeAndMessage) {
  Status s = Status::InvalidArgument("bad quantity");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "InvalidArgument: bad quantity");
  EXPECT_EQ(s.WithContext("gpupack.io/gpu-memory").message(), "gpupack.io/gpu-memory: bad quantity");
  EXPECT_TRUE(Status().WithContext("x").ok());
}

TEST(StatusOr, ValueAndError) {
  StatusOr<int> v = 7;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
  StatusOr<int> e = Status::NotFound("node gpu-a1");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  // An OK status cannot masquerade as a value.
  StatusOr<int> bogus = Status();
  EXPECT_FALSE(bogus.ok());
  EXPECT_EQ(bogus.status().code(), StatusCode::kInternal);
}

StatusOr<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}
StatusOr<int> Quarter(int x) {
  GPUPACK_ASSIGN_OR_RETURN(int h, Half(x));
  GPUPACK_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusOr, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
}

TEST(StatusDeathTest, ValueOnErrorAborts) {
  StatusOr<int> e = Status::Internal("boom");
  EXPECT_DEATH({ (void)e.value(); }, "boom");
}

}  // namespace
}  // namespace gpupack
