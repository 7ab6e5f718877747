#include "scheduler/extender/verb_support.h"

#include "common/log.h"

namespace gpupack::extender::verbs {

void LogDecision(std::string_view pod, std::string_view node, std::string_view devices, std::string_view cap,
                 std::string_view reason) {
  GPUPACK_LOG(kInfo, "extender") << "decision pod=" << pod << " node=" << (node.empty() ? "none" : node)
                                 << " devices=" << (devices.empty() ? "none" : devices)
                                 << " cap=" << (cap.empty() ? "none" : cap) << " reason=\"" << reason << "\"";
}

Reply PlainError(int status, std::string message) { return Reply{status, std::move(message)}; }

}  // namespace gpupack::extender::verbs
