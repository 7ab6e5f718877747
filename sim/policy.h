// Placement policies the simulator can replay: gpupack's own (the placement core, exactly what
// the extender runs) and the published baselines of the FGD paper, re-implemented from their
// definitions (the artifact's *_score.go, docs/design.md "Sources"): random, dotprod, clustering, packing,
// bestfit, fgd.
//
// Every policy sees the same filter (ClusterState::Fits: CPU and host memory like
// NodeResourcesFit, device model/kind, enough devices with room) and breaks ties by the seed's
// node order (`rank`: lower wins), like the artifact's lexicographic selectHost over names
// prefixed by a seeded permutation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model.h"
#include "placement/decision.h"
#include "placement/node_summary.h"
#include "placement/workload.h"
#include "sim/cluster_state.h"

namespace gpupack::sim {

// Seeded randomness with a portable bounded draw (std::uniform_int_distribution differs between
// standard libraries; this does not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, n). REQUIRES: n > 0.
  uint64_t Below(uint64_t n);
  // Fisher–Yates.
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

// One pod as replayed: the decoded request (for the core and the HTTP mode) and its compact demand.
struct SimPod {
  const model::PodRequest* request = nullptr;
  Demand demand;
  std::string name;  // unique per arrival (copies made by inflation get "-tuned-<i>")
  // The pods created with this one that kube-scheduler has not yet taken up, in the order it
  // will (a burst, ReplayOptions::burst; empty when pods come one at a time). The extender learns
  // them at an early refresh (placement::Decision::Observe).
  std::span<const SimPod> waiting;
};

// The pod's request as the extender sees this arrival: named, with the name as its UID (PodJson),
// so a copy made by inflation is a pod of its own, as it is to the extender's learner.
model::PodRequest ArrivalRequest(const SimPod& pod);

class SimPolicy {
 public:
  virtual ~SimPolicy() = default;
  // Called before the first pod of a replay. `nodes` is the cluster as loaded (index = node index
  // of `state`); `rank[n]` is node n's position in the seed's random node order.
  virtual Status Start(const ClusterState& state, const std::vector<model::Node>& nodes, std::span<const int> rank) = 0;
  // Chooses a node and its devices for the pod, or nullopt when it fits nowhere. A Status error
  // aborts the replay (e.g. the extender is unreachable).
  virtual StatusOr<std::optional<Choice>> Choose(const ClusterState& state, const SimPod& pod, Rng& rng) = 0;
  // The choice was committed to `state`.
  virtual void Committed(const SimPod& pod, const Choice& choice) = 0;
};

// What placement::RankOf reads of a node besides its score, fixed while the node's devices are:
// the extender's tie-break rank (placement::NodeTieBreakRank with the default salt 0) and
// placement::GpuCount. Computed once per node, as the extender does when a node enters its state.
struct NodeOrder {
  uint64_t tie_break_rank = 0;
  int gpu_count = 0;
};
NodeOrder NodeOrderOf(const model::Node& node);

// gpupack's choice of a node for a pod, as the extender makes it: every node that `admits` and
// where the core fits the pod is keyed by placement::RankOf (FGD levels for a kFgd decision whose
// options say so) with `order[n]`, the tie-break rank last; the lowest key wins, equal keys the
// lower tie-break rank. `admits` only saves the core nodes it rules out: it must admit every node
// where the pod fits. -1 when it fits on none.
// REQUIRES: summaries[n] == policy.Summarize(nodes[n]); order[n] == NodeOrderOf(nodes[n]).
int CoreRankFirst(const placement::Decision& decision, model::PolicyKind kind, const placement::Policy& policy,
                  std::span<const model::Node> nodes, std::span<const placement::NodeSummary> summaries,
                  std::span<const NodeOrder> order, const model::PodRequest& pod,
                  const std::function<bool(int)>& admits);

// What "gpupack-overhead" charges each process on a device (gpupack-sim --process-overhead):
// each device's family default (model/process_overhead.h), or one figure in the cluster's MiB.
struct OverheadVariant {
  placement::ProcessOverheadMode mode = placement::ProcessOverheadMode::kFamilyDefault;
  MiB mib = 0;  // kFixed's figure
};

// The policy names accepted by MakePolicy, in the order the report lists them.
std::vector<std::string> PolicyNames();

// "gpupack" (what the extender does by default: the placement core's FGD against the workload it
// learns from bound pods, starting from the core's prior; nodes ranked by the completion loss,
// then the fill level with the capacity reservation's price, then FGD's integer score level, then
// the node order), "gpupack-nocompletion" (the extender with rankByCompletion: false, the
// previous release: FGD level, then the fill level, then the node order), "gpupack-nofill" (the
// extender with rankByFill: false: the fill level holds the reservation price alone),
// "gpupack-noreserve" (the extender with reserveScarceCapacity: false), "gpupack-exact" (the
// same as gpupack with FGD's exact cost in place of its level),
// "gpupack-pinned" / "gpupack-pinned-exact" (FGD against the trace's own typical set `typical`
// instead of the learned one), "gpupack-binpack" and "gpupack-spread" (the core's simple
// policies), "gpupack-overhead" (the extender with processOverhead as `overhead` says, charged
// once per process: what the overhead costs), and the baselines "random", "dotprod", "clustering", "packing",
// "bestfit", "fgd" (which, like every baseline, checks the compute share in its fit), and the
// two-dimensional baselines "drf" (best fit on the dominant share) and "tetris" (Tetris's
// alignment score). InvalidArgument for anything else.
StatusOr<std::unique_ptr<SimPolicy>> MakePolicy(std::string_view name, const placement::TypicalWorkload& typical,
                                                OverheadVariant overhead = {});

}  // namespace gpupack::sim
