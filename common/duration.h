// Durations as Kubernetes and Go write them, for every flag and config key that takes one.
#pragma once

#include <chrono>
#include <string_view>

#include "common/status.h"

namespace gpupack {

// "90s", "5m", "1h30m", "250ms", "1.5s": Go's time.ParseDuration without a sign (units h, m, s, ms,
// us, ns; every number needs its unit). InvalidArgument quoting the text otherwise, or when it is
// longer than about 31 years.
StatusOr<std::chrono::nanoseconds> ParseDuration(std::string_view text);

}  // namespace gpupack
