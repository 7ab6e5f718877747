#include "agent/doctor_probe.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "agent/testing/agent_testing.h"

namespace gpupack::agent {
namespace {

using namespace testing;  // NOLINT: the helpers' flavours

constexpr const char* kRegion = "nvidia/0000:17:00.0/vidmem 150323855360";

// A cgroup v2 root as the kernel lays it out: cgroup.controllers at the root, dmem.capacity only
// there, kubepods.slice below with what its parent enabled (cgroup.controllers) and what it passes on
// (cgroup.subtree_control).
struct CgroupTree {
  std::string controllers = "cpuset cpu io memory pids dmem";
  std::string capacity = std::string("drm/0000:03:00.0/vram0 8573157376\n") + kRegion + "\n";
  std::string kubepods_controllers = "cpu memory dmem";
  std::string kubepods_subtree = "cpu memory dmem";
};

std::string WriteCgroupTree(const TempDir& dir, const CgroupTree& t) {
  dir.WriteFile("cg/cgroup.controllers", t.controllers + "\n");
  dir.WriteFile("cg/dmem.capacity", t.capacity);
  dir.WriteFile("cg/kubepods.slice/cgroup.controllers", t.kubepods_controllers + "\n");
  dir.WriteFile("cg/kubepods.slice/cgroup.subtree_control", t.kubepods_subtree + "\n");
  return dir.File("cg");
}

CheckVerdict CgroupVerdict(const std::string& root) {
  DoctorEvidence e;
  e.cgroup = ProbeCgroup(root);
  return Diagnose(e).Find("cgroup")->verdict;
}

TEST(DoctorProbeTest, CgroupTreeWithDmemDelegatedToPods) {
  TempDir dir;
  const std::string root = WriteCgroupTree(dir, CgroupTree{});
  const CgroupEvidence c = ProbeCgroup(root);
  EXPECT_TRUE(c.v2);
  EXPECT_EQ(c.nvidia_dmem_regions, std::vector<std::string>{kRegion}) << "the drm region is not NVIDIA's";
  EXPECT_EQ(c.kubepods, root + "/kubepods.slice");
  EXPECT_TRUE(c.kubepods_dmem_enabled && c.kubepods_dmem_delegated);
  EXPECT_EQ(CgroupVerdict(root), CheckVerdict::kOk);
}

TEST(DoctorProbeTest, CgroupTreesThatFallShort) {
  {
    TempDir dir;  // cgroup v1: no cgroup.controllers at the root
    dir.WriteFile("cg/memory/memory.limit_in_bytes", "9223372036854771712\n");
    EXPECT_FALSE(ProbeCgroup(dir.File("cg")).v2);
    EXPECT_EQ(CgroupVerdict(dir.File("cg")), CheckVerdict::kMissing);
  }
  {
    TempDir dir;  // a kernel before 6.14: no dmem controller, no dmem.capacity
    CgroupTree t;
    t.controllers = "cpuset cpu io memory pids misc";
    dir.WriteFile("cg/cgroup.controllers", t.controllers + "\n");
    dir.MakeDir("cg/kubepods.slice");
    const CgroupEvidence c = ProbeCgroup(dir.File("cg"));
    EXPECT_TRUE(c.v2);
    EXPECT_TRUE(c.nvidia_dmem_regions.empty());
    EXPECT_EQ(CgroupVerdict(dir.File("cg")), CheckVerdict::kDegraded);
  }
  {
    TempDir dir;  // dmem is there, the driver did not register with it (misc accounting)
    CgroupTree t;
    t.capacity = "drm/0000:03:00.0/vram0 8573157376\n";
    EXPECT_EQ(CgroupVerdict(WriteCgroupTree(dir, t)), CheckVerdict::kDegraded);
  }
  {
    TempDir dir;  // dmem accounts NVIDIA memory but kubepods does not pass it on to the pods
    CgroupTree t;
    t.kubepods_subtree = "cpu memory";
    const std::string root = WriteCgroupTree(dir, t);
    EXPECT_FALSE(ProbeCgroup(root).kubepods_dmem_delegated);
    DoctorEvidence e;
    e.cgroup = ProbeCgroup(root);
    const DoctorReport r = Diagnose(e);
    EXPECT_EQ(r.Find("cgroup")->verdict, CheckVerdict::kDegraded);
    EXPECT_FALSE(r.can.memory_hard);
  }
}

TEST(DoctorProbeTest, MpsPipeDirectoryPresentOrNot) {
  TempDir dir;
  EXPECT_FALSE(ProbeMps("").control_pipe);
  EXPECT_FALSE(ProbeMps(dir.File("nowhere")).control_pipe);
  dir.MakeDir("mps");
  EXPECT_FALSE(ProbeMps(dir.File("mps")).control_pipe) << "a directory without the daemon's pipe";
  ASSERT_EQ(mkfifo(dir.File("mps/control").c_str(), 0600), 0);
  const MpsEvidence m = ProbeMps(dir.File("mps"));
  EXPECT_TRUE(m.control_pipe);
  DoctorEvidence e;
  e.mps = m;
  EXPECT_EQ(Diagnose(e).Find("mps")->verdict, CheckVerdict::kOk);
  e.mps = ProbeMps(dir.File("nowhere"));
  EXPECT_EQ(Diagnose(e).Find("mps")->verdict, CheckVerdict::kMissing);
}

// As nvidia-ctk cdi generate writes it (trimmed): the hook on the whole GPU, none on the MIG device.
constexpr const char* kSpecWithHook = R"(cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
    hooks:
    - hookName: createRuntime
      path: /usr/bin/nvidia-cdi-hook
      args: [nvidia-cdi-hook, apply-cuda-memory-limits, --driver-root, /, --gpu-id, GPU-1]
- name: "1:0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
containerEdits:
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
)";

constexpr const char* kSpecWithoutHook =
    R"({"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[{"name":"0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}}],
"containerEdits":{"hooks":[{"hookName":"createContainer","path":"/usr/bin/nvidia-cdi-hook","args":["nvidia-cdi-hook","create-symlinks"]}]}})";

CheckVerdict CdiVerdict(const std::vector<std::string>& dirs) {
  DoctorEvidence e;
  e.cdi = ProbeCdi(dirs);
  return Diagnose(e).Find("cdi")->verdict;
}

TEST(DoctorProbeTest, CdiSpecWithAndWithoutTheHook) {
  TempDir dir;
  dir.WriteFile("etc/other-vendor.yaml", "cdiVersion: 0.5.0\nkind: vendor.com/fpga\ndevices: [{name: a}]\n");
  dir.WriteFile("etc/README", "not a spec");
  dir.MakeDir("run");
  const std::vector<std::string> dirs = {dir.File("etc"), dir.File("run"), dir.File("absent")};
  EXPECT_TRUE(ProbeCdi(dirs).nvidia_specs.empty()) << "only NVIDIA GPU kinds count";
  EXPECT_EQ(CdiVerdict(dirs), CheckVerdict::kMissing);

  dir.WriteFile("run/nvidia.json", kSpecWithoutHook);
  const CdiEvidence without = ProbeCdi(dirs);
  ASSERT_EQ(without.nvidia_specs.size(), 1u);
  EXPECT_EQ(without.nvidia_specs[0].devices, 1);
  EXPECT_EQ(without.nvidia_specs[0].devices_with_hook, 0);
  EXPECT_EQ(CdiVerdict(dirs), CheckVerdict::kDegraded);

  dir.WriteFile("etc/nvidia.yaml", kSpecWithHook);
  const CdiEvidence with = ProbeCdi(dirs);
  ASSERT_EQ(with.nvidia_specs.size(), 2u);
  EXPECT_EQ(with.nvidia_specs[0].path, dir.File("etc/nvidia.yaml"));
  EXPECT_EQ(with.nvidia_specs[0].devices, 2);
  EXPECT_EQ(with.nvidia_specs[0].devices_with_hook, 1) << "the MIG device carries no hook";
  EXPECT_EQ(CdiVerdict(dirs), CheckVerdict::kOk);

  dir.WriteFile("etc/broken-other.yaml", "kind: vendor.com/fpga\ndevices: [unclosed\n");
  EXPECT_EQ(ProbeCdi(dirs).nvidia_specs.size(), 2u) << "a broken spec of another vendor is not ours to judge";
  dir.WriteFile("etc/k8s-device-plugin.yaml", "kind: k8s.device-plugin.nvidia.com/gpu\ndevices: [unclosed\n");
  const CdiEvidence broken = ProbeCdi(dirs);
  ASSERT_EQ(broken.nvidia_specs.size(), 3u);
  EXPECT_TRUE(broken.nvidia_specs[0].error.starts_with("cannot parse: ")) << broken.nvidia_specs[0].path;
  EXPECT_EQ(CdiVerdict(dirs), CheckVerdict::kDegraded);
}

TEST(DoctorProbeTest, NriSocketMustBeASocket) {
  TempDir dir;
  dir.WriteFile("file.sock", "");
  EXPECT_FALSE(ProbeNri(dir.File("file.sock")).present);
  EXPECT_FALSE(ProbeNri(dir.File("absent.sock")).present);
  const std::string path = dir.File("nri.sock");
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  path.copy(addr.sun_path, path.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_TRUE(ProbeNri(path).present);
  close(fd);
}

struct FlavourCase {
  FakeDriver driver;
  CheckVerdict memory_limits;
  CheckVerdict mig;
  std::optional<bool> memory_limit_calls;
  bool memory_hard;
};

// Each driver generation through the agent's own discovery and the fake libnvidia-ml, on a cgroup
// tree whose dmem reaches the pods.
TEST(DoctorProbeTest, FakeNvmlFlavours) {
  const FlavourCase cases[] = {
      {FakeDriver::kR580, CheckVerdict::kMissing, CheckVerdict::kOk, false, false},
      {FakeDriver::kR615, CheckVerdict::kOk, CheckVerdict::kOk, true, true},
      {FakeDriver::kR615LibraryWithoutCalls, CheckVerdict::kMissing, CheckVerdict::kOk, false, false},
      {FakeDriver::kR615Mig, CheckVerdict::kOk, CheckVerdict::kOk, true, true},
      {FakeDriver::kR615MigWithoutInstances, CheckVerdict::kOk, CheckVerdict::kDegraded, true, true},
  };
  for (const FlavourCase& c : cases) {
    TempDir dir;
    const FakeNvmlFlavour flavour = FakeNvmlFlavourOf(c.driver);
    SetFakeNvmlState(dir, flavour.state);
    NvmlBackendOptions o;
    o.library = flavour.library;
    o.proc_root = dir.File("proc");
    o.cgroup_root = WriteCgroupTree(dir, CgroupTree{});
    NvmlBackend backend(o);
    const NvmlEvidence nvml =
        NvmlEvidenceOf(backend.Discover(), flavour.library, ProbeMemoryLimitCalls(flavour.library));
    DoctorRoots roots;
    roots.cgroup_root = o.cgroup_root;
    const DoctorReport r = Diagnose(ProbeNode(roots, nvml));
    const std::string label = flavour.state.dump();
    EXPECT_EQ(nvml.error, "") << label;
    EXPECT_EQ(nvml.memory_limit_calls, c.memory_limit_calls) << label;
    EXPECT_EQ(r.Find("nvml")->verdict, CheckVerdict::kOk) << label;
    EXPECT_EQ(r.Find("memory-limits")->verdict, c.memory_limits) << label << ": " << r.Find("memory-limits")->summary;
    EXPECT_EQ(r.Find("mig")->verdict, c.mig) << label;
    EXPECT_EQ(r.can.memory_hard, c.memory_hard) << label;
  }
}

TEST(DoctorProbeTest, NoDriverIsMissingEverywhereNvmlCounts) {
  TempDir dir;
  NvmlBackendOptions o;
  o.library = dir.File("libnvidia-ml.so.1");  // nothing there
  NvmlBackend backend(o);
  const NvmlEvidence nvml = NvmlEvidenceOf(backend.Discover(), o.library, ProbeMemoryLimitCalls(o.library));
  EXPECT_NE(nvml.error.find("cannot load"), std::string::npos) << nvml.error;
  EXPECT_EQ(nvml.memory_limit_calls, std::nullopt);
  DoctorEvidence e;
  e.nvml = nvml;
  const DoctorReport r = Diagnose(e);
  for (const char* check : {"nvml", "memory-limits", "compute", "mig"}) {
    EXPECT_EQ(r.Find(check)->verdict, CheckVerdict::kMissing) << check;
  }
}

}  // namespace
}  // namespace gpupack::agent
