#include "agent/injection.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/injection_c.h"
#include "agent/mps_namespace.h"
#include "api/allocation.h"

namespace gpupack::agent {
namespace {

using Annotations = std::map<std::string, std::string>;
using Env = std::vector<std::string>;
using Set = std::vector<std::pair<std::string, std::string>>;

// The pod the extender bound: app container "main" (spec.containers[0]) on GPU-a and GPU-b with an
// 8192-MiB cap each and compute shares of 30 % and 25 % (MPS gets the lesser, 25), init container
// "warmup" (spec.initContainers[0]) on MIG-x with 5120 MiB and 50 % of the instance, and a sidecar
// "log" (spec.containers[1]) without gpupack resources.
api::Allocation Bound() {
  api::Allocation a;
  a.node = "n1";
  a.containers.push_back(
      {"main", 0, false, false, false, {{"GPU-a", 0, 8192, "", "", 30}, {"GPU-b", 1, 8192, "", "", 25}}});
  a.containers.push_back({"warmup", 0, true, false, false, {{"MIG-x", 2, 5120, "GPU-c", "1g.10gb", 50}}});
  return a;
}

// Exactly the annotations the bind writes with requestRatio 0.5: soft = 8192 × 0.5 = 4096 for
// "main", 5120 × 0.5 = 2560 for "warmup".
Annotations BoundAnnotations() { return api::AllocationAnnotations(Bound(), 0.5); }

Annotations With(Annotations a, const std::string& key, const std::string& value) {
  a[key] = value;
  return a;
}

Annotations Without(Annotations a, const std::string& key) {
  a.erase(key);
  return a;
}

const std::string kMainRequest = "gpupack.io/c0-memory-request-mib";
const std::string kMainDevices = "gpupack.io/c0-visible-devices";

Set MainEnv(const std::string& request) {
  return {{"NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b"},   {"NVIDIA_GPU_MEMORY_LIMIT", "8192"},
          {"NVIDIA_GPU_MEMORY_REQUEST", request},      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=8192M,1=8192M"},
          {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"}, {"CUDA_MPS_CLIENT_PRIORITY", "0"}};
}

const Set kVoid = {{"NVIDIA_VISIBLE_DEVICES", "void"}};

// A tenant's namespace, with the chart's default exemptions.
const PodOrigin kTenant = {"ml", {"kube-system", "gpupack-system", "gpu-operator"}};

Set Plus(Set a, const Set& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(Injection, DecidesTheEnvFromTheAllocationAlone) {
  struct Case {
    const char* what;
    Annotations annotations;
    std::string container;
    Env env;
    Set set;
  } cases[] = {
      {"allocated: the bind's env; the image's `all` is replaced, an envFrom MPS pipe emptied, driver "
       "capabilities (not a device variable) untouched",
       BoundAnnotations(),
       "main",
       {"PATH=/usr/bin", "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
        "CUDA_MPS_PIPE_DIRECTORY=/tmp/other-server"},
       Plus(MainEnv("4096"), {{"CUDA_MPS_PIPE_DIRECTORY", ""}})},
      {"allocated, the webhook's env already resolved by kubelet: set again to the same values",
       BoundAnnotations(),
       "main",
       {"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b", "NVIDIA_GPU_MEMORY_LIMIT=8192", "NVIDIA_GPU_MEMORY_REQUEST=4096",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M,1=8192M"},
       MainEnv("4096")},
      {"allocated: a raised cap goes; a device subset becomes the container's own devices", BoundAnnotations(), "main",
       Env{"NVIDIA_GPU_MEMORY_LIMIT=999999", "CUDA_VISIBLE_DEVICES=1"},
       Plus(MainEnv("4096"), {{"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b"}})},
      {"allocated init container (MIG): its own devices and cap, soft 5120 × 0.5 = 2560",
       BoundAnnotations(),
       "warmup",
       {},
       {{"NVIDIA_VISIBLE_DEVICES", "MIG-x"},
        {"NVIDIA_GPU_MEMORY_LIMIT", "5120"},
        {"NVIDIA_GPU_MEMORY_REQUEST", "2560"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=5120M"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"},
        {"CUDA_MPS_CLIENT_PRIORITY", "0"}}},
      {"allocated: its own thread share and priority give way to the scheduler's (25 %, normal)",
       BoundAnnotations(),
       "main",
       {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", "CUDA_MPS_CLIENT_PRIORITY=0"},
       MainEnv("4096")},
      {"the compute annotation raised after bind: the allocation's 25 % decides",
       With(BoundAnnotations(), "gpupack.io/c0-mps-thread-percentage", "100"),
       "main",
       {},
       MainEnv("4096")},
      {"request annotation missing: soft = cap = 8192",
       Without(BoundAnnotations(), kMainRequest),
       "main",
       {},
       MainEnv("8192")},
      {"request annotation above the cap (9000 > 8192): soft = cap",
       With(BoundAnnotations(), kMainRequest, "9000"),
       "main",
       {},
       MainEnv("8192")},
      {"request annotation not a count: soft = cap",
       With(BoundAnnotations(), kMainRequest, "lots"),
       "main",
       {},
       MainEnv("8192")},
      {"devices annotation changed after bind: the allocation decides",
       With(BoundAnnotations(), kMainDevices, "GPU-a,GPU-b,GPU-z"),
       "main",
       {},
       MainEnv("4096")},
      {"sidecar of a gpupack pod that sets `all` itself: void", BoundAnnotations(), "log",
       Env{"NVIDIA_VISIBLE_DEVICES=all"}, kVoid},
      {"no gpupack resources, cap variables set: void, each emptied",
       {},
       "app",
       {"NVIDIA_GPU_MEMORY_LIMIT=999999", "HOME=/root", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=999999M"},
       Plus(kVoid, {{"NVIDIA_GPU_MEMORY_LIMIT", ""}, {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", ""}})},
      {"no env at all: void, so the toolkit's unset-means-runc is explicit", {}, "app", {}, kVoid},
      {"a forged per-container annotation without an allocation gives nothing",
       {{kMainDevices, "GPU-a"}},
       "main",
       Env{"NVIDIA_VISIBLE_DEVICES=GPU-a"},
       kVoid},
      {"no allocation: a thread share the pod sets is emptied too",
       {},
       "app",
       Env{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100"},
       Plus(kVoid, {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", ""}})},
      {"an allocation entry without devices gives nothing",
       {{"gpupack.io/allocation", R"({"v":1,"node":"n1","containers":[{"name":"main","index":0,"devices":[]}]})"}},
       "main",
       {},
       kVoid},
      {"values that give no device stay: none (driver libraries only), CUDA -1",
       {},
       "app",
       Env{"NVIDIA_VISIBLE_DEVICES=none", "CUDA_VISIBLE_DEVICES=-1"},
       {}},
      {"allocated: its own CUDA -1 (it hides its GPUs from itself) stays", BoundAnnotations(), "main",
       Env{"CUDA_VISIBLE_DEVICES=-1"}, MainEnv("4096")},
      {"a second entry that gives a device: each name set once, CUDA to no device",
       {},
       "app",
       {"NVIDIA_VISIBLE_DEVICES=void", "CUDA_VISIBLE_DEVICES=0", "NVIDIA_VISIBLE_DEVICES=all",
        "CUDA_VISIBLE_DEVICES=1"},
       Plus(kVoid, {{"CUDA_VISIBLE_DEVICES", ""}})},
  };
  for (const Case& c : cases) {
    StatusOr<EnvAdjustment> got = DecideContainerEnv(kTenant, c.annotations, c.container, c.env);
    ASSERT_TRUE(got.ok()) << c.what << ": " << got.status();
    EXPECT_EQ(got->set, c.set) << c.what;
    EXPECT_FALSE(got->exempt) << c.what;
  }
}

// GPU infrastructure keeps its own env, allocation or not (the agent itself sets
// NVIDIA_VISIBLE_DEVICES=all to see every GPU through NVML).
TEST(Injection, LeavesExemptNamespacesAlone) {
  for (const std::string ns : {"gpupack-system", "gpu-operator"}) {
    PodOrigin infrastructure = kTenant;
    infrastructure.pod_namespace = ns;
    for (const Annotations& annotations : {Annotations{}, BoundAnnotations()}) {
      StatusOr<EnvAdjustment> got =
          DecideContainerEnv(infrastructure, annotations, "main", Env{"NVIDIA_VISIBLE_DEVICES=all"});
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->set, Set{}) << ns;
      EXPECT_TRUE(got->exempt) << ns;
    }
  }
  // A namespace is exempt by its exact name only.
  PodOrigin lookalike = kTenant;
  lookalike.pod_namespace = "gpu-operator-tenant";
  StatusOr<EnvAdjustment> got = DecideContainerEnv(lookalike, {}, "app", Env{"NVIDIA_VISIBLE_DEVICES=all"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->set, kVoid);
  EXPECT_FALSE(got->exempt);
}

// A pod the bind gave below-normal MPS priority (a negative Kubernetes priority) gets it in every
// container; the pod's own setting never counts.
TEST(Injection, GivesTheBindsMpsClientPriority) {
  api::Allocation low = Bound();
  low.mps_client_priority = api::kMpsClientPriorityBelowNormal;
  StatusOr<EnvAdjustment> got =
      DecideContainerEnv(kTenant, api::AllocationAnnotations(low, 0.5), "main", Env{"CUDA_MPS_CLIENT_PRIORITY=0"});
  ASSERT_TRUE(got.ok()) << got.status();
  Set want = MainEnv("4096");
  want.back().second = "1";
  EXPECT_EQ(got->set, want);
}

// With the node's MPS daemon configured, an allocated container joins it: the pipe directory as
// env (a pod's own replaced) and mounted by the runtime, no hostPath in the pod spec; a container
// without devices still gets no pipe directory.
TEST(Injection, JoinsAllocatedContainersToTheNodesMpsServer) {
  PodOrigin with_mps = kTenant;
  with_mps.mps_pipe_directory = "/run/nvidia-mps";
  StatusOr<EnvAdjustment> main =
      DecideContainerEnv(with_mps, BoundAnnotations(), "main", Env{"CUDA_MPS_PIPE_DIRECTORY=/tmp/mine"});
  ASSERT_TRUE(main.ok()) << main.status();
  EXPECT_EQ(main->set, Plus(MainEnv("4096"), {{"CUDA_MPS_PIPE_DIRECTORY", "/run/nvidia-mps"}}));
  EXPECT_EQ(main->mounts, std::vector<std::string>{"/run/nvidia-mps"});
  StatusOr<EnvAdjustment> sidecar =
      DecideContainerEnv(with_mps, BoundAnnotations(), "log", Env{"CUDA_MPS_PIPE_DIRECTORY=/tmp/mine"});
  ASSERT_TRUE(sidecar.ok()) << sidecar.status();
  EXPECT_EQ(sidecar->set, Plus(kVoid, {{"CUDA_MPS_PIPE_DIRECTORY", ""}}));
  EXPECT_TRUE(sidecar->mounts.empty());
}

// MPS v3: the decision names the namespace's ceiling, the lesser share of main's devices (30 %
// and 25 % → 25), and gives no pipe directory until JoinMpsNamespace hands it the namespace's.
TEST(Injection, AsksForAnMpsNamespaceCappedAtTheContainersShare) {
  PodOrigin with_namespaces = kTenant;
  with_namespaces.mps_pipe_directory = "/run/nvidia-mps";
  with_namespaces.mps_namespaces = true;
  StatusOr<EnvAdjustment> main = DecideContainerEnv(with_namespaces, BoundAnnotations(), "main",
                                                    Env{"CUDA_MPS_PIPE_DIRECTORY=/tmp/mine", "CUDA_VISIBLE_DEVICES=0"});
  ASSERT_TRUE(main.ok()) << main.status();
  EXPECT_EQ(main->mps_namespace_percentage, 25);
  // The pod's own pipe directory is overridden with "" until the namespace's replaces it.
  EXPECT_EQ(main->set,
            Plus(MainEnv("4096"), {{"CUDA_MPS_PIPE_DIRECTORY", ""}, {"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b"}}));
  EXPECT_TRUE(main->mounts.empty());
  JoinMpsNamespace(*main, "/run/nvidia-mps/shared/gpupack_x");
  EXPECT_EQ(main->set, Plus(MainEnv("4096"), {{"CUDA_MPS_PIPE_DIRECTORY", "/run/nvidia-mps/shared/gpupack_x"},
                                              {"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b"}}));
  EXPECT_EQ(main->mounts, std::vector<std::string>{"/run/nvidia-mps/shared/gpupack_x"});
  // Without a pipe directory in the env it comes right after the allocation's variables.
  StatusOr<EnvAdjustment> plain =
      DecideContainerEnv(with_namespaces, BoundAnnotations(), "main", Env{"CUDA_VISIBLE_DEVICES=0"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  JoinMpsNamespace(*plain, "/ns");
  EXPECT_EQ(plain->set,
            Plus(MainEnv("4096"), {{"CUDA_MPS_PIPE_DIRECTORY", "/ns"}, {"CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b"}}));
  // The init container's share of its MIG instance is 50 %; the sidecar gets no namespace.
  EXPECT_EQ(DecideContainerEnv(with_namespaces, BoundAnnotations(), "warmup", Env{})->mps_namespace_percentage, 50);
  EXPECT_EQ(DecideContainerEnv(with_namespaces, BoundAnnotations(), "log", Env{})->mps_namespace_percentage, 0);
}

TEST(Injection, RefusesAnAllocationItCannotRead) {
  for (std::string text : {"{", R"({"v":2,"node":"n1","containers":[]})"}) {
    StatusOr<EnvAdjustment> got =
        DecideContainerEnv(kTenant, {{"gpupack.io/allocation", text}}, "main", Env{"NVIDIA_VISIBLE_DEVICES=all"});
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status().message().rfind("gpupack.io/allocation: ", 0), 0u) << got.status();
  }
}

// The C entry the NRI plugin calls carries the same decision as JSON, and every bad request as an error.
TEST(Injection, CEntryCarriesTheDecisionAsJson) {
  auto call = [](const std::string& request) {
    char* out = gpupack_decide_container_env(request.data(), request.size());
    EXPECT_NE(out, nullptr);
    nlohmann::json reply = nlohmann::json::parse(out);
    std::free(out);
    return reply;
  };
  nlohmann::json request = {
      {"annotations", BoundAnnotations()}, {"container", "main"}, {"env", {"CUDA_VISIBLE_DEVICES=3"}}};
  EXPECT_EQ(call(request.dump()), nlohmann::json::parse(R"({"set": [["NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b"],
      ["NVIDIA_GPU_MEMORY_LIMIT", "8192"], ["NVIDIA_GPU_MEMORY_REQUEST", "4096"],
      ["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=8192M,1=8192M"], ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"],
      ["CUDA_MPS_CLIENT_PRIORITY", "0"], ["CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b"]], "mounts": [], "exempt": false})"));
  // Absent or null (Go's nil map and slice): empty.
  EXPECT_EQ(call(R"({"namespace": "gpu-operator", "exemptNamespaces": ["gpu-operator"], "container": "app",
                      "env": ["NVIDIA_VISIBLE_DEVICES=all"]})"),
            nlohmann::json::parse(R"({"set": [], "mounts": [], "exempt": true})"));
  EXPECT_EQ(call(R"({"container": "app", "annotations": null, "env": null})"),
            nlohmann::json::parse(R"({"set": [["NVIDIA_VISIBLE_DEVICES", "void"]], "mounts": [], "exempt": false})"));
  // The node's MPS pipe directory reaches an allocated container as env and a mount.
  request["mpsPipeDirectory"] = "/run/nvidia-mps";
  nlohmann::json with_mps = call(request.dump());
  EXPECT_EQ(with_mps["mounts"], nlohmann::json::parse(R"(["/run/nvidia-mps"])"));
  EXPECT_EQ(with_mps["set"][6], nlohmann::json::parse(R"(["CUDA_MPS_PIPE_DIRECTORY", "/run/nvidia-mps"])"));
  // A named MPS server needs the daemon's pipe directory.
  request.erase("mpsPipeDirectory");
  request["mpsServer"] = "shared";
  EXPECT_EQ(call(request.dump()).value("error", ""),
            "mpsServer needs mpsPipeDirectory, the MPS daemon's pipe directory");
  EXPECT_EQ(call("[1]").value("error", ""), "the request is not a JSON object");
  EXPECT_EQ(call("{").value("error", ""), "the request is not a JSON object");
  EXPECT_EQ(call(R"({"env": [7]})").value("error", "").rfind("malformed request: ", 0), 0u);
  EXPECT_EQ(
      call(R"({"annotations": {"gpupack.io/allocation": "{"}})").value("error", "").rfind("gpupack.io/allocation: ", 0),
      0u);
}

// The C entries against the stand-in control daemon (agent/testing/fake_mps_control.sh): create,
// the container's namespace only; release, retried while a client is attached; reconcile, what the
// runtime still runs.
TEST(Injection, CEntriesProvisionReleaseAndReconcileMpsNamespaces) {
  char tmpl[] = "/tmp/gpupack-mps-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::filesystem::create_directories(dir + "/fake-state/servers");
  std::ofstream(dir + "/control").put('\n');
  std::ofstream(dir + "/fake-state/servers/shared").put('\n');
  auto call = [](char* (*entry)(const char*, size_t), const nlohmann::json& request) {
    const std::string text = request.dump();
    char* out = entry(text.data(), text.size());
    EXPECT_NE(out, nullptr);
    nlohmann::json reply = nlohmann::json::parse(out);
    std::free(out);
    return reply;
  };
  const nlohmann::json mps = {
      {"mpsServer", "shared"}, {"mpsPipeDirectory", dir}, {"mpsControlBinary", GPUPACK_FAKE_MPS_CONTROL}};
  nlohmann::json create = mps;
  create.update(
      {{"annotations", BoundAnnotations()}, {"container", "main"}, {"containerId", "c0ffee"}, {"env", Env{}}});
  const std::string name = *MpsNamespaceName("c0ffee");
  nlohmann::json created = call(gpupack_decide_container_env, create);
  ASSERT_FALSE(created.contains("error")) << created;
  EXPECT_EQ(created["mpsNamespace"], name);
  EXPECT_EQ(created["set"][6], nlohmann::json({"CUDA_MPS_PIPE_DIRECTORY", dir + "/shared/" + name}));
  EXPECT_EQ(created["mounts"], nlohmann::json({dir + "/shared/" + name}));
  std::ifstream percent(dir + "/fake-state/shared/" + name + "/percent");
  std::string cap;
  percent >> cap;
  EXPECT_EQ(cap, "25");
  // A container with devices but no id cannot be given a namespace, so it is not created.
  create["containerId"] = "";
  EXPECT_EQ(call(gpupack_decide_container_env, create).value("error", ""),
            "an MPS namespace needs a container id; it is empty");

  nlohmann::json release = mps;
  release.update(
      {{"containerId", "c0ffee"}, {"namespace", "ml"}, {"container", "main"}, {"annotations", BoundAnnotations()}});
  // The sidecar was given no namespace: released at once, the daemon not asked.
  nlohmann::json sidecar = release;
  sidecar.update({{"containerId", "side"}, {"container", "log"}});
  EXPECT_EQ(call(gpupack_release_mps_namespace, sidecar), nlohmann::json::object());
  std::ifstream log(dir + "/fake-state/log");
  const std::string commands((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(commands.find(*MpsNamespaceName("side")), std::string::npos) << commands;
  std::ofstream(dir + "/fake-state/shared/" + name + "/attached").put('\n');
  nlohmann::json busy = call(gpupack_release_mps_namespace, release);
  EXPECT_EQ(busy.value("retry", false), true) << busy;
  std::filesystem::remove(dir + "/fake-state/shared/" + name + "/attached");
  EXPECT_EQ(call(gpupack_release_mps_namespace, release), nlohmann::json::object());
  EXPECT_FALSE(std::filesystem::exists(dir + "/fake-state/shared/" + name));

  // The runtime still runs c0ffee (main, 25 %) and a sidecar: only main's namespace comes back.
  nlohmann::json reconcile = mps;
  reconcile["defaultPercentage"] = 10;
  reconcile["containers"] = {
      {{"containerId", "c0ffee"}, {"namespace", "ml"}, {"container", "main"}, {"annotations", BoundAnnotations()}},
      {{"containerId", "side"}, {"namespace", "ml"}, {"container", "log"}, {"annotations", BoundAnnotations()}}};
  EXPECT_EQ(call(gpupack_reconcile_mps_namespaces, reconcile), nlohmann::json({{"claims", 1}}));
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/fake-state/shared/" + name));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupack::agent
