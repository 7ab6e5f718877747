#include "model/process_overhead.h"

#include <algorithm>

namespace gpupack::model {
namespace {

// docs/placement.md, "Per-process overhead", gives each figure's source. Figures are a context
// under CUDA 12.2+ lazy module loading (the default) plus the driver's per-process reserve; a
// framework that loads cuBLAS/cuDNN workspaces eagerly holds more, which its request must cover.
constexpr ProcessOverheadFamily kFamilies[] = {
    {"Turing", "T4", 448},       {"Volta", "V100", 448},   {"Ampere", "A100", 512},    {"Ampere", "A30", 512},
    {"Ampere", "A10", 512},      {"Ampere", "A40", 512},   {"Ada", "L4", 512},         {"Ada", "L40", 512},
    {"Ada", "L40S", 512},        {"Hopper", "H100", 640},  {"Hopper", "H200", 640},    {"Hopper", "H800", 640},
    {"Hopper", "H20", 640},      {"Hopper", "GH200", 640}, {"Blackwell", "B200", 768}, {"Blackwell", "B300", 768},
    {"Blackwell", "GB200", 768},
};

}  // namespace

std::span<const ProcessOverheadFamily> ProcessOverheadFamilies() { return kFamilies; }

MiB DefaultProcessOverheadMiB(std::string_view gpu_model, MiB capacity_mib) {
  for (const ProcessOverheadFamily& f : kFamilies) {
    if (GpuModelMatches(f.model_name, gpu_model)) return f.overhead_mib;
  }
  const MiB pct = (std::max<MiB>(0, capacity_mib) * kUnknownFamilyOverheadPct + 99) / 100;
  return std::max(kUnknownFamilyOverheadFloorMiB, pct);
}

MiB SmallestProcessOverheadMiB() {
  MiB least = kUnknownFamilyOverheadFloorMiB;
  for (const ProcessOverheadFamily& f : kFamilies) least = std::min(least, f.overhead_mib);
  return least;
}

}  // namespace gpupack::model
