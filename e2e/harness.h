// The end-to-end test bed: an API server (the in-tree TestApiServer, or a real cluster when
// GPUPACK_E2E_KUBECONFIG is set), real gpupack-agent processes reporting GPUNodes from a cluster
// file, real gpupack-extender processes, and FakeKubeScheduler, which drives the extender exactly
// as kube-scheduler does. CheckLedger is the invariant every scenario asserts.
//
// Thread safety: Cluster and FakeKubeScheduler are used from the test's thread; the scheduler's
// binds run on its own worker threads internally.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "kube/client.h"
#include "testing/process.h"
#include "testing/test_apiserver.h"

namespace gpupack::e2e {

using Json = nlohmann::json;

struct BinaryPaths {
  std::string extender;
  std::string agent;
  // The fake libnvidia-ml.so.1 the tests build (agent/testing/fake_nvml.cc), for agents on the NVML
  // backend; empty where the build has none.
  std::string fake_nvml;
};

// A running gpupack-extender.
struct ExtenderProcess {
  Process process;
  std::string url;  // "http://127.0.0.1:PORT"
};

class Cluster {
 public:
  // `cluster_yaml`: a cluster file (docs/cluster-file.md). With the test server, a core/v1 Node is
  // created per entry; against a real cluster (GPUPACK_E2E_KUBECONFIG) the entries' names must be
  // real nodes (GPUPACK_E2E_NODES renames them in order) and pods go to GPUPACK_E2E_NAMESPACE.
  static StatusOr<std::unique_ptr<Cluster>> Create(const std::string& test_name, const std::string& cluster_yaml,
                                                   BinaryPaths bins);
  ~Cluster();

  kube::Client& api() { return *api_; }
  // Null against a real cluster: fault injection is only possible on the test server.
  TestApiServer* server() { return server_.get(); }
  const std::vector<std::string>& node_names() const { return nodes_; }
  const std::string& ns() const { return ns_; }
  const std::string& run_label() const { return run_label_; }

  // Starts one agent per node (heartbeat every second) and waits until every GPUNode exists.
  Status StartAgents();
  // kill -9 of one node's agent: its heartbeat stops.
  void KillAgent(const std::string& node);
  // Starts `node`'s agent on the NVML backend with the fake NVML library in `nvml_state` (its
  // devices and the processes on them, agent/testing/fake_nvml.cc), a /proc of its own where
  // PlaceProcess put the processes' cgroups, and `extra_args`; waits until its GPUNode reports and
  // returns the agent's /metrics URL. The fake library reads its state once, when the agent loads
  // it: place processes first. KillAgent stops it.
  StatusOr<std::string> StartNvmlAgent(const std::string& node, const Json& nvml_state,
                                       const std::vector<std::string>& extra_args = {});
  // Makes process `pid` on `node` belong to container `container_id` of pod `pod_uid` (or to the
  // host when `pod_uid` is empty) in what that node's NVML agent reads from /proc.
  Status PlaceProcess(const std::string& node, int64_t pid, const std::string& pod_uid,
                      const std::string& container_id);
  // A pod without gpupack resources, created bound to `node` and running container "main" with
  // runtime id `container_id`, as its kubelet would report it (the test server only: no kubelet
  // runs it). It is not a pod of the run's ledger (no gpupack-e2e-run label): CheckLedger leaves
  // it out.
  StatusOr<Json> CreateRunningPod(const std::string& name, const std::string& node, const std::string& container_id,
                                  const std::map<std::string, std::string>& labels = {});
  // Reports pod `name`'s container "main" running as `container_id`, as its kubelet would.
  Status MarkRunning(const std::string& name, const std::string& container_id);
  // Starts an extender with `extra_config` YAML appended to the defaults and waits for /readyz.
  StatusOr<ExtenderProcess> StartExtender(const std::string& extra_config = "");

  // Creates a pod asking for `gpu_memory` (quantity, may be empty) on `gpus` devices; returns the
  // created object. `admit`, when given, is the mutating admission the pod passes first (the
  // webhook's patch applied, or its denial returned instead of creating anything).
  StatusOr<Json> CreatePod(const std::string& name, const std::string& gpu_memory, int gpus,
                           const std::map<std::string, std::string>& annotations = {},
                           const std::function<StatusOr<Json>(const Json&)>& admit = nullptr);
  // Deletes every pod of this run (real-cluster hygiene; the test server dies with the test).
  void Cleanup();

 private:
  Cluster() = default;
  std::string dir_;
  std::string kubeconfig_;
  std::string cluster_file_;
  std::string ns_ = "default";
  std::string run_label_;
  BinaryPaths bins_;
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<kube::Client> api_;
  std::vector<std::string> nodes_;
  // Waits until every node in `nodes` has a GPUNode with a heartbeat, or an agent exits.
  Status AwaitReports(const std::vector<std::string>& nodes);

  std::map<std::string, Process> agents_;
  int extenders_started_ = 0;
};

struct LedgerReport {
  int pods_total = 0;
  int pods_bound = 0;
  int pods_with_allocation = 0;
  int devices = 0;
  int64_t allocated_mib = 0;
  int64_t capacity_mib = 0;
  std::map<std::string, int> bound_per_node;
};

// The device ledger invariant from the API server's truth: for every live pod of the run with a
// gpupack.io/allocation, every device exists on the pod's node (per its GPUNode), Σ caps ≤
// capacity and Σ compute shares ≤ 100 % per device, an exclusive holder is alone, and the annotation's node is
// spec.nodeName; a bound gpupack pod without an allocation is an error too. Returns the first violation.
StatusOr<LedgerReport> CheckLedger(kube::Client& api, const std::string& ns, const std::string& run_label);

struct SchedulerOptions {
  int extender_weight = 10;  // the chart's default
  int bind_workers = 4;      // concurrent asynchronous binds
  int max_no_fit_attempts = 3;
  std::chrono::milliseconds retry_pause{50};  // after an extender error
  std::chrono::milliseconds no_fit_pause{0};  // after a no-fit answer that will be retried
  std::chrono::seconds deadline{90};
  uint64_t seed = 1;
};

struct ScheduleResult {
  std::map<std::string, std::string> bound;  // pod key → node
  std::set<std::string> unschedulable;       // no node fit after max_no_fit_attempts
  std::set<std::string> unfinished;          // deadline reached while still retrying errors
  std::set<std::string> deleted;             // deleted while queued or being bound
  int bind_errors = 0;
  int extender_errors = 0;  // filter/prioritize transport or protocol errors
};

// Plays kube-scheduler against the extender: per pod, its own NodeResourcesFit (cpu, memory;
// gpupack resources are ignoredByScheduler as in the chart), POST filter (nodeCacheCapable:
// NodeNames), POST prioritize unless one node passed (then it is the choice, as in kube-scheduler),
// final score = extender score × weight × 10 (MaxNodeScore / MaxExtenderPriority) + its own
// LeastAllocated CPU score, random tie-break among the best, then
// an asynchronous POST bind while it goes on with the next pod (the pod's resources are assumed
// on the node meanwhile). A failed bind or an extender error puts the pod back in the queue.
class FakeKubeScheduler {
 public:
  FakeKubeScheduler(Cluster& cluster, SchedulerOptions options = {});
  ~FakeKubeScheduler();

  // Points verbs at another extender (failover, restart). Safe from a hook.
  void SetExtender(const std::string& url);
  // Schedules `pods` (created objects) until each is bound, unschedulable or the deadline passes.
  // `after_cycle(n)` runs after the n-th scheduling cycle (1-based): scenarios inject trouble there.
  ScheduleResult Schedule(const std::vector<Json>& pods, const std::function<void(int)>& after_cycle = nullptr);

 private:
  struct NodeInfo {
    int64_t cpu_milli = 0, memory = 0;
    int64_t used_cpu_milli = 0, used_memory = 0;
  };
  Status RefreshNodes();
  std::string ExtenderUrl();

  Cluster& cluster_;
  const SchedulerOptions options_;
  std::mt19937_64 rng_;
  std::mutex mu_;
  std::string extender_url_;
  std::map<std::string, NodeInfo> nodes_;
};

// POSTs a JSON body to an extender verb ("/filter", "/bind"); Unavailable for transport errors and
// non-200 answers.
StatusOr<Json> PostToExtender(const std::string& url, const std::string& path, const Json& body);
// GETs `path` of a binary's HTTP endpoint ("/metrics"); the body of a 200, else Unavailable.
StatusOr<std::string> GetText(const std::string& url, const std::string& path);

// The binaries the e2e tests run (from CMake, overridable with GPUPACK_E2E_BIN_DIR).
BinaryPaths DefaultBinaries();

}  // namespace gpupack::e2e
