// A fast decoder for ExtenderArgs, the body of every filter and prioritize call (simdjson
// on-demand). Same result and the same errors as api::DecodeExtenderArgs for every well-formed
// body, several times faster: node names are read without building a DOM, and full Node objects
// (nodeCacheCapable: false) are kept as the exact text the scheduler sent, not parsed and
// re-serialised. Only the Pod is handed to nlohmann, for translate::ParsePodRequest.
//
// Thread safety: may be called concurrently (each thread has its own parser).
#pragma once

#include <string_view>

#include "api/extender_types.h"
#include "common/status.h"

namespace gpupack::extender {

StatusOr<api::ExtenderArgs> DecodeExtenderArgsFast(std::string_view body);

}  // namespace gpupack::extender
