// What the agent needs to know about the pods on its node: which containers are gpupack
// containers, their devices and caps (from the gpupack.io/allocation annotation, docs/annotations.md),
// their soft limits (gpupack.io/c<i>-memory-request-mib), and the runtime container ids that tie
// processes and cgroups to them.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/allocation.h"
#include "translate/workload_owner.h"

namespace gpupack::agent {

struct PodContainer {
  std::string name;
  int index = 0;
  bool init = false;
  std::string container_id;  // runtime id without the "containerd://" scheme; empty before start
  bool running = false;
  // From the allocation; empty for a container gpupack did not place.
  std::vector<api::AllocatedDevice> devices;
  model::MiB request_mib = 0;  // per-device soft limit; 0 = same as the cap
};

struct PodInfo {
  std::string uid;
  std::string ns;
  std::string name;
  // Being deleted (deletionTimestamp) or finished (Succeeded/Failed): its caps are released.
  bool terminating = false;
  // Succeeded or Failed: its containers are gone, and the extender no longer counts its allocation.
  bool finished = false;
  bool gpupack = false;          // carries a valid allocation
  std::string allocation_error;  // why the allocation annotation was refused, if it was
  std::vector<PodContainer> containers;
  translate::WorkloadRef workload;  // its owning workload, from ownerReferences

  std::string Key() const { return ns + "/" + name; }
};

// Never fails: missing fields leave defaults, a malformed allocation sets allocation_error.
PodInfo PodInfoFromJson(const nlohmann::json& pod);

}  // namespace gpupack::agent
