#include "api/recommendation.h"

namespace gpupack::api {
namespace {

using Json = nlohmann::json;

template <typename T>
Status Read(const Json& obj, const char* key, const std::string& where, T* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return Status::InvalidArgument(where + "." + key + ": expected a string");
  } else {
    if (!it->is_number_integer()) return Status::InvalidArgument(where + "." + key + ": expected an integer");
  }
  *out = it->get<T>();
  return Status::Ok();
}

}  // namespace

std::string ContainerQuantity(model::MiB per_device_mib, int devices) {
  return std::to_string(per_device_mib * devices) + "Mi";
}

nlohmann::json RecommendationReportToJson(const RecommendationReport& report) {
  Json list = Json::array();
  for (const WorkloadRecommendation& r : report.recommendations) {
    list.push_back({{"namespace", r.ns},
                    {"workloadKind", r.workload_kind},
                    {"workloadName", r.workload_name},
                    {"container", r.container},
                    {"pods", r.pods},
                    {"samples", r.samples},
                    {"devices", r.devices},
                    {"deviceMemoryMiB", r.device_memory_mib},
                    {"requestMiB", r.request_mib},
                    {"peakMiB", r.peak_mib},
                    {"p99MiB", r.p99_mib},
                    {"guaranteedMiB", r.guaranteed_mib},
                    {"ceilingMiB", r.ceiling_mib},
                    {"granuleMiB", r.granule_mib},
                    {"fitNow", r.fit_now},
                    {"fitRecommended", r.fit_recommended},
                    {"verdict", r.verdict},
                    {"reason", r.reason},
                    {"gpuMemory", ContainerQuantity(r.guaranteed_mib, r.devices)},
                    {"gpuMemoryLimit", ContainerQuantity(r.ceiling_mib, r.devices)}});
  }
  return Json{{"headroomPercent", report.headroom_percent},
              {"minShareMiB", report.min_share_mib},
              {"recommendations", std::move(list)}};
}

StatusOr<RecommendationReport> RecommendationReportFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("recommendations: expected an object");
  RecommendationReport report;
  GPUPACK_RETURN_IF_ERROR(Read(j, "headroomPercent", "report", &report.headroom_percent));
  GPUPACK_RETURN_IF_ERROR(Read(j, "minShareMiB", "report", &report.min_share_mib));
  auto list = j.find("recommendations");
  if (list == j.end() || list->is_null()) return report;
  if (!list->is_array()) return Status::InvalidArgument("report.recommendations: expected a list");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& e = (*list)[i];
    const std::string at = "report.recommendations[" + std::to_string(i) + "]";
    if (!e.is_object()) return Status::InvalidArgument(at + ": expected an object");
    WorkloadRecommendation r;
    GPUPACK_RETURN_IF_ERROR(Read(e, "namespace", at, &r.ns));
    GPUPACK_RETURN_IF_ERROR(Read(e, "workloadKind", at, &r.workload_kind));
    GPUPACK_RETURN_IF_ERROR(Read(e, "workloadName", at, &r.workload_name));
    GPUPACK_RETURN_IF_ERROR(Read(e, "container", at, &r.container));
    GPUPACK_RETURN_IF_ERROR(Read(e, "pods", at, &r.pods));
    GPUPACK_RETURN_IF_ERROR(Read(e, "samples", at, &r.samples));
    GPUPACK_RETURN_IF_ERROR(Read(e, "devices", at, &r.devices));
    GPUPACK_RETURN_IF_ERROR(Read(e, "deviceMemoryMiB", at, &r.device_memory_mib));
    GPUPACK_RETURN_IF_ERROR(Read(e, "requestMiB", at, &r.request_mib));
    GPUPACK_RETURN_IF_ERROR(Read(e, "peakMiB", at, &r.peak_mib));
    GPUPACK_RETURN_IF_ERROR(Read(e, "p99MiB", at, &r.p99_mib));
    GPUPACK_RETURN_IF_ERROR(Read(e, "guaranteedMiB", at, &r.guaranteed_mib));
    GPUPACK_RETURN_IF_ERROR(Read(e, "ceilingMiB", at, &r.ceiling_mib));
    GPUPACK_RETURN_IF_ERROR(Read(e, "granuleMiB", at, &r.granule_mib));
    GPUPACK_RETURN_IF_ERROR(Read(e, "fitNow", at, &r.fit_now));
    GPUPACK_RETURN_IF_ERROR(Read(e, "fitRecommended", at, &r.fit_recommended));
    GPUPACK_RETURN_IF_ERROR(Read(e, "verdict", at, &r.verdict));
    GPUPACK_RETURN_IF_ERROR(Read(e, "reason", at, &r.reason));
    report.recommendations.push_back(std::move(r));
  }
  return report;
}

}  // namespace gpupack::api
