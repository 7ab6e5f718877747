#include "translate/cluster_file.h"

#include <gtest/gtest.h>

namespace gpupack::translate {
namespace {

TEST(ClusterFile, ParsesTheDesignExample) {
  auto nodes = ParseClusterYaml(R"(
nodes:
  - name: gpu-a1
    cpu: "64"
    memory: 512Gi
    labels: {zone: a}
    gpus:
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 4, used: 2Gi}
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, mig: [{profile: 3g.40gb, memory: 40Gi}, {profile: 2g.20gb, memory: 20Gi}, {profile: 1g.10gb, memory: 10Gi, placement: {start: 6, size: 1}}]}
  - name: gpu-b1
    gpus:
      - {model: Tesla T4, memory: 16Gi, uuid: GPU-fixed}
)");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  const model::Node& a = (*nodes)[0];
  EXPECT_EQ(a.cpu_milli, 64000);
  EXPECT_EQ(a.memory_bytes, int64_t{512} << 30);
  EXPECT_EQ(a.labels.at("zone"), "a");
  ASSERT_EQ(a.devices.size(), 7u);  // 4 GPUs + 3 MIG instances
  EXPECT_EQ(a.devices[0].capacity_mib, 81920);
  EXPECT_EQ(a.devices[0].used_mib, 2048);
  EXPECT_EQ(a.devices[3].index, 3);
  const model::Device& mig = a.devices[6];
  EXPECT_EQ(mig.kind, model::DeviceKind::kMig);
  EXPECT_EQ(mig.index, 4);
  EXPECT_EQ(mig.mig_profile, "1g.10gb");
  EXPECT_EQ(mig.capacity_mib, 10240);
  EXPECT_EQ(mig.placement_start, 6);
  EXPECT_EQ(mig.parent_uuid, a.devices[4].parent_uuid);
  EXPECT_EQ(mig.uuid.rfind("MIG-", 0), 0u);
  EXPECT_EQ((*nodes)[1].devices[0].uuid, "GPU-fixed");
  EXPECT_EQ((*nodes)[1].cpu_milli, -1);
  // Generated UUIDs are deterministic.
  EXPECT_EQ(a.devices[1].uuid, GeneratedGpuUuid("gpu-a1", 1));
  EXPECT_EQ(GeneratedGpuUuid("gpu-a1", 1), GeneratedGpuUuid("gpu-a1", 1));
  EXPECT_NE(GeneratedGpuUuid("gpu-a1", 1), GeneratedGpuUuid("gpu-a1", 2));
}

TEST(ClusterFile, ErrorsNameThePlace) {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"nodes: [{name: a, gpus: [{model: T4, memory: 16GB}]}]",
       "line 1: nodes[0].gpus[0].memory: invalid quantity \"16GB\": unknown suffix \"GB\""},
      {"nodes: [{name: a, gpus: [{memory: 16Gi}]}]", "line 1: nodes[0].gpus[0]: missing \"model\""},
      {"nodes: [{name: a, gpu: []}]", "line 1: nodes[0]: unknown key \"gpu\""},
      {"nodes: [{name: a}, {name: a}]", "line 1: nodes[1].name: duplicate node \"a\" (also nodes[0])"},
      {"nodes: [{name: a, gpus: [{model: T4, memory: 16Gi, count: 0}]}]",
       "line 1: nodes[0].gpus[0].count: must be 1..64"},
      {"nodes: [{name: a, gpus: [{model: T4, memory: 16Gi, count: 2, uuid: GPU-x}]}]",
       "line 1: nodes[0].gpus[0].uuid: only allowed with count 1"},
      {"nodes: [{name: a, gpus: [{model: A, memory: 40Gi, mig: [{profile: 3g.40gb, memory: 40Gi}, {profile: 1g.10gb, "
       "memory: 10Gi}]}]}]",
       "line 1: nodes[0].gpus[0].mig: instances total 51200 MiB, more than the GPU's 40960 MiB"},
      {"nodes: [{name: a, gpus: [{model: T4, memory: 16Gi, uuid: G}]}, {name: b, gpus: [{model: T4, memory: 16Gi, "
       "uuid: G}]}]",
       "line 1: nodes[1]: duplicate device uuid \"G\""},
      {"nodes: {a: 1}", "line 1: cluster file: \"nodes\" must be a list"},
      {"pods: []", "line 1: cluster file: unknown key \"pods\""},
      {"nodes: [{name: a, gpus: [{model: T4, memory: 16Gi, healthy: maybe}]}]",
       "line 1: nodes[0].gpus[0].healthy: want true or false, got \"maybe\""},
  };
  for (const auto& c : cases) {
    auto nodes = ParseClusterYaml(c.yaml);
    ASSERT_FALSE(nodes.ok()) << c.yaml;
    EXPECT_EQ(nodes.status().message(), c.message) << c.yaml;
  }
  EXPECT_FALSE(ParseClusterYaml("nodes: [").ok());
  EXPECT_EQ(LoadClusterFile("/nonexistent/cluster.yaml").status().code(), StatusCode::kNotFound);
}

// Files that parsed and then misled every component that read them.
TEST(ClusterFile, RefusesSemanticMistakesWithFieldAndLine) {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      // The agent would publish usedMiB 32768 on a 16384 MiB GPU.
      {"nodes:\n  - name: a\n    gpus:\n      - {model: T4, memory: 16Gi, used: 32Gi}\n",
       "line 4: nodes[0].gpus[0].used: 32768 MiB is more than the GPU's memory (16384 MiB)"},
      {"nodes:\n  - name: a\n    gpus:\n      - {model: A100, memory: 40Gi, mig: [{profile: 1g.10gb, memory: 10Gi, "
       "used: 11Gi}]}\n",
       "line 4: nodes[0].gpus[0].mig[0].used: 11264 MiB is more than the MIG instance's memory (10240 MiB)"},
      // yaml-cpp keeps one of two equal keys silently.
      {"nodes:\n  - name: a\n    name: b\n",
       "cluster file: line 3: key \"name\" appears twice in one mapping (first on line 2)"},
      {"nodes:\n  - name: \"Bad Name!\"\n",
       "line 2: nodes[0].name: \"Bad Name!\" is not a valid Kubernetes name (a DNS-1123 subdomain: at most 253 "
       "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)"},
      {"nodes: []\n", "line 1: cluster file: \"nodes\" is empty; list at least one node"},
      {"nodes:\n  - name: a\n  - name: a\n", "line 3: nodes[1].name: duplicate node \"a\" (also nodes[0])"},
  };
  for (const auto& c : cases) {
    auto nodes = ParseClusterYaml(c.yaml);
    ASSERT_FALSE(nodes.ok()) << c.yaml;
    EXPECT_EQ(nodes.status().message(), c.message) << c.yaml;
  }
  // A device may be full, not fuller.
  EXPECT_TRUE(ParseClusterYaml("nodes: [{name: a.b-1, gpus: [{model: T4, memory: 16Gi, used: 16Gi}]}]").ok());
}

}  // namespace
}  // namespace gpupack::translate
