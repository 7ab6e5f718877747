// The agent's Prometheus metrics (prometheus-cpp registry; served on /metrics by the shared HTTP
// server, server/http_server.h).
// Names use base units and carry the labels dashboards join on (node, gpu_uuid, gpu_index,
// gpu_model, mig_profile, namespace, pod, container):
//
//   gpupack_agent_gpu_memory_total_bytes{node,gpu_uuid,gpu_index,gpu_model,mig_profile}   gauge
//   gpupack_agent_gpu_memory_used_bytes{…same}                                           gauge
//   gpupack_agent_gpu_memory_allocated_bytes{…same}   Σ caps of gpupack containers        gauge
//   gpupack_agent_gpu_healthy{…same}                  1 healthy, 0 not                    gauge
//   gpupack_agent_container_memory_cap_bytes{node,namespace,pod,container,gpu_uuid}       gauge
//   gpupack_agent_container_memory_used_bytes{…same}                                      gauge
//   gpupack_agent_container_memory_enforced{…same}    1 when a driver limit is in place   gauge
//   gpupack_agent_enforcement_mode{node,mode}         1 for the node's mode, else 0       gauge
//   gpupack_agent_audit_findings{node,kind}           current findings per kind           gauge
//   gpupack_agent_foreign_processes{…device labels}   foreign-process findings on each    gauge
//                                                     device gpupack manages (0 when none)
//   gpupack_agent_gpu_compute_allocated_percent{…device labels}  Σ compute shares          gauge
//   gpupack_agent_gpu_sm_utilization_percent{…device labels}     NVML, whole GPUs only     gauge
//   gpupack_agent_gpu_compute_enforcement{…device labels,mode}   1 for the device's mode   gauge
//   gpupack_agent_container_compute_share_percent{node,namespace,pod,container,gpu_uuid}  gauge
//   gpupack_agent_container_compute_used_percent{…same}  SM time, where NVML has it       gauge
//   gpupack_agent_namespace_compute_allocated_percent{node,namespace}  Σ shares           gauge
//   gpupack_agent_namespace_compute_used_percent{node,namespace}       Σ SM time          gauge
//   gpupack_agent_evictions_total{node,result=evicted|blocked_by_pdb|failed}              counter
//   gpupack_agent_enforcement_actions_total{node,action=apply|verify|clear|error}         counter
//   gpupack_agent_nvml_errors_total{node,call}        failed NVML calls by function       counter
//   gpupack_agent_reports_total{node,result=written|skipped|error}                        counter
//   gpupack_agent_report_timestamp_seconds{node}      last successful GPUNode write       gauge
//   gpupack_build_info{version,revision}              1, once SetBuildInfo is called      gauge
//
// A "device" is what pods land on: a whole GPU not in MIG mode (mig_profile="") or a MIG instance
// (gpu_uuid = the MIG UUID, gpu_index = its parent's index). Series of devices and containers that
// disappear are removed.
//
// Thread safety: all methods may be called concurrently (prometheus-cpp locks internally and
// Update holds a mutex).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "agent/enforcer.h"
#include "api/gpunode.h"
#include "common/build_info.h"
#include "common/clock.h"

namespace gpupack::agent {

class AgentMetrics {
 public:
  explicit AgentMetrics(std::string node);

  void CountNvmlError(std::string_view call);
  void CountReport(std::string_view result);
  void SetReportTime(Clock::TimePoint t);
  void CountEnforcement(const EnforcementPass& pass);
  // One eviction attempt of a pod holding a foreign process; `result` is agent/eviction.h's label.
  void CountEviction(std::string_view result);
  // Exports gpupack_build_info{version,revision} 1 (the binary's main calls it once).
  void SetBuildInfo(const BuildInfo& build);
  // Replaces the per-device, per-container, mode and audit series with this pass's values.
  void Update(const api::GpuNodeStatus& status, const std::vector<ContainerCap>& caps);

  // Every family, for the HTTP server's /metrics.
  std::vector<prometheus::MetricFamily> Collect() const;
  // Collect() in the text format, for tests.
  std::string Serialize() const;

 private:
  // A gauge family whose series are replaced wholesale each pass.
  class GaugeSeries {
   public:
    explicit GaugeSeries(prometheus::Family<prometheus::Gauge>* family) : family_(family) {}
    void Begin();
    void Set(const std::map<std::string, std::string>& labels, double value);
    void End();  // removes series not Set since Begin

   private:
    prometheus::Family<prometheus::Gauge>* family_;
    std::map<std::map<std::string, std::string>, std::pair<prometheus::Gauge*, bool>> live_;
  };

  std::string node_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::mutex mu_;
  prometheus::Family<prometheus::Counter>* nvml_errors_;
  prometheus::Family<prometheus::Counter>* reports_;
  prometheus::Family<prometheus::Counter>* actions_;
  prometheus::Family<prometheus::Counter>* evictions_;
  prometheus::Gauge* report_time_;
  GaugeSeries total_, used_, allocated_, healthy_, cap_, cap_used_, enforced_, mode_, findings_, foreign_;
  GaugeSeries compute_allocated_, sm_util_, compute_mode_, container_compute_, container_compute_used_,
      namespace_compute_, namespace_compute_used_;
};

}  // namespace gpupack::agent
