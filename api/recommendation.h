// The right-sizing report (docs/recommendations.md): what the extender serves on
// GET /recommendations and what `gpupack-extender recommend` prints. One entry per workload
// container; memory per device in MiB (a container's gpupack.io/gpu-memory is the per-device share
// × devices, given ready to apply in gpuMemory and gpuMemoryLimit).
//
//   {"headroomPercent":10,"minShareMiB":0,
//    "recommendations":[{"namespace":"ml","workloadKind":"Deployment","workloadName":"web",
//      "container":"main","pods":3,"samples":1080,"devices":1,"deviceMemoryMiB":81920,
//      "requestMiB":8192,"peakMiB":5325,"p99MiB":5120,"guaranteedMiB":5632,"ceilingMiB":6144,
//      "granuleMiB":256,"fitNow":10,"fitRecommended":14,"verdict":"shrink","reason":"…",
//      "gpuMemory":"5632Mi","gpuMemoryLimit":"6144Mi"}]}
//
// Decoding ignores unknown keys and refuses wrong types naming the field.
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "model/model.h"

namespace gpupack::api {

struct WorkloadRecommendation {
  std::string ns;
  std::string workload_kind;
  std::string workload_name;
  std::string container;
  int pods = 0;         // pods whose observations are combined (live and retained)
  int64_t samples = 0;  // Σ agent samples behind the figures
  int devices = 1;
  model::MiB device_memory_mib = 0;
  model::MiB request_mib = 0;  // per device, now
  model::MiB peak_mib = 0;
  model::MiB p99_mib = 0;
  model::MiB guaranteed_mib = 0;  // recommended, per device
  model::MiB ceiling_mib = 0;
  model::MiB granule_mib = 0;
  int64_t fit_now = 0;
  int64_t fit_recommended = 0;
  std::string verdict;  // shrink | keep | at-cap | too-few-samples
  std::string reason;

  bool operator==(const WorkloadRecommendation&) const = default;
};

struct RecommendationReport {
  int headroom_percent = 0;
  model::MiB min_share_mib = 0;
  std::vector<WorkloadRecommendation> recommendations;

  bool operator==(const RecommendationReport&) const = default;
};

// "5632Mi": the quantity of `mib` × `devices` (gpuMemory, gpuMemoryLimit in the JSON).
std::string ContainerQuantity(model::MiB per_device_mib, int devices);

nlohmann::json RecommendationReportToJson(const RecommendationReport& report);
StatusOr<RecommendationReport> RecommendationReportFromJson(const nlohmann::json& j);

}  // namespace gpupack::api
