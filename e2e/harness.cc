// Long file: the e2e bed is one component; starting the processes, seeding the API server and
// speaking kube-scheduler's protocol share its state and read best together.
#include "e2e/harness.h"

#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "api/allocation.h"
#include "api/annotations.h"
#include "api/gpunode.h"
#include "common/log.h"
#include "common/quantity.h"
#include "translate/allocation_ledger.h"

namespace gpupack::e2e {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kComponent = "e2e";
constexpr char kSchedulerName[] = "gpupack-e2e";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Splits "http://host:port" for httplib.
std::pair<std::string, int> HostPort(const std::string& url) {
  std::string rest = url.substr(url.find("://") + 3);
  const size_t colon = rest.rfind(':');
  return {rest.substr(0, colon), std::stoi(rest.substr(colon + 1))};
}

StatusOr<Json> PostJsonImpl(const std::string& url, const std::string& path, const Json& body) {
  auto [host, port] = HostPort(url);
  httplib::Client c(host, port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(10, 0);
  auto res = c.Post(path, body.dump(), "application/json");
  if (!res) return Status::Unavailable("POST " + url + path + ": " + httplib::to_string(res.error()));
  if (res->status != 200)
    return Status::Unavailable("POST " + url + path + ": HTTP " + std::to_string(res->status) + " " + res->body);
  Json parsed = Json::parse(res->body, nullptr, false);
  if (parsed.is_discarded()) return Status::Internal("POST " + url + path + ": reply is not JSON");
  return parsed;
}

int64_t PodCpuMilli(const Json& pod) {
  int64_t total = 0;
  for (const Json& c : pod["spec"].value("containers", Json::array())) {
    const std::string cpu = kube::StringAt(c, {"resources", "requests", "cpu"});
    if (auto v = ParseMilliValue(cpu.empty() ? "0" : cpu, "cpu"); v.ok()) total += *v;
  }
  return total;
}

int64_t PodMemory(const Json& pod) {
  int64_t total = 0;
  for (const Json& c : pod["spec"].value("containers", Json::array())) {
    const std::string mem = kube::StringAt(c, {"resources", "requests", "memory"});
    if (auto v = ParseBytes(mem.empty() ? "0" : mem, "memory"); v.ok()) total += *v;
  }
  return total;
}

// The nodes of `passing` with the highest total score: kube-scheduler's own plus the extender's
// (`prioritized`, a HostPriorityList) × weight × 10 (MaxNodeScore / MaxExtenderPriority).
std::vector<std::string> HighestScored(const std::vector<std::string>& passing,
                                       const std::map<std::string, int64_t>& own_score, const Json& prioritized,
                                       int weight) {
  std::map<std::string, int64_t> total;
  for (const std::string& n : passing) {
    auto own = own_score.find(n);
    total[n] = own == own_score.end() ? 0 : own->second;
  }
  if (prioritized.is_array()) {
    for (const Json& hp : prioritized) {
      auto it = total.find(hp.value("Host", ""));
      if (it != total.end()) it->second += hp.value("Score", int64_t{0}) * weight * 10;
    }
  }
  int64_t best = std::numeric_limits<int64_t>::min();
  std::vector<std::string> winners;
  for (const auto& [n, s] : total) {
    if (s > best) {
      best = s;
      winners.clear();
    }
    if (s == best) winners.push_back(n);
  }
  return winners;
}

}  // namespace

StatusOr<Json> PostToExtender(const std::string& url, const std::string& path, const Json& body) {
  return PostJsonImpl(url, path, body);
}

StatusOr<std::string> GetText(const std::string& url, const std::string& path) {
  auto [host, port] = HostPort(url);
  httplib::Client c(host, port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(10, 0);
  auto res = c.Get(path);
  if (!res) return Status::Unavailable("GET " + url + path + ": " + httplib::to_string(res.error()));
  if (res->status != 200) return Status::Unavailable("GET " + url + path + ": HTTP " + std::to_string(res->status));
  return res->body;
}

BinaryPaths DefaultBinaries() {
  BinaryPaths b;
#ifdef GPUPACK_E2E_EXTENDER
  b.extender = GPUPACK_E2E_EXTENDER;
#endif
#ifdef GPUPACK_E2E_AGENT
  b.agent = GPUPACK_E2E_AGENT;
#endif
#ifdef GPUPACK_E2E_FAKE_NVML
  b.fake_nvml = GPUPACK_E2E_FAKE_NVML;
#endif
  if (const std::string dir = Env("GPUPACK_E2E_BIN_DIR"); !dir.empty()) {
    b.extender = dir + "/gpupack-extender";
    b.agent = dir + "/gpupack-agent";
  }
  return b;
}

// ------------------------------------------------------------------------- Cluster

StatusOr<std::unique_ptr<Cluster>> Cluster::Create(const std::string& test_name, const std::string& cluster_yaml,
                                                   BinaryPaths bins) {
  std::unique_ptr<Cluster> c(new Cluster());
  c->bins_ = std::move(bins);
  c->dir_ = (fs::temp_directory_path() / ("gpupack-e2e-" + test_name + "-" + std::to_string(::getpid()))).string();
  fs::remove_all(c->dir_);
  fs::create_directories(c->dir_);
  c->run_label_ = test_name.substr(0, 40) + "-" + std::to_string(::getpid());
  std::transform(c->run_label_.begin(), c->run_label_.end(), c->run_label_.begin(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::tolower(ch)) : '-';
  });

  YAML::Node root;
  try {
    root = YAML::Load(cluster_yaml);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("cluster yaml: ") + e.what());
  }
  const std::string real_nodes = Env("GPUPACK_E2E_NODES");
  std::vector<std::string> renames;
  if (!real_nodes.empty()) {
    std::stringstream ss(real_nodes);
    for (std::string n; std::getline(ss, n, ',');) renames.push_back(n);
  }
  for (size_t i = 0; i < root["nodes"].size(); ++i) {
    if (i < renames.size()) root["nodes"][i]["name"] = renames[i];
    c->nodes_.push_back(root["nodes"][i]["name"].as<std::string>());
  }
  c->cluster_file_ = c->dir_ + "/cluster.yaml";
  {
    std::ofstream out(c->cluster_file_);
    out << YAML::Dump(root) << "\n";
  }

  const std::string real_kubeconfig = Env("GPUPACK_E2E_KUBECONFIG");
  if (!real_kubeconfig.empty()) {
    c->kubeconfig_ = real_kubeconfig;
    if (const std::string ns = Env("GPUPACK_E2E_NAMESPACE"); !ns.empty()) c->ns_ = ns;
  } else {
    TestApiServerOptions o;
    o.bookmark_interval = std::chrono::milliseconds(200);
    c->server_ = std::make_unique<TestApiServer>(o);
    GPUPACK_RETURN_IF_ERROR(c->server_->Start().status());
    c->kubeconfig_ = c->dir_ + "/kubeconfig";
    GPUPACK_RETURN_IF_ERROR(WriteKubeconfig(c->kubeconfig_, c->server_->url()));
  }
  GPUPACK_ASSIGN_OR_RETURN(kube::Config kc, kube::LoadKubeconfig(c->kubeconfig_));
  GPUPACK_ASSIGN_OR_RETURN(c->api_, kube::Client::Create(kc));
  if (c->server_) {
    for (const std::string& n : c->nodes_) {
      Json node = {{"metadata", {{"name", n}, {"labels", {{"kubernetes.io/hostname", n}}}}},
                   {"status",
                    {{"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "1000"}}},
                     {"capacity", {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "1000"}}}}}};
      GPUPACK_RETURN_IF_ERROR(c->api_->Create(kube::NodesResource(), "", node).status());
      // Status is a subresource: write it as the kubelet does.
      GPUPACK_RETURN_IF_ERROR(c->api_->PatchNodeStatus(n, {{"status", node["status"]}}).status());
    }
  }
  return c;
}

Cluster::~Cluster() {
  agents_.clear();  // SIGKILL
  if (!server_) Cleanup();
  if (server_) server_->Stop();
  std::error_code ec;
  if (Env("GPUPACK_E2E_KEEP").empty()) fs::remove_all(dir_, ec);
}

void Cluster::Cleanup() {
  kube::ListOptions lo;
  lo.label_selector = "gpupack-e2e-run=" + run_label_;
  auto pods = api_->List(kube::PodsResource(), ns_, lo);
  if (!pods.ok()) return;
  for (const Json& p : pods->items)
    (void)api_->Delete(kube::PodsResource(), ns_, kube::StringAt(p, {"metadata", "name"}));
}

Status Cluster::StartAgents() {
  for (const std::string& n : nodes_) {
    GPUPACK_ASSIGN_OR_RETURN(
        Process p, Process::Start({bins_.agent, "--node-name", n, "--backend", "file:" + cluster_file_, "--kubeconfig",
                                   kubeconfig_, "--listen", "127.0.0.1:0", "--poll-interval", "1s",
                                   "--heartbeat-interval", "1s", "--min-write-interval", "1s"},
                                  dir_ + "/agent-" + n + ".log"));
    agents_.emplace(n, std::move(p));
  }
  return AwaitReports(nodes_);
}

Status Cluster::AwaitReports(const std::vector<std::string>& nodes) {
  for (int i = 0; i < 1000; ++i) {
    auto list = api_->List(kube::GpuNodesResource(), "");
    if (list.ok()) {
      std::set<std::string> seen;
      for (const Json& g : list->items) {
        if (g.contains("status") && g["status"].contains("heartbeatTime"))
          seen.insert(kube::StringAt(g, {"metadata", "name"}));
      }
      if (std::all_of(nodes.begin(), nodes.end(), [&](const std::string& n) { return seen.count(n) > 0; })) {
        return Status::Ok();
      }
    }
    for (auto& [name, proc] : agents_) {
      if (!proc.Running())
        return Status::Internal("agent for " + name + " exited; see " + dir_ + "/agent-" + name + ".log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::DeadlineExceeded("agents did not report every GPUNode within 20s (logs in " + dir_ + ")");
}

StatusOr<std::string> Cluster::StartNvmlAgent(const std::string& node, const Json& nvml_state,
                                              const std::vector<std::string>& extra_args) {
  if (bins_.fake_nvml.empty()) return Status::FailedPrecondition("this build has no fake NVML library");
  const std::string root = dir_ + "/node-" + node;
  fs::create_directories(root + "/proc");
  fs::create_directories(root + "/cgroup");
  const std::string state = root + "/fake-nvml-state.json";
  {
    std::ofstream out(state);
    out << nvml_state.dump();
  }
  std::vector<std::string> argv = {bins_.agent,
                                   "--node-name",
                                   node,
                                   "--backend",
                                   "nvml",
                                   "--nvml-library",
                                   bins_.fake_nvml,
                                   "--proc-root",
                                   root + "/proc",
                                   "--cgroup-root",
                                   root + "/cgroup",
                                   "--kubeconfig",
                                   kubeconfig_,
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--poll-interval",
                                   "1s",
                                   "--heartbeat-interval",
                                   "1s",
                                   "--min-write-interval",
                                   "1s"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  GPUPACK_ASSIGN_OR_RETURN(
      Process p, Process::Start(argv, dir_ + "/agent-" + node + ".log", {{"GPUPACK_FAKE_NVML_STATE", state}}));
  GPUPACK_ASSIGN_OR_RETURN(std::string address, p.ReadLine(std::chrono::seconds(20)));
  agents_.insert_or_assign(node, std::move(p));
  GPUPACK_RETURN_IF_ERROR(AwaitReports({node}));
  return "http://" + address;
}

Status Cluster::PlaceProcess(const std::string& node, int64_t pid, const std::string& pod_uid,
                             const std::string& container_id) {
  const std::string dir = dir_ + "/node-" + node + "/proc/" + std::to_string(pid);
  fs::create_directories(dir);
  std::string path = "/system.slice/sshd.service";  // a host process
  if (!pod_uid.empty()) {
    // kubelet's systemd-driver layout (agent/cgroup.h).
    std::string underscored = pod_uid;
    std::replace(underscored.begin(), underscored.end(), '-', '_');
    path = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + underscored + ".slice/cri-containerd-" +
           container_id + ".scope";
  }
  std::ofstream out(dir + "/cgroup");
  out << "0::" << path << "\n";
  out.close();
  return out ? Status::Ok() : Status::Internal("cannot write " + dir + "/cgroup");
}

StatusOr<Json> Cluster::CreateRunningPod(const std::string& name, const std::string& node,
                                         const std::string& container_id,
                                         const std::map<std::string, std::string>& labels) {
  if (!server_) return Status::FailedPrecondition("a running pod without a kubelet needs the test API server");
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns_}, {"labels", Json::object()}}},
              {"spec",
               {{"nodeName", node},
                {"containers", Json::array({{{"name", "main"}, {"image", "registry.k8s.io/pause:3.9"}}})}}}};
  for (const auto& [k, v] : labels) pod["metadata"]["labels"][k] = v;
  GPUPACK_RETURN_IF_ERROR(api_->Create(kube::PodsResource(), ns_, pod).status());
  GPUPACK_RETURN_IF_ERROR(MarkRunning(name, container_id));
  return api_->GetPod(ns_, name);
}

Status Cluster::MarkRunning(const std::string& name, const std::string& container_id) {
  const Json status = {{"status",
                        {{"phase", "Running"},
                         {"containerStatuses", Json::array({{{"name", "main"},
                                                             {"containerID", "containerd://" + container_id},
                                                             {"state", {{"running", Json::object()}}}}})}}}};
  return api_->Patch(kube::PodsResource(), ns_, name, kube::PatchType::kMerge, status, "status").status();
}

void Cluster::KillAgent(const std::string& node) {
  auto it = agents_.find(node);
  if (it != agents_.end()) it->second.Kill(SIGKILL);
}

StatusOr<ExtenderProcess> Cluster::StartExtender(const std::string& extra_config) {
  const int n = ++extenders_started_;
  const std::string config_path = dir_ + "/extender-" + std::to_string(n) + ".yaml";
  {
    std::ofstream out(config_path);
    out << "threads: 4\n" << extra_config << "\n";
  }
  GPUPACK_ASSIGN_OR_RETURN(Process p, Process::Start({bins_.extender, "--kubeconfig", kubeconfig_, "--listen",
                                                      "127.0.0.1:0", "--config", config_path},
                                                     dir_ + "/extender-" + std::to_string(n) + ".log"));
  GPUPACK_ASSIGN_OR_RETURN(std::string address, p.ReadLine(std::chrono::seconds(20)));
  ExtenderProcess e{std::move(p), "http://" + address};
  auto [host, port] = HostPort(e.url);
  httplib::Client c(host, port);
  for (int i = 0; i < 1000; ++i) {
    auto res = c.Get("/readyz");
    if (res && res->status == 200) return e;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::DeadlineExceeded("extender " + e.url + " not ready within 20s (log " + dir_ + "/extender-" +
                                  std::to_string(n) + ".log)");
}

StatusOr<Json> Cluster::CreatePod(const std::string& name, const std::string& gpu_memory, int gpus,
                                  const std::map<std::string, std::string>& annotations,
                                  const std::function<StatusOr<Json>(const Json&)>& admit) {
  Json limits = {{"cpu", "100m"}, {"memory", "128Mi"}};
  if (!gpu_memory.empty()) limits[std::string(api::kResourceGpuMemory)] = gpu_memory;
  if (gpus > 1 || (gpu_memory.empty() && gpus > 0)) limits[std::string(api::kResourceGpu)] = std::to_string(gpus);
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns_}, {"labels", {{"gpupack-e2e-run", run_label_}}}}},
              {"spec",
               {{"schedulerName", kSchedulerName},
                {"terminationGracePeriodSeconds", 0},
                {"containers", Json::array({{{"name", "main"},
                                             {"image", "registry.k8s.io/pause:3.9"},
                                             {"resources", {{"limits", limits}, {"requests", limits}}}}})}}}};
  if (!annotations.empty()) pod["metadata"]["annotations"] = annotations;
  if (admit) {
    GPUPACK_ASSIGN_OR_RETURN(pod, admit(pod));
  }
  return api_->Create(kube::PodsResource(), ns_, pod);
}

// ------------------------------------------------------------------------- ledger

StatusOr<LedgerReport> CheckLedger(kube::Client& api, const std::string& ns, const std::string& run_label) {
  struct Dev {
    std::string node;
    int64_t capacity = 0;
    int64_t used = 0;
    bool exclusive = false;
    std::set<std::string> pods;
    int compute_pct = 0;
  };
  std::map<std::string, Dev> devices;
  GPUPACK_ASSIGN_OR_RETURN(kube::ListResult gpunodes, api.List(kube::GpuNodesResource(), ""));
  for (const Json& g : gpunodes.items) {
    GPUPACK_ASSIGN_OR_RETURN(api::GpuNodeStatus s, api::GpuNodeStatusFromJson(g.value("status", Json::object())));
    const std::string node = kube::StringAt(g, {"metadata", "name"});
    for (const api::GpuNodeDevice& d : s.devices) {
      if (!d.mig_enabled) devices[d.uuid] = Dev{node, d.memory_mib, 0, false, {}};
      for (const api::GpuNodeMigInstance& m : d.mig_instances) devices[m.uuid] = Dev{node, m.memory_mib, 0, false, {}};
    }
  }
  LedgerReport report;
  kube::ListOptions lo;
  lo.label_selector = "gpupack-e2e-run=" + run_label;
  GPUPACK_ASSIGN_OR_RETURN(kube::ListResult pods, api.List(kube::PodsResource(), ns, lo));
  for (const Json& pod : pods.items) {
    ++report.pods_total;
    const std::string node = kube::StringAt(pod, {"spec", "nodeName"});
    const std::string phase = kube::StringAt(pod, {"status", "phase"});
    if (node.empty()) continue;
    ++report.pods_bound;
    ++report.bound_per_node[node];
    if (phase == "Succeeded" || phase == "Failed") continue;
    const std::string text =
        kube::StringAt(pod, {"metadata", "annotations", std::string(api::kAnnotationAllocation).c_str()});
    if (text.empty())
      return Status::Internal("pod " + kube::ObjectKey(pod) + " is bound to " + node +
                              " without gpupack.io/allocation");
    StatusOr<api::Allocation> alloc = api::DecodeAllocation(text);
    if (!alloc.ok()) return alloc.status().WithContext("pod " + kube::ObjectKey(pod));
    if (alloc->node != node)
      return Status::Internal("pod " + kube::ObjectKey(pod) + ": allocation names node " + alloc->node +
                              " but it is bound to " + node);
    ++report.pods_with_allocation;
    for (const auto& [uuid, share] :
         translate::AllocationShares(*alloc, kube::StringAt(pod, {"metadata", "uid"}), kube::ObjectKey(pod))) {
      auto it = devices.find(uuid);
      if (it == devices.end()) return Status::Internal("pod " + kube::ObjectKey(pod) + " holds unknown device " + uuid);
      if (it->second.node != node)
        return Status::Internal("pod " + kube::ObjectKey(pod) + " on " + node + " holds device " + uuid + " of node " +
                                it->second.node);
      it->second.used += share.mem_mib;
      it->second.compute_pct += share.compute_pct;
      it->second.exclusive = it->second.exclusive || share.exclusive;
      it->second.pods.insert(kube::ObjectKey(pod));
    }
  }
  for (const auto& [uuid, d] : devices) {
    ++report.devices;
    report.capacity_mib += d.capacity;
    report.allocated_mib += d.used;
    std::string holders;
    for (const std::string& p : d.pods) holders += " " + p;
    if (d.used > d.capacity) {
      return Status::Internal("device " + uuid + " on " + d.node + " overbooked: " + std::to_string(d.used) +
                              " MiB of " + std::to_string(d.capacity) + " by" + holders);
    }
    if (d.compute_pct > model::kDeviceComputePct) {
      return Status::Internal("device " + uuid + " on " + d.node + " overbooked: " + std::to_string(d.compute_pct) +
                              " % compute by" + holders);
    }
    if (d.exclusive && d.pods.size() > 1) return Status::Internal("exclusive device " + uuid + " shared by" + holders);
  }
  return report;
}

// ------------------------------------------------------------------------- scheduler

FakeKubeScheduler::FakeKubeScheduler(Cluster& cluster, SchedulerOptions options)
    : cluster_(cluster), options_(options), rng_(options.seed) {}

FakeKubeScheduler::~FakeKubeScheduler() = default;

void FakeKubeScheduler::SetExtender(const std::string& url) {
  std::lock_guard<std::mutex> l(mu_);
  extender_url_ = url;
}

std::string FakeKubeScheduler::ExtenderUrl() {
  std::lock_guard<std::mutex> l(mu_);
  return extender_url_;
}

Status FakeKubeScheduler::RefreshNodes() {
  GPUPACK_ASSIGN_OR_RETURN(kube::ListResult nodes, cluster_.api().List(kube::NodesResource(), ""));
  GPUPACK_ASSIGN_OR_RETURN(kube::ListResult pods, cluster_.api().List(kube::PodsResource(), ""));
  std::lock_guard<std::mutex> l(mu_);
  nodes_.clear();
  for (const Json& n : nodes.items) {
    const std::string name = kube::StringAt(n, {"metadata", "name"});
    if (std::find(cluster_.node_names().begin(), cluster_.node_names().end(), name) == cluster_.node_names().end())
      continue;
    NodeInfo info;
    info.cpu_milli = ParseMilliValue(kube::StringAt(n, {"status", "allocatable", "cpu"}), "cpu").ok()
                         ? *ParseMilliValue(kube::StringAt(n, {"status", "allocatable", "cpu"}), "cpu")
                         : 0;
    info.memory = ParseBytes(kube::StringAt(n, {"status", "allocatable", "memory"}), "memory").ok()
                      ? *ParseBytes(kube::StringAt(n, {"status", "allocatable", "memory"}), "memory")
                      : 0;
    nodes_[name] = info;
  }
  for (const Json& p : pods.items) {
    auto it = nodes_.find(kube::StringAt(p, {"spec", "nodeName"}));
    const std::string phase = kube::StringAt(p, {"status", "phase"});
    if (it == nodes_.end() || phase == "Succeeded" || phase == "Failed") continue;
    it->second.used_cpu_milli += PodCpuMilli(p);
    it->second.used_memory += PodMemory(p);
  }
  return Status::Ok();
}

ScheduleResult FakeKubeScheduler::Schedule(const std::vector<Json>& pods, const std::function<void(int)>& after_cycle) {
  ScheduleResult result;
  struct Item {
    Json pod;
    int no_fit = 0;
  };
  std::deque<Item> queue;
  for (const Json& p : pods) queue.push_back({p, 0});
  const auto deadline = std::chrono::steady_clock::now() + options_.deadline;
  if (Status s = RefreshNodes(); !s.ok()) {
    GPUPACK_LOG(kError, kComponent) << "cannot list nodes: " << s;
    for (const Item& i : queue) result.unfinished.insert(kube::ObjectKey(i.pod));
    return result;
  }

  // Asynchronous binds: a small worker pool; results come back through `done`.
  struct BindOutcome {
    Item item;
    std::string node;
    Status status;
  };
  std::mutex done_mu;
  std::deque<BindOutcome> done;
  std::vector<std::future<void>> in_flight;
  auto drain = [&](bool all) {
    std::vector<std::future<void>> still;
    for (auto& f : in_flight) {
      if (all || f.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        f.get();
      else
        still.push_back(std::move(f));
    }
    in_flight = std::move(still);
    std::deque<BindOutcome> outcomes;
    {
      std::lock_guard<std::mutex> l(done_mu);
      outcomes.swap(done);
    }
    for (BindOutcome& o : outcomes) {
      const int64_t cpu = PodCpuMilli(o.item.pod), mem = PodMemory(o.item.pod);
      if (o.status.ok()) {
        result.bound[kube::ObjectKey(o.item.pod)] = o.node;
        continue;
      }
      ++result.bind_errors;
      // Like kube-scheduler's informer: a pod deleted meanwhile is dropped; one that is in fact
      // bound (a lost response) is done.
      StatusOr<Json> now = cluster_.api().GetPod(kube::StringAt(o.item.pod, {"metadata", "namespace"}),
                                                 kube::StringAt(o.item.pod, {"metadata", "name"}));
      const bool gone =
          (!now.ok() && now.status().code() == StatusCode::kNotFound) ||
          (now.ok() && kube::StringAt(*now, {"metadata", "uid"}) != kube::StringAt(o.item.pod, {"metadata", "uid"}));
      const std::string bound_to = now.ok() && !gone ? kube::StringAt(*now, {"spec", "nodeName"}) : "";
      if (gone) result.deleted.insert(kube::ObjectKey(o.item.pod));
      if (!bound_to.empty()) result.bound[kube::ObjectKey(o.item.pod)] = bound_to;
      if (bound_to != o.node) {
        std::lock_guard<std::mutex> l(mu_);  // forget the assumption
        nodes_[o.node].used_cpu_milli -= cpu;
        nodes_[o.node].used_memory -= mem;
      }
      if (gone || !bound_to.empty()) continue;
      GPUPACK_LOG(kInfo, kComponent) << "bind of " << kube::ObjectKey(o.item.pod) << " to " << o.node
                                     << " failed: " << o.status;
      queue.push_back(std::move(o.item));
    }
  };

  int cycle = 0;
  while (!queue.empty() || !in_flight.empty()) {
    drain(false);
    if (queue.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      drain(true);
      for (const Item& i : queue) result.unfinished.insert(kube::ObjectKey(i.pod));
      break;
    }
    Item item = std::move(queue.front());
    queue.pop_front();
    const Json& pod = item.pod;
    const int64_t cpu = PodCpuMilli(pod), mem = PodMemory(pod);
    ++cycle;

    // Own filter: NodeResourcesFit on cpu and memory (gpupack resources are ignoredByScheduler).
    std::vector<std::string> feasible;
    std::map<std::string, int64_t> own_score;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (const auto& [name, n] : nodes_) {
        if (n.used_cpu_milli + cpu > n.cpu_milli || n.used_memory + mem > n.memory) continue;
        feasible.push_back(name);
        own_score[name] =
            n.cpu_milli == 0 ? 0 : (n.cpu_milli - n.used_cpu_milli - cpu) * 100 / n.cpu_milli;  // LeastAllocated
      }
    }
    const std::string url = ExtenderUrl();
    auto requeue_error = [&](const Status& s) {  // the cycle ends: the caller continues
      ++result.extender_errors;
      GPUPACK_LOG(kInfo, kComponent) << "extender error for " << kube::ObjectKey(pod) << ": " << s;
      queue.push_back(std::move(item));
      std::this_thread::sleep_for(options_.retry_pause);
      if (after_cycle) after_cycle(cycle);
    };
    StatusOr<Json> filtered =
        PostToExtender(url, "/filter", {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", feasible}});
    if (!filtered.ok()) {
      requeue_error(filtered.status());
      continue;
    }
    const std::string ferr = filtered->value("Error", "");
    if (!ferr.empty()) {
      requeue_error(Status::Unavailable("filter: " + ferr));
      continue;
    }
    std::vector<std::string> passing;
    if ((*filtered)["NodeNames"].is_array()) passing = (*filtered)["NodeNames"].get<std::vector<std::string>>();
    if (passing.empty()) {
      if (++item.no_fit >= options_.max_no_fit_attempts) {
        result.unschedulable.insert(kube::ObjectKey(pod));
      } else {
        queue.push_back(std::move(item));  // capacity may free up (deletions, failed binds)
        std::this_thread::sleep_for(options_.no_fit_pause);
      }
      if (after_cycle) after_cycle(cycle);
      continue;
    }
    // With one feasible node kube-scheduler skips scoring, the extenders' prioritize included
    // (schedule_one.go: "When only one node after predicate, just use it"). The extender's filter
    // hold relies on that: a prioritize releases the pod's hold.
    std::vector<std::string> winners = passing;
    if (passing.size() > 1) {
      StatusOr<Json> prioritized =
          PostToExtender(url, "/prioritize", {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", passing}});
      if (!prioritized.ok()) {
        requeue_error(prioritized.status());
        continue;
      }
      winners = HighestScored(passing, own_score, *prioritized, options_.extender_weight);
    }
    const std::string node = winners[std::uniform_int_distribution<size_t>(0, winners.size() - 1)(rng_)];
    {
      std::lock_guard<std::mutex> l(mu_);  // assume
      nodes_[node].used_cpu_milli += cpu;
      nodes_[node].used_memory += mem;
    }
    while (static_cast<int>(in_flight.size()) >= options_.bind_workers) {
      drain(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    in_flight.push_back(std::async(std::launch::async, [url, node, it = std::move(item), &done, &done_mu]() mutable {
      const Json& p = it.pod;
      Json args = {{"PodName", kube::StringAt(p, {"metadata", "name"})},
                   {"PodNamespace", kube::StringAt(p, {"metadata", "namespace"})},
                   {"PodUID", kube::StringAt(p, {"metadata", "uid"})},
                   {"Node", node}};
      StatusOr<Json> r = PostToExtender(url, "/bind", args);
      Status s = r.ok() ? (r->value("Error", "").empty() ? Status::Ok() : Status::Unavailable(r->value("Error", "")))
                        : r.status();
      std::lock_guard<std::mutex> l(done_mu);
      done.push_back({std::move(it), node, s});
    }));
    if (after_cycle) after_cycle(cycle);
  }
  drain(true);
  return result;
}

}  // namespace gpupack::e2e
