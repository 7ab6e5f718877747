// Why a pod does or does not fit on a node: a value, not an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpupack::placement {

// Bounded set (used as a metric label). Order is not significant.
enum class RejectReason : uint8_t {
  kNone = 0,
  kNodeStale,                  // inventory too old (agent heartbeat past TTL)
  kNoDevices,                  // node has no GPU devices at all                      (unresolvable)
  kNoMatchingDevice,           // no device of the wanted model / kind / MIG profile  (unresolvable)
  kDeviceTooSmall,             // every matching device's capacity < per-device need  (unresolvable)
  kTooFewMatchingDevices,      // fewer matching devices than distinct devices needed (unresolvable)
  kInsufficientDeviceMemory,   // largest free slice < per-device need
  kInsufficientDeviceCompute,  // devices with the memory lack the compute share (need %, have %)
  kInsufficientEmptyDevices,   // whole-device request: not enough empty devices
  kInsufficientDevices,        // not enough distinct devices with room for the per-device need
  kInsufficientCpu,
  kInsufficientMemory,
  kInvalidRequest,  // the pod's request itself is malformed               (unresolvable)
  kExcludedByRule,  // devices of the wanted sort exist but the pod's device rules, the
                    // administrator's exclusion or the spread key refuse them all (unresolvable)
};

// Metric label / short name, e.g. "insufficient_device_memory".
std::string_view RejectReasonLabel(RejectReason reason);

struct Verdict {
  RejectReason reason = RejectReason::kNone;
  // True when preemption on this node cannot help (kube-scheduler's UnschedulableAndUnresolvable).
  bool unresolvable = false;
  int64_t need = 0;    // the amount asked (MiB per device, devices, milli-CPU, bytes)
  int64_t have = 0;    // the best the node can offer
  std::string detail;  // model / profile / staleness text where the message needs it

  bool fits() const { return reason == RejectReason::kNone; }
  // A precise, human-readable message, e.g.
  // "largest free device has 6144 MiB, pod needs 8192 MiB per device", or
  // "needs 30 % compute, largest free share 20 %".
  std::string Message() const;

  static Verdict Fits() { return {}; }
  static Verdict Reject(RejectReason r, bool unresolvable, int64_t need = 0, int64_t have = 0,
                        std::string detail = {}) {
    return Verdict{r, unresolvable, need, have, std::move(detail)};
  }
};

}  // namespace gpupack::placement
