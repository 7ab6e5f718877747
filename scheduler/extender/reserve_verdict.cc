#include "scheduler/extender/reserve_verdict.h"

namespace gpupack::extender {

std::string_view ReserveRefusalLabel(ReserveRefusal refusal) {
  switch (refusal) {
    case ReserveRefusal::kNone:
      return "ok";
    case ReserveRefusal::kBoundElsewhere:
      return "bound_elsewhere";
    case ReserveRefusal::kBindInProgress:
      return "bind_in_progress";
    case ReserveRefusal::kStaleNode:
      return "node_stale";
    case ReserveRefusal::kNoFit:
      return "no_fit";
  }
  return "unknown";
}

}  // namespace gpupack::extender
