#include "agent/doctor.h"

#include <functional>

#include <gtest/gtest.h>

namespace gpupack::agent {
namespace {

// A node where every check holds: R615 with the limit calls, dmem accounting both GPUs and enabled
// down to kubepods, an MPS daemon, one GPU in an MPS v3 namespace per container and one in MIG mode
// with instances, a CDI spec whose whole GPU runs the hook, and an NRI socket.
DoctorEvidence GoodNode() {
  DoctorEvidence e;
  e.nvml.library = "libnvidia-ml.so.1";
  e.nvml.driver_version = "615.20";
  e.nvml.cuda_version = "13.4";
  e.nvml.memory_limit_calls = true;
  e.nvml.enforcement_mode = "cgroup-dmem";
  e.nvml.devices = {{"GPU-1", "NVIDIA H200", false, 0, "mps-namespace"}, {"GPU-2", "NVIDIA H200", true, 3, "none"}};
  e.cgroup.root = "/sys/fs/cgroup";
  e.cgroup.v2 = true;
  e.cgroup.controllers = {"cpu", "memory", "dmem"};
  e.cgroup.nvidia_dmem_regions = {"nvidia/0000:17:00.0/vidmem 150323855360", "nvidia/0000:2a:00.0/vidmem 150323855360"};
  e.cgroup.kubepods = "/sys/fs/cgroup/kubepods.slice";
  e.cgroup.kubepods_dmem_enabled = true;
  e.cgroup.kubepods_dmem_delegated = true;
  e.mps = {"/run/nvidia/mps", true};
  e.cdi.dirs = {"/etc/cdi", "/var/run/cdi"};
  e.cdi.nvidia_specs = {{"/var/run/cdi/nvidia.yaml", "nvidia.com/gpu", 2, 1, ""}};
  e.nri = {"/var/run/nri/nri.sock", true};
  return e;
}

TEST(DoctorTest, AGoodNodePassesEveryCheckAndEnforcesEverything) {
  const DoctorReport r = Diagnose(GoodNode());
  ASSERT_EQ(r.checks.size(), 8u);
  for (const DoctorCheck& c : r.checks) {
    EXPECT_EQ(c.verdict, CheckVerdict::kOk) << c.name << ": " << c.summary;
    EXPECT_EQ(c.fix, "") << c.name;
  }
  EXPECT_TRUE(r.can.memory_hard);
  EXPECT_TRUE(r.can.memory_soft);
  EXPECT_EQ(r.can.compute, "hard");
  EXPECT_TRUE(r.can.mig);
  EXPECT_EQ(r.Find("nvml")->summary, "driver 615.20, CUDA 13.4, 2 GPUs");
  EXPECT_EQ(r.Find("cdi")->summary,
            "1 of 2 CDI devices apply the container's memory limits at creation (whole GPUs; MIG needs none)");
}

struct Case {
  const char* name;
  std::function<void(DoctorEvidence&)> change;
  const char* check;
  CheckVerdict verdict;
  const char* summary;  // the check's summary starts with this
};

// One row per verdict of every check that is not ok: the verdict, what it says, and a fix.
TEST(DoctorTest, EveryFailingVerdictSaysWhatAndHowToFix) {
  const std::vector<Case> cases = {
      {"no library", [](DoctorEvidence& e) { e.nvml.error = "cannot load libnvidia-ml.so.1"; }, "nvml",
       CheckVerdict::kMissing, "NVML cannot be used: cannot load libnvidia-ml.so.1"},
      {"no GPU", [](DoctorEvidence& e) { e.nvml.devices.clear(); }, "nvml", CheckVerdict::kDegraded,
       "driver 615.20, CUDA 13.4, no GPU found"},
      {"pre-R615 driver",
       [](DoctorEvidence& e) {
         e.nvml.driver_version = "580.65.06";
         e.nvml.memory_limit_calls = false;
         e.nvml.enforcement_mode = "none";
         e.nvml.enforcement_reason = "driver 580.65.06 is older than R615 (no per-cgroup memory limits)";
       },
       "memory-limits", CheckVerdict::kMissing, "no per-cgroup memory limits: driver 580.65.06 is older than R615"},
      {"R615 driver, old library",
       [](DoctorEvidence& e) {
         e.nvml.memory_limit_calls = false;
         e.nvml.enforcement_mode = "none";
         e.nvml.enforcement_reason = "NVML lacks nvmlDeviceSetMemoryLimits_v1";
       },
       "memory-limits", CheckVerdict::kMissing, "no per-cgroup memory limits: NVML lacks"},
      {"no library for limits", [](DoctorEvidence& e) { e.nvml.error = "dlopen failed"; }, "memory-limits",
       CheckVerdict::kMissing, "NVML cannot be used"},
      {"cgroup v1", [](DoctorEvidence& e) { e.cgroup.v2 = false; }, "cgroup", CheckVerdict::kMissing,
       "no cgroup v2 at /sys/fs/cgroup"},
      {"no dmem controller",
       [](DoctorEvidence& e) {
         e.cgroup.controllers = {"cpu", "memory", "misc"};
         e.cgroup.nvidia_dmem_regions.clear();
       },
       "cgroup", CheckVerdict::kDegraded, "cgroup v2 without the dmem controller: the driver's misc"},
      {"dmem without NVIDIA regions", [](DoctorEvidence& e) { e.cgroup.nvidia_dmem_regions.clear(); }, "cgroup",
       CheckVerdict::kDegraded, "dmem controller present, but dmem.capacity names no NVIDIA region"},
      {"dmem not delegated to pods", [](DoctorEvidence& e) { e.cgroup.kubepods_dmem_delegated = false; }, "cgroup",
       CheckVerdict::kDegraded, "dmem accounts NVIDIA memory but is not enabled down to /sys/fs/cgroup/kubepods.slice"},
      {"no MPS dir given",
       [](DoctorEvidence& e) {
         e.mps = {"", false};
       },
       "mps", CheckVerdict::kMissing, "no MPS pipe directory given"},
      {"no MPS daemon", [](DoctorEvidence& e) { e.mps.control_pipe = false; }, "mps", CheckVerdict::kMissing,
       "no MPS control daemon (/run/nvidia/mps/control is absent)"},
      {"compute by MPS client env", [](DoctorEvidence& e) { e.nvml.devices[0].compute_enforcement = "mps-client"; },
       "compute", CheckVerdict::kDegraded, "1 GPU with compute capped only by MPS clients'"},
      {"compute not held", [](DoctorEvidence& e) { e.nvml.devices[0].compute_enforcement = "none"; }, "compute",
       CheckVerdict::kMissing, "1 of 2 GPUs hold compute shares by scheduling only"},
      {"compute not reported", [](DoctorEvidence& e) { e.nvml.devices[0].compute_enforcement = ""; }, "compute",
       CheckVerdict::kMissing, "1 of 2 GPUs hold compute shares by scheduling only"},
      {"no GPU for compute", [](DoctorEvidence& e) { e.nvml.devices.clear(); }, "compute", CheckVerdict::kMissing,
       "no GPU to hold compute shares on"},
      {"MIG without instances", [](DoctorEvidence& e) { e.nvml.devices[1].mig_instances = 0; }, "mig",
       CheckVerdict::kDegraded, "MIG on without instances (nothing to place on): GPU-2"},
      {"MIG unknown without NVML", [](DoctorEvidence& e) { e.nvml.error = "x"; }, "mig", CheckVerdict::kMissing,
       "NVML cannot be used"},
      {"no CDI spec", [](DoctorEvidence& e) { e.cdi.nvidia_specs.clear(); }, "cdi", CheckVerdict::kMissing,
       "no NVIDIA CDI spec in /etc/cdi /var/run/cdi"},
      {"CDI spec without the hook", [](DoctorEvidence& e) { e.cdi.nvidia_specs[0].devices_with_hook = 0; }, "cdi",
       CheckVerdict::kDegraded, "the NVIDIA CDI spec has no apply-cuda-memory-limits hook"},
      {"CDI spec unreadable", [](DoctorEvidence& e) { e.cdi.nvidia_specs[0].error = "cannot parse: bad"; }, "cdi",
       CheckVerdict::kDegraded, "unreadable CDI spec: /var/run/cdi/nvidia.yaml"},
      {"no NRI socket", [](DoctorEvidence& e) { e.nri.present = false; }, "nri", CheckVerdict::kMissing,
       "no NRI socket at /var/run/nri/nri.sock"},
  };
  for (const Case& c : cases) {
    DoctorEvidence e = GoodNode();
    c.change(e);
    const DoctorReport r = Diagnose(e);
    const DoctorCheck* check = r.Find(c.check);
    ASSERT_NE(check, nullptr) << c.name;
    EXPECT_EQ(check->verdict, c.verdict) << c.name << ": " << check->summary;
    EXPECT_TRUE(check->summary.starts_with(c.summary)) << c.name << ": " << check->summary;
    EXPECT_FALSE(check->fix.empty()) << c.name;
  }
}

// What the node enforces follows the checks: hard memory needs the limits and, where dmem does the
// accounting, dmem on the pods' cgroups; soft memory also needs MPS; misc still enforces.
TEST(DoctorTest, CapabilitiesFollowTheChecks) {
  DoctorEvidence e = GoodNode();
  e.cgroup.kubepods_dmem_enabled = false;
  EXPECT_FALSE(Diagnose(e).can.memory_hard) << "dmem stops above kubepods: no limit can be set on a container";

  e = GoodNode();
  e.cgroup.controllers = {"memory"};
  e.cgroup.nvidia_dmem_regions.clear();
  e.nvml.enforcement_mode = "cgroup-misc";
  DoctorReport misc = Diagnose(e);
  EXPECT_TRUE(misc.can.memory_hard) << "the driver's misc accounting enforces hard limits";
  EXPECT_TRUE(misc.can.memory_soft);

  e = GoodNode();
  e.mps.control_pipe = false;
  DoctorReport no_mps = Diagnose(e);
  EXPECT_TRUE(no_mps.can.memory_hard);
  EXPECT_FALSE(no_mps.can.memory_soft) << "soft limits are evicted by MPS";

  e = GoodNode();
  e.nvml.enforcement_mode = "none";
  e.nvml.driver_version = "580.65.06";
  EXPECT_FALSE(Diagnose(e).can.memory_hard);

  e = GoodNode();
  e.nvml.devices[0].compute_enforcement = "mps-client";
  EXPECT_EQ(Diagnose(e).can.compute, "soft");
  e.nvml.devices[0].compute_enforcement = "none";
  EXPECT_EQ(Diagnose(e).can.compute, "none");

  e = GoodNode();
  e.nvml.devices[1].mig_instances = 0;
  EXPECT_FALSE(Diagnose(e).can.mig);
}

TEST(DoctorTest, FixesPointAtTheCause) {
  DoctorEvidence e = GoodNode();
  e.nvml.driver_version = "580.65.06";
  e.nvml.enforcement_mode = "none";
  EXPECT_TRUE(Diagnose(e).Find("memory-limits")->fix.starts_with("upgrade the driver to R615"));
  e = GoodNode();
  e.nvml.memory_limit_calls = false;
  e.nvml.enforcement_mode = "none";
  EXPECT_TRUE(Diagnose(e).Find("memory-limits")->fix.starts_with("the libnvidia-ml the agent loads lacks"));
  e = GoodNode();
  e.nvml.enforcement_mode = "none";
  e.nvml.enforcement_reason = "cgroup v2 is not mounted at /sys/fs/cgroup";
  EXPECT_TRUE(Diagnose(e).Find("memory-limits")->fix.starts_with("mount cgroup v2"));
  e = GoodNode();
  e.cgroup.kubepods_dmem_delegated = false;
  EXPECT_EQ(Diagnose(e).Find("cgroup")->fix,
            "enable dmem from the root down: echo +dmem into cgroup.subtree_control of /sys/fs/cgroup and of "
            "/sys/fs/cgroup/kubepods.slice");
}

TEST(DoctorTest, MpsProtocolFollowsTheDriverBranch) {
  DoctorEvidence e = GoodNode();
  auto protocol = [](const DoctorReport& r) {
    for (const auto& [k, v] : r.Find("mps")->evidence) {
      if (k == "protocol") return v;
    }
    return std::string();
  };
  EXPECT_EQ(protocol(Diagnose(e)), "v3 available (driver R615+); the daemon's own is not read");
  e.nvml.driver_version = "580.65.06";
  EXPECT_EQ(protocol(Diagnose(e)), "v2 only (driver before R615, or unknown)");
}

TEST(DoctorTest, TableAndJsonCarryTheSameVerdicts) {
  DoctorEvidence e = GoodNode();
  e.nri.present = false;
  const DoctorReport r = Diagnose(e);
  const std::string table = DoctorTable(r);
  EXPECT_NE(table.find("ok        nvml           driver 615.20, CUDA 13.4, 2 GPUs\n"), std::string::npos) << table;
  EXPECT_NE(table.find("missing   nri            no NRI socket at /var/run/nri/nri.sock"), std::string::npos) << table;
  EXPECT_NE(table.find("\n                         fix: enable NRI in the runtime"), std::string::npos) << table;
  EXPECT_NE(table.find("this node enforces: memory hard yes, memory soft yes, compute hard, MIG yes"),
            std::string::npos)
      << table;
  const nlohmann::json j = DoctorJson(r);
  ASSERT_EQ(j["checks"].size(), 8u);
  EXPECT_EQ(j["checks"][7]["name"], "nri");
  EXPECT_EQ(j["checks"][7]["verdict"], "missing");
  EXPECT_EQ(j["checks"][7]["evidence"]["present"], "no");
  EXPECT_EQ(j["checks"][0]["evidence"]["driverVersion"], "615.20");
  EXPECT_EQ(j["can"], (nlohmann::json{{"memoryHard", true}, {"memorySoft", true}, {"compute", "hard"}, {"mig", true}}));
}

TEST(DoctorTest, ConditionsSayWhatDecidedThemAndKeepTheirTransitionTime) {
  const Clock::TimePoint t0 = Clock::TimePoint(std::chrono::seconds(1'800'000'000));
  const Clock::TimePoint t1 = t0 + std::chrono::seconds(10);
  DoctorEvidence e = GoodNode();
  const std::vector<api::GpuNodeCondition> good = DoctorConditions(Diagnose(e), {}, t0);
  ASSERT_EQ(good.size(), 2u);
  EXPECT_EQ(good[0],
            (api::GpuNodeCondition{"MemoryEnforced", true, "Enforced",
                                   "per-cgroup memory limits through cgroup-dmem; soft limits held by MPS", t0}));
  EXPECT_EQ(good[1],
            (api::GpuNodeCondition{"ComputeEnforced", true, "Enforced", "compute shares are hard on every GPU", t0}));

  e.mps.control_pipe = false;
  e.nvml.devices[0].compute_enforcement = "mps-client";
  const std::vector<api::GpuNodeCondition> later = DoctorConditions(Diagnose(e), good, t1);
  EXPECT_TRUE(later[0].status);
  EXPECT_EQ(later[0].message,
            "per-cgroup memory limits through cgroup-dmem; soft limits not held (no MPS control daemon "
            "(/run/nvidia/mps/control is absent): soft limits and compute shares are not enforced)");
  EXPECT_EQ(later[0].last_transition_time, t0) << "still True: no transition";
  EXPECT_FALSE(later[1].status);
  EXPECT_EQ(later[1].reason, "ComputeDegraded");
  EXPECT_TRUE(later[1].message.starts_with("compute: 1 GPU with compute capped only by MPS clients'"))
      << later[1].message;
  EXPECT_NE(later[1].message.find("; fix: hard compute caps need an MPS v3 namespace"), std::string::npos);
  EXPECT_EQ(later[1].last_transition_time, t1);

  e = GoodNode();
  e.nvml.driver_version = "580.65.06";
  e.nvml.enforcement_mode = "none";
  EXPECT_EQ(DoctorConditions(Diagnose(e), {}, t0)[0].reason, "MemoryLimitsMissing");
  e = GoodNode();
  e.cgroup.kubepods_dmem_enabled = false;
  EXPECT_EQ(DoctorConditions(Diagnose(e), {}, t0)[0].reason, "CgroupDegraded")
      << "the limits exist, but not on the pods' cgroups";
}

}  // namespace
}  // namespace gpupack::agent
