// The per-process overhead floor (docs/placement.md, "Per-process overhead"): device memory that
// every process on a device holds before it allocates a byte of its own (the CUDA context, with
// its per-SM local-memory and printf/malloc heaps, and the driver's per-process reserve). The
// default is per GPU family, from the sources docs/placement.md cites; the extender's config key
// `processOverhead` (off | auto | a quantity) chooses off, these defaults, or one figure for every
// device. One declaration, so the extender's placement, the webhook's minimum share and the
// recommendation's floor use the same number.
#pragma once

#include <span>
#include <string_view>

#include "model/model.h"

namespace gpupack::model {

// One GPU family's default: a device whose model matches `model_name` (GpuModelMatches: whole
// words, case-insensitive) pays `overhead_mib` per process.
struct ProcessOverheadFamily {
  std::string_view family;      // "Hopper", for the docs' table and messages
  std::string_view model_name;  // "H100", matched as GpuModelMatches does
  MiB overhead_mib = 0;
};

// The families gpupack knows, in matching order (the first match wins).
std::span<const ProcessOverheadFamily> ProcessOverheadFamilies();

// For a device of no known family: KAI-Scheduler #2212's proposal, 3 % of the device's memory and at
// least 256 MiB.
inline constexpr MiB kUnknownFamilyOverheadFloorMiB = 256;
inline constexpr int kUnknownFamilyOverheadPct = 3;

// The default per-process overhead of a device of `gpu_model` with `capacity_mib` of memory: its
// family's figure, else max(256 MiB, ⌈3 % of capacity⌉). A MIG instance pays its parent GPU's
// family figure (a context on an instance is as large as on the GPU).
MiB DefaultProcessOverheadMiB(std::string_view gpu_model, MiB capacity_mib);

// The smallest default of any known family: the least any device charges a process, which the
// webhook's minimum share is measured against (it does not know the device a pod will get).
MiB SmallestProcessOverheadMiB();

}  // namespace gpupack::model
