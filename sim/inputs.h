// Readers for the simulator's inputs: clusters (our cluster file, or the Alibaba node CSV) and
// workloads (our workload file, docs/cluster-file.md, or an Alibaba pod CSV).
//
// The Alibaba trace models every GPU with 1000 MiB of memory, so 1 milli-GPU = 1 MiB and the FGD
// paper's arithmetic carries over unchanged: a pod's gpu_milli < 1000 becomes a 'gpu_milli' MiB
// share of one device, gpu_milli = 1000 whole devices (exclusive), gpu_spec the allowed models.
// Errors name the file, line and column ("pods.csv:12:18: num_gpu: \"x\" is not a number").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model.h"

namespace gpupack::sim {

// Memory of one modelled trace GPU.
inline constexpr model::MiB kTraceGpuMiB = 1000;

// The Alibaba node list (columns sn, cpu_milli, memory_mib, gpu, model; any order, extra columns
// ignored). `where` names the source in errors.
StatusOr<std::vector<model::Node>> ParseAlibabaNodes(std::string_view csv, const std::string& where);
// The Alibaba pod list (name, cpu_milli, memory_mib, num_gpu, gpu_milli, optional gpu_spec).
StatusOr<std::vector<model::PodRequest>> ParseAlibabaPods(std::string_view csv, const std::string& where);
// A trace pod's life: when it was created and deleted (seconds from the trace's start) and its
// QoS class ("LS", "BE", "Burstable", "Guaranteed" in the Alibaba trace).
struct PodLifetime {
  int64_t created_s = 0;
  int64_t deleted_s = 0;
  std::string qos;  // empty when the list has no qos column
};
// The lifetimes of the Alibaba pod list, one per pod in ParseAlibabaPods' order (the same rows):
// columns creation_time and deletion_time (non-negative integers) required, qos optional. A
// deletion before its creation is an error naming the pod.
StatusOr<std::vector<PodLifetime>> ParseAlibabaPodLifetimes(std::string_view csv, const std::string& where);
// Our workload file:
//   pods:
//     - {name: infer, gpuMemory: 10Gi, gpus: 1, cpu: "4", memory: 16Gi, count: 20}
// Keys (docs/cluster-file.md): name (required), count, gpuMemory (total per pod, split evenly over
// `gpus`), gpus, cpu, memory, and the workload keys of the pod annotation table
// (api::PodAnnotations(): deviceKind for gpupack.io/device-kind, ...), whose rows read the values
// as the pod parser reads a pod's annotations, refusing what it refuses with its message after the
// value's position. A pod with neither gpuMemory nor gpus asks for no device. Entries with
// count > 1 are named name-0 … name-(count−1).
StatusOr<std::vector<model::PodRequest>> ParseWorkloadYaml(std::string_view yaml, const std::string& where);

// By content: a file whose first line starts with "sn," / "name," is an Alibaba CSV, anything else
// YAML (the cluster file via translate::LoadClusterFile).
StatusOr<std::vector<model::Node>> LoadCluster(const std::string& path);
StatusOr<std::vector<model::PodRequest>> LoadWorkload(const std::string& path);
// An Alibaba pod CSV with its lifetimes (the timeline replay's input); InvalidArgument naming the
// file for a workload of another format, which has no times.
struct TimedWorkload {
  std::vector<model::PodRequest> pods;
  std::vector<PodLifetime> lives;  // lives[i] is pods[i]'s
};
StatusOr<TimedWorkload> LoadTimedWorkload(const std::string& path);

// Writes nodes as a cluster file (docs/cluster-file.md), e.g. to start a standalone extender on the
// Alibaba cluster for the HTTP mode. Everything the file can say round-trips (labels, reported
// usage, health, hard isolation, MIG instance ids and placements), so the extender started on it
// decides on the cluster the simulator replays.
std::string ClusterYaml(const std::vector<model::Node>& nodes);

}  // namespace gpupack::sim
