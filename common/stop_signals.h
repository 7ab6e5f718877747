// SIGTERM and SIGINT delivered to one waiting thread: how every gpupack binary learns to stop
// (Kubernetes sends SIGTERM, then SIGKILL after the grace period).
#pragma once

#include <signal.h>

namespace gpupack {

class StopSignals {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread, and so in every thread it starts afterwards,
  // and installs the rest of the process's signal policy (common/signal_policy.h: SIGPIPE
  // ignored, fatal signals logged). Construct it in main before any thread starts, so that only
  // Wait() ever receives them.
  StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until SIGTERM or SIGINT arrives; returns its number. Callable from any thread.
  int Wait() const;

 private:
  sigset_t signals_;
};

}  // namespace gpupack
