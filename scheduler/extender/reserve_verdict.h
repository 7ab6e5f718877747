// What a bind's reservation (ClusterState::Reserve) came to: the devices it reserved, or why it
// reserved nothing. A refusal is a value, not an error, like placement::Verdict: the caller tells
// kube-scheduler why and counts it under its own label, so that a dashboard can tell a lost race
// (no_fit) from a duplicate bind (bind_in_progress) or an agent that stopped (node_stale).
// Errors (an unknown node, a placement the ledger cannot apply) stay Statuses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/allocation.h"

namespace gpupack::extender {

// Bounded set (used as a metric label).
enum class ReserveRefusal : uint8_t {
  kNone = 0,
  kBoundElsewhere,  // the UID already holds devices on another node
  kBindInProgress,  // a bind of the UID to this node has reserved and not yet confirmed
  kStaleNode,       // the node's heartbeat is older than heartbeatTTL
  kNoFit,           // the pod does not fit on the node (any more)
};

// Metric label / log name: "bound_elsewhere", "bind_in_progress", "node_stale" (the filter's
// label for the same cause, placement::RejectReasonLabel), "no_fit"; "ok" for kNone.
std::string_view ReserveRefusalLabel(ReserveRefusal refusal);

struct Reservation {
  api::Allocation allocation;
  bool repeated = false;  // the UID already held this node: a repeated bind, nothing new reserved
};

struct ReserveVerdict {
  ReserveRefusal refusal = ReserveRefusal::kNone;
  // Why, when refused, e.g. "pod default/a no longer fits on node n1: largest free device has
  // 6144 MiB, pod needs 8192 MiB per device". Empty when reserved.
  std::string message;
  Reservation reservation;  // when reserved; empty when refused

  bool reserved() const { return refusal == ReserveRefusal::kNone; }

  static ReserveVerdict Reserved(Reservation reservation) {
    return {ReserveRefusal::kNone, {}, std::move(reservation)};
  }
  static ReserveVerdict Refuse(ReserveRefusal refusal, std::string message) {
    return {refusal, std::move(message), {}};
  }
};

}  // namespace gpupack::extender
