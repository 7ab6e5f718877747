// What the extender's verbs share, in extender.cc (filter, prioritize) and extender_bind.cc (bind,
// preempt): the not-synced answer, the verb timer, the decision log line, a plain error reply.
// Internal to the extender.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "scheduler/extender/extender.h"
#include "scheduler/extender/metrics.h"

namespace gpupack::extender::verbs {

inline constexpr char kNotSynced[] = "gpupack extender is not synced with the cluster yet; retry shortly";

// Times a verb and records it once, whatever path the verb returns by.
class VerbTimer {
 public:
  VerbTimer(ExtenderMetrics* metrics, std::string_view verb)
      : metrics_(metrics), verb_(verb), start_(std::chrono::steady_clock::now()) {}
  ~VerbTimer() {
    if (metrics_ == nullptr) return;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
    metrics_->ObserveRequest(verb_, result_, took.count());
  }
  void set_result(std::string_view result) { result_ = result; }

 private:
  ExtenderMetrics* metrics_;
  std::string_view verb_;
  std::string_view result_ = "error";
  std::chrono::steady_clock::time_point start_;
};

// One log line per decision, at info level in every mode, so that an operator can tell from the
// extender's log alone where each pod went and why, or why it went nowhere:
//   decision pod=default/infer-0 node=gpu-a1 devices=main:GPU-1f…#0 cap=8192MiB reason="bound (policy fgd)"
void LogDecision(std::string_view pod, std::string_view node, std::string_view devices, std::string_view cap,
                 std::string_view reason);

// Prioritize and preempt replies have no Error field; the protocol treats a non-200 as the verb's
// error, and the text tells a human what was wrong.
Reply PlainError(int status, std::string message);

}  // namespace gpupack::extender::verbs
