// gpupack-sim's command line (docs/simulator.md): the flags, their defaults and their parser,
// apart from the main so that each rule has a unit test.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/replay.h"
#include "sim/timeline.h"
#include "sim/what_if.h"

namespace gpupack::sim {

// The usage text; the policy list comes from PolicyNames(), so it cannot fall behind it.
std::string SimUsage();

struct SimFlags {
  bool help = false;  // --help / -h: print SimUsage(), exit 0
  std::string cluster_path, workload_path, report_path, extender_url, write_cluster;
  std::string policies = "gpupack";
  // 42-51 by default; 42 with --extender (a running extender keeps its ledger, and a replay
  // starts from an empty cluster: one seed per fresh extender).
  std::string seeds_text = "42-51";
  ReplayOptions options;
  int extender_weight = 1;
  bool policies_given = false;
  bool json = false;
  // --compute-rho: replay the trace's two-dimensional family with this correlation
  // (sim/compute_family.h); nullopt = the one-dimensional workload as it is.
  std::optional<double> compute_rho;
  // --what-if beta:A,B: the right-sizing what-if (sim/what_if.h) instead of the replay table.
  std::optional<UsageModel> what_if;
  // --timeline: the replay with departures (sim/timeline.h) instead of the replay table, once
  // per entry of `defrag_runs` (--defrag off|on|both: without and / or with defragmentation).
  bool timeline = false;
  std::vector<bool> defrag_runs = {false, true};
  TimelineOptions timeline_options;
};

// `args` without the program name. On failure the status message is what the main prints after
// "gpupack-sim: ". --workload is checked by the caller (--write-cluster needs none).
StatusOr<SimFlags> ParseSimFlags(const std::vector<std::string>& args);

// The policies to replay, in table order: "extender" first with --extender, then --policy's list
// (without --extender, or with it when --policy is given). Empty names are dropped.
std::vector<std::string> PoliciesToRun(const SimFlags& flags);

}  // namespace gpupack::sim
