#include "api/allocation.h"

#include <gtest/gtest.h>

#include "api/annotations.h"

namespace gpupack::api {
namespace {

Allocation TwoContainers() {
  Allocation a;
  a.node = "n1";
  ContainerAllocation main;
  main.name = "main";
  main.index = 0;
  main.devices = {{"GPU-a", 0, 8192, "", ""}, {"GPU-b", 1, 8192, "", ""}};
  ContainerAllocation setup;
  setup.name = "setup";
  setup.index = 0;
  setup.init = true;
  setup.within_pod = true;
  setup.devices = {{"MIG-x", 2, 10240, "GPU-c", "1g.10gb"}};
  a.containers = {main, setup};
  return a;
}

TEST(Allocation, EncodesTheDesignFormat) {
  Allocation a;
  a.node = "n1";
  a.containers.push_back({"main", 0, false, false, false, {{"GPU-1", 0, 8192, "", ""}}});
  EXPECT_EQ(EncodeAllocation(a),
            R"({"v":1,"node":"n1","containers":[{"name":"main","index":0,"devices":[{"uuid":"GPU-1","index":0,"memMiB":8192}]}]})");
}

TEST(Allocation, RoundTrips) {
  const Allocation a = TwoContainers();
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
  std::map<std::string, std::string> ann = AllocationAnnotations(TwoContainers(), 0.5);
  EXPECT_EQ(ann.at("gpupack.io/allocation"), EncodeAllocation(TwoContainers()));
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kVisibleDevices)), "GPU-a,GPU-b");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMemoryLimitMiB)), "8192");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMemoryRequestMiB)), "4096");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(false, 0, ContainerEnvKey::kMpsMemoryLimit)), "0=8192M,1=8192M");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(true, 0, ContainerEnvKey::kVisibleDevices)), "MIG-x");
  EXPECT_EQ(ann.at(ContainerAnnotationKey(true, 0, ContainerEnvKey::kMemoryRequestMiB)), "5120");
  EXPECT_EQ(ann.size(), 1u + 2 * 4);
}

TEST(Allocation, FromPlacementResolvesSlotsToDevices) {
  core::Node node;
  node.name = "n1";
  node.devices.resize(2);
  node.devices[0].uuid = "GPU-0";
  node.devices[1].uuid = "MIG-1";
  node.devices[1].index = 0;
  node.devices[1].kind = core::DeviceKind::kMig;
  node.devices[1].parent_uuid = "GPU-0";
  node.devices[1].mig_profile = "1g.10gb";
  core::Placement p;
  core::ContainerPlacement cp;
  cp.container = "main";
  cp.container_index = 1;
  cp.device_slots = {1};
  cp.mem_per_device_mib = 4096;
  p.containers.push_back(cp);
  Allocation a = AllocationFromPlacement(node, p);
  ASSERT_EQ(a.containers.size(), 1u);
  EXPECT_EQ(a.containers[0].index, 1);
  EXPECT_EQ(a.containers[0].devices[0], (AllocatedDevice{"MIG-1", 0, 4096, "GPU-0", "1g.10gb"}));
  EXPECT_TRUE(AllocationShares(TwoContainers(), "u", "ns/p").size() == 2u) << "the within-pod init container adds none";
  auto shares = AllocationShares(a, "uid-1", "ns/p");
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_EQ(shares[0].first, "MIG-1");
  EXPECT_EQ(shares[0].second.mem_mib, 4096);
  EXPECT_EQ(shares[0].second.pod_uid, "uid-1");
}


TEST(Allocation, CarriesTheSpreadKeyIntoTheRebuiltLedger) {
  Allocation a = TwoContainers();
  a.spread_key = "web";
  const std::string text = EncodeAllocation(a);
  EXPECT_NE(text.find(R"("spreadKey":"web")"), std::string::npos) << text;
  StatusOr<Allocation> back = DecodeAllocation(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
  // The shares rebuilt from it keep the key, so a restarted extender still spreads replicas.
  for (const auto& [uuid, share] : AllocationShares(*back, "uid-1", "ns/web-1")) EXPECT_EQ(share.spread_key, "web");
  // Without a key nothing is written (the design format is unchanged).
  EXPECT_EQ(EncodeAllocation(TwoContainers()).find("spreadKey"), std::string::npos);
  EXPECT_FALSE(DecodeAllocation(R"({"v":1,"node":"n1","containers":[],"spreadKey":7})").ok());
}

}  // namespace
}  // namespace gpupack::api
