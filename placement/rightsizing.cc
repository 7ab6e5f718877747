#include "placement/rightsizing.h"

#include <algorithm>
#include <cmath>

namespace gpupack::placement {
namespace {

std::string MiBText(model::MiB v) { return std::to_string(v) + " MiB"; }

// ⌈value × (1 + headroom)⌉.
model::MiB WithHeadroom(model::MiB value, double headroom) {
  return static_cast<model::MiB>(std::ceil(static_cast<double>(value) * (1.0 + headroom)));
}

}  // namespace

std::string_view RightsizingVerdictName(RightsizingVerdict v) {
  switch (v) {
    case RightsizingVerdict::kShrink:
      return "shrink";
    case RightsizingVerdict::kKeep:
      return "keep";
    case RightsizingVerdict::kAtCap:
      return "at-cap";
    case RightsizingVerdict::kTooFewSamples:
      return "too-few-samples";
  }
  return "unknown";
}

model::MiB PackingGranuleMiB(model::MiB device_mib) {
  model::MiB granule = 1;
  while (granule * 2 <= device_mib / 256) granule *= 2;
  return granule;
}

model::MiB PackedShareMiB(model::MiB need_mib, model::MiB device_mib) {
  if (need_mib >= device_mib) return device_mib;
  const model::MiB granule = PackingGranuleMiB(device_mib);
  const model::MiB fit = device_mib / std::max<model::MiB>(1, need_mib);
  const model::MiB packed = device_mib / fit / granule * granule;
  if (packed >= need_mib) return packed;
  // The granule is coarser than the room between the need and D/n: round the need up instead.
  return std::min(device_mib, (need_mib + granule - 1) / granule * granule);
}

ObservedUse CombineObserved(const std::vector<ObservedUse>& pods) {
  ObservedUse out = pods.front();
  out.samples = 0;
  out.pods = 0;
  for (const ObservedUse& p : pods) {
    out.request_mib = std::max(out.request_mib, p.request_mib);
    out.peak_mib = std::max(out.peak_mib, p.peak_mib);
    out.p99_mib = std::max(out.p99_mib, p.p99_mib);
    out.device_memory_mib = std::min(out.device_memory_mib, p.device_memory_mib);
    out.samples += p.samples;
    out.pods += p.pods;
  }
  return out;
}

Recommendation Recommend(const ObservedUse& observed, const RightsizingOptions& options) {
  const model::MiB device = observed.device_memory_mib;
  Recommendation r;
  r.granule_mib = PackingGranuleMiB(device);
  r.fit_now = observed.request_mib > 0 ? device / observed.request_mib : 0;
  auto keep_request = [&](RightsizingVerdict verdict, std::string reason) {
    r.verdict = verdict;
    r.guaranteed_mib = observed.request_mib;
    r.ceiling_mib = observed.request_mib;
    r.fit_recommended = r.fit_now;
    r.reason = std::move(reason);
    return r;
  };
  if (observed.samples < options.min_samples) {
    return keep_request(RightsizingVerdict::kTooFewSamples, std::to_string(observed.samples) + " samples, " +
                                                                std::to_string(options.min_samples) +
                                                                " needed before advising");
  }
  if (static_cast<double>(observed.peak_mib) >= options.at_cap_ratio * static_cast<double>(observed.request_mib)) {
    return keep_request(RightsizingVerdict::kAtCap,
                        "peak " + MiBText(observed.peak_mib) + " reached the cap of " + MiBText(observed.request_mib) +
                            ": the cap may be what held it down; give it a higher ceiling to learn its need");
  }
  const model::MiB guaranteed_need =
      std::max(WithHeadroom(observed.p99_mib, options.headroom), std::max<model::MiB>(options.min_share_mib, 1));
  const model::MiB guaranteed = PackedShareMiB(guaranteed_need, device);
  const model::MiB ceiling =
      std::max(guaranteed, PackedShareMiB(WithHeadroom(observed.peak_mib, options.headroom), device));
  if (guaranteed >= observed.request_mib) {
    return keep_request(RightsizingVerdict::kKeep, "p99 " + MiBText(observed.p99_mib) + " + headroom packs to " +
                                                       MiBText(guaranteed) + ", not below the share of " +
                                                       MiBText(observed.request_mib));
  }
  r.verdict = RightsizingVerdict::kShrink;
  r.guaranteed_mib = guaranteed;
  r.ceiling_mib = std::min(ceiling, std::max(observed.request_mib, guaranteed));
  r.fit_recommended = device / guaranteed;
  r.reason = "p99 " + MiBText(observed.p99_mib) + ", peak " + MiBText(observed.peak_mib) + " of " +
             MiBText(observed.request_mib) + ": " + std::to_string(r.fit_recommended) + " per device instead of " +
             std::to_string(r.fit_now);
  return r;
}

}  // namespace gpupack::placement
