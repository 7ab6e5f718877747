// gpupack-extender's configuration file (YAML; every key optional; docs/configuration.md has the
// table). Unknown keys and bad values are refused at start-up with the key named, e.g.
//   config key "policy": expected fgd, binpack or spread, got "fdg"
//
// Thread safety: plain value.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model.h"
#include "placement/decision.h"
#include "placement/placement.h"
#include "placement/rightsizing.h"
#include "scheduler/extender/defragmenter.h"
#include "scheduler/extender/usage_store.h"

namespace gpupack::extender {

struct ExtenderConfig {
  std::string listen = "0.0.0.0:8888";  // verbs (and /metrics, /healthz, /readyz)
  std::string metrics_listen;           // optional second listener for /metrics, /healthz, /readyz
  std::string prefix;                   // verbs at {prefix}/filter etc.; "" or "/path"
  model::PolicyKind policy = model::PolicyKind::kFgd;
  bool decisive_filter = true;
  double filter_band_mib = 0;
  // The decision's keys (placement::DecisionOptions; the defaults are its defaults, written once).
  // fgdScoreUnit: the device size that scales the rank keys; 0 = the cluster's typical device
  // size, found again at every policy refresh (placement::TypicalDeviceMiB).
  model::MiB fgd_score_unit_mib = 0;
  bool fgd_score_levels = placement::DecisionOptions{}.fgd_levels;  // false: rank FGD by the exact cost
  bool rank_by_fill = placement::DecisionOptions{}.rank_by_fill;
  bool reserve_scarce_capacity = placement::DecisionOptions{}.reserve_scarce_capacity;
  bool rank_by_completion = placement::DecisionOptions{}.rank_by_completion;
  bool fixed_tie_break = placement::DecisionOptions{}.fixed_tie_break;  // tieBreak: nodeOrder (true) | random
  uint64_t tie_break_seed = 0;
  bool neutral_non_gpu_pods = false;
  model::MiB reserve_per_device_mib = 0;
  // ceilingOvercommit: Σ ceilings per device ≤ this percent of its memory less the reserve.
  int ceiling_overcommit_pct = placement::kDefaultCeilingOvercommitPct;
  // processOverhead: off (default), auto (each device's family default) or one quantity.
  placement::ProcessOverheadMode process_overhead = placement::ProcessOverheadMode::kOff;
  model::MiB process_overhead_mib = 0;
  double workload_half_life_pods = placement::DecisionOptions{}.half_life_pods;
  double workload_prior_pods = placement::DecisionOptions{}.prior_pods;
  double workload_whole_gpu_prior_pods = placement::DecisionOptions{}.whole_gpu_prior_pods;
  double workload_coverage =
      placement::DecisionOptions{}.coverage;  // the learned typical set covers this share of pods
  int workload_refresh_pods =
      placement::DecisionOptions{}.refresh_pods;  // re-derive the policy after this many binds; 0 = never
  std::chrono::nanoseconds heartbeat_ttl = std::chrono::seconds(120);  // 0 = nodes never go stale
  double request_ratio = 1.0;
  std::chrono::nanoseconds reservation_ttl = std::chrono::minutes(2);
  std::chrono::nanoseconds filter_hold_ttl = std::chrono::seconds(30);  // 0 = the filter holds nothing
  int64_t remembered_pods = 10000;
  std::chrono::nanoseconds remembered_ttl = std::chrono::minutes(10);
  int64_t max_body_bytes = 64ll << 20;
  int threads = 4;
  int bind_threads = 32;  // binds in flight at once (each waits on the API server)
  // A verb that waited this long for a worker is answered 503 unrun; 0 = no bound. Below
  // kube-scheduler's extender httpTimeout (the chart's 5 s), so it hears a refusal in time.
  std::chrono::nanoseconds max_queue_wait = std::chrono::seconds(2);
  bool per_device_metrics = true;
  int max_devices_per_container = 16;
  std::string tls_cert_file;  // both set: serve HTTPS (kube-scheduler's enableHTTPS)
  std::string tls_key_file;
  // rightsizing: the recommendations' headroom and sample minimum, the workload store's bounds
  // (docs/recommendations.md).
  placement::RightsizingOptions rightsizing;
  UsageStoreOptions usage_store;
  // defragmentation: the mode (off | dry-run), how soon a waiting pod is planned for again, and
  // the most moves a plan may make (docs/placement.md, "Defragmentation").
  DefragConfig defrag;
};

StatusOr<ExtenderConfig> ParseExtenderConfig(std::string_view yaml_text);
// The decision's options as configured (ExtenderOptions::decision).
placement::DecisionOptions DecisionOptionsOf(const ExtenderConfig& config);
// The placement core's options as configured (reserve, ceiling bound, per-process overhead).
placement::PlacementOptions PlacementOptionsOf(const ExtenderConfig& config);
StatusOr<ExtenderConfig> LoadExtenderConfig(const std::string& path);
// What the config cannot know alone, checked once the inventory is known (standalone mode, at
// start): InvalidArgument naming the key when reservePerDevice is at least the memory of a device.
Status CheckConfigAgainstCluster(const ExtenderConfig& config, const std::vector<model::Node>& nodes);

}  // namespace gpupack::extender
