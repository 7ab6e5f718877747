// An injectable clock, so that TTLs, heartbeats, back-off and the waits of periodic loops are
// testable without sleeping (tests use testing/fake_clock.h).
// Thread safety: every method of every Clock here is safe to call concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace gpupack {

class Clock {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::time_point<std::chrono::system_clock, Duration>;
  virtual ~Clock() = default;
  // Wall-clock time (comparable with Kubernetes timestamps).
  virtual TimePoint Now() const = 0;
  // Waits on `cv` until `done()` or until Now() reaches `deadline`, whichever comes first, and
  // returns done(): std::condition_variable::wait_until with a predicate, on this clock. Whoever
  // makes `done()` true notifies `cv`. `lock` holds `cv`'s mutex on entry and on return; it may be
  // released meanwhile, as in any wait, so `done()` is checked under it each time.
  virtual bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, TimePoint deadline,
                         const std::function<bool()>& done) const = 0;
};

// later − earlier, saturated at Clock::Duration's range instead of overflowing: the nanosecond
// difference of two points some 292 years apart does not fit, and a heartbeat from a peer (a
// GPUNode's "1707-12-02T07:00:00Z") may be that far from now.
inline Clock::Duration SaturatingElapsed(Clock::TimePoint earlier, Clock::TimePoint later) {
  int64_t out = 0;
  if (__builtin_sub_overflow(later.time_since_epoch().count(), earlier.time_since_epoch().count(), &out)) {
    return later > earlier ? Clock::Duration::max() : Clock::Duration::min();
  }
  return Clock::Duration(out);
}

class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()); }
  // Measured as a span from now on the steady clock, so that a wall-clock step (NTP) neither
  // cuts a wait short nor stretches it.
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, TimePoint deadline,
                 const std::function<bool()>& done) const override {
    return cv.wait_for(lock, deadline - Now(), done);
  }
  // A process-wide instance for production wiring.
  static const SystemClock& Instance() {
    static const SystemClock clock;
    return clock;
  }
};

}  // namespace gpupack
