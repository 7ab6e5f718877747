// Waiting in tests for what another thread (an informer, a watch) makes true.
#pragma once

#include <chrono>
#include <thread>

namespace gpupack::builders {

// Polls `cond` every 5 ms for up to `limit` (10 s unless said: a process's own loop, such as the
// agent's audit interval, may need longer); returns its last value. Bounded, and asserts nothing
// on time: the caller asserts on the result.
template <typename F>
bool Eventually(F cond, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  for (auto waited = std::chrono::milliseconds(0); waited < limit; waited += std::chrono::milliseconds(5)) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

}  // namespace gpupack::builders
