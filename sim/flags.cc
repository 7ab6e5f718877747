#include "sim/flags.h"

#include <algorithm>
#include <cstdlib>
#include <span>

#include "common/quantity.h"
#include "sim/policy.h"

namespace gpupack::sim {

std::string SimUsage() {
  const std::string head = "  --policy A,B,...     policies to compare (default gpupack):";
  const std::string indent = "\n                      ";
  std::string policies;
  size_t line = head.size();
  for (const std::string& name : PolicyNames()) {
    if (!policies.empty()) {
      policies += ",";
      ++line;
      if (line + name.size() + 1 > 96) {
        policies += indent;
        line = indent.size() - 1;
      }
    }
    policies += " " + name;
    line += name.size() + 1;
  }
  return R"(usage: gpupack-sim --cluster FILE --workload FILE [options]

  --cluster FILE       cluster file (YAML, docs/cluster-file.md) or Alibaba node CSV
                       (openb_node_list_gpu_node.csv; data/traces/alibaba-gpu-v2023 ships one)
  --workload FILE      workload file (YAML, docs/cluster-file.md) or Alibaba pod CSV (openb_pod_list_*.csv)
)" + head +
         policies + R"(
  --seeds LIST         e.g. 42-51 (default) or 42,43
  --tune R             inflate the workload to R x cluster GPU capacity (default 1.3; 0 = off)
  --fill-pods N        the early window: per seed, replay on a random sample of the nodes that
                       the seed's first N pods fill (a fresh cluster; at arrived 100 % about N
                       pods have come, all a learner has seen)
  --burst              with --fill-pods: those N pods all wait before the first is placed
                       (created before gpupack was ready, or queued); they come in the same
                       order, and the learner also counts the ones still waiting at its early
                       refreshes, as the extender does
  --compute-rho R      the two-dimensional family: gpu_milli as the compute share, memory drawn
                       with correlation R (-1..1) to it (docs/simulator.md, "Compute"); the
                       table adds unallocated compute %
  --what-if beta:A,B   the right-sizing what-if: each pod's peak use is a fraction ~ Beta(A, B)
                       of its request (--usage-seed N, default 1); replays every seed's arrivals
                       as requested and right-sized, and prints pods placed and memory freed
  --process-overhead auto|Q  what the gpupack-overhead policy charges each process on a device:
                       auto (default) each GPU family's default, or one quantity in the
                       cluster's MiB (the Alibaba trace's GPUs are 1000 "MiB": 27Mi is a 16 GiB
                       card's 448 MiB); compare it with gpupack in one table
  --timeline           the replay with departures (Alibaba pod CSV): pods arrive at creation_time,
                       leave at deletion_time, wait in a queue while they fit nowhere; gpupack
                       alone, in time order (the flags above and below that shape the table
                       are refused with it); prints a table with and without defragmentation
  --defrag off|on|both the timeline's runs (default both)
  --movable be|all|none  the pods defragmentation may move: the trace's best-effort (qos BE,
                       default), every pod, or none
  --max-moves-per-hour N  the cluster's move budget over any hour of replay time (default 60)
  --move-cooldown S    seconds before a moved pod may move again (default 600)
  --arrival-speedup X  divide the arrival times by X (> 0), lifetimes kept: X times the
                       trace's load (default 1)
  --cluster-share F    replay on this share of the nodes (0 < F <= 1, default 1): the first in
                       the extender's fixed pseudo-random node order
  --keep-order         replay pods in file order (default: sort by name, shuffle per seed)
  --extender URL       replay through a running gpupack-extender (policy name: extender), as
                       kube-scheduler would (filter, prioritize, bind over HTTP); with --policy,
                       those policies run in process on the same seed, in the same table
  --extender-weight N  the extender's weight in kube-scheduler's profile (default 1)
  --json               print one JSON object (several policies: {"runs":[...]})
  --report FILE        write a self-contained .html or .svg chart
  --write-cluster FILE write the cluster as a cluster file (for a standalone extender) and exit

The table: unallocated GPU % (the share of GPU capacity left unallocated; lower is better) at
each arrived-workload level, median over seeds; "@100 mean±sd" the same at 100 % over seeds;
"failed" the pods that fit on no node, mean per seed (a pod fails once and is not retried);
"s/seed" wall-clock seconds per seed. --json gives the same numbers, with "failedPods" per seed.
)";
}

namespace {

// A whole number in [low, high] for `flag`, or an error naming the flag and the value.
StatusOr<int64_t> WholeNumber(const std::string& flag, const std::string& v, int64_t low, int64_t high,
                              const std::string& what) {
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end == v.c_str() || *end != '\0' || n < low || n > high) {
    return Status::InvalidArgument(flag + ": \"" + v + "\" is not " + what + " in " + std::to_string(low) + ".." +
                                   std::to_string(high));
  }
  return static_cast<int64_t>(n);
}

// The timeline's own flags (each takes a value), and the replay's flags that do not apply to it.
constexpr const char* kTimelineOnly[] = {"--defrag",        "--movable",         "--max-moves-per-hour",
                                         "--move-cooldown", "--arrival-speedup", "--cluster-share"};
constexpr const char* kReplayOnly[] = {"--policy",     "--seeds",       "--tune",       "--fill-pods",       "--burst",
                                       "--keep-order", "--compute-rho", "--extender",   "--extender-weight", "--json",
                                       "--report",     "--what-if",     "--usage-seed", "--process-overhead"};

bool IsTimelineFlag(const std::string& arg) {
  return std::find(std::begin(kTimelineOnly), std::end(kTimelineOnly), arg) != std::end(kTimelineOnly);
}

// REQUIRES: IsTimelineFlag(arg).
Status ParseTimelineFlag(const std::string& arg, const std::string& v, SimFlags& f) {
  TimelineOptions& t = f.timeline_options;
  if (arg == "--defrag") {
    if (v == "off" || v == "on") {
      f.defrag_runs = {v == "on"};
    } else if (v == "both") {
      f.defrag_runs = {false, true};
    } else {
      return Status::InvalidArgument("--defrag: \"" + v + "\" is not off, on or both");
    }
  } else if (arg == "--movable") {
    GPUPACK_ASSIGN_OR_RETURN(t.movable, ParseMovability(v));
  } else if (arg == "--max-moves-per-hour") {
    GPUPACK_ASSIGN_OR_RETURN(int64_t n, WholeNumber(arg, v, 0, 1000000, "a number of moves"));
    t.max_moves_per_hour = static_cast<int>(n);
  } else if (arg == "--move-cooldown") {
    GPUPACK_ASSIGN_OR_RETURN(t.move_cooldown_s, WholeNumber(arg, v, 0, 100000000, "a number of seconds"));
  } else if (arg == "--cluster-share") {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || !(x > 0) || x > 1) {
      return Status::InvalidArgument("--cluster-share: \"" + v + "\" is not a share in (0, 1]");
    }
    t.cluster_share = x;
  } else {  // --arrival-speedup
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || !(x > 0) || x > 1e6) {
      return Status::InvalidArgument("--arrival-speedup: \"" + v + "\" is not a positive number up to 1000000");
    }
    t.arrival_speedup = x;
  }
  return Status::Ok();
}

// The flags that do not apply to --timeline, and the timeline's own without it.
Status CheckTimelineFlags(const SimFlags& f, const std::vector<std::string>& given) {
  for (const std::string& flag : given) {
    for (const char* other :
         f.timeline ? std::span<const char* const>(kReplayOnly) : std::span<const char* const>(kTimelineOnly)) {
      if (flag != other) continue;
      return Status::InvalidArgument(f.timeline ? flag + " does not apply to --timeline (gpupack alone, in time order)"
                                                : flag + " needs --timeline");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<SimFlags> ParseSimFlags(const std::vector<std::string>& args) {
  SimFlags f;
  bool seeds_given = false;
  std::optional<uint64_t> usage_seed;
  std::vector<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    given.push_back(arg);
    auto value = [&](std::string& out) -> bool {
      if (i + 1 >= args.size()) return false;
      out = args[++i];
      return true;
    };
    std::string v;
    if (arg == "--help" || arg == "-h") {
      f.help = true;
      return f;
    } else if (arg == "--json") {
      f.json = true;
    } else if (arg == "--timeline") {
      f.timeline = true;
    } else if (IsTimelineFlag(arg)) {
      if (!value(v)) return Status::InvalidArgument(arg + " needs a value");
      GPUPACK_RETURN_IF_ERROR(ParseTimelineFlag(arg, v, f));
    } else if (arg == "--keep-order") {
      f.options.shuffle = false;
    } else if (arg == "--burst") {
      f.options.burst = true;
    } else if (arg == "--cluster") {
      if (!value(f.cluster_path)) return Status::InvalidArgument("--cluster needs a file");
    } else if (arg == "--workload") {
      if (!value(f.workload_path)) return Status::InvalidArgument("--workload needs a file");
    } else if (arg == "--policy") {
      if (!value(f.policies)) return Status::InvalidArgument("--policy needs a name");
      f.policies_given = true;
    } else if (arg == "--seeds") {
      if (!value(f.seeds_text)) return Status::InvalidArgument("--seeds needs a list");
      seeds_given = true;
    } else if (arg == "--report") {
      if (!value(f.report_path)) return Status::InvalidArgument("--report needs a file");
    } else if (arg == "--extender") {
      if (!value(f.extender_url)) return Status::InvalidArgument("--extender needs a URL");
    } else if (arg == "--write-cluster") {
      if (!value(f.write_cluster)) return Status::InvalidArgument("--write-cluster needs a file");
    } else if (arg == "--process-overhead") {
      if (!value(v)) return Status::InvalidArgument("--process-overhead needs auto or a quantity");
      if (v == "auto") {
        f.options.overhead = OverheadVariant{};
      } else {
        StatusOr<int64_t> bytes = ParseBytes(v, "--process-overhead");
        if (!bytes.ok() || *bytes < (int64_t{1} << 20)) {
          return Status::InvalidArgument("--process-overhead: \"" + v +
                                         "\" is neither auto nor a quantity of 1Mi or more");
        }
        f.options.overhead = OverheadVariant{placement::ProcessOverheadMode::kFixed, *bytes >> 20};
      }
    } else if (arg == "--fill-pods") {
      if (!value(v)) return Status::InvalidArgument("--fill-pods needs a number of pods");
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 1 || n > 1000000) {
        return Status::InvalidArgument("--fill-pods: \"" + v + "\" is not a number of pods in 1..1000000");
      }
      f.options.fill_pods = static_cast<int>(n);
    } else if (arg == "--compute-rho") {
      if (!value(v)) return Status::InvalidArgument("--compute-rho needs a correlation");
      char* end = nullptr;
      const double rho = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(rho >= -1) || rho > 1) {
        return Status::InvalidArgument("--compute-rho: \"" + v + "\" is not a correlation in -1..1");
      }
      f.compute_rho = rho;
    } else if (arg == "--what-if") {
      if (!value(v)) return Status::InvalidArgument("--what-if needs a usage model (e.g. beta:2,2)");
      GPUPACK_ASSIGN_OR_RETURN(f.what_if, ParseUsageModel(v));
    } else if (arg == "--usage-seed") {
      if (!value(v)) return Status::InvalidArgument("--usage-seed needs a seed");
      GPUPACK_ASSIGN_OR_RETURN(std::vector<uint64_t> s, ParseSeeds(v));
      if (s.size() != 1) return Status::InvalidArgument("--usage-seed: one seed, got \"" + v + "\"");
      usage_seed = s[0];
    } else if (arg == "--tune" || arg == "--extender-weight") {
      if (!value(v)) return Status::InvalidArgument(arg + " needs a number");
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(d >= 0) || d > 100) {
        return Status::InvalidArgument(arg + ": \"" + v + "\" is not a number in 0..100");
      }
      if (arg == "--tune") {
        f.options.tune = d;
      } else {
        f.extender_weight = static_cast<int>(d);
        if (f.extender_weight < 1) return Status::InvalidArgument("--extender-weight must be at least 1");
      }
    } else {
      return Status::InvalidArgument("unknown argument \"" + arg + "\"\n" + SimUsage());
    }
  }
  if (f.cluster_path.empty()) return Status::InvalidArgument("--cluster is required\n" + SimUsage());
  GPUPACK_RETURN_IF_ERROR(CheckTimelineFlags(f, given));
  if (!f.extender_url.empty() && !seeds_given) f.seeds_text = "42";
  if (f.options.burst && f.options.fill_pods == 0) {
    return Status::InvalidArgument("--burst needs --fill-pods: the burst is the window's first N pods");
  }
  if (f.options.burst && !f.extender_url.empty()) {
    return Status::InvalidArgument(
        "--burst replays in process, not --extender: the extender learns waiting pods from the API server");
  }
  if (usage_seed && !f.what_if) return Status::InvalidArgument("--usage-seed needs --what-if");
  if (usage_seed) f.what_if->seed = *usage_seed;
  if (f.what_if && !f.extender_url.empty())
    return Status::InvalidArgument("--what-if replays in process, not --extender");
  if (f.what_if && f.options.burst) return Status::InvalidArgument("--what-if replays pods one at a time, not --burst");
  if (f.what_if && (f.json || !f.report_path.empty()))
    return Status::InvalidArgument("--what-if prints its own table, without --json or --report");
  return f;
}

std::vector<std::string> PoliciesToRun(const SimFlags& flags) {
  std::vector<std::string> names;
  if (!flags.extender_url.empty()) names.push_back("extender");
  if (!flags.extender_url.empty() && !flags.policies_given) return names;
  size_t start = 0;
  while (start <= flags.policies.size()) {
    size_t comma = flags.policies.find(',', start);
    if (comma == std::string::npos) comma = flags.policies.size();
    if (comma > start) names.push_back(flags.policies.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

}  // namespace gpupack::sim
