// The right-sizing what-if (docs/simulator.md "Right-sizing what-if"): how much more of the cluster
// the workload would fit if every pod asked for what the recommendations (placement/rightsizing.h)
// would give it, under a usage model, against asking as it does.
//
// The usage model: each pod of the workload file (a copy made by inflation shares its pod's draw)
// uses at its peak a fraction f of its request, f ~ Beta(α, β), drawn in file order from
// std::mt19937_64(seed) as G₁ / (G₁ + G₂) with G₁ ~ Gamma(α), G₂ ~ Gamma(β) (libstdc++'s
// gamma_distribution: the draws are the same on every run of the same build). Its p99 is taken
// equal to its peak (the model says nothing finer, and equal is the cautious side). A pod that
// shares its devices then gets the recommendation's guaranteed amount on the cluster's typical
// device (placement::TypicalDeviceMiB): peak × (1 + headroom), packed to the device's granule,
// never below the minimum share, unchanged when the peak reached 95 % of the request. Whole-device
// pods and CPU-only pods are left as they are.
//
// Per seed: the seed's cluster and arrival list of the FGD protocol (sim/replay.h: every node or
// the --fill-pods sample, the copies of inflation included) are replayed twice in that order, once
// with the pods as they ask and once right-sized, with the same policy and node order; reported
// are the pods placed in each, and the memory the pods placed as requested would free if
// right-sized in place. Memory counts shares only (a whole-device pod holds no share).
// Each replay's policy is made for the typical set of the list it replays (the arrivals, copies
// included), where the table's uses the workload file's pods: inflation copies pods uniformly, so
// the two differ by the draw only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model.h"
#include "placement/rightsizing.h"
#include "sim/replay.h"

namespace gpupack::sim {

struct UsageModel {
  double alpha = 2;
  double beta = 2;
  uint64_t seed = 1;
};

// "beta:A,B" (A, B > 0), e.g. "beta:2,2".
StatusOr<UsageModel> ParseUsageModel(std::string_view text);

// The peak fraction of each pod, in order (above).
std::vector<double> PeakFractions(size_t pods, const UsageModel& model);

// `pods` right-sized for `peak_fraction` (one per pod) on a device of `device_mib`.
std::vector<model::PodRequest> RightSized(std::vector<model::PodRequest> pods, const std::vector<double>& peak_fraction,
                                          model::MiB device_mib, const placement::RightsizingOptions& options);

struct WhatIfSeed {
  uint64_t seed = 0;
  int submitted = 0;
  int placed_requested = 0;
  int placed_rightsized = 0;
  model::MiB held_requested_mib = 0;   // Σ memory of the pods placed as requested
  model::MiB held_rightsized_mib = 0;  // Σ memory of the pods placed right-sized
  model::MiB freed_mib = 0;            // Σ (request − right-sized) over the pods placed as requested
};

struct WhatIf {
  std::string policy;
  UsageModel model;
  model::MiB device_mib = 0;
  // The extender's defaults (its rightsizing config section sets only headroom and minSamples).
  placement::RightsizingOptions rightsizing;
  std::vector<WhatIfSeed> seeds;
};

StatusOr<WhatIf> RunWhatIf(const std::vector<model::Node>& nodes, const std::vector<model::PodRequest>& pods,
                           const ReplayOptions& options, const UsageModel& usage, const std::string& policy,
                           const std::vector<uint64_t>& seeds);

// One row per seed and the mean: submitted, placed as requested, right-sized, more placed, memory
// held (GiB) each way, memory freed (GiB and % of what the requested placement held).
std::string FormatWhatIf(const WhatIf& what_if);

}  // namespace gpupack::sim
