#include "placement/verdict.h"

namespace gpupack::placement {

std::string_view RejectReasonLabel(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kNodeStale:
      return "node_stale";
    case RejectReason::kNoDevices:
      return "no_devices";
    case RejectReason::kNoMatchingDevice:
      return "no_matching_device";
    case RejectReason::kDeviceTooSmall:
      return "device_too_small";
    case RejectReason::kTooFewMatchingDevices:
      return "too_few_matching_devices";
    case RejectReason::kInsufficientDeviceMemory:
      return "insufficient_device_memory";
    case RejectReason::kInsufficientDeviceCompute:
      return "insufficient_device_compute";
    case RejectReason::kInsufficientEmptyDevices:
      return "insufficient_empty_devices";
    case RejectReason::kInsufficientDevices:
      return "insufficient_devices";
    case RejectReason::kInsufficientCpu:
      return "insufficient_cpu";
    case RejectReason::kInsufficientMemory:
      return "insufficient_memory";
    case RejectReason::kInvalidRequest:
      return "invalid_request";
    case RejectReason::kExcludedByRule:
      return "excluded_by_rule";
  }
  return "unknown";
}

std::string Verdict::Message() const {
  auto n = [](int64_t v) { return std::to_string(v); };
  switch (reason) {
    case RejectReason::kNone:
      return "fits";
    case RejectReason::kNodeStale:
      return "node inventory is stale: " + detail;
    case RejectReason::kNoDevices:
      return "node has no GPU devices";
    case RejectReason::kNoMatchingDevice:
      return "no device matches " + detail;
    case RejectReason::kDeviceTooSmall:
      return "largest matching device has " + n(have) + " MiB in total, pod needs " + n(need) + " MiB per device";
    case RejectReason::kTooFewMatchingDevices:
      return "needs " + n(need) + " distinct devices, node has " + n(have) + " matching " + detail;
    case RejectReason::kInsufficientDeviceMemory:
      return "largest free device has " + n(have) + " MiB, pod needs " + n(need) + " MiB per device";
    case RejectReason::kInsufficientDeviceCompute:
      // `detail`, for several devices: how many have the memory and the share.
      return "needs " + n(need) + " % compute" + (detail.empty() ? "" : " on each of " + detail) +
             ", largest free share " + n(have) + " %";
    case RejectReason::kInsufficientEmptyDevices:
      return "needs " + n(need) + " empty device" + (need == 1 ? "" : "s") + ", node has " + n(have);
    case RejectReason::kInsufficientDevices:
      return "needs " + n(need) + " devices with " + detail + " free, node has " + n(have);
    case RejectReason::kInsufficientCpu:
      return "insufficient cpu: pod needs " + n(need) + "m, node has " + n(have) + "m free";
    case RejectReason::kInsufficientMemory:
      return "insufficient memory: pod needs " + n(need) + " bytes, node has " + n(have) + " bytes free";
    case RejectReason::kInvalidRequest:
      return "invalid request: " + detail;
    case RejectReason::kExcludedByRule:
      return detail;
  }
  return "unknown reason";
}

}  // namespace gpupack::placement
