// Right-sizing from observed use (docs/recommendations.md): what a workload's container was seen
// using on its devices goes in, a recommended guaranteed amount (gpupack.io/gpu-memory) and
// ceiling (gpupack.io/gpu-memory-limit) come out. Advice only: nothing here changes a pod.
//
// The rule, per device (a container's gpupack.io/gpu-memory is split evenly over its devices, so
// the largest device's use decides the share):
//   guaranteed need = max(p99 × (1 + headroom), the minimum share)
//   ceiling need    = max(peak × (1 + headroom), guaranteed)
//   each need is then packed: on a device of D MiB a share s lets n = ⌊D / s⌋ shares fit, and any
//   share between D/(n+1) and D/n fits the same n, so the need is raised to the largest multiple
//   of the packing granule g that still fits n (the difference is headroom the device would
//   otherwise leave as a fragment); g = the largest power of two MiB ≤ D / 256 (256 MiB on an
//   80 GiB device, 64 MiB on a 16 GiB one), so shares stay round numbers that divide well.
// A workload's pods are combined by the maximum (every replica has to fit its share, so the
// largest replica's percentile decides, not a pooled one).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"

namespace gpupack::placement {

// What one container was seen using (per device, MiB), or the combination over a workload's pods.
struct ObservedUse {
  model::MiB request_mib = 0;        // its current share per device (the cap)
  model::MiB peak_mib = 0;           // the highest sample
  model::MiB p99_mib = 0;            // the 99th percentile of its samples
  int64_t samples = 0;               // how many samples (agent passes) stand behind the figures
  model::MiB device_memory_mib = 0;  // the smallest device it ran on
  int devices = 1;                   // devices per container (gpu-memory is their total)
  int pods = 1;                      // pods combined

  bool operator==(const ObservedUse&) const = default;
};

struct RightsizingOptions {
  double headroom = 0.10;  // added on top of what was observed
  // The least share a recommendation goes down to: the per-process overhead floor (CUDA context
  // and driver reserve), which the admission refuses to go under. 0 = none.
  model::MiB min_share_mib = 0;
  // Fewer samples than this: too little seen to advise (30 passes = 5 minutes at the agent's 10 s).
  int64_t min_samples = 30;
  // A peak at or above this share of the cap: the cap may be what held the use down, so the
  // observed figures say nothing about the real need.
  double at_cap_ratio = 0.95;
};

enum class RightsizingVerdict {
  kShrink,        // the recommendation is below the current share
  kKeep,          // the current share is about right (the recommendation would not be smaller)
  kAtCap,         // the use reached the cap: keep the share, learn more with a higher ceiling
  kTooFewSamples  // not enough seen yet
};
std::string_view RightsizingVerdictName(RightsizingVerdict v);  // "shrink", "keep", "at-cap", "too-few-samples"

struct Recommendation {
  RightsizingVerdict verdict = RightsizingVerdict::kTooFewSamples;
  model::MiB guaranteed_mib = 0;  // per device; × devices for gpupack.io/gpu-memory
  model::MiB ceiling_mib = 0;     // per device, ≥ guaranteed; equal = no ceiling needed
  model::MiB granule_mib = 0;
  int64_t fit_now = 0;          // shares of the current size one device holds
  int64_t fit_recommended = 0;  // shares of the guaranteed size one device holds
  std::string reason;           // in words, with the figures

  bool operator==(const Recommendation&) const = default;
};

// The largest power of two MiB ≤ device_mib / 256, at least 1.
model::MiB PackingGranuleMiB(model::MiB device_mib);
// The share ≥ need_mib that packs on a device of device_mib (above); device_mib when the need is
// the whole device or more.
model::MiB PackedShareMiB(model::MiB need_mib, model::MiB device_mib);
// The pods of one workload's container, combined: the largest request, peak and p99, the smallest
// device, Σ samples; devices of the first. REQUIRES: !pods.empty().
ObservedUse CombineObserved(const std::vector<ObservedUse>& pods);
// The recommendation for `observed`. REQUIRES: observed.device_memory_mib > 0.
Recommendation Recommend(const ObservedUse& observed, const RightsizingOptions& options);

}  // namespace gpupack::placement
