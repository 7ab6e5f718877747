#include "api/allocation.h"

#include <gtest/gtest.h>

#include "api/annotations.h"
#include "testing/builders.h"

namespace gpupack::api {
namespace {

using builders::TwoContainerAllocation;

TEST(Allocation, EncodesTheDesignFormat) {
  Allocation a;
  a.node = "n1";
  a.containers.push_back({"main", 0, false, false, false, {{"GPU-1", 0, 8192, "", ""}}});
  EXPECT_EQ(
      EncodeAllocation(a),
      R"({"v":1,"node":"n1","containers":[{"name":"main","index":0,"devices":[{"uuid":"GPU-1","index":0,"memMiB":8192}]}]})");
}

TEST(Allocation, RoundTrips) {
  const Allocation a = TwoContainerAllocation();
  StatusOr<Allocation> back = DecodeAllocation(EncodeAllocation(a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
}

TEST(Allocation, DecodesTheDesignExampleAndIgnoresUnknownKeys) {
  StatusOr<Allocation> a = DecodeAllocation(
      R"({"containers":[{"name":"main","devices":[{"uuid":"GPU-1","index":3,"memMiB":8192,"future":1}]}],"node":"n1","v":1})");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->containers.size(), 1u);
  EXPECT_EQ(a->containers[0].devices[0].index, 3);
  EXPECT_EQ(a->containers[0].devices[0].mem_mib, 8192);
}

TEST(Allocation, RefusesMalformedInputNamingTheField) {
  struct Case {
    const char* text;
    const char* mentions;
  } cases[] = {
      {"not json", "not valid JSON"},
      {"[]", "JSON object"},
      {R"({"node":"n1","containers":[]})", "v"},
      {R"({"v":2,"node":"n1","containers":[]})", "unsupported version"},
      {R"({"v":1,"containers":[]})", "node"},
      {R"({"v":1,"node":"n1"})", "containers"},
      {R"({"v":1,"node":"n1","containers":[{"name":"m","devices":[{"index":0,"memMiB":1}]}]})",
       "containers[0].devices[0].uuid"},
      {R"({"v":1,"node":"n1","containers":[{"name":"m","devices":[{"uuid":"G","memMiB":-5}]}]})",
       "containers[0].devices[0].memMiB"},
      {R"({"v":1,"node":"n1","containers":[{"name":7,"devices":[]}]})", "containers[0].name"},
      {R"({"v":1,"node":"n1","containers":[{"name":"m","devices":[{"uuid":"G","memMiB":1.5}]}]})", "memMiB"},
      // Two containers without indexes would both write c0-*: one would run with the other's cap.
      {R"({"v":1,"node":"n1","containers":[{"name":"a","devices":[]},{"name":"b","devices":[]}]})",
       "containers[1].index: app container index 0 appears twice (also containers[0])"},
  };
  for (const Case& c : cases) {
    StatusOr<Allocation> a = DecodeAllocation(c.text);
    ASSERT_FALSE(a.ok()) << c.text;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find(c.mentions), std::string::npos) << a.status() << " for " << c.text;
  }
}

TEST(Allocation, AnnotationsCarryPerContainerKeys) {
  std::map<std::string, std::string> ann = AllocationAnnotations(TwoContainerAllocation(), 0.5);
  EXPECT_EQ(ann.at("gpupack.io/allocation"), EncodeAllocation(TwoContainerAllocation()));
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kVisibleDevices)), "GPU-a,GPU-b");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMemoryLimitMiB)), "8192");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMemoryRequestMiB)), "4096");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMpsMemoryLimit)), "0=8192M,1=8192M");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(true, 0, ContainerEnvKey::kVisibleDevices)), "MIG-x");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(true, 0, ContainerEnvKey::kMemoryRequestMiB)), "5120");
  EXPECT_EQ(ann.size(), 1u + 2 * 4);
}

// The soft limit is what the bind wrote when 1 ≤ it ≤ the cap, else the cap itself.
TEST(Allocation, SoftLimitIsTheWrittenRequestWithinTheCap) {
  struct Case {
    model::MiB request, cap, want;
  } cases[] = {
      {4096, 8192, 4096},  // cap × 0.5, as the bind writes it with requestRatio 0.5
      {8192, 8192, 8192},  // requestRatio 1.0: soft = hard
      {1, 8192, 1},        // the bind's floor: at least 1 MiB
      {0, 8192, 8192},     // no annotation (or not a count): the cap
      {9000, 8192, 8192},  // above the cap: never a soft limit over the hard one
      {-5, 8192, 8192},
  };
  for (const Case& c : cases) EXPECT_EQ(SoftLimitMiB(c.request, c.cap), c.want) << c.request << " of " << c.cap;
}

TEST(Allocation, CarriesTheSpreadKeyIntoTheRebuiltLedger) {
  Allocation a = TwoContainerAllocation();
  a.spread_key = "web";
  const std::string text = EncodeAllocation(a);
  EXPECT_NE(text.find(R"("spreadKey":"web")"), std::string::npos) << text;
  StatusOr<Allocation> back = DecodeAllocation(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
  // Without a key nothing is written (the design format is unchanged).
  EXPECT_EQ(EncodeAllocation(TwoContainerAllocation()).find("spreadKey"), std::string::npos);
  EXPECT_FALSE(DecodeAllocation(R"({"v":1,"node":"n1","containers":[],"spreadKey":7})").ok());
}

}  // namespace
}  // namespace gpupack::api
