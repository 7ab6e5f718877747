// What each gpupack container on this node has used over its life (docs/agent.md "Observed use"):
// its peak and high percentiles of used GPU memory, sampled once per agent pass, for the
// right-sizing recommendations the extender makes (placement/rightsizing.h).
//
// A sample is the container's use on the busiest of its devices (its processes' usedGpuMemory as
// NVML reports it; gpu-memory is split evenly over the devices, so the busiest decides the share).
// NVML sees a process's whole device memory: its CUDA context, the framework pool's reserve
// (PyTorch's caching allocator, TensorFlow's BFC, JAX's preallocation) and its tensors, as one
// number; the pool's reserve is not shown apart, so the figures are what the driver handed the
// process, which is what a share has to hold.
//
// Percentiles come from a fixed log-bucket histogram: 16 buckets per doubling from 1 MiB to
// 2^20 MiB (1 TiB), plus one for 0, so 321 counters (1.3 KB) per container however long it runs.
// Why this estimator: memory is bounded and known in advance (a node's containers × 1.3 KB); the
// error is relative, the same for 300 MiB and 80 GiB; a quantile is the upper edge of its bucket
// (capped at the exact maximum), so it is never below the truth and at most 2^(1/16) − 1 = 4.4 %
// above it, the safe side for sizing. Sketches that adapt (t-digest, P²) are tighter in the middle
// but need more state or are biased in the tails, where the p99 lives.
//
// Thread safety: not thread-safe; one agent loop drives it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/enforcer.h"
#include "agent/pods.h"
#include "api/gpunode.h"
#include "common/clock.h"

namespace gpupack::agent {

class UsageHistogram {
 public:
  static constexpr int kBucketsPerDoubling = 16;
  static constexpr int kDoublings = 20;  // up to 2^20 MiB
  static constexpr int kBuckets = kBucketsPerDoubling * kDoublings + 1;

  void Add(model::MiB used_mib);
  // The q-quantile (0 < q ≤ 1) of the samples: the upper edge of the bucket holding the
  // ⌈q × count⌉-th smallest, capped at the maximum; 0 with no samples.
  model::MiB Quantile(double q) const;
  int64_t count() const { return count_; }
  model::MiB max() const { return max_; }

  // The bucket of a value: 0 for 0, else 1 + ⌈16 × log2(v)⌉ (clamped to the last), and its upper
  // edge ⌈2^((b − 1) / 16)⌉ MiB.
  static int BucketOf(model::MiB used_mib);
  static model::MiB UpperEdgeMiB(int bucket);

 private:
  std::array<uint32_t, kBuckets> counts_{};
  int64_t count_ = 0;
  model::MiB max_ = 0;
};

class UsageTracker {
 public:
  // At most this many containers are reported (the GPUNode CRD's maxItems): more than any node
  // holds at the default 16 pods per device on 16 devices.
  static constexpr size_t kMaxReported = 256;

  // One pass: a sample of every running gpupack container in `caps` (one entry per container and
  // device, from the enforcer), described by its pod in `pods` and its devices in `status`;
  // containers of pods no longer listed, or terminating, are forgotten (the extender keeps what
  // they reported).
  void Observe(const std::vector<ContainerCap>& caps, const std::vector<PodInfo>& pods,
               const api::GpuNodeStatus& status, Clock::TimePoint now);
  // Every tracked container that has a sample, by pod then container, at most kMaxReported.
  std::vector<api::GpuNodeContainerUsage> Report() const;

 private:
  struct Tracked {
    api::GpuNodeContainerUsage about;  // identity, devices and cap; figures filled by Report
    UsageHistogram histogram;
  };
  std::map<std::pair<std::string, std::string>, Tracked> tracked_;  // (pod UID, container name)
};

}  // namespace gpupack::agent
