#include "scheduler/core/model.h"

namespace gpupack::core {

MiB PodRequest::TotalMemMiB() const {
  MiB total = 0;
  for (const auto& c : containers) {
    if (!c.init) total += static_cast<MiB>(c.device_count) * c.mem_per_device_mib;
  }
  return total;
}

}  // namespace gpupack::core
