#include "scheduler/extender/recommendations.h"

#include <string>

namespace gpupack::extender {
namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

prometheus::MetricFamily Gauge(const char* name, const char* help) {
  return prometheus::MetricFamily{name, help, prometheus::MetricType::Gauge, {}};
}

void Add(prometheus::MetricFamily& family, const api::WorkloadRecommendation& r, double value,
         const char* extra_label = nullptr, const std::string& extra_value = "") {
  prometheus::ClientMetric& m = family.metric.emplace_back();
  m.label = {{"namespace", r.ns},
             {"workload_kind", r.workload_kind},
             {"workload", r.workload_name},
             {"container", r.container}};
  if (extra_label != nullptr) m.label.push_back({extra_label, extra_value});
  m.gauge.value = value;
}

}  // namespace

std::vector<prometheus::MetricFamily> RecommendationFamilies(const api::RecommendationReport& report) {
  prometheus::MetricFamily requested =
      Gauge("gpupack_workload_gpu_memory_requested_bytes",
            "GPU memory each device of the workload's container holds now (its share).");
  prometheus::MetricFamily peak =
      Gauge("gpupack_workload_gpu_memory_peak_bytes", "Highest GPU memory the workload's pods used on a device.");
  prometheus::MetricFamily p99 =
      Gauge("gpupack_workload_gpu_memory_p99_bytes",
            "99th percentile of the GPU memory the workload's largest pod used on a device.");
  prometheus::MetricFamily recommended =
      Gauge("gpupack_workload_gpu_memory_recommended_bytes",
            "Recommended share per device: bound=guaranteed (gpupack.io/gpu-memory) or ceiling (gpu-memory-limit).");
  prometheus::MetricFamily verdict =
      Gauge("gpupack_workload_rightsizing_verdict", "1 for the workload's current right-sizing verdict.");
  for (const api::WorkloadRecommendation& r : report.recommendations) {
    Add(requested, r, static_cast<double>(r.request_mib) * kBytesPerMiB);
    Add(peak, r, static_cast<double>(r.peak_mib) * kBytesPerMiB);
    Add(p99, r, static_cast<double>(r.p99_mib) * kBytesPerMiB);
    Add(recommended, r, static_cast<double>(r.guaranteed_mib) * kBytesPerMiB, "bound", "guaranteed");
    Add(recommended, r, static_cast<double>(r.ceiling_mib) * kBytesPerMiB, "bound", "ceiling");
    Add(verdict, r, 1, "verdict", r.verdict);
  }
  return {std::move(requested), std::move(peak), std::move(p99), std::move(recommended), std::move(verdict)};
}

void RegisterRecommendations(server::HttpServer& server, WorkloadUsageStore& store,
                             const placement::RightsizingOptions& options) {
  server.Handle("GET", "/recommendations", [&store, options](const server::Request&) {
    return server::Response{
        200, "application/json", api::RecommendationReportToJson(store.Recommend(options)).dump(), {}};
  });
  server.AddMetrics([&store, options] { return RecommendationFamilies(store.Recommend(options)); });
}

}  // namespace gpupack::extender
