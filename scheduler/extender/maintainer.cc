#include "scheduler/extender/maintainer.h"

#include <utility>

namespace gpupack::extender {

Maintainer::Maintainer(std::function<void()> tick, const Clock& clock, Clock::Duration period)
    : tick_(std::move(tick)), clock_(clock), period_(period), thread_([this] {
        std::unique_lock lock(mu_);
        while (!clock_.WaitUntil(lock, cv_, clock_.Now() + period_, [this] { return stopping_; })) {
          lock.unlock();
          tick_();
          lock.lock();
        }
      }) {}

Maintainer::~Maintainer() { Stop(); }

void Maintainer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpupack::extender
