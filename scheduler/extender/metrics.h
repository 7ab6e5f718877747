// The extender's Prometheus metrics (names gpupack_…, base units, counters end in _total). The
// exact list, with labels, is in docs/extender.md; metrics_test.cc checks the names.
//
// Request counters and histograms are updated by the verbs; cluster gauges (capacity, allocated,
// used, fragmentation, reservations in flight) are computed from the ClusterState at scrape time,
// so they can never drift from the ledger.
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "scheduler/core/verdict.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
class Histogram;
}  // namespace prometheus

namespace gpupack::extender {

class ClusterState;

class ExtenderMetrics {
 public:
  // `state` (may be null in tests) must outlive the metrics. `per_device`: export the per-device
  // gauges (one series per device and metric; turn off on very large clusters).
  ExtenderMetrics(const ClusterState* state, bool per_device);
  ~ExtenderMetrics();

  // `result`: "ok", "no_fit" (filter passed no node, bind could not place), "error".
  void ObserveRequest(std::string_view verb, std::string_view result, double seconds);
  void CountRejection(core::RejectReason reason);
  void CountExpiredReservations(int count);
  void SetReady(bool ready);

  // Prometheus text exposition format 0.0.4.
  std::string Render() const;

 private:
  const ClusterState* state_;
  const bool per_device_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* durations_;
  prometheus::Family<prometheus::Counter>* rejections_;
  prometheus::Counter* expired_;
  std::atomic<bool> ready_{false};
};

}  // namespace gpupack::extender
