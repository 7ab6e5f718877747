// The device-size matrix: the Alibaba trace replayed with every GPU given another
// memory size, gpupack at its default settings against fgd and bestfit, unallocated GPU % at
// arrived 100 % (median over the seeds). Prints a markdown table; a measurement, not a test.
//
//   bench_device_matrix [--trace-dir DIR] [--traces default,gpushare40,...] [--seeds 42-44]
//                       [--sizes 16000,24Gi,40Gi,80Gi,141Gi,mig1g,mig2g,mig3g]
//                       [--requests fractional,gi] [--policies gpupack,fgd,bestfit] [--http]
//
// Sizes: every GPU of the trace becomes a device of that many MiB (Gi suffix: GiB), or one MIG
// instance of an A100 80GB (1g.10gb 9728 MiB, 2g.20gb 19968 MiB, 3g.40gb 40192 MiB). Requests:
// `fractional` asks gpu_milli / 1000 of the device (rounded down to the MiB); `gi` rounds it up to
// whole GiB (at most the device). Whole-GPU pods take whole devices either way. With --http each
// gpupack seed also goes through a fresh standalone gpupack-extender (no config file) with the
// kube-scheduler-like client of gpupack-sim --extender (random ties), column `gpupack http`.
// Column `bound`: what no scheduler can beat on the seed's arrivals (PackingBound), median.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "sim/extender_policy.h"
#include "sim/extender_process.h"
#include "sim/inputs.h"
#include "sim/policy.h"
#include "sim/replay.h"

namespace gpupack::sim {
namespace {

struct Size {
  std::string label;
  model::MiB mib = 0;
  std::string mig_profile;  // empty: whole GPUs
};

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

StatusOr<Size> ParseSize(const std::string& text) {
  if (text == "mig1g") return Size{"MIG 1g.10gb", 9728, "1g.10gb"};
  if (text == "mig2g") return Size{"MIG 2g.20gb", 19968, "2g.20gb"};
  if (text == "mig3g") return Size{"MIG 3g.40gb", 40192, "3g.40gb"};
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (n <= 0) return Status::InvalidArgument("--sizes: \"" + text + "\" is not a size");
  const std::string unit = end;
  if (unit == "Gi") return Size{text, n * 1024, ""};
  if (unit.empty() || unit == "Mi") return Size{std::to_string(n) + " MiB", n, ""};
  return Status::InvalidArgument("--sizes: \"" + text + "\": want MiB, NGi or mig1g/mig2g/mig3g");
}

std::vector<model::Node> Resize(std::vector<model::Node> nodes, const Size& size) {
  for (model::Node& node : nodes) {
    for (model::Device& device : node.devices) {
      device.capacity_mib = size.mib;
      if (size.mig_profile.empty()) continue;
      device.kind = model::DeviceKind::kMig;
      device.parent_uuid = device.uuid;
      device.uuid = "MIG-" + device.uuid.substr(device.uuid.find('-') + 1);
      device.mig_profile = size.mig_profile;
      device.hard_isolation = true;
    }
  }
  return nodes;
}

std::vector<model::PodRequest> Rescale(std::vector<model::PodRequest> pods, const Size& size, bool gi) {
  for (model::PodRequest& pod : pods) {
    for (model::ContainerRequest& c : pod.containers) {
      if (c.mem_per_device_mib == 0) continue;  // whole devices
      // Rounded down, so shapes that fill a trace GPU together still fill the device together.
      model::MiB mib = c.mem_per_device_mib * size.mib / kTraceGpuMiB;
      if (gi) mib = std::min<model::MiB>((mib + 1023) / 1024 * 1024, size.mib);
      c.mem_per_device_mib = std::max<model::MiB>(1, mib);
    }
  }
  return pods;
}

// Liquid filling: the most of `small` (size → volume, divisible) that `bins` (capacity → count)
// take when a bin only takes sizes up to its capacity. The eligibility is nested, so filling the
// smallest bins first with the largest sizes they take is optimal.
double LiquidFill(const std::map<model::MiB, double>& bins, std::map<model::MiB, double> small) {
  double placed = 0;
  for (const auto& [capacity, count] : bins) {
    double room = static_cast<double>(capacity) * count;
    for (auto it = small.upper_bound(capacity); it != small.begin() && room > 0;) {
      --it;
      const double take = std::min(room, it->second);
      it->second -= take;
      room -= take;
      placed += take;
    }
  }
  return placed;
}

// A lower bound on the unallocated % at arrived 100 % that no scheduler can beat, even offline:
// the pods of the seed's arrival list up to 100 % of capacity, packed with every constraint but
// the device memory dropped (no CPU or host memory, no node boundaries, no models, any order).
// Whole-device pods fill a device each and come first (a device gives them all its memory, more
// than shares can). On the other devices: at most one share above half a device each; shares fit
// in K, the largest multiple of their greatest common divisor g that a device holds (Gi-aligned
// shares on 16000 MiB: 15 GiB), and beside a big share b only in the multiple of g below the
// device − b; the small shares (at most half a device) pour like liquid into whatever room takes
// their size. For x big shares placed, the x largest bound their memory and the rooms beside the
// x smallest bound the small shares'; the bound is the best x.
double PackingBound(const Replayer& replayer, uint64_t seed) {
  const model::MiB device = replayer.unit_mib();
  const double capacity = static_cast<double>(replayer.capacity_mib());
  const int64_t devices = replayer.capacity_mib() / device;
  Rng rng(seed);
  int64_t whole = 0, full = 0;
  model::MiB gcd = 0, arrived = 0;
  std::vector<model::MiB> big;
  std::map<model::MiB, double> small;  // size → volume
  for (int index : replayer.Arrivals(rng)) {
    const model::PodRequest& pod = replayer.pods()[index];
    model::MiB adds = 0;
    for (const model::ContainerRequest& c : pod.containers) {
      if (!c.init) adds += c.device_count * (c.whole_device() ? device : c.mem_per_device_mib);
    }
    if (arrived + adds > replayer.capacity_mib()) break;
    arrived += adds;
    for (const model::ContainerRequest& c : pod.containers) {
      if (c.init || c.device_count == 0) continue;
      for (int k = 0; k < c.device_count; ++k) {
        const model::MiB share = c.mem_per_device_mib;
        if (c.whole_device()) {
          ++whole;
        } else if (share >= device) {
          ++full;
        } else {
          gcd = std::gcd(gcd, share);
          if (2 * share > device)
            big.push_back(share);
          else
            small[share] += static_cast<double>(share);
        }
      }
    }
  }
  if (gcd == 0) gcd = 1;
  const int64_t placed_whole = std::min(whole, devices);
  const int64_t placed_full = std::min(full, devices - placed_whole);
  const int64_t rest = devices - placed_whole - placed_full;
  const model::MiB per_device = device / gcd * gcd;
  std::sort(big.begin(), big.end());  // ascending: the x smallest are the first x
  const int64_t most = std::min<int64_t>(rest, static_cast<int64_t>(big.size()));
  std::vector<double> largest(most + 1, 0);  // largest[x]: the x largest big shares' memory
  for (int64_t x = 1; x <= most; ++x) largest[x] = largest[x - 1] + static_cast<double>(big[big.size() - x]);
  double best = 0;
  std::map<model::MiB, double> rooms;  // the rooms beside the x smallest big shares
  for (int64_t x = 0; x <= most; ++x) {
    if (x > 0) rooms[(device - big[x - 1]) / gcd * gcd] += 1;
    std::map<model::MiB, double> bins = rooms;
    bins[per_device] += static_cast<double>(rest - x);
    const double shares =
        std::min(largest[x] + LiquidFill(bins, small), static_cast<double>(rest) * static_cast<double>(per_device));
    best = std::max(best, shares);
  }
  const double placed = static_cast<double>(placed_whole + placed_full) * static_cast<double>(device) + best;
  return 100.0 * (1.0 - placed / capacity);
}

double At100(const PolicyRun& run) { return run.curve.size() > 100 ? run.curve[100].unallocated_pct.median : NAN; }

int Main(int argc, char** argv) {
  std::string trace_dir = GPUPACK_TRACE_DIR;
  if (const char* env = std::getenv("GPUPACK_TRACE_DIR")) trace_dir = env;
  std::string traces = "default", seeds_text = "42-44", sizes_text = "16000,24Gi,40Gi,80Gi,141Gi,mig1g,mig2g,mig3g";
  std::string requests_text = "fractional,gi", policies_text = "gpupack,fgd,bestfit";
  bool http = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    bool ok = true;
    if (arg == "--trace-dir")
      ok = value(trace_dir);
    else if (arg == "--traces")
      ok = value(traces);
    else if (arg == "--seeds")
      ok = value(seeds_text);
    else if (arg == "--sizes")
      ok = value(sizes_text);
    else if (arg == "--requests")
      ok = value(requests_text);
    else if (arg == "--policies")
      ok = value(policies_text);
    else if (arg == "--http")
      http = true;
    else
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "bench_device_matrix: bad argument %s (see the comment at the top of device_matrix.cc)\n",
                   arg.c_str());
      return 2;
    }
  }
  StatusOr<std::vector<uint64_t>> seeds = ParseSeeds(seeds_text);
  if (!seeds.ok()) {
    std::fprintf(stderr, "bench_device_matrix: %s\n", seeds.status().ToString().c_str());
    return 2;
  }
  std::vector<Size> sizes;
  for (const std::string& s : Split(sizes_text)) {
    StatusOr<Size> size = ParseSize(s);
    if (!size.ok()) {
      std::fprintf(stderr, "bench_device_matrix: %s\n", size.status().ToString().c_str());
      return 2;
    }
    sizes.push_back(*size);
  }
  const std::vector<std::string> policies = Split(policies_text);
  auto nodes = LoadCluster(trace_dir + "/openb_node_list_gpu_node.csv");
  if (!nodes.ok()) {
    std::fprintf(stderr, "bench_device_matrix: %s\n", nodes.status().ToString().c_str());
    return 2;
  }
  const std::filesystem::path work =
      std::filesystem::temp_directory_path() / ("gpupack-device-matrix-" + std::to_string(getpid()));
  std::filesystem::create_directories(work);

  std::printf("seeds %s; unallocated GPU %% at arrived 100 %% (median)\n\n", seeds_text.c_str());
  std::printf("| trace | device | requests | bound |");
  for (const auto& p : policies) std::printf(" %s |", p.c_str());
  if (http) std::printf(" gpupack http |");
  std::printf("\n|---|---|---|---:|");
  for (size_t i = 0; i < policies.size() + (http ? 1 : 0); ++i) std::printf("---:|");
  std::printf("\n");
  std::fflush(stdout);
  for (const std::string& trace : Split(traces)) {
    auto pods = LoadWorkload(trace_dir + "/openb_pod_list_" + trace + ".csv");
    if (!pods.ok()) {
      std::fprintf(stderr, "bench_device_matrix: %s\n", pods.status().ToString().c_str());
      return 2;
    }
    for (const Size& size : sizes) {
      for (const std::string& requests : Split(requests_text)) {
        std::vector<model::Node> resized = Resize(*nodes, size);
        const std::string cluster_file = (work / "cluster.yaml").string();
        if (http) std::ofstream(cluster_file) << ClusterYaml(resized);
        auto replayer = Replayer::Create(std::move(resized), Rescale(*pods, size, requests == "gi"), ReplayOptions{});
        if (!replayer.ok()) {
          std::fprintf(stderr, "bench_device_matrix: %s\n", replayer.status().ToString().c_str());
          return 2;
        }
        std::vector<double> bounds;
        for (uint64_t seed : *seeds) bounds.push_back(PackingBound(*replayer, seed));
        std::printf("| %s | %s | %s | %.2f |", trace.c_str(), size.label.c_str(), requests.c_str(),
                    Summarize(bounds).median);
        for (const std::string& policy : policies) {
          auto run = replayer->Run(
              policy, [&]() { return MakePolicy(policy, replayer->typical()); }, *seeds);
          std::printf(run.ok() ? " %.2f |" : " error |", run.ok() ? At100(*run) : 0.0);
          std::fflush(stdout);
        }
        if (http) {
          std::vector<SeedRun> runs;
          for (uint64_t seed : *seeds) {
            StatusOr<ExtenderProcess> extender =
                ExtenderProcess::Start(GPUPACK_EXTENDER_BIN, cluster_file, (work / "extender.log").string());
            if (!extender.ok()) {
              std::fprintf(stderr, "bench_device_matrix: %s\n", extender.status().ToString().c_str());
              return 1;
            }
            auto client = MakeExtenderPolicy(extender->url(), 1);
            StatusOr<SeedRun> run = replayer->RunSeed(**client, seed);
            if (!run.ok()) {
              std::fprintf(stderr, "bench_device_matrix: %s\n", run.status().ToString().c_str());
              return 1;
            }
            runs.push_back(std::move(*run));
          }
          const std::vector<AggregatePoint> curve = Aggregate(runs);
          std::printf(" %.2f |", curve.size() > 100 ? curve[100].unallocated_pct.median : NAN);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  std::filesystem::remove_all(work);
  return 0;
}

}  // namespace
}  // namespace gpupack::sim

int main(int argc, char** argv) { return gpupack::sim::Main(argc, argv); }
