// The right-sizing recommendations on the extender's HTTP servers (docs/recommendations.md):
// GET /recommendations answers the report (api/recommendation.h) of the workload store, and
// /metrics gains one series per workload container and figure (docs/metrics.md):
//
//   gpupack_workload_gpu_memory_requested_bytes{namespace,workload_kind,workload,container}  gauge
//   gpupack_workload_gpu_memory_peak_bytes{…same}                                             gauge
//   gpupack_workload_gpu_memory_p99_bytes{…same}                                              gauge
//   gpupack_workload_gpu_memory_recommended_bytes{…same, bound=guaranteed|ceiling}             gauge
//   gpupack_workload_rightsizing_verdict{…same, verdict=shrink|keep|at-cap|too-few-samples}    gauge (1)
//
// All per device (the share each of a container's devices holds). The series are bounded by the
// store's max_workloads: 6 per workload container.
//
// Thread safety: register before the server starts; served concurrently after.
#pragma once

#include <vector>

#include <prometheus/metric_family.h>

#include "api/recommendation.h"
#include "placement/rightsizing.h"
#include "scheduler/extender/usage_store.h"
#include "server/http_server.h"

namespace gpupack::extender {

// The metric families of a report (above).
std::vector<prometheus::MetricFamily> RecommendationFamilies(const api::RecommendationReport& report);

// GET /recommendations and the families on /metrics, from `store` with `options` at each request.
// REQUIRES: `store` outlives the server.
void RegisterRecommendations(server::HttpServer& server, WorkloadUsageStore& store,
                             const placement::RightsizingOptions& options);

}  // namespace gpupack::extender
