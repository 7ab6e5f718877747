// The simulator's compact view of a cluster: per device free memory and sharing state, per node
// free CPU / host memory, and FGD's fragmentation F_n(M) of every node against one target workload,
// kept up to date incrementally (only the node that changed is recomputed).
//
// All policies of the simulator (the baselines and gpupack's core policy) choose through this
// view and commit their choice here, so metrics are measured the same way for every policy.
// Units: device memory in MiB (the Alibaba trace models a GPU as 1000 MiB, so 1 MiB = 1 milli-GPU),
// CPU in milli-cores, host memory in bytes.
//
// Thread safety: none; one replay owns one ClusterState.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model.h"
#include "placement/workload.h"

namespace gpupack::sim {

using model::MiB;

inline constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 4;

// A pod's demand in the compact form: one device group (the simulator replays pods with at most
// one device-requesting app container; DemandOf refuses others).
struct Demand {
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int device_count = 0;    // 0 = CPU-only
  MiB mem_per_device = 0;  // 0 with device_count > 0 = whole devices, taken exclusively
  int constraint = 0;      // index into ClusterState's interned device constraints
  int compute = 0;         // per-device compute share, percent; 0 = its memory's share
  bool whole() const { return device_count > 0 && mem_per_device == 0; }
};

struct SimDevice {
  MiB capacity = 0;
  MiB free = 0;
  // The caps of the pods on the device, and the usage the cluster reported for it: as in the
  // placement core (placement::DeviceFreeMiB), only the usage beyond the caps is foreign and takes
  // room, so a reported 1 GiB stops counting once 1 GiB of caps is placed.
  MiB caps = 0;
  MiB used = 0;
  int shares = 0;                               // pods on the device
  bool exclusive = false;                       // held whole (or unhealthy): nothing else may land here
  int type = 0;                                 // interned (model, kind, profile, isolation)
  int compute_free = model::kDeviceComputePct;  // percent of the device's SMs no share reserves
};

struct SimNode {
  std::string name;
  int64_t cpu_free = kUnlimited;
  int64_t memory_free = kUnlimited;
  bool stale = false;
  std::vector<SimDevice> devices;
  MiB total_free = 0;  // R_n
  MiB capacity = 0;    // Σ device capacity
  // GPU-pod affinity tags on the node (the Clustering baseline): 0 = sharing pod, k = k whole devices.
  std::map<int, int> tags;
};

// One typical pod shape of the target workload M, in compact form.
struct TypicalShape {
  Demand demand;
  double weight = 0;
};

// Where a pod goes: a node and the device slots it takes (one per requested device).
struct Choice {
  int node = -1;
  std::vector<int> slots;
};

class ClusterState {
 public:
  // Builds the view of `nodes` (their current shares count as used) measured against `typical`.
  // unit_mib(), the memory of "one GPU" for arrived-workload accounting and score scales, is the
  // cluster's most common device capacity.
  ClusterState(const std::vector<model::Node>& nodes, const placement::TypicalWorkload& typical);

  // Interns the device constraint of `pod` and returns its compact demand. Multi-container pods
  // are refused (InvalidArgument naming the pod) unless all device containers share one shape.
  StatusOr<Demand> DemandOf(const model::PodRequest& pod);

  const std::vector<SimNode>& nodes() const { return nodes_; }
  const std::vector<TypicalShape>& typical() const { return typical_; }
  MiB unit_mib() const { return unit_mib_; }
  MiB total_capacity() const { return total_capacity_; }
  int64_t max_node_cpu() const { return max_node_cpu_; }
  MiB max_node_capacity() const { return max_node_capacity_; }

  // Whether device `slot` of node `n` may be chosen for one of `d`'s devices right now: its
  // memory and, as the placement core counts it, its compute share (ComputeNeed).
  bool DeviceFits(int n, int slot, const Demand& d) const;
  // The compute share one of `d`'s devices reserves on `dev` (placement's rule: all of it whole,
  // the pod's own share, else its memory's share).
  static int ComputeNeed(const SimDevice& dev, const Demand& d);
  // kube-scheduler's NodeResourcesFit plus the device fit: CPU, host memory, model/kind, and
  // enough devices with room (whole requests: enough empty devices).
  bool Fits(int n, const Demand& d) const;
  // kube-scheduler's own NodeResourcesFit alone (CPU and host memory): the nodes it passes to an
  // extender. With none, kube-scheduler does not call the extender, so the extender never hears
  // of the pod (findNodesThatPassExtenders).
  bool HostFits(int n, const Demand& d) const;
  bool AnyHostFits(const Demand& d) const;

  // F_n(M) of node n, MiB.
  double NodeFragmentation(int n) const { return frag_[n]; }
  // F_n(M) after hypothetically placing `d` on `slots` of node n (slots may be empty for
  // CPU-only pods). Cost O(|M| · |slots|).
  double FragmentationAfter(int n, const Demand& d, std::span<const int> slots) const;

  // Commits a placement (REQUIRES: it fits).
  void Apply(const Choice& choice, const Demand& d);

  // Cluster totals, kept incrementally.
  MiB allocated() const { return total_capacity_ - total_free_; }
  // Compute: reserved and total, in percent-of-a-device units (100 per device).
  int64_t compute_allocated() const { return compute_allocated_; }
  int64_t compute_capacity() const { return compute_capacity_; }
  MiB idle() const { return total_free_; }
  double fragmentation() const { return total_frag_; }

  // The arrived amount a pod adds (k × per-device memory; whole devices count unit_mib each).
  MiB ArrivedOf(const Demand& d) const { return d.device_count * (d.whole() ? unit_mib_ : d.mem_per_device); }

 private:
  bool TypeAllowed(int constraint, int type) const { return allowed_[constraint][type] != 0; }
  // With `check_compute`, the compute share must be free too (a pod's fit); FGD's shapes measure
  // memory alone (the "fgd" baseline is FGD on memory with a compute fit check).
  bool UsableForShape(const SimDevice& dev, const Demand& shape, bool check_compute = false) const;
  double ShapeFrag(int m, int usable, MiB unusable_free, MiB total_free, int64_t cpu_free) const;
  void Resummarize(int n);

  struct ConstraintKey {
    std::vector<std::string> models;
    model::DeviceKindPreference kind;
    std::string profile;
    bool hard;
    bool whole;
    auto operator<=>(const ConstraintKey&) const = default;
  };
  int InternConstraint(const ConstraintKey& key);

  std::vector<SimNode> nodes_;
  std::vector<model::Device> device_types_;  // one exemplar per interned type
  std::vector<ConstraintKey> constraints_;
  std::vector<std::vector<uint8_t>> allowed_;  // [constraint][type]: 1 = the type is acceptable
  std::vector<TypicalShape> typical_;
  // Per node, per shape: q_n(m) and Σ free of devices that cannot hold m; row-major [n][m].
  std::vector<int16_t> usable_;
  std::vector<MiB> unusable_free_;
  std::vector<double> frag_;
  MiB unit_mib_ = 1000;
  MiB total_capacity_ = 0;
  MiB total_free_ = 0;
  int64_t compute_allocated_ = 0;
  int64_t compute_capacity_ = 0;
  double total_frag_ = 0;
  int64_t max_node_cpu_ = 0;
  MiB max_node_capacity_ = 0;
};

}  // namespace gpupack::sim
