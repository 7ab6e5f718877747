// An injectable clock, so that TTLs, heartbeats and back-off are testable without sleeping.
// Thread safety: every method of every Clock here is safe to call concurrently.
#pragma once

#include <atomic>
#include <chrono>

namespace gpupack {

class Clock {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::time_point<std::chrono::system_clock, Duration>;
  virtual ~Clock() = default;
  // Wall-clock time (comparable with Kubernetes timestamps).
  virtual TimePoint Now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()); }
  // A process-wide instance for production wiring.
  static const SystemClock& Instance() {
    static const SystemClock clock;
    return clock;
  }
};

// A clock that moves only when told to. Starts at a fixed, readable instant.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint(std::chrono::seconds(1'800'000'000)))
      : now_ns_(start.time_since_epoch().count()) {}
  TimePoint Now() const override { return TimePoint(Duration(now_ns_.load())); }
  void Advance(Duration d) { now_ns_ += d.count(); }
  void Set(TimePoint t) { now_ns_ = t.time_since_epoch().count(); }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace gpupack
