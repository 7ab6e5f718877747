// gpupack_build_info{version,revision} 1 (docs/metrics.md), registered the same way by each of
// the three binaries' metrics. Header-only, so gpupack_common itself does not depend on
// prometheus-cpp: include it only from targets that link prometheus-cpp::core.
#pragma once

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "common/build_info.h"

namespace gpupack {

inline void ExportBuildInfo(prometheus::Registry& registry, const BuildInfo& build) {
  prometheus::BuildGauge()
      .Name("gpupack_build_info")
      .Help("The running build: version and git revision (value 1).")
      .Register(registry)
      .Add({{"version", build.version}, {"revision", build.revision}})
      .Set(1);
}

}  // namespace gpupack
