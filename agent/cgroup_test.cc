#include "agent/cgroup.h"

#include <gtest/gtest.h>

#include "agent/testing/agent_testing.h"

namespace gpupack::agent {
namespace {

using namespace testing;  // NOLINT: the helpers' constants

TEST(CgroupTest, V2SystemdPath) {
  const std::string path = SystemdContainerPath(kPodUid1, kContainerA);
  auto p = CgroupPathFromProcFile("0::" + path + "\n");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, path);
  auto owner = ParseKubeCgroupPath(*p);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->pod_uid, kPodUid1);
  EXPECT_EQ(owner->container_id, kContainerA);
}

TEST(CgroupTest, V1CgroupfsPathPrefersMemoryController) {
  const std::string content = std::string("12:pids:/kubepods/besteffort/pod") + kPodUid2 + "/" + kContainerB +
                              "\n11:memory:/kubepods/pod" + kPodUid1 + "/" + kContainerA +
                              "\n1:name=systemd:/system.slice/containerd.service\n";
  auto p = CgroupPathFromProcFile(content);
  ASSERT_TRUE(p.has_value());
  auto owner = ParseKubeCgroupPath(*p);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->pod_uid, kPodUid1);  // guaranteed pod: directly under kubepods
  EXPECT_EQ(owner->container_id, kContainerA);
}

TEST(CgroupTest, OtherRuntimesAndPrefixes) {
  const std::string uid = std::string(kPodUid2);
  std::string us = uid;
  for (char& c : us) c = c == '-' ? '_' : c;
  for (const std::string& path :
       {"/kubepods.slice/kubepods-pod" + us + ".slice/docker-" + kContainerB + ".scope",
        "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + us + ".slice/crio-" + kContainerB +
            ".scope",
        "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + us +
            ".slice/cri-containerd-" + kContainerB + ".scope",
        "/kubepods/burstable/pod" + uid + "/" + kContainerB}) {
    auto owner = ParseKubeCgroupPath(path);
    ASSERT_TRUE(owner.has_value()) << path;
    EXPECT_EQ(owner->pod_uid, uid) << path;
    EXPECT_EQ(owner->container_id, kContainerB) << path;
  }
}

TEST(CgroupTest, PathsSeenFromAPrivateCgroupNamespace) {
  // An agent in its own cgroup namespace sees host processes relative to its own cgroup.
  const std::string path = "/../../.." + SystemdContainerPath(kPodUid1, kContainerA);
  auto owner = ParseKubeCgroupPath(*CgroupPathFromProcFile("0::" + path + "\n"));
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->pod_uid, kPodUid1);
  EXPECT_EQ(owner->container_id, kContainerA);
}

TEST(CgroupTest, NonPodPathsAreNotOwned) {
  for (const std::string& path :
       {std::string("/"), std::string("/system.slice/sshd.service"), std::string("/user.slice/user-0.slice"),
        std::string("/kubepods.slice/kubepods-burstable.slice"), std::string("/podcast/") + kContainerA,
        "/kubepods/burstable/podnot-a-uid/" + std::string(kContainerA),
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + std::string(kPodUid1) +
            ".slice/crio-conmon-" + kContainerA + ".scope"}) {
    EXPECT_FALSE(ParseKubeCgroupPath(path).has_value()) << path;
  }
  // The pod-level cgroup itself: owned by the pod, no container.
  auto pod = ParseKubeCgroupPath(std::string("/kubepods/pod") + kPodUid1);
  ASSERT_TRUE(pod.has_value());
  EXPECT_EQ(pod->container_id, "");
  EXPECT_FALSE(CgroupPathFromProcFile("").has_value());
  EXPECT_FALSE(CgroupPathFromProcFile("garbage\n").has_value());
}

TEST(CgroupTest, ProcReaderUsesInjectedRoot) {
  TempDir dir;
  dir.WriteFile("proc/42/cgroup", "0::" + SystemdContainerPath(kPodUid1, kContainerA) + "\n");
  dir.WriteFile("proc/43/cgroup", "nonsense");
  ProcReader proc(dir.path() + "/proc");
  auto p = proc.CgroupPath(42);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, SystemdContainerPath(kPodUid1, kContainerA));
  EXPECT_EQ(proc.CgroupPath(44).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(proc.CgroupPath(43).status().code(), StatusCode::kInvalidArgument);
}

TEST(CgroupTest, ScanFindsContainerLeaves) {
  TempDir dir;
  const std::string leaf_a = dir.MakeDir("cg" + SystemdContainerPath(kPodUid1, kContainerA));
  const std::string leaf_b = dir.MakeDir(std::string("cg/kubepods/pod") + kPodUid2 + "/" + kContainerB);
  dir.MakeDir("cg/system.slice/containerd.service");
  ContainerCgroups found = ScanContainerCgroups(dir.path() + "/cg");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found.at({kPodUid1, kContainerA}), leaf_a);
  EXPECT_EQ(found.at({kPodUid2, kContainerB}), leaf_b);
  EXPECT_TRUE(ScanContainerCgroups(dir.path() + "/missing").empty());
}

TEST(CgroupTest, DetectEnforcement) {
  TempDir dir;
  dir.WriteFile("v2dmem/cgroup.controllers", "cpuset cpu io memory dmem pids\n");
  dir.WriteFile("v2/cgroup.controllers", "cpuset cpu io memory pids\n");
  auto dmem = DetectEnforcement("615.20", true, dir.path() + "/v2dmem");
  EXPECT_EQ(dmem.mode, "cgroup-dmem");
  EXPECT_EQ(DetectEnforcement("620.1", true, dir.path() + "/v2").mode, "cgroup-misc");
  auto old = DetectEnforcement("580.65.06", true, dir.path() + "/v2dmem");
  EXPECT_EQ(old.mode, "none");
  EXPECT_EQ(old.reason, "driver 580.65.06 is older than R615 (no per-cgroup memory limits)");
  EXPECT_EQ(DetectEnforcement("615.20", false, dir.path() + "/v2dmem").mode, "none");
  auto v1 = DetectEnforcement("615.20", true, dir.path() + "/v1");
  EXPECT_EQ(v1.mode, "none");
  EXPECT_NE(v1.reason.find("cgroup v2 is not mounted"), std::string::npos);
  EXPECT_EQ(DetectEnforcement("", true, dir.path() + "/v2dmem").mode, "none");
}

}  // namespace
}  // namespace gpupack::agent
