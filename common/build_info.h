// The build a gpupack binary runs, exported by each of the three binaries as
// gpupack_build_info{version,revision} 1 (docs/metrics.md), so a dashboard can tell which build
// every replica and node runs.
//
// Only the binaries' mains know the values: cmd/*/CMakeLists.txt compile them in as
// GPUPACK_VERSION (the CMake project version) and GPUPACK_REVISION (the git commit the build
// directory was configured at, or -DGPUPACK_REVISION=… where there is no checkout). The
// libraries take a BuildInfo from their main, so a new revision recompiles three mains only.
//
// Thread safety: plain value.
#pragma once

#include <string>

namespace gpupack {

struct BuildInfo {
  std::string version;   // e.g. "0.1.0"
  std::string revision;  // e.g. "96dfbc0a1b2c"; "unknown" when the build had no git checkout
};

}  // namespace gpupack
