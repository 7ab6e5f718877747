#include "agent/reporter.h"

#include <cstdlib>

#include "common/log.h"

namespace gpupack::agent {
namespace {

// A copy with every live-usage figure zeroed, so two statuses compare equal when only usage moved.
api::GpuNodeStatus WithoutUsage(api::GpuNodeStatus s) {
  s.heartbeat_time = {};
  for (api::GpuNodeDevice& d : s.devices) {
    d.used_mib = 0;
    for (api::GpuNodeMigInstance& m : d.mig_instances) m.used_mib = 0;
  }
  for (api::GpuNodeProcess& p : s.processes) p.used_mib = 0;
  for (api::GpuNodeAuditFinding& f : s.audit) f.used_mib = 0;
  // Observed use moves every pass (samples at least): only its peak, beyond the threshold, counts.
  for (api::GpuNodeContainerUsage& u : s.usage) u.peak_mib = u.p95_mib = u.p99_mib = u.samples = 0;
  return s;
}

bool Moved(model::MiB a, model::MiB b, model::MiB threshold) { return std::llabs(a - b) > threshold; }

}  // namespace

NodeCapacity CapacityOf(const api::GpuNodeStatus& status) {
  NodeCapacity c;
  for (const api::GpuNodeDevice& d : status.devices) {
    if (!d.mig_enabled) {
      if (d.excluded) continue;  // out of gpupack's pool: not advertised
      c.memory_mib += d.memory_mib;
      ++c.devices;
      continue;
    }
    for (const api::GpuNodeMigInstance& m : d.mig_instances) {
      if (m.excluded) continue;
      c.memory_mib += m.memory_mib;
      ++c.devices;
    }
  }
  return c;
}

bool SignificantChange(const api::GpuNodeStatus& last, const api::GpuNodeStatus& now, model::MiB threshold_mib) {
  if (!(WithoutUsage(last) == WithoutUsage(now))) return true;
  // Same shape, so the lists line up element by element.
  for (size_t i = 0; i < now.devices.size(); ++i) {
    if (Moved(last.devices[i].used_mib, now.devices[i].used_mib, threshold_mib)) return true;
    for (size_t j = 0; j < now.devices[i].mig_instances.size(); ++j) {
      if (Moved(last.devices[i].mig_instances[j].used_mib, now.devices[i].mig_instances[j].used_mib, threshold_mib)) {
        return true;
      }
    }
  }
  for (size_t i = 0; i < now.processes.size(); ++i) {
    if (Moved(last.processes[i].used_mib, now.processes[i].used_mib, threshold_mib)) return true;
  }
  for (size_t i = 0; i < now.usage.size(); ++i) {
    if (Moved(last.usage[i].peak_mib, now.usage[i].peak_mib, threshold_mib)) return true;
  }
  return false;
}

Reporter::Reporter(ReporterOptions options, ReportSink* sink, const Clock* clock)
    : options_(std::move(options)), sink_(sink), clock_(clock) {}

void Reporter::MaybeEnsureCapacity(const api::GpuNodeStatus& status) {
  const NodeCapacity want = CapacityOf(status);
  const Clock::TimePoint now = clock_->Now();
  if (capacity_ && *capacity_ == want && now - capacity_checked_ < options_.capacity_recheck_interval) return;
  const std::string memory = std::to_string(want.memory_mib) + "Mi";
  const int64_t gpus = want.devices * options_.max_pods_per_device;
  Status s = sink_->EnsureNodeCapacity(options_.node_name, memory, gpus, want.devices * model::kDeviceComputePct);
  if (!s.ok()) {
    GPUPACK_LOG(kWarning, "reporter") << "node capacity not updated (will retry): " << s;
    capacity_.reset();
    return;
  }
  capacity_ = want;
  capacity_checked_ = now;
}

StatusOr<Reporter::Outcome> Reporter::Report(api::GpuNodeStatus status) {
  MaybeEnsureCapacity(status);
  const Clock::TimePoint now = clock_->Now();
  const bool heartbeat_due = !last_ || now - last_write_ >= options_.heartbeat_interval;
  const bool changed = last_ && now - last_write_ >= options_.min_write_interval &&
                       SignificantChange(*last_, status, options_.change_threshold_mib);
  if (!heartbeat_due && !changed) return Outcome::kSkipped;
  status.heartbeat_time = now;
  GPUPACK_RETURN_IF_ERROR(sink_->WriteGpuNodeStatus(options_.node_name, status));
  last_ = std::move(status);
  last_write_ = now;
  return Outcome::kWritten;
}

}  // namespace gpupack::agent
