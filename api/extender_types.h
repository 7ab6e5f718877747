// Wire types of the kube-scheduler HTTP extender protocol (k8s.io/kube-scheduler/extender/v1) and
// their JSON codecs. Sources: docs/design.md ("Sources"); our reading: docs/extender.md.
//
// Decoding is tolerant the way Go's encoding/json is: field names match case-insensitively,
// `null` is accepted for every field, unknown fields are ignored. Wrong types are refused with an
// InvalidArgument that names the field ("ExtenderArgs.NodeNames[2]: must be a string").
// Encoding is exact: PascalCase names, every field present (null where Go would send nil),
// integer literals only.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <strings.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace gpupack::api {

inline constexpr int64_t kMinExtenderPriority = 0;
inline constexpr int64_t kMaxExtenderPriority = 10;
// The filter's reason for a node the extender has no inventory for. gpupack-sim --extender
// recognises it: the extender was started on another cluster than the one replayed.
inline constexpr std::string_view kUnknownNodeReason = "node has no GPUs known to gpupack";

// One v1.Node of ExtenderArgs.Nodes.items: its name plus its JSON text, echoed back unchanged in
// the filter result when nodeCacheCapable is false.
struct WireNode {
  std::string name;
  std::string raw;  // compact JSON of the whole object
};

// The filter and prioritize request.
struct ExtenderArgs {
  nlohmann::json pod;                                  // the v1.Pod; null when absent
  std::optional<std::vector<WireNode>> nodes;          // nodeCacheCapable: false
  std::optional<std::vector<std::string>> node_names;  // nodeCacheCapable: true
};

using FailedNodesMap = std::map<std::string, std::string>;

struct ExtenderFilterResult {
  std::optional<std::vector<WireNode>> nodes;
  std::optional<std::vector<std::string>> node_names;
  FailedNodesMap failed_nodes;
  FailedNodesMap failed_and_unresolvable_nodes;
  std::string error;
};

struct HostPriority {
  std::string host;
  int64_t score = 0;
  bool operator==(const HostPriority&) const = default;
};
using HostPriorityList = std::vector<HostPriority>;

struct ExtenderBindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
  bool operator==(const ExtenderBindingArgs&) const = default;
};

struct ExtenderBindingResult {
  std::string error;
};

// Victims on one node, by UID (MetaVictims). Full-pod Victims decode into the same shape: only
// their metadata.uid matters to the extender.
struct MetaVictims {
  std::vector<std::string> pod_uids;
  int64_t num_pdb_violations = 0;
  bool operator==(const MetaVictims&) const = default;
};

struct ExtenderPreemptionArgs {
  nlohmann::json pod;
  // NodeNameToMetaVictims, or NodeNameToVictims reduced to UIDs; whichever was non-null (Meta wins
  // when both are).
  std::map<std::string, MetaVictims> victims;
};

struct ExtenderPreemptionResult {
  std::map<std::string, MetaVictims> node_name_to_meta_victims;
};

// Decoders for what kube-scheduler sends. Duplicate node names in a request are refused (a
// well-formed scheduler never sends them; accepting them would double-count a node), and so is a
// top-level field named twice (SameFieldName), which Go would read as the last and a parsed
// object as either.
StatusOr<ExtenderArgs> DecodeExtenderArgs(std::string_view body);
StatusOr<ExtenderBindingArgs> DecodeBindingArgs(std::string_view body);
StatusOr<ExtenderPreemptionArgs> DecodePreemptionArgs(std::string_view body);

// Whether two JSON field names name the same Go struct field: equal ignoring ASCII case.
inline bool SameFieldName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// Whether `text` has a byte that JSON must escape in a string: a control character, '"' or '\\'.
// Inline, as it runs once per node name in decoding and encoding. 8 bytes at a time (a byte loop
// was most of encoding 5,000 priorities), by the classic "has a byte < n" / "has a zero byte" word
// tests: exact about whether any byte matches (bytes of UTF-8 never do).
inline bool NeedsJsonEscape(std::string_view text) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  auto matches = [](uint64_t w) {
    const uint64_t quote = w ^ (kOnes * '"');
    const uint64_t backslash = w ^ (kOnes * '\\');
    return ((w - kOnes * 0x20) & ~w) | ((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash);
  };
  uint64_t any = 0;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, text.data() + i, 8);
    any |= matches(w);
  }
  if (i < text.size()) {
    uint64_t w = kOnes * 'a';  // the last 8 bytes (overlapping), or the few over padding that matches nothing
    if (text.size() >= 8) {
      std::memcpy(&w, text.data() + text.size() - 8, 8);
    } else {
      for (; i < text.size(); ++i) w = (w << 8) | static_cast<unsigned char>(text[i]);
    }
    any |= matches(w);
  }
  return (any & kHigh) != 0;
}

// Encoders for what the extender replies. The messages (FailedNodes, FailedAndUnresolvableNodes and
// Error values) go out with every '%' as U+FF05 '％' (SchedulerSafeMessage): kube-scheduler passes a
// failure's text as the format string of its FailedScheduling event (Eventf(…, msg), v1.34), so a
// verdict's "needs 30 % compute" would reach `kubectl describe pod` as "needs 30 %!c(MISSING)ompute".
std::string EncodeFilterResult(const ExtenderFilterResult& result);
std::string EncodeHostPriorityList(const HostPriorityList& list);
// The same list as hosts[i] with scores[i], without a string per host (prioritize's path).
// REQUIRES: hosts.size() == scores.size().
std::string EncodeHostPriorityList(const std::vector<std::string_view>& hosts, const std::vector<int64_t>& scores);
std::string EncodeBindingResult(const ExtenderBindingResult& result);
std::string EncodePreemptionResult(const ExtenderPreemptionResult& result);

// `text` with every '%' replaced by the full-width '％' (UTF-8 EF BC 85), which no printf reads.
std::string SchedulerSafeMessage(std::string_view text);

// The other direction, for clients that play kube-scheduler (the simulator's HTTP mode, tests).
// `pod` is encoded verbatim; exactly one of `node_names` / `nodes` should be set.
std::string EncodeExtenderArgs(const ExtenderArgs& args);
std::string EncodeBindingArgs(const ExtenderBindingArgs& args);
std::string EncodePreemptionArgs(const ExtenderPreemptionArgs& args);  // Meta form
StatusOr<ExtenderFilterResult> DecodeFilterResult(std::string_view body);
// Refuses non-integer scores, as Go's decoder does.
StatusOr<HostPriorityList> DecodeHostPriorityList(std::string_view body);
StatusOr<ExtenderBindingResult> DecodeBindingResult(std::string_view body);
StatusOr<ExtenderPreemptionResult> DecodePreemptionResult(std::string_view body);

}  // namespace gpupack::api
