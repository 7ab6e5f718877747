// `gpupack-extender recommend` (docs/recommendations.md): asks a running extender for its
// right-sizing report (GET /recommendations) and prints it as a table, or as the report's JSON
// with --json. The flags and the table live here, apart from the main, so each has a unit test;
// the main does the HTTP GET.
#pragma once

#include <string>
#include <vector>

#include "api/recommendation.h"
#include "common/status.h"

namespace gpupack::extender {

extern const char* const kRecommendUsage;

struct RecommendFlags {
  bool help = false;  // --help / -h: print kRecommendUsage, exit 0
  // The extender's verbs listener in the chart's pod (kubectl exec … -- gpupack-extender recommend).
  std::string extender = "http://127.0.0.1:8888";
  bool json = false;
  std::string ns;  // --namespace: only this namespace's workloads; "" = all
};

// `args` after "recommend". On failure the message is what the main prints after
// "gpupack-extender recommend: ".
StatusOr<RecommendFlags> ParseRecommendFlags(const std::vector<std::string>& args);

// The report's entries in `ns` (all when empty).
api::RecommendationReport InNamespace(api::RecommendationReport report, const std::string& ns);

// One row per workload container: NAMESPACE WORKLOAD CONTAINER PODS REQUEST PEAK P99 GUARANTEED
// CEILING FIT VERDICT, memory as container totals in GiB to two decimals (what gpu-memory says),
// then a line per row that advises a change with the values to apply.
std::string FormatRecommendationTable(const api::RecommendationReport& report);

}  // namespace gpupack::extender
