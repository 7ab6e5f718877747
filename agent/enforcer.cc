#include "agent/enforcer.h"

#include <filesystem>
#include <set>

#include "agent/foreign_process.h"
#include "common/log.h"

namespace gpupack::agent {
namespace {

constexpr uint64_t kMiB = 1024ULL * 1024ULL;

// A finding about container `container` of `pod`.
api::GpuNodeAuditFinding Finding(std::string_view kind, const std::string& device, const PodInfo& pod,
                                 const std::string& container, std::string message) {
  api::GpuNodeAuditFinding f;
  f.kind = std::string(kind);
  f.device = device;
  f.pod_uid = pod.uid;
  f.pod = pod.Key();
  f.container = container;
  f.message = std::move(message);
  return f;
}

}  // namespace

void Enforcer::ClearSoft(const std::string& device, const std::string& dir, uint64_t hard_bytes, MemoryLimiter* limiter,
                         EnforcementPass* pass) {
  std::error_code ec;
  if (limiter == nullptr || !std::filesystem::is_directory(dir, ec)) return;  // gone: nothing left to clear
  Status s = limiter->SetLimits(device, dir, 0, hard_bytes);
  if (!s.ok()) {
    ++pass->errors;
    GPUPACK_LOG(kWarning, "enforcer") << "zeroing soft limit on " << dir << " for " << device << ": " << s;
    return;
  }
  ++pass->cleared;
  GPUPACK_LOG(kInfo, "enforcer") << "zeroed soft limit on " << dir << " for " << device;
}

void Enforcer::Enforce(const PodInfo& pod, const PodContainer& c, const api::AllocatedDevice& d,
                       const ContainerCgroups& cgroups, MemoryLimiter* limiter, ContainerCap* cap,
                       EnforcementPass* pass) {
  auto unenforced = [&](std::string why) {
    pass->findings.push_back(
        Finding(api::kAuditUnenforced, d.uuid, pod, c.name,
                "container " + pod.Key() + "/" + c.name + " has no memory limit on " + d.uuid + ": " + why));
  };
  if (c.container_id.empty()) return;  // not started yet
  auto dir_it = cgroups.find({pod.uid, c.container_id});
  if (dir_it == cgroups.end()) {
    unenforced("its cgroup was not found under " + cgroup_root_);
    return;
  }
  const std::string& dir = dir_it->second;
  const model::MiB limit = api::HardLimitMiB(d);
  const uint64_t hard = static_cast<uint64_t>(limit) * kMiB;
  const model::MiB request = api::SoftLimitMiB(c.request_mib, d);
  const uint64_t soft = static_cast<uint64_t>(request) * kMiB;
  auto current = limiter->GetLimits(d.uuid, dir);
  if (current.ok() && current->has_value() && (*current)->hard_bytes == hard && (*current)->soft_bytes == soft) {
    auto [it, inserted] = applied_.try_emplace({d.uuid, dir}, Applied{hard, true});
    it->second.seen = true;
    if (inserted) {
      ++pass->verified;
      GPUPACK_LOG(kInfo, "enforcer") << "limit already in place on " << dir << " for " << d.uuid << " (verified)";
    }
    cap->enforced = true;
    return;
  }
  Status s = limiter->SetLimits(d.uuid, dir, soft, hard);
  if (!s.ok()) {
    ++pass->errors;
    unenforced(s.ToString());
    return;
  }
  applied_[{d.uuid, dir}] = Applied{hard, true};
  ++pass->applied;
  cap->enforced = true;
  GPUPACK_LOG(kInfo, "enforcer") << "applied hard " << limit << " MiB, soft " << request << " MiB on " << dir << " for "
                                 << d.uuid << " (" << pod.Key() << "/" << c.name << ")";
}

EnforcementPass Enforcer::Run(const api::GpuNodeStatus& status, const std::vector<PodInfo>& pods,
                              MemoryLimiter* limiter) {
  EnforcementPass pass;
  std::set<std::string> whole_gpus;
  for (const api::GpuNodeDevice& d : status.devices) {
    if (!d.mig_enabled) whole_gpus.insert(d.uuid);
  }
  // Devices whose SM time measures compute shares (compute enforcement none: time-sliced).
  std::set<std::string> time_sliced;
  for (const api::GpuNodeDevice& d : status.devices) {
    if (d.compute_enforcement == api::kComputeEnforcementNone) time_sliced.insert(d.uuid);
  }
  // Live use per (pod UID, container id, device): memory, and SM time where every process has it.
  std::map<std::tuple<std::string, std::string, std::string>, model::MiB> used;
  std::map<std::tuple<std::string, std::string, std::string>, int> used_sm;
  for (const api::GpuNodeProcess& p : status.processes) {
    const auto key = std::tuple{p.pod_uid, p.container_id, p.device};
    used[key] += p.used_mib;
    int& sm = used_sm.try_emplace(key, 0).first->second;
    sm = sm < 0 || p.sm_util_pct < 0 ? -1 : sm + p.sm_util_pct;
  }

  const ContainerCgroups cgroups = limiter != nullptr ? ScanContainerCgroups(cgroup_root_) : ContainerCgroups{};
  for (auto& [key, applied] : applied_) applied.seen = false;

  for (const PodInfo& pod : pods) {
    if (!pod.allocation_error.empty()) {
      GPUPACK_LOG(kWarning, "enforcer") << "pod " << pod.Key() << ": ignoring its allocation: " << pod.allocation_error;
    }
    if (!pod.gpupack || pod.terminating) continue;
    for (const PodContainer& c : pod.containers) {
      for (const api::AllocatedDevice& d : c.devices) {
        ContainerCap cap{pod.ns, pod.name, c.name, d.uuid, d.mem_mib, 0, false, pod.uid, c.running, d.compute_pct, -1};
        if (!c.container_id.empty()) {
          auto u = used.find({pod.uid, c.container_id, d.uuid});
          if (u != used.end()) cap.used_mib = u->second;
          auto sm = used_sm.find({pod.uid, c.container_id, d.uuid});
          if (sm != used_sm.end()) cap.used_compute_pct = sm->second;
        }
        if (cap.compute_pct != api::kComputeNotRecorded && cap.used_compute_pct > cap.compute_pct &&
            time_sliced.count(d.uuid) > 0) {
          api::GpuNodeAuditFinding f =
              Finding(api::kAuditOverCompute, d.uuid, pod, c.name,
                      "container " + pod.Key() + "/" + c.name + " uses " + std::to_string(cap.used_compute_pct) +
                          " % of the SMs' time on " + d.uuid + ", over its compute share of " +
                          std::to_string(cap.compute_pct) + " % (the GPU has no compute enforcement)");
          f.used_compute_pct = cap.used_compute_pct;
          f.compute_pct = cap.compute_pct;
          pass.findings.push_back(std::move(f));
        }
        // Use up to a burstable container's ceiling is its burst (evictable under MPS v3, never a
        // neighbour's guarantee); only use beyond the hard limit is over it.
        const model::MiB limit = api::HardLimitMiB(d);
        if (cap.used_mib > limit) {
          api::GpuNodeAuditFinding f = Finding(
              api::kAuditOverCap, d.uuid, pod, c.name,
              "container " + pod.Key() + "/" + c.name + " uses " + std::to_string(cap.used_mib) + " MiB on " + d.uuid +
                  ", over its " + (limit > d.mem_mib ? "ceiling" : "cap") + " of " + std::to_string(limit) + " MiB");
          f.used_mib = cap.used_mib;
          f.cap_mib = limit;
          pass.findings.push_back(std::move(f));
        }
        if (limiter != nullptr && c.running && whole_gpus.count(d.uuid) > 0) {
          Enforce(pod, c, d, cgroups, limiter, &cap, &pass);
        }
        pass.caps.push_back(std::move(cap));
      }
    }
  }

  // Containers that stopped, were replaced or whose pod went away: zero the soft limit while the
  // cgroup still exists, then forget it.
  for (auto it = applied_.begin(); it != applied_.end();) {
    if (it->second.seen) {
      ++it;
      continue;
    }
    ClearSoft(it->first.first, it->first.second, it->second.hard_bytes, limiter, &pass);
    it = applied_.erase(it);
  }

  std::vector<api::GpuNodeAuditFinding> foreign = ForeignProcessFindings(status, pods);
  pass.findings.insert(pass.findings.end(), std::make_move_iterator(foreign.begin()),
                       std::make_move_iterator(foreign.end()));
  return pass;
}

}  // namespace gpupack::agent
