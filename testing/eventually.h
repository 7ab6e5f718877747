// Waiting in tests for what another thread (an informer, a watch) makes true.
#pragma once

#include <chrono>
#include <thread>

namespace gpupack::builders {

// Polls `cond` every 5 ms for up to 10 s; returns its last value. Bounded, and asserts nothing
// on time: the caller asserts on the result.
template <typename F>
bool Eventually(F cond) {
  for (int i = 0; i < 2000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

}  // namespace gpupack::builders
