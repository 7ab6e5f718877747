// Timestamps as Kubernetes writes metav1.Time: RFC 3339.
#pragma once

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace gpupack {

// RFC 3339 in UTC at whole seconds ("2026-11-29T10:18:41Z"), as Kubernetes writes metav1.Time.
std::string FormatRfc3339(Clock::TimePoint t);
// Accepts "YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)". InvalidArgument naming the text otherwise.
StatusOr<Clock::TimePoint> ParseRfc3339(std::string_view text);

}  // namespace gpupack
