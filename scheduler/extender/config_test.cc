#include "scheduler/extender/config.h"

#include <gtest/gtest.h>

#include "scheduler/extender/routes.h"
#include "testing/builders.h"

namespace gpupack::extender {
namespace {

TEST(ExtenderConfig, EmptyMeansDefaults) {
  StatusOr<ExtenderConfig> c = ParseExtenderConfig("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->policy, model::PolicyKind::kFgd);
  EXPECT_TRUE(c->decisive_filter);
  EXPECT_EQ(c->prefix, "");
  EXPECT_TRUE(c->rank_by_fill);
  EXPECT_TRUE(c->reserve_scarce_capacity);
  EXPECT_TRUE(c->rank_by_completion);
}

TEST(ExtenderConfig, ReadsEveryKey) {
  StatusOr<ExtenderConfig> c = ParseExtenderConfig(R"(
listen: 127.0.0.1:9000
metricsListen: 0.0.0.0:9395
prefix: /gpupack/
policy: binpack
decisiveFilter: false
filterBandMiB: 512
neutralNonGpuPods: true
reservePerDevice: 256Mi
heartbeatTTL: 1m30s
requestRatio: 0.8
reservationTTL: 45s
rememberedPods: 100
rememberedTTL: 2m
maxBodyBytes: 8Mi
threads: 2
bindThreads: 8
maxQueueWait: 1500ms
perDeviceMetrics: false
maxDevicesPerContainer: 8
workload: {halfLifePods: 200, priorPods: 10, wholeGpuPriorPods: 30, refreshPods: 5, coverage: 0.9}
rankByFill: false
reserveScarceCapacity: false
rankByCompletion: false
tls: {certFile: /c.pem, keyFile: /k.pem}
rightsizing: {headroom: 0.2, minSamples: 5, retention: 48h, maxWorkloads: 50}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen, "127.0.0.1:9000");
  EXPECT_EQ(c->prefix, "/gpupack");
  EXPECT_EQ(c->policy, model::PolicyKind::kBinpack);
  EXPECT_FALSE(c->decisive_filter);
  EXPECT_EQ(c->filter_band_mib, 512);
  EXPECT_EQ(c->reserve_per_device_mib, 256);
  EXPECT_EQ(c->heartbeat_ttl, std::chrono::seconds(90));
  EXPECT_EQ(c->request_ratio, 0.8);
  EXPECT_EQ(c->max_body_bytes, 8 << 20);
  EXPECT_EQ(c->threads, 2);
  EXPECT_EQ(c->bind_threads, 8);
  EXPECT_EQ(c->max_queue_wait, std::chrono::milliseconds(1500));
  EXPECT_EQ(c->workload_prior_pods, 10);
  EXPECT_EQ(c->workload_whole_gpu_prior_pods, 30);
  EXPECT_EQ(c->workload_refresh_pods, 5);
  EXPECT_EQ(c->workload_coverage, 0.9);
  EXPECT_FALSE(c->rank_by_fill);
  EXPECT_FALSE(c->reserve_scarce_capacity);
  EXPECT_FALSE(c->rank_by_completion);
  EXPECT_EQ(c->tls_key_file, "/k.pem");
  EXPECT_EQ(c->rightsizing.headroom, 0.2);
  EXPECT_EQ(c->rightsizing.min_samples, 5);
  EXPECT_EQ(c->usage_store.retention, std::chrono::hours(48));
  EXPECT_EQ(c->usage_store.max_workloads, 50u);
}

TEST(ExtenderConfig, RefusesUnknownKeysAndBadValuesNamingTheKey) {
  struct Case {
    const char* yaml;
    const char* mentions;
  } cases[] = {
      {"polcy: fgd", "\"polcy\": unknown key"},
      {"policy: fdg", "\"policy\": expected fgd, binpack or spread"},
      {"workload: {halfLife: 3}", "\"workload.halfLife\": unknown key"},
      {"workload: {coverage: 0.2}", "\"workload.coverage\""},
      {"threads: 0", "\"threads\""},
      {"threads: 2.5", "\"threads\": expected an integer"},
      {"decisiveFilter: yes please", "\"decisiveFilter\""},
      {"reserveScarceCapacity: 0.5", "\"reserveScarceCapacity\""},
      {"rankByCompletion: maybe", "\"rankByCompletion\""},
      {"requestGranularity: 1Mi", "\"requestGranularity\": was removed"},
      {"heartbeatTTL: 10", "\"heartbeatTTL\""},
      {"reservePerDevice: 80GB", "\"reservePerDevice\""},
      {"requestRatio: 1.5", "\"requestRatio\""},
      {"ceilingOvercommit: 0.9", "\"ceilingOvercommit\": must be between 1 and 100"},
      {"processOverhead: lots", "\"processOverhead\": expected off, auto or a quantity such as 512Mi, got \"lots\""},
      {"listen: localhost", "\"listen\": expected HOST:PORT"},
      {"prefix: gpupack", "\"prefix\": must start with"},
      {"tls: {certFile: /c.pem}", "\"tls\""},
      {"rightsizing: {headroom: 10}", "\"rightsizing.headroom\""},
      {"rightsizing: {minSamples: 0}", "\"rightsizing.minSamples\""},
      {"defragmentation: {mode: yes}", "\"defragmentation.mode\": expected off, dry-run or on, got \"yes\""},
      {"defragmentation: {maxMoves: 9}", "\"defragmentation.maxMoves\""},
      {"defragmentation: {replanAfter: soon}", "\"defragmentation.replanAfter\""},
      {"[1, 2]", "expected a mapping"},
      {"a: [", "invalid YAML"},
  };
  for (const Case& c : cases) {
    StatusOr<ExtenderConfig> config = ParseExtenderConfig(c.yaml);
    ASSERT_FALSE(config.ok()) << c.yaml;
    EXPECT_NE(config.status().message().find(c.mentions), std::string::npos) << config.status() << " for " << c.yaml;
  }
}

// The ceiling bound and the per-process overhead reach the placement core's options; by default
// the bound is 150 % and the overhead off (docs/placement.md).
TEST(ExtenderConfig, CeilingBoundAndProcessOverheadReachThePlacementOptions) {
  StatusOr<ExtenderConfig> defaults = ParseExtenderConfig("");
  ASSERT_TRUE(defaults.ok());
  placement::PlacementOptions options = PlacementOptionsOf(*defaults);
  EXPECT_EQ(options.ceiling_overcommit_pct, 150);
  EXPECT_EQ(options.process_overhead, placement::ProcessOverheadMode::kOff);
  StatusOr<ExtenderConfig> tuned =
      ParseExtenderConfig("ceilingOvercommit: 2\nprocessOverhead: 512Mi\nreservePerDevice: 1Gi\n");
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  options = PlacementOptionsOf(*tuned);
  EXPECT_EQ(options.ceiling_overcommit_pct, 200);
  EXPECT_EQ(options.process_overhead, placement::ProcessOverheadMode::kFixed);
  EXPECT_EQ(options.process_overhead_mib, 512);
  EXPECT_EQ(options.reserve_mib_per_device, 1024);
  StatusOr<ExtenderConfig> family = ParseExtenderConfig("processOverhead: auto\n");
  ASSERT_TRUE(family.ok());
  EXPECT_EQ(PlacementOptionsOf(*family).process_overhead, placement::ProcessOverheadMode::kFamilyDefault);
}

// Defragmentation is a dry run by default: it reports plans and evicts nothing.
TEST(ExtenderConfig, DefragmentationDefaultsToDryRunAndReachesTheExtender) {
  StatusOr<ExtenderConfig> defaults = ParseExtenderConfig("");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->defrag.mode, DefragMode::kDryRun);
  StatusOr<ExtenderConfig> tuned = ParseExtenderConfig("defragmentation: {mode: off, replanAfter: 90s, maxMoves: 2}\n");
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  const ExtenderOptions options = ExtenderOptionsOf(*tuned);
  EXPECT_EQ(options.defrag.mode, DefragMode::kOff);
  EXPECT_EQ(options.defrag.replan_after, std::chrono::seconds(90));
  EXPECT_EQ(options.defrag.planner.max_moves, 2);
}

// No config file and an empty one give the decision's own defaults (placement::DecisionOptions), with
// the rank keys' device size found from the cluster (0).
TEST(ExtenderConfig, DefaultsAreTheDecisionDefaults) {
  StatusOr<ExtenderConfig> c = ParseExtenderConfig("");
  ASSERT_TRUE(c.ok());
  const placement::DecisionOptions got = DecisionOptionsOf(*c), want;
  EXPECT_EQ(got.device_mib, 0);
  EXPECT_EQ(got.fgd_levels, want.fgd_levels);
  EXPECT_EQ(got.rank_by_completion, want.rank_by_completion);
  EXPECT_EQ(got.rank_by_fill, want.rank_by_fill);
  EXPECT_EQ(got.reserve_scarce_capacity, want.reserve_scarce_capacity);
  EXPECT_EQ(got.fixed_tie_break, want.fixed_tie_break);
  EXPECT_EQ(got.half_life_pods, want.half_life_pods);
  EXPECT_EQ(got.prior_pods, want.prior_pods);
  EXPECT_EQ(got.whole_gpu_prior_pods, want.whole_gpu_prior_pods);
  EXPECT_EQ(got.coverage, want.coverage);
  EXPECT_EQ(got.refresh_pods, want.refresh_pods);
}

// Accepted without complaint before: a key given twice (one silently won) and a reserve no device
// could ever hold; and no error said on which line.
TEST(ExtenderConfig, RefusesDuplicateKeysAndAReserveLargerThanTheDevicesWithTheLine) {
  StatusOr<ExtenderConfig> twice = ParseExtenderConfig("policy: fgd\nthreads: 2\npolicy: binpack\n");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "line 3: key \"policy\" appears twice in one mapping (first on line 1)");
  StatusOr<ExtenderConfig> bad = ParseExtenderConfig("threads: 2\nworkload:\n  coverage: 0.2\nrequestRatio: 1.5\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("line 3: config key \"workload.coverage\": ", 0), 0u) << bad.status();
  StatusOr<ExtenderConfig> ratio = ParseExtenderConfig("threads: 2\nrequestRatio: 1.5\n");
  ASSERT_FALSE(ratio.ok());
  EXPECT_EQ(ratio.status().message().rfind("line 2: config key \"requestRatio\": ", 0), 0u) << ratio.status();

  StatusOr<ExtenderConfig> reserve = ParseExtenderConfig("reservePerDevice: 100Gi\n");
  ASSERT_TRUE(reserve.ok()) << reserve.status();
  const model::Node node = builders::GpuNode("gpu-a1", 1, 81920);
  EXPECT_EQ(CheckConfigAgainstCluster(*reserve, {node}).message(),
            "config key \"reservePerDevice\": 102400 MiB is not less than the memory of device 0 (NVIDIA "
            "A100-SXM4-80GB, 81920 MiB) of node gpu-a1: nothing would ever fit on it");
  reserve->reserve_per_device_mib = 512;
  EXPECT_TRUE(CheckConfigAgainstCluster(*reserve, {node}).ok());
}

}  // namespace
}  // namespace gpupack::extender
