// gpupack-sim: replays a workload against a cluster with one or more placement policies and
// reports packing quality (docs/simulator.md; input formats in docs/cluster-file.md).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "sim/extender_policy.h"
#include "sim/inputs.h"
#include "sim/policy.h"
#include "sim/replay.h"
#include "sim/report.h"

namespace {

// The usage text; the policy list comes from PolicyNames(), so it cannot fall behind it.
std::string Usage() {
  const std::string head = "  --policy A,B,...     policies to compare (default gpupack):";
  const std::string indent = "\n                      ";
  std::string policies;
  size_t line = head.size();
  for (const std::string& name : gpupack::sim::PolicyNames()) {
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
)" + head + policies + R"(
  --seeds LIST         e.g. 42-51 (default) or 42,43
  --tune R             inflate the workload to R x cluster GPU capacity (default 1.3; 0 = off)
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

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpupack-sim: %s\n", message.c_str());
  return 2;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupack;
  std::string cluster_path, workload_path, policies = "gpupack", seeds_text = "42-51", report_path, extender_url,
                                           write_cluster;
  sim::ReplayOptions options;
  int extender_weight = 1;
  bool seeds_given = false;
  bool policies_given = false;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string& out) -> bool {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--help" || arg == "-h") {
      std::fputs(Usage().c_str(), stdout);
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--keep-order") {
      options.shuffle = false;
    } else if (arg == "--cluster") {
      if (!value(cluster_path)) return Fail("--cluster needs a file");
    } else if (arg == "--workload") {
      if (!value(workload_path)) return Fail("--workload needs a file");
    } else if (arg == "--policy") {
      if (!value(policies)) return Fail("--policy needs a name");
      policies_given = true;
    } else if (arg == "--seeds") {
      if (!value(seeds_text)) return Fail("--seeds needs a list");
      seeds_given = true;
    } else if (arg == "--report") {
      if (!value(report_path)) return Fail("--report needs a file");
    } else if (arg == "--extender") {
      if (!value(extender_url)) return Fail("--extender needs a URL");
    } else if (arg == "--write-cluster") {
      if (!value(write_cluster)) return Fail("--write-cluster needs a file");
    } else if (arg == "--tune" || arg == "--extender-weight") {
      if (!value(v)) return Fail(arg + " needs a number");
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(d >= 0) || d > 100) return Fail(arg + ": \"" + v + "\" is not a number in 0..100");
      if (arg == "--tune") {
        options.tune = d;
      } else {
        extender_weight = static_cast<int>(d);
        if (extender_weight < 1) return Fail("--extender-weight must be at least 1");
      }
    } else {
      return Fail("unknown argument \"" + arg + "\"\n" + Usage());
    }
  }
  if (cluster_path.empty()) return Fail(std::string("--cluster is required\n") + Usage());

  auto nodes = sim::LoadCluster(cluster_path);
  if (!nodes.ok()) return Fail(nodes.status().message());
  if (!write_cluster.empty()) {
    std::ofstream out(write_cluster);
    out << sim::ClusterYaml(*nodes);
    if (!out) return Fail("cannot write " + write_cluster);
    return 0;
  }
  if (workload_path.empty()) return Fail(std::string("--workload is required\n") + Usage());
  auto pods = sim::LoadWorkload(workload_path);
  if (!pods.ok()) return Fail(pods.status().message());
  // A running extender keeps its ledger, and a replay starts from an empty cluster: one seed per
  // fresh extender.
  if (!extender_url.empty() && !seeds_given) seeds_text = "42";
  auto seeds = sim::ParseSeeds(seeds_text);
  if (!seeds.ok()) return Fail(seeds.status().message());
  if (seeds->empty()) return Fail("--seeds: no seeds");
  if (!extender_url.empty() && seeds->size() > 1) {
    return Fail("--extender replays one seed per extender (the extender keeps what it bound); restart it for each seed");
  }

  auto replayer = sim::Replayer::Create(std::move(*nodes), std::move(*pods), options);
  if (!replayer.ok()) return Fail(replayer.status().message());

  std::vector<std::string> names;
  if (!extender_url.empty()) names.push_back("extender");
  if (extender_url.empty() || policies_given) {
    for (const std::string& name : SplitComma(policies)) names.push_back(name);
  }
  if (names.empty()) return Fail("--policy: no policy named");
  std::vector<sim::PolicyRun> runs;
  for (const auto& name : names) {
    std::function<StatusOr<std::unique_ptr<sim::SimPolicy>>()> make;
    if (!extender_url.empty() && name == "extender") {
      make = [&]() -> StatusOr<std::unique_ptr<sim::SimPolicy>> {
        return sim::MakeExtenderPolicy(extender_url, extender_weight);
      };
    } else {
      auto probe = sim::MakePolicy(name, replayer->typical());
      if (!probe.ok()) return Fail(probe.status().message());
      make = [&, name]() { return sim::MakePolicy(name, replayer->typical()); };
    }
    auto run = replayer->Run(name, make, *seeds);
    if (!run.ok()) return Fail(name + ": " + run.status().message());
    runs.push_back(std::move(*run));
  }

  if (!report_path.empty()) {
    const std::string title = "gpupack-sim: " + workload_path.substr(workload_path.find_last_of('/') + 1);
    std::ofstream out(report_path);
    out << (EndsWith(report_path, ".svg") ? sim::SvgChart(runs, title) : sim::HtmlReport(runs, title));
    if (!out) return Fail("cannot write " + report_path);
  }
  if (json) {
    if (runs.size() == 1) {
      std::cout << sim::RunJson(runs[0]).dump() << "\n";
    } else {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& r : runs) all.push_back(sim::RunJson(r));
      std::cout << nlohmann::json{{"runs", all}}.dump() << "\n";
    }
  } else {
    std::cout << sim::FormatTable(runs);
    if (!report_path.empty()) std::cout << "report: " << report_path << "\n";
  }
  return 0;
}
