#include "sim/what_if.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "placement/decision.h"

namespace gpupack::sim {
namespace {

// Forwards to a policy and notes what it placed.
class Recording final : public SimPolicy {
 public:
  explicit Recording(std::unique_ptr<SimPolicy> inner) : inner_(std::move(inner)) {}
  Status Start(const ClusterState& state, const std::vector<model::Node>& nodes, std::span<const int> rank) override {
    return inner_->Start(state, nodes, rank);
  }
  StatusOr<std::optional<Choice>> Choose(const ClusterState& state, const SimPod& pod, Rng& rng) override {
    return inner_->Choose(state, pod, rng);
  }
  void Committed(const SimPod& pod, const Choice& choice) override {
    inner_->Committed(pod, choice);
    placed.push_back(pod.name);
    held_mib += pod.request->TotalMemMiB();
  }
  std::vector<std::string> placed;
  model::MiB held_mib = 0;

 private:
  std::unique_ptr<SimPolicy> inner_;
};

StatusOr<double> Positive(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !(v > 0) || v > 1e6) {
    return Status::InvalidArgument("--what-if: \"" + std::string(s) + "\" is not a positive number");
  }
  return v;
}

}  // namespace

StatusOr<UsageModel> ParseUsageModel(std::string_view text) {
  constexpr std::string_view kPrefix = "beta:";
  const size_t comma = text.find(',');
  if (text.substr(0, kPrefix.size()) != kPrefix || comma == std::string_view::npos) {
    return Status::InvalidArgument("--what-if: expected beta:A,B (e.g. beta:2,2), got \"" + std::string(text) + "\"");
  }
  UsageModel m;
  GPUPACK_ASSIGN_OR_RETURN(m.alpha, Positive(text.substr(kPrefix.size(), comma - kPrefix.size())));
  GPUPACK_ASSIGN_OR_RETURN(m.beta, Positive(text.substr(comma + 1)));
  return m;
}

std::vector<double> PeakFractions(size_t pods, const UsageModel& model) {
  std::mt19937_64 engine(model.seed);
  std::gamma_distribution<double> a(model.alpha, 1.0), b(model.beta, 1.0);
  std::vector<double> out(pods);
  for (double& f : out) {
    const double x = a(engine);
    const double y = b(engine);
    f = x + y > 0 ? x / (x + y) : 0.5;
  }
  return out;
}

std::vector<model::PodRequest> RightSized(std::vector<model::PodRequest> pods, const std::vector<double>& peak_fraction,
                                          model::MiB device_mib, const placement::RightsizingOptions& options) {
  for (size_t i = 0; i < pods.size(); ++i) {
    for (model::ContainerRequest& c : pods[i].containers) {
      if (c.device_count == 0 || c.whole_device()) continue;
      placement::ObservedUse seen;
      seen.request_mib = c.mem_per_device_mib;
      seen.peak_mib = static_cast<model::MiB>(std::ceil(peak_fraction[i] * static_cast<double>(c.mem_per_device_mib)));
      seen.p99_mib = seen.peak_mib;
      seen.samples = options.min_samples;
      seen.device_memory_mib = device_mib;
      seen.devices = c.device_count;
      c.mem_per_device_mib = placement::Recommend(seen, options).guaranteed_mib;
    }
  }
  return pods;
}

StatusOr<WhatIf> RunWhatIf(const std::vector<model::Node>& nodes, const std::vector<model::PodRequest>& pods,
                           const ReplayOptions& options, const UsageModel& usage, const std::string& policy,
                           const std::vector<uint64_t>& seeds) {
  WhatIf out;
  out.policy = policy;
  out.model = usage;
  out.device_mib = placement::TypicalDeviceMiB(nodes);
  const std::vector<double> fraction = PeakFractions(pods.size(), usage);
  const std::vector<model::PodRequest> sized = RightSized(pods, fraction, out.device_mib, out.rightsizing);
  GPUPACK_ASSIGN_OR_RETURN(Replayer protocol, Replayer::Create(nodes, pods, options));
  ReplayOptions as_listed = options;
  as_listed.tune = 0;  // the list below is the protocol's, copies included, in its order
  as_listed.shuffle = false;
  as_listed.fill_pods = 0;
  for (uint64_t seed : seeds) {
    // The seed's cluster (every node, or with --fill-pods its sample) and arrivals, as the replay
    // table's run of this seed has them.
    Rng rng(seed);
    GPUPACK_ASSIGN_OR_RETURN(Replayer::SeedCluster cluster, protocol.ClusterOfSeed(rng));
    const std::vector<int>& arrivals = cluster.arrivals;
    std::vector<model::PodRequest> requested_list, sized_list;
    std::map<std::string, model::MiB> saved;  // per arrival name: request − right-sized
    std::vector<int> copies(pods.size(), 0);
    for (int index : arrivals) {
      const int copy = copies[index]++;
      model::PodRequest a = pods[index], b = sized[index];
      a.name = b.name = ArrivalName(pods[index].name, copy);
      saved[a.name] = a.TotalMemMiB() - b.TotalMemMiB();
      requested_list.push_back(std::move(a));
      sized_list.push_back(std::move(b));
    }
    WhatIfSeed row;
    row.seed = seed;
    row.submitted = static_cast<int>(arrivals.size());
    for (bool right_sized : {false, true}) {
      GPUPACK_ASSIGN_OR_RETURN(Replayer replay,
                               Replayer::Create(cluster.nodes, right_sized ? sized_list : requested_list, as_listed));
      GPUPACK_ASSIGN_OR_RETURN(std::unique_ptr<SimPolicy> made,
                               MakePolicy(policy, replay.typical(), replay.options().overhead));
      Recording recording(std::move(made));
      GPUPACK_RETURN_IF_ERROR(replay.RunSeed(recording, seed).status());
      if (right_sized) {
        row.placed_rightsized = static_cast<int>(recording.placed.size());
        row.held_rightsized_mib = recording.held_mib;
      } else {
        row.placed_requested = static_cast<int>(recording.placed.size());
        row.held_requested_mib = recording.held_mib;
        for (const std::string& name : recording.placed) row.freed_mib += saved[name];
      }
    }
    out.seeds.push_back(row);
  }
  return out;
}

std::string FormatWhatIf(const WhatIf& w) {
  auto gib = [](double mib) { return mib / 1024.0; };
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "what-if %s, peak/request ~ Beta(%g, %g), usage seed %llu, typical device %lld MiB, headroom %g %%\n",
                w.policy.c_str(), w.model.alpha, w.model.beta, static_cast<unsigned long long>(w.model.seed),
                static_cast<long long>(w.device_mib), 100 * w.rightsizing.headroom);
  out += line;
  out +=
      "seed  submitted  placed as requested  placed right-sized  more  held GiB (requested → right-sized)  freed GiB\n";
  WhatIfSeed sum;
  for (const WhatIfSeed& s : w.seeds) {
    std::snprintf(line, sizeof line, "%-4llu  %9d  %19d  %18d  %+4d  %14.1f → %-18.1f  %9.1f (%.1f %%)\n",
                  static_cast<unsigned long long>(s.seed), s.submitted, s.placed_requested, s.placed_rightsized,
                  s.placed_rightsized - s.placed_requested, gib(s.held_requested_mib), gib(s.held_rightsized_mib),
                  gib(s.freed_mib), s.held_requested_mib > 0 ? 100.0 * s.freed_mib / s.held_requested_mib : 0.0);
    out += line;
    sum.submitted += s.submitted;
    sum.placed_requested += s.placed_requested;
    sum.placed_rightsized += s.placed_rightsized;
    sum.held_requested_mib += s.held_requested_mib;
    sum.held_rightsized_mib += s.held_rightsized_mib;
    sum.freed_mib += s.freed_mib;
  }
  if (w.seeds.size() > 1) {
    const double n = static_cast<double>(w.seeds.size());
    std::snprintf(line, sizeof line, "mean  %9.1f  %19.1f  %18.1f  %+4.1f  %14.1f → %-18.1f  %9.1f (%.1f %%)\n",
                  sum.submitted / n, sum.placed_requested / n, sum.placed_rightsized / n,
                  (sum.placed_rightsized - sum.placed_requested) / n, gib(sum.held_requested_mib) / n,
                  gib(sum.held_rightsized_mib) / n, gib(sum.freed_mib) / n,
                  sum.held_requested_mib > 0 ? 100.0 * sum.freed_mib / sum.held_requested_mib : 0.0);
    out += line;
  }
  return out;
}

}  // namespace gpupack::sim
