// The clock tests inject where production code takes a Clock (common/clock.h): time moves only
// when the test says so. Test-only.
// Thread safety: every method is safe to call concurrently.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "common/clock.h"

namespace gpupack {

// A clock that moves only when told to. Starts at a fixed, readable instant. Its waits end only
// when done() or when Advance or Set reaches their deadline, never by real time, so a test of a
// periodic loop runs its periods at once and in a known order: AwaitWaitsBegun tells the test the
// loop has reached its wait, then Advance ends it.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint(std::chrono::seconds(1'800'000'000)))
      : now_ns_(start.time_since_epoch().count()) {}
  TimePoint Now() const override { return TimePoint(Duration(now_ns_.load())); }
  // Advance and Set wake every wait, which ends those whose deadline has come. REQUIRES: the
  // caller holds no mutex a waiter waits with.
  void Advance(Duration d) {
    now_ns_ += d.count();
    WakeWaiters();
  }
  void Set(TimePoint t) {
    now_ns_ = t.time_since_epoch().count();
    WakeWaiters();
  }

  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, TimePoint deadline,
                 const std::function<bool()>& done) const override {
    // Registered with `lock` released (WakeWaiters takes waiters_mu_, then the waiter's mutex),
    // and before the first look at the time, so an Advance after that look finds this waiter.
    Waiter self{lock.mutex(), &cv};
    lock.unlock();
    {
      std::lock_guard guard(waiters_mu_);
      waiters_.push_back(&self);
      ++waits_begun_;
    }
    waits_begun_cv_.notify_all();
    lock.lock();
    while (!done() && Now() < deadline) cv.wait(lock);
    lock.unlock();
    {
      std::lock_guard guard(waiters_mu_);
      waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &self));
    }
    lock.lock();
    return done();
  }

  // Blocks until `n` calls of WaitUntil have begun since construction (ended ones included).
  void AwaitWaitsBegun(uint64_t n) const {
    std::unique_lock guard(waiters_mu_);
    waits_begun_cv_.wait(guard, [&] { return waits_begun_ >= n; });
  }

 private:
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
  };

  // Under the waiter's mutex, so a waiter between its look at the time and its cv.wait cannot
  // miss the notification.
  void WakeWaiters() {
    std::lock_guard guard(waiters_mu_);
    for (const Waiter* waiter : waiters_) {
      std::lock_guard waiter_guard(*waiter->mu);
      waiter->cv->notify_all();
    }
  }

  std::atomic<int64_t> now_ns_;
  mutable std::mutex waiters_mu_;
  mutable std::condition_variable waits_begun_cv_;
  mutable std::vector<const Waiter*> waiters_;  // guarded by waiters_mu_
  mutable uint64_t waits_begun_ = 0;            // guarded by waiters_mu_
};

}  // namespace gpupack
