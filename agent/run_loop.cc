#include "agent/run_loop.h"

#include <algorithm>

namespace gpupack::agent {

RunLoop::RunLoop(RunLoopOptions options, const Clock& clock)
    : options_(options), clock_(clock), last_pass_(clock.Now()) {}

void RunLoop::Run(const std::function<void()>& pass) {
  const Clock::Duration gap = std::min(options_.min_pass_gap, options_.poll_interval);
  for (;;) {
    pass();
    std::unique_lock<std::mutex> lock(mu_);
    last_pass_ = clock_.Now();
    if (clock_.WaitUntil(lock, cv_, last_pass_ + gap, [&] { return stopping_; })) return;
    if (clock_.WaitUntil(lock, cv_, last_pass_ + options_.poll_interval, [&] { return stopping_ || pods_changed_; }) &&
        stopping_) {
      return;
    }
    pods_changed_ = false;
  }
}

void RunLoop::PodsChanged() {
  std::lock_guard<std::mutex> lock(mu_);
  pods_changed_ = true;
  cv_.notify_all();
}

void RunLoop::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

std::string RunLoop::Health() const {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::Duration age = clock_.Now() - last_pass_;
  if (age <= 3 * options_.poll_interval + std::chrono::seconds(30)) return "";
  return "agent loop stalled: last pass " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(age).count()) + "s ago";
}

}  // namespace gpupack::agent
