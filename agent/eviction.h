// The opt-in policy that evicts pods holding foreign processes on gpupack's devices (docs/agent.md
// "Evicting foreign pods"). Eviction goes through the Eviction API (policy/v1), so the pod's
// PodDisruptionBudget decides; the agent never deletes a pod any other way.
//
// Which pods, and when: a pod that a foreign-process finding names (a host process, or a pod this
// node does not list, cannot be evicted: it is reported only), that is not terminating already,
// once its finding has held for one `interval` (a pod list running a little behind the runtime
// then costs no eviction), and at most once per `interval` (a pod that a budget protects, or whose
// eviction failed, is asked again one interval later). Each attempt is logged and counted; a
// Warning event on the pod tells each new outcome (not every repeat of the same one):
//   GpupackForeignPodEvicted  the API server took the eviction (result "evicted")
//   GpupackEvictionBlocked    a PodDisruptionBudget refused it, 429 ("blocked_by_pdb")
//   GpupackEvictionFailed     any other error ("failed")
//
// Thread safety: not thread-safe; the agent's loop drives it.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/pods.h"
#include "api/gpunode.h"
#include "common/clock.h"
#include "common/status.h"
#include "kube/client.h"

namespace gpupack::agent {

// The result label of gpupack_agent_evictions_total.
inline constexpr std::string_view kEvictionEvicted = "evicted";
inline constexpr std::string_view kEvictionBlockedByPdb = "blocked_by_pdb";
inline constexpr std::string_view kEvictionFailed = "failed";

struct EvictionOptions {
  bool enabled = false;  // off by default: the audit reports, it does not act
  std::chrono::seconds interval{60};
};

// Where evictions and their events go (the API server in production, a recorder in tests).
class PodEvictor {
 public:
  virtual ~PodEvictor() = default;
  // kube::Client::EvictPod for the pod, its UID the precondition.
  virtual StatusOr<kube::EvictionAnswer> Evict(const PodInfo& pod) = 0;
  // A Warning event on the pod (best effort).
  virtual Status EmitPodWarning(const PodInfo& pod, std::string_view reason, const std::string& message) = 0;
};

// One eviction attempt of a pass.
struct EvictionAttempt {
  std::string pod;          // namespace/name
  std::string_view result;  // kEvictionEvicted | kEvictionBlockedByPdb | kEvictionFailed
  std::string message;
};

class ForeignPodEvictions {
 public:
  // `evictor` and `clock` must outlive this.
  ForeignPodEvictions(EvictionOptions options, PodEvictor* evictor, const Clock* clock);

  // One pass: evicts the pods that are due among those `findings` name (the pass's audit), with
  // `pods` the pods bound to this node. Nothing when the policy is off.
  std::vector<EvictionAttempt> Run(const std::vector<api::GpuNodeAuditFinding>& findings,
                                   const std::vector<PodInfo>& pods);

 private:
  struct Tracked {
    Clock::TimePoint first_seen{};
    std::optional<Clock::TimePoint> last_attempt;
    std::string_view last_result;
  };
  EvictionAttempt Evict(const PodInfo& pod, const api::GpuNodeAuditFinding& finding, Tracked* tracked);

  EvictionOptions options_;
  PodEvictor* evictor_;
  const Clock* clock_;
  std::map<std::string, Tracked> tracked_;  // by pod UID, while a finding names the pod
};

}  // namespace gpupack::agent
