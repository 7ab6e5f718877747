// The two-dimensional workload families of the Alibaba trace (docs/simulator.md, "Compute"): the
// trace's gpu_milli is a share of a GPU's compute as much as of its memory (its authors: "0.6 GPU
// refers to 60% of the GPU's memory capacity and at least 60% of its computation time"), and the
// simulator reads it as memory. A family keeps it as the compute share and draws the memory.
//
// For every pod with one device container that shares its device (memory below the device):
//   compute = max(1, ⌊gpu_milli / 10⌋) percent (the trace's 1000-MiB GPU: gpu_milli = its memory);
//   memory  = the empirical quantile, over those pods' gpu_milli, of Φ(ρ·z + √(1 − ρ²)·ε), where
//             z = Φ⁻¹((rank + ½) / n) is the normal score of the pod's gpu_milli among them and ε a
//             standard normal drawn from `seed` (a Gaussian copula: ρ is the correlation of the
//             normal scores, so memory and compute keep the trace's marginal and correlate by ρ).
// ρ = 1 gives every pod back its own gpu_milli as memory (today's one-dimensional case, the
// share stated explicitly); ρ = −1 gives the largest compute the smallest memory. Whole-device
// and CPU-only pods are left as they are.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace gpupack::sim {

// REQUIRES: −1 ≤ rho ≤ 1.
void ApplyComputeFamily(std::vector<model::PodRequest>& pods, double rho, uint64_t seed);

}  // namespace gpupack::sim
