#include "common/stop_signals.h"

#include <pthread.h>

#include "common/signal_policy.h"

namespace gpupack {

StopSignals::StopSignals() {
  InstallSignalPolicy();
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

int StopSignals::Wait() const {
  int signal_number = 0;
  sigwait(&signals_, &signal_number);
  return signal_number;
}

}  // namespace gpupack
