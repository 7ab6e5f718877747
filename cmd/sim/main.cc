// gpupack-sim: replays a workload against a cluster with one or more placement policies and
// reports packing quality (docs/simulator.md; input formats in docs/cluster-file.md).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/signal_policy.h"
#include "sim/compare.h"
#include "sim/compute_family.h"
#include "sim/flags.h"
#include "sim/inputs.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/timeline.h"
#include "sim/what_if.h"

namespace {

int Fail(const std::string& message) { return gpupack::FailStartup("gpupack-sim", message); }

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupack;
  InstallSignalPolicy();  // replays against a running extender write to sockets it may close
  StatusOr<sim::SimFlags> parsed = sim::ParseSimFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) return Fail(parsed.status().message());
  const sim::SimFlags& flags = *parsed;
  if (flags.help) {
    std::fputs(sim::SimUsage().c_str(), stdout);
    return 0;
  }

  auto nodes = sim::LoadCluster(flags.cluster_path);
  if (!nodes.ok()) return Fail(nodes.status().message());
  if (!flags.write_cluster.empty()) {
    std::ofstream out(flags.write_cluster);
    out << sim::ClusterYaml(*nodes);
    if (!out) return Fail("cannot write " + flags.write_cluster);
    return 0;
  }
  if (flags.workload_path.empty()) return Fail("--workload is required\n" + sim::SimUsage());
  if (flags.timeline) {
    auto workload = sim::LoadTimedWorkload(flags.workload_path);
    if (!workload.ok()) return Fail(workload.status().message());
    std::vector<sim::TimelineRun> runs;
    for (bool defrag : flags.defrag_runs) {
      sim::TimelineOptions options = flags.timeline_options;
      options.defrag = defrag;
      auto run = sim::RunTimeline(*nodes, workload->pods, workload->lives, options);
      if (!run.ok()) return Fail(run.status().message());
      runs.push_back(std::move(*run));
    }
    std::cout << sim::FormatTimeline(runs, flags.timeline_options);
    return 0;
  }
  auto pods = sim::LoadWorkload(flags.workload_path);
  if (!pods.ok()) return Fail(pods.status().message());
  // One draw of the family's memory (seed 1) for every replay seed: the seeds vary the order.
  if (flags.compute_rho) sim::ApplyComputeFamily(*pods, *flags.compute_rho, 1);
  auto seeds = sim::ParseSeeds(flags.seeds_text);
  if (!seeds.ok()) return Fail(seeds.status().message());
  if (seeds->empty()) return Fail("--seeds: no seeds");
  if (!flags.extender_url.empty() && seeds->size() > 1) {
    return Fail(
        "--extender replays one seed per extender (the extender keeps what it bound); restart it for each seed");
  }

  const std::vector<std::string> names = sim::PoliciesToRun(flags);
  if (names.empty()) return Fail("--policy: no policy named");
  if (flags.what_if) {
    for (const std::string& policy : names) {
      auto what_if = sim::RunWhatIf(*nodes, *pods, flags.options, *flags.what_if, policy, *seeds);
      if (!what_if.ok()) return Fail(what_if.status().message());
      std::cout << sim::FormatWhatIf(*what_if);
    }
    return 0;
  }
  auto replayer = sim::Replayer::Create(std::move(*nodes), std::move(*pods), flags.options);
  if (!replayer.ok()) return Fail(replayer.status().message());
  auto runs = sim::RunPolicies(*replayer, names, *seeds, flags.extender_url, flags.extender_weight);
  if (!runs.ok()) return Fail(runs.status().message());

  const std::string& report_path = flags.report_path;
  if (!report_path.empty()) {
    const std::string title = "gpupack-sim: " + flags.workload_path.substr(flags.workload_path.find_last_of('/') + 1);
    std::ofstream out(report_path);
    out << (EndsWith(report_path, ".svg") ? sim::SvgChart(*runs, title) : sim::HtmlReport(*runs, title));
    if (!out) return Fail("cannot write " + report_path);
  }
  if (flags.json) {
    if (runs->size() == 1) {
      std::cout << sim::RunJson((*runs)[0]).dump() << "\n";
    } else {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& r : *runs) all.push_back(sim::RunJson(r));
      std::cout << nlohmann::json{{"runs", all}}.dump() << "\n";
    }
  } else {
    std::cout << sim::FormatTable(*runs, flags.compute_rho.has_value());
    if (!report_path.empty()) std::cout << "report: " << report_path << "\n";
  }
  return 0;
}
