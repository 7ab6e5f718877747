// A fast decoder for ExtenderArgs, the body of every filter and prioritize call (simdjson
// on-demand), with the result of api::DecodeExtenderArgs for every body. The fast reading takes
// only bodies it can vouch for, as kube-scheduler sends them, several times faster: node names
// are read without building a DOM, and full Node objects (nodeCacheCapable: false) are kept as
// the exact text the scheduler sent, not parsed and re-serialised; only the Pod is handed to
// nlohmann, for translate::ParsePodRequest. Any other body (a malformed one, a repeated name or
// field, a number past 64 bits) is decoded by api::DecodeExtenderArgs, which gives the verdict
// and the error.
//
// Thread safety: may be called concurrently (each thread has its own parser).
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/extender_types.h"
#include "common/status.h"

namespace gpupack::extender {

// ExtenderArgs as filter and prioritize read them: the node names are views, not a string each.
// A name points into `text` (the body as the parser read it) or, when it carried a JSON escape,
// into `unescaped`. Not copyable or movable, so the views cannot outlive their bytes.
struct DecodedArgs {
  DecodedArgs() = default;
  DecodedArgs(const DecodedArgs&) = delete;
  DecodedArgs& operator=(const DecodedArgs&) = delete;

  nlohmann::json pod;                                       // the v1.Pod; null when absent
  std::optional<std::vector<api::WireNode>> nodes;          // nodeCacheCapable: false
  std::optional<std::vector<std::string_view>> node_names;  // nodeCacheCapable: true
  std::string text;                                         // the body, padded for the parser
  std::deque<std::string> unescaped;                        // names that carried an escape

  // The nodes the scheduler asked about, by name, in its order: NodeNames when it sent them,
  // else the Node objects' names, viewed in `storage` (empty when it sent neither).
  const std::vector<std::string_view>& AskedNames(std::vector<std::string_view>& storage) const;
};

// Decodes `body` into `out` (which must be fresh). On error `out` is unspecified.
Status DecodeExtenderArgsInto(std::string_view body, DecodedArgs& out);

StatusOr<api::ExtenderArgs> DecodeExtenderArgsFast(std::string_view body);

}  // namespace gpupack::extender
