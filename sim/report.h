// The simulator's outputs: a readable table, the --json object (docs/simulator.md), and a
// self-contained SVG / HTML report with the unallocated-GPU curve of each policy against arrived
// workload (like the FGD paper's Fig. 9(a)).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/replay.h"

namespace gpupack::sim {

// {"policy":…,"seeds":[…],"pods":N,"curve":[{"arrivedPct":x,"unallocatedGpuPct":{"median","mean","sd"},
//  "fragRatePct":{…}},…],"seconds":…}. `pods` is the first seed's submitted count.
nlohmann::json RunJson(const PolicyRun& run);

// One row per policy: median unallocated GPU % at the arrived levels the runs reached among
// 80, 90, 95, 100, 110, 120, 130, then mean ± SD at 100, failed pods and seconds per seed.
// With `compute`, then one row per policy of unallocated compute % at 100 % arrived (median,
// mean ± SD over seeds) beside the unallocated GPU memory % there.
std::string FormatTable(const std::vector<PolicyRun>& runs, bool compute = false);

// Median unallocated GPU % (with the 25–75 % band of seeds) against arrived %, one line per policy.
std::string SvgChart(const std::vector<PolicyRun>& runs, const std::string& title);
// An HTML page embedding the chart and the table; no external resources.
std::string HtmlReport(const std::vector<PolicyRun>& runs, const std::string& title);

}  // namespace gpupack::sim
