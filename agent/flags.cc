#include "agent/flags.h"

#include <algorithm>

#include "common/duration.h"

namespace gpupack::agent {

const char* const kAgentUsage = R"(usage: gpupack-agent --node-name NAME [--backend nvml|file:PATH] [flags]

  --node-name NAME            this node (default: $NODE_NAME)
  --backend nvml|file:PATH    GPUs from the driver (default) or from one node entry of a cluster file
  --kubeconfig FILE           API server from a kubeconfig (default: in-cluster service account)
  --once                      run one pass and exit (status 1 when discovery fails)
  --print                     with --once: print the GPUNode object as JSON on stdout; no API server
  --listen HOST:PORT          serve /metrics and /healthz (default :9402; port 0 picks a free
                              port); the bound address is printed as the first stdout line
  --poll-interval DUR         discovery / enforcement / audit period (default 10s)
  --heartbeat-interval DUR    GPUNode status written at least this often (default 60s)
  --min-write-interval DUR    and, for changes, at most this often (default 10s)
  --change-threshold-mib N    used-memory movement that counts as a change (default 256)
  --max-pods-per-device N     gpupack.io/gpu capacity = devices x N (default 16)
  --nvml-library PATH         NVML library to dlopen (default libnvidia-ml.so.1)
  --proc-root DIR             where /proc is (default /proc; the agent needs hostPID)
  --cgroup-root DIR           cgroup v2 mount (default /sys/fs/cgroup)
  --mps-pipe-directory DIR    where the node's MPS control daemon keeps its pipes (its
                              CUDA_MPS_PIPE_DIRECTORY, as the agent sees it); GPUs are reported
                              compute enforcement mps-client while DIR/control exists and the GPU
                              is EXCLUSIVE_PROCESS (default: none, no MPS looked for)
  --mps-server NAME           the MPS v3 server (driver R615+) on which gpupack-nri gives each
                              container a namespace capped at its share: GPUs are reported
                              mps-namespace while it answers `namespace list` (needs
                              --mps-pipe-directory; default: none)
  --mps-control-binary PATH   the MPS control CLI (default nvidia-cuda-mps-control, on PATH)
  --evict-foreign-pods        evict (Eviction API, PodDisruptionBudgets respected) a pod whose process
                              uses a gpupack device without a gpupack allocation of it (default: off,
                              such processes are only reported)
  --foreign-eviction-interval DUR
                              a foreign process must hold this long before its pod is evicted, and
                              a pod is asked at most once per interval (default 1m)
  --doctor                    check what this node can enforce (NVML, cgroup dmem, MPS, CDI hook,
                              NRI, MIG), print one line per check with its fix, exit 0; no API server
  --json                      with --doctor: the report as JSON
  --cdi-spec-dirs DIR,DIR     where --doctor looks for the NVIDIA CDI spec (default /etc/cdi,/var/run/cdi)
  --nri-socket PATH           the runtime's NRI socket --doctor looks for (default /var/run/nri/nri.sock)
  --cluster                   with --doctor: read every agent node's verdicts from its GPUNode instead
                              (API server as --kubeconfig says); exit 1 when a node has not reported
  --namespace NS              with --cluster: the agent pods' namespace
  --agent-selector LABELS     with --cluster: the agent pods' labels (default app.kubernetes.io/component=agent)
  --require-memory-enforced   with --cluster: a node whose MemoryEnforced is False fails too
Durations as Go writes them (30s, 5m, 1h30m), at least 1s.
)";

namespace {

// The agent's periods are whole seconds: a Go duration of at least 1s, rounded down.
bool ParseSeconds(const std::string& text, std::chrono::seconds* out) {
  StatusOr<std::chrono::nanoseconds> duration = ParseDuration(text);
  if (!duration.ok() || *duration < std::chrono::seconds(1)) return false;
  *out = std::chrono::duration_cast<std::chrono::seconds>(*duration);
  return true;
}

bool ParseInt(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoll(text);
  return *out >= lo && *out <= hi;
}

// "a,b,,c" → {a, b, c}.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

StatusOr<AgentFlags> ParseAgentFlags(const std::vector<std::string>& args, const std::string& node_name_env) {
  AgentFlags f;
  f.node_name = node_name_env;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      f.help = true;
      return f;
    }
    if (arg == "--once") {
      f.once = true;
      continue;
    }
    if (arg == "--print") {
      f.print = true;
      continue;
    }
    if (arg == "--doctor") {
      f.doctor = true;
      continue;
    }
    if (arg == "--json") {
      f.json = true;
      continue;
    }
    if (arg == "--cluster") {
      f.doctor_cluster = true;
      continue;
    }
    if (arg == "--require-memory-enforced") {
      f.require_memory_enforced = true;
      continue;
    }
    if (arg == "--evict-foreign-pods") {
      f.evict_foreign_pods = true;
      continue;
    }
    if (i + 1 >= args.size()) return Status::InvalidArgument(arg + " needs a value\n" + kAgentUsage);
    const std::string& value = args[++i];
    bool ok = true;
    if (arg == "--node-name")
      f.node_name = value;
    else if (arg == "--backend")
      f.backend = value;
    else if (arg == "--kubeconfig")
      f.kubeconfig = value;
    else if (arg == "--listen")
      f.listen = value;
    else if (arg == "--nvml-library")
      f.nvml_library = value;
    else if (arg == "--proc-root")
      f.proc_root = value;
    else if (arg == "--cgroup-root")
      f.cgroup_root = value;
    else if (arg == "--mps-pipe-directory")
      f.mps_pipe_directory = value;
    else if (arg == "--mps-server")
      ok = IsMpsName(f.mps_server = value);
    else if (arg == "--mps-control-binary")
      ok = !(f.mps_control_binary = value).empty();
    else if (arg == "--cdi-spec-dirs")
      ok = !(f.cdi_spec_dirs = SplitList(value)).empty();
    else if (arg == "--nri-socket")
      f.nri_socket = value;
    else if (arg == "--namespace")
      f.agent_namespace = value;
    else if (arg == "--agent-selector")
      f.agent_selector = value;
    else if (arg == "--poll-interval")
      ok = ParseSeconds(value, &f.poll);
    else if (arg == "--heartbeat-interval")
      ok = ParseSeconds(value, &f.heartbeat);
    else if (arg == "--min-write-interval")
      ok = ParseSeconds(value, &f.min_write);
    else if (arg == "--foreign-eviction-interval")
      ok = ParseSeconds(value, &f.foreign_eviction_interval);
    else if (arg == "--change-threshold-mib")
      ok = ParseInt(value, 0, 1 << 30, &f.change_threshold_mib);
    else if (arg == "--max-pods-per-device")
      ok = ParseInt(value, 1, 1024, &f.max_pods_per_device);
    else
      return Status::InvalidArgument("unknown flag " + arg + "\n" + kAgentUsage);
    if (!ok) return Status::InvalidArgument(arg + " " + value + ": invalid value");
  }
  if (f.node_name.empty() && !f.doctor)
    return Status::InvalidArgument("--node-name (or $NODE_NAME) is required\n" + std::string(kAgentUsage));
  if (f.print && !f.once) return Status::InvalidArgument("--print needs --once");
  if (f.json && !f.doctor) return Status::InvalidArgument("--json needs --doctor");
  if (f.doctor && f.once) return Status::InvalidArgument("--doctor and --once are separate runs");
  if ((f.doctor_cluster || f.require_memory_enforced) && !f.doctor) {
    return Status::InvalidArgument("--cluster and --require-memory-enforced need --doctor");
  }
  if (f.require_memory_enforced && !f.doctor_cluster) {
    return Status::InvalidArgument("--require-memory-enforced needs --cluster");
  }
  if (f.doctor_cluster && f.agent_namespace.empty()) return Status::InvalidArgument("--cluster needs --namespace");
  if (!f.mps_server.empty() && f.mps_pipe_directory.empty()) {
    return Status::InvalidArgument("--mps-server needs --mps-pipe-directory, the MPS daemon's pipe directory");
  }
  if (f.backend != "nvml" && !(f.backend.rfind("file:", 0) == 0 && f.backend.size() > 5)) {
    return Status::InvalidArgument("--backend " + f.backend + ": expected nvml or file:PATH");
  }
  return f;
}

std::unique_ptr<GpuBackend> MakeGpuBackend(const AgentFlags& flags, AgentMetrics* metrics) {
  if (flags.backend != "nvml")
    return std::make_unique<FileBackend>(flags.backend.substr(5), flags.node_name);  // file:PATH
  NvmlBackendOptions o;
  o.library = flags.nvml_library;
  o.proc_root = flags.proc_root;
  o.cgroup_root = flags.cgroup_root;
  o.mps.pipe_directory = flags.mps_pipe_directory;
  o.mps.server = flags.mps_server;
  o.mps.binary = flags.mps_control_binary;
  o.on_nvml_error = [metrics](std::string_view call) { metrics->CountNvmlError(call); };
  return std::make_unique<NvmlBackend>(o);
}

AgentOptions AgentOptionsOf(const AgentFlags& flags) {
  AgentOptions options;
  options.node_name = flags.node_name;
  options.cgroup_root = flags.cgroup_root;
  options.max_pods_per_device = static_cast<int>(flags.max_pods_per_device);
  options.eviction.enabled = flags.evict_foreign_pods;
  options.eviction.interval = flags.foreign_eviction_interval;
  options.doctor = DoctorRootsOf(flags);
  return options;
}

DoctorRoots DoctorRootsOf(const AgentFlags& flags) {
  DoctorRoots roots;
  roots.cgroup_root = flags.cgroup_root;
  roots.mps_pipe_dir = flags.mps_pipe_directory;
  roots.cdi_dirs = flags.cdi_spec_dirs;
  roots.nri_socket = flags.nri_socket;
  return roots;
}

DoctorEvidence DoctorEvidenceOf(const AgentFlags& flags, GpuBackend& backend) {
  const bool nvml = flags.backend == "nvml";
  NvmlEvidence evidence = NvmlEvidenceOf(backend.Discover(), nvml ? flags.nvml_library : flags.backend,
                                         nvml ? ProbeMemoryLimitCalls(flags.nvml_library) : std::nullopt);
  return ProbeNode(DoctorRootsOf(flags), std::move(evidence));
}

ReporterOptions ReporterOptionsOf(const AgentFlags& flags) {
  ReporterOptions options;
  options.node_name = flags.node_name;
  options.heartbeat_interval = flags.heartbeat;
  options.min_write_interval = flags.min_write;
  options.change_threshold_mib = flags.change_threshold_mib;
  options.max_pods_per_device = static_cast<int>(flags.max_pods_per_device);
  return options;
}

}  // namespace gpupack::agent
