// Runs the extender's periodic housekeeping (Extender::Maintain: expired reservations and
// remembered requests) on its own thread every `period` (timed by the injected clock) until
// stopped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "common/clock.h"

namespace gpupack::extender {

class Maintainer {
 public:
  // Starts the thread; the first tick comes one period after construction, each next one a
  // period after the last ended. `clock` must outlive the Maintainer.
  Maintainer(std::function<void()> tick, const Clock& clock, Clock::Duration period = std::chrono::seconds(5));
  // Stops and joins.
  ~Maintainer();
  Maintainer(const Maintainer&) = delete;
  Maintainer& operator=(const Maintainer&) = delete;

  // Returns promptly, without waiting out the period (a tick in progress finishes first).
  // Idempotent.
  void Stop();

 private:
  const std::function<void()> tick_;
  const Clock& clock_;
  const Clock::Duration period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace gpupack::extender
