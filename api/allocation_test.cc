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

TEST(Allocation, CarriesEachDevicesComputeShare) {
  Allocation a;
  a.node = "n1";
  a.containers.push_back(
      {"main", 0, false, false, false, {{"GPU-1", 0, 8192, "", "", 30}, {"GPU-2", 1, 8192, "", "", 0}}});
  const std::string text = EncodeAllocation(a);
  EXPECT_EQ(text, R"({"v":1,"node":"n1","containers":[{"name":"main","index":0,"devices":[)"
                  R"({"uuid":"GPU-1","index":0,"memMiB":8192,"computePct":30},)"
                  R"({"uuid":"GPU-2","index":1,"memMiB":8192,"computePct":0}]}]})");
  StatusOr<Allocation> back = DecodeAllocation(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
  // Written before compute shares existed: not recorded.
  StatusOr<Allocation> old = DecodeAllocation(
      R"({"v":1,"node":"n1","containers":[{"name":"main","devices":[{"uuid":"GPU-1","memMiB":8192}]}]})");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->containers[0].devices[0].compute_pct, kComputeNotRecorded);
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
      {R"({"v":1,"node":"n1","containers":[{"name":"m","devices":[{"uuid":"G","computePct":101}]}]})",
       "containers[0].devices[0].computePct: must be at most 100"},
      {R"({"v":1,"node":"n1","containers":[{"name":"m","devices":[{"uuid":"G","computePct":-1}]}]})",
       "containers[0].devices[0].computePct: must not be negative"},
      {R"({"v":1,"node":"n1","containers":[{"name":"m","devices":[{"uuid":"G","memMiB":8192,"limitMiB":4096}]}]})",
       "containers[0].devices[0].limitMiB: must not be below memMiB"},
      // Two containers without indexes would both write c0-*: one would run with the other's cap.
      {R"({"v":1,"node":"n1","containers":[{"name":"a","devices":[]},{"name":"b","devices":[]}]})",
       "containers[1].index: app container index 0 appears twice (also containers[0])"},
      // The node-side injection finds a container by name: an init and an app container of one
      // name (which Kubernetes forbids) would get whichever entry came last.
      {R"({"v":1,"node":"n1","containers":[{"name":"a","devices":[]},{"name":"a","init":true,"devices":[]}]})",
       R"(containers[1].name: container "a" appears twice (also containers[0]))"},
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
  // TwoContainerAllocation records no compute share: MPS gets no cap below the server's (100), and
  // the pod is of normal priority.
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMpsActiveThreadPercentage)), "100");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(true, 0, ContainerEnvKey::kMpsClientPriority)), "0");
  EXPECT_EQ(ann.size(), 1u + 2 * std::size(kAllContainerEnvKeys));
}

// One client setting covers every device of the container, so it is the least share of them:
// shares 30 and 20 give 20; a share of 0 (8 MiB of an 80 GiB device: ⌊100 · 8 / 81920⌋ = 0) gives
// MPS's least, 1; devices written before compute shares existed do not count.
TEST(Allocation, ActiveThreadPercentageIsTheLeastShareOfTheDevices) {
  auto with = [](std::vector<int> shares) {
    ContainerAllocation c{"main", 0, false, false, false, {}};
    for (int pct : shares) c.devices.push_back({"GPU-" + std::to_string(c.devices.size()), 0, 8192, "", "", pct});
    return ActiveThreadPercentage(c);
  };
  EXPECT_EQ(with({30, 20}), 20);
  EXPECT_EQ(with({30}), 30);
  EXPECT_EQ(with({0}), 1);
  EXPECT_EQ(with({100}), 100);
  EXPECT_EQ(with({kComputeNotRecorded, 40}), 40);
  EXPECT_EQ(with({kComputeNotRecorded}), 100);
}

// Negative Kubernetes priorities are below normal for MPS; 0 (no PriorityClass) and above are normal.
TEST(Allocation, MpsClientPriorityFollowsThePodsPriority) {
  EXPECT_EQ(MpsClientPriorityOf(-1), kMpsClientPriorityBelowNormal);
  EXPECT_EQ(MpsClientPriorityOf(-1000000), kMpsClientPriorityBelowNormal);
  EXPECT_EQ(MpsClientPriorityOf(0), kMpsClientPriorityNormal);
  EXPECT_EQ(MpsClientPriorityOf(2000001000), kMpsClientPriorityNormal);  // system-node-critical

  Allocation a = TwoContainerAllocation();
  a.mps_client_priority = kMpsClientPriorityBelowNormal;
  const std::string text = EncodeAllocation(a);
  EXPECT_NE(text.find(R"("mpsClientPriority":1)"), std::string::npos) << text;
  StatusOr<Allocation> back = DecodeAllocation(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
  EXPECT_EQ(AllocationAnnotations(a).at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMpsClientPriority)), "1");
  // Normal priority writes nothing (the design format is unchanged); other levels are refused.
  EXPECT_EQ(EncodeAllocation(TwoContainerAllocation()).find("mpsClientPriority"), std::string::npos);
  EXPECT_FALSE(DecodeAllocation(R"({"v":1,"node":"n1","containers":[],"mpsClientPriority":2})").ok());
  EXPECT_FALSE(DecodeAllocation(R"({"v":1,"node":"n1","containers":[],"mpsClientPriority":-1})").ok());
}

// The soft limit is what the bind wrote when 1 ≤ it ≤ the hard limit, else the cap itself.
TEST(Allocation, SoftLimitIsTheWrittenRequestWithinTheHardLimit) {
  struct Case {
    model::MiB request, cap, ceiling, want;
  } cases[] = {
      {4096, 8192, 0, 4096},  // cap × 0.5, as the bind writes it with requestRatio 0.5
      {8192, 8192, 0, 8192},  // requestRatio 1.0: soft = hard
      {1, 8192, 0, 1},        // the bind's floor: at least 1 MiB
      {0, 8192, 0, 8192},     // no annotation (or not a count): the cap
      {9000, 8192, 0, 8192},  // above the cap: never a soft limit over the hard one
      {-5, 8192, 0, 8192},
      // Burstable, 8192 guaranteed under a 16384 ceiling: the bind writes 8192; without the
      // annotation the guarantee still is the soft limit, and 16384 is within the hard limit.
      {8192, 8192, 16384, 8192},
      {0, 8192, 16384, 8192},
      {16384, 8192, 16384, 16384},
      {16385, 8192, 16384, 8192},
  };
  for (const Case& c : cases) {
    AllocatedDevice d;
    d.mem_mib = c.cap;
    d.limit_mib = c.ceiling;
    EXPECT_EQ(SoftLimitMiB(c.request, d), c.want) << c.request << " of " << c.cap << "/" << c.ceiling;
  }
}

// A burstable container's annotations: the request is its cap (the guarantee) whatever the ratio,
// the hard limit and the MPS limits its ceiling; the ceiling travels in the allocation and back.
TEST(Allocation, BurstableContainerWritesRequestAsSoftAndCeilingAsHardLimit) {
  Allocation a;
  a.node = "n1";
  ContainerAllocation c;
  c.name = "notebook";
  c.devices = {AllocatedDevice{"GPU-a", 0, 8192, "", "", 10, 16384},
               AllocatedDevice{"GPU-b", 1, 8192, "", "", 10, 16384}};
  a.containers = {c};
  const std::string text = EncodeAllocation(a);
  EXPECT_NE(text.find(R"("memMiB":8192,"limitMiB":16384)"), std::string::npos) << text;
  StatusOr<Allocation> back = DecodeAllocation(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
  std::map<std::string, std::string> ann = AllocationAnnotations(a, 0.5);
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMemoryLimitMiB)), "16384");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMemoryRequestMiB)), "8192");  // not 16384 × 0.5
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMpsMemoryLimit)), "0=16384M,1=16384M");
  // Without a ceiling nothing is written (the format of allocations that cannot burst is unchanged).
  EXPECT_EQ(EncodeAllocation(TwoContainerAllocation()).find("limitMiB"), std::string::npos);
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
