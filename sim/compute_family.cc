#include "sim/compute_family.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace gpupack::sim {
namespace {

double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Φ⁻¹ by bisection: exact enough for ranks, and portable (no library inverse differs).
double NormalQuantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (NormalCdf(mid) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// A standard normal by Box–Muller from the engine's raw bits (std::normal_distribution differs
// between standard libraries; this does not).
double StandardNormal(std::mt19937_64& engine) {
  auto uniform = [&] { return (static_cast<double>(engine() >> 11) + 0.5) / static_cast<double>(uint64_t{1} << 53); };
  const double u = uniform(), v = uniform();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
}

model::ContainerRequest* SharedContainer(model::PodRequest& pod) {
  model::ContainerRequest* found = nullptr;
  for (auto& c : pod.containers) {
    if (c.init || c.device_count == 0) continue;
    if (found != nullptr) return nullptr;
    found = &c;
  }
  return found != nullptr && found->mem_per_device_mib > 0 ? found : nullptr;
}

}  // namespace

void ApplyComputeFamily(std::vector<model::PodRequest>& pods, double rho, uint64_t seed) {
  std::vector<model::ContainerRequest*> shared;
  for (auto& pod : pods) {
    if (model::ContainerRequest* c = SharedContainer(pod)) shared.push_back(c);
  }
  const size_t n = shared.size();
  if (n == 0) return;
  // Ranks by gpu_milli (ties in trace order), and the sorted values for the quantiles.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return shared[a]->mem_per_device_mib < shared[b]->mem_per_device_mib; });
  std::vector<model::MiB> sorted(n);
  std::vector<size_t> rank(n);
  for (size_t r = 0; r < n; ++r) {
    sorted[r] = shared[order[r]]->mem_per_device_mib;
    rank[order[r]] = r;
  }
  std::mt19937_64 engine(seed);
  const double spread = std::sqrt(std::max(0.0, 1.0 - rho * rho));
  for (size_t i = 0; i < n; ++i) {
    model::ContainerRequest& c = *shared[i];
    const double z = NormalQuantile((static_cast<double>(rank[i]) + 0.5) / static_cast<double>(n));
    const double epsilon = StandardNormal(engine);
    const double u = NormalCdf(rho * z + spread * epsilon);
    const size_t q = std::min(n - 1, static_cast<size_t>(u * static_cast<double>(n)));
    c.compute_pct = std::max(1, static_cast<int>(c.mem_per_device_mib / 10));
    c.mem_per_device_mib = sorted[q];
  }
}

}  // namespace gpupack::sim
