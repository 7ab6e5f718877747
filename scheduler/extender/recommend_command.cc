#include "scheduler/extender/recommend_command.h"

#include <algorithm>
#include <cstdio>

namespace gpupack::extender {
namespace {

std::string GiB(model::MiB per_device_mib, int devices) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(per_device_mib * devices) / 1024.0);
  return buf;
}

}  // namespace

const char* const kRecommendUsage =
    R"(usage: gpupack-extender recommend [--extender URL] [--namespace NS] [--json]

Prints the extender's right-sizing recommendations (docs/recommendations.md): per workload
container, the GPU memory it asks for, the peak and p99 its pods used, and the guaranteed amount
(gpupack.io/gpu-memory) and ceiling (gpupack.io/gpu-memory-limit) recommended. Advice only:
nothing is changed.

  --extender URL   the extender to ask (default http://127.0.0.1:8888, its verbs listener inside
                   the scheduler pod: kubectl -n gpupack exec deploy/gpupack-scheduler -c extender
                   -- gpupack-extender recommend)
  --namespace NS   only workloads in NS
  --json           the report as JSON (GET /recommendations) instead of the table
)";

StatusOr<RecommendFlags> ParseRecommendFlags(const std::vector<std::string>& args) {
  RecommendFlags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      f.help = true;
      return f;
    }
    if (arg == "--json") {
      f.json = true;
      continue;
    }
    std::string* target = arg == "--extender" ? &f.extender : arg == "--namespace" ? &f.ns : nullptr;
    if (target == nullptr) return Status::InvalidArgument("unknown flag " + arg + "\n" + kRecommendUsage);
    if (i + 1 >= args.size() || args[i + 1].empty()) return Status::InvalidArgument(arg + " needs a value");
    *target = args[++i];
  }
  if (f.extender.rfind("http://", 0) != 0 && f.extender.rfind("https://", 0) != 0) {
    return Status::InvalidArgument("--extender: expected an http:// or https:// URL, got \"" + f.extender + "\"");
  }
  return f;
}

api::RecommendationReport InNamespace(api::RecommendationReport report, const std::string& ns) {
  if (ns.empty()) return report;
  std::erase_if(report.recommendations, [&](const api::WorkloadRecommendation& r) { return r.ns != ns; });
  return report;
}

std::string FormatRecommendationTable(const api::RecommendationReport& report) {
  const std::vector<std::string> header = {"NAMESPACE",   "WORKLOAD", "CONTAINER", "PODS",
                                           "REQUEST GiB", "PEAK GiB", "P99 GiB",   "GUARANTEED GiB",
                                           "CEILING GiB", "PER GPU",  "VERDICT"};
  std::vector<std::vector<std::string>> rows = {header};
  for (const api::WorkloadRecommendation& r : report.recommendations) {
    rows.push_back({r.ns, r.workload_kind + "/" + r.workload_name, r.container, std::to_string(r.pods),
                    GiB(r.request_mib, r.devices), GiB(r.peak_mib, r.devices), GiB(r.p99_mib, r.devices),
                    GiB(r.guaranteed_mib, r.devices), GiB(r.ceiling_mib, r.devices),
                    std::to_string(r.fit_now) + "→" + std::to_string(r.fit_recommended), r.verdict});
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  if (report.recommendations.empty()) out += "(no workload observed yet)\n";
  out += "headroom " + std::to_string(report.headroom_percent) + " %; memory per container (gpu-memory is the " +
         "total over its devices); PER GPU: how many such pods one device holds now → recommended\n";
  for (const api::WorkloadRecommendation& r : report.recommendations) {
    if (r.verdict != "shrink") continue;
    out += r.ns + "/" + r.workload_name + " " + r.container +
           ": gpupack.io/gpu-memory: " + api::ContainerQuantity(r.guaranteed_mib, r.devices);
    if (r.ceiling_mib > r.guaranteed_mib) {
      out += ", annotation gpupack.io/gpu-memory-limit: " + api::ContainerQuantity(r.ceiling_mib, r.devices);
    }
    out += " (" + r.reason + ")\n";
  }
  return out;
}

}  // namespace gpupack::extender
