// The agent's run loop (docs/agent.md): one pass every poll interval, an early pass when the
// node's pods change (so caps apply as soon as a container exists and soft limits are zeroed
// while its cgroup is still there), but at most one early pass per `min_pass_gap`, however busy
// the pods are; and the stall rule /healthz reports.
// Thread safety: PodsChanged, Stop and Health may be called from any thread while Run runs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "common/clock.h"

namespace gpupack::agent {

struct RunLoopOptions {
  Clock::Duration poll_interval = std::chrono::seconds(10);
  // The least time between the end of one pass and the start of the next (bounds early passes).
  Clock::Duration min_pass_gap = std::chrono::seconds(1);
};

class RunLoop {
 public:
  // `clock` dates passes for Health() and times the waits between them; it must outlive the
  // loop.
  RunLoop(RunLoopOptions options, const Clock& clock);

  // Runs `pass` (one agent pass; it logs its own failures) until Stop(); returns promptly after
  // it (a pass in progress finishes first).
  void Run(const std::function<void()>& pass);
  // Asks for an early pass (a pod on this node was added, updated or deleted).
  void PodsChanged();
  void Stop();
  // "" while healthy; otherwise why not: the last pass ended more than 3 poll intervals + 30 s
  // ago (a pass stuck in the driver or the API server). Counted from construction before any pass.
  std::string Health() const;

 private:
  const RunLoopOptions options_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool pods_changed_ = false;
  Clock::TimePoint last_pass_;
};

}  // namespace gpupack::agent
