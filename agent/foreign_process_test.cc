#include "agent/foreign_process.h"

#include <gtest/gtest.h>

namespace gpupack::agent {
namespace {

// Devices: GPU-1 (held by ml/infer), GPU-3 (idle), GPU-X (excluded by the administrator), and
// GPU-2 in MIG mode with MIG-a (held by ml/mig) and MIG-b (idle).
api::GpuNodeStatus Node(std::vector<api::GpuNodeProcess> processes) {
  api::GpuNodeStatus s;
  for (const char* uuid : {"GPU-1", "GPU-3"}) {
    api::GpuNodeDevice d;
    d.uuid = uuid;
    s.devices.push_back(d);
  }
  api::GpuNodeDevice excluded;
  excluded.uuid = "GPU-X";
  excluded.excluded = true;
  s.devices.push_back(excluded);
  api::GpuNodeDevice mig;
  mig.uuid = "GPU-2";
  mig.mig_enabled = true;
  mig.mig_instances.push_back({"MIG-a", "3g.40gb", 40192, 0, 1, 0, 4});
  mig.mig_instances.push_back({"MIG-b", "3g.40gb", 40192, 0, 2, 4, 4});
  s.devices.push_back(mig);
  s.processes = std::move(processes);
  return s;
}

PodContainer Container(const std::string& name, const std::string& id, std::vector<std::string> devices = {}) {
  PodContainer c;
  c.name = name;
  c.container_id = id;
  c.running = true;
  for (const std::string& uuid : devices) {
    api::AllocatedDevice d;
    d.uuid = uuid;
    d.mem_mib = 8192;
    c.devices.push_back(d);
  }
  return c;
}

PodInfo Pod(const std::string& uid, const std::string& name, std::vector<PodContainer> containers) {
  PodInfo p;
  p.uid = uid;
  p.ns = "ml";
  p.name = name;
  p.containers = std::move(containers);
  for (const PodContainer& c : p.containers) p.gpupack = p.gpupack || !c.devices.empty();
  return p;
}

std::vector<PodInfo> Pods() {
  PodInfo finished = Pod("uid-done", "done", {Container("main", "id-done", {"GPU-3"})});
  finished.finished = finished.terminating = true;
  PodInfo deleting = Pod("uid-deleting", "deleting", {Container("main", "id-deleting", {"GPU-3"})});
  deleting.terminating = true;
  return {Pod("uid-infer", "infer", {Container("main", "id-main", {"GPU-1"}), Container("sidecar", "id-sidecar")}),
          Pod("uid-web", "web", {Container("main", "id-web")}),
          Pod("uid-mig", "mig", {Container("main", "id-mig", {"MIG-a"})}), finished, deleting};
}

struct Case {
  std::string name;
  api::GpuNodeProcess process;  // pid, device, usedMiB, pod UID, (pod, container: unused), container id
  bool finding;
  std::string pod, container;  // what the finding names
  std::string message;         // the finding's message
};

TEST(ForeignProcessTest, EveryProcessOnAGpupackDeviceNeedsAnAllocationOfIt) {
  const std::vector<Case> cases = {
      {"a pod without gpupack resources on an idle device",
       {10, "GPU-3", 500, "uid-web", "", "", "id-web"},
       true,
       "ml/web",
       "main",
       "process 10 (pod ml/web, container main) uses 500 MiB of gpupack device GPU-3 without a gpupack allocation of "
       "it"},
      {"a pod without gpupack resources on a device gpupack pods hold",
       {11, "GPU-1", 500, "uid-web", "", "", "id-web"},
       true,
       "ml/web",
       "main",
       "process 11 (pod ml/web, container main) uses 500 MiB of gpupack device GPU-1 without a gpupack allocation of "
       "it"},
      {"a gpupack pod on a device other than the one it was given",
       {12, "GPU-3", 700, "uid-infer", "", "", "id-main"},
       true,
       "ml/infer",
       "main",
       "process 12 (pod ml/infer, container main) uses 700 MiB of gpupack device GPU-3 without a gpupack allocation "
       "of it"},
      {"a gpupack container's own process", {13, "GPU-1", 7000, "uid-infer", "", "", "id-main"}, false},
      {"a sidecar without gpupack resources beside the gpupack container",
       {14, "GPU-1", 300, "uid-infer", "", "", "id-sidecar"},
       true,
       "ml/infer",
       "sidecar",
       "process 14 (pod ml/infer, container sidecar) uses 300 MiB of gpupack device GPU-1 without a gpupack "
       "allocation of it"},
      {"a container the pod list has not caught up with, of a pod holding the device",
       {15, "GPU-1", 100, "uid-infer", "", "", "id-restarted"},
       false},
      {"the pod's own cgroup, of a pod holding the device", {16, "GPU-1", 100, "uid-infer", "", "", ""}, false},
      {"a host process",
       {17, "GPU-3", 900, "", "", "", ""},
       true,
       "",
       "",
       "process 17 (not in a pod) uses 900 MiB of gpupack device GPU-3 without a gpupack allocation of it"},
      {"a pod this node does not list",
       {18, "GPU-3", 900, "uid-elsewhere", "", "", "id-x"},
       true,
       "",
       "",
       "process 18 (pod UID uid-elsewhere, not among this node's pods) uses 900 MiB of gpupack device GPU-3 without "
       "a gpupack allocation of it"},
      {"a MIG instance the pod was given", {19, "MIG-a", 4000, "uid-mig", "", "", "id-mig"}, false},
      {"an idle MIG instance",
       {20, "MIG-b", 4000, "uid-mig", "", "", "id-mig"},
       true,
       "ml/mig",
       "main",
       "process 20 (pod ml/mig, container main) uses 4000 MiB of gpupack device MIG-b without a gpupack allocation of "
       "it"},
      {"a device the administrator excluded (not gpupack's)", {21, "GPU-X", 900, "uid-web", "", "", "id-web"}, false},
      {"a pod that finished: its allocation is released",
       {22, "GPU-3", 900, "uid-done", "", "", "id-done"},
       true,
       "ml/done",
       "main",
       "process 22 (pod ml/done, container main) uses 900 MiB of gpupack device GPU-3 without a gpupack allocation of "
       "it"},
      {"a pod being deleted, still in its grace period",
       {23, "GPU-3", 900, "uid-deleting", "", "", "id-deleting"},
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<api::GpuNodeAuditFinding> found = ForeignProcessFindings(Node({c.process}), Pods());
    if (!c.finding) {
      EXPECT_TRUE(found.empty()) << found[0].message;
      continue;
    }
    ASSERT_EQ(found.size(), 1u);
    const api::GpuNodeAuditFinding& f = found[0];
    EXPECT_EQ(f.kind, "foreign-process");
    EXPECT_EQ(f.device, c.process.device);
    EXPECT_EQ(f.pid, c.process.pid);
    EXPECT_EQ(f.used_mib, c.process.used_mib);
    EXPECT_EQ(f.pod_uid, c.process.pod_uid);
    EXPECT_EQ(f.pod, c.pod);
    EXPECT_EQ(f.container, c.container);
    EXPECT_EQ(f.message, c.message);
  }
}

TEST(ForeignProcessTest, ManagedDevicesAreWholeGpusAndMigInstancesNotExcluded) {
  EXPECT_EQ(ManagedDevices(Node({})), (std::set<std::string>{"GPU-1", "GPU-3", "MIG-a", "MIG-b"}));
  // Excluding a MIG-mode GPU takes all its instances out.
  api::GpuNodeStatus s = Node({});
  api::MarkExcluded(s, {"GPU-X", "GPU-2"});
  EXPECT_EQ(ManagedDevices(s), (std::set<std::string>{"GPU-1", "GPU-3"}));
}

TEST(ForeignProcessTest, AnIdleNodeHasNoFindings) { EXPECT_TRUE(ForeignProcessFindings(Node({}), {}).empty()); }

}  // namespace
}  // namespace gpupack::agent
