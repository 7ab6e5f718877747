// The timeline replay (docs/simulator.md, "Departures and defragmentation"): the pods of a trace
// arrive at their creation time and leave at their deletion time, and gpupack places them, with
// or without defragmentation (placement/defrag.h) for the pods that fit nowhere.
//
//  * Events in time order; at equal times departures first (what leaves frees room for what
//    comes), then by pod order.
//  * Placement: gpupack's, through the placement core on model::Node and NodeSummary as the
//    extender runs it (placement::Decision learns the workload from the arrivals; CoreRankFirst).
//  * A pod that fits nowhere waits in a FIFO queue. After every departure of a running pod, the
//    waiting pods are retried in order. A waiting pod's departure takes it out of the queue: it
//    never ran. A running pod's departure removes its shares and its CPU and memory requests.
//  * With defragmentation, a pod that fits nowhere (on arrival or retry) asks the planner, with
//    the running pods the movability model allows as the movable pods, minus those moved within
//    the cool-down. A plan is applied unless it would take the moves of the last hour past the
//    rate limit: its pods are evicted, the waiting pod takes its place and devices, and each
//    moved pod lands where the plan re-placed it (a controller would recreate it and
//    kube-scheduler place it; here it moves at once and keeps its deletion time). A waiting pod
//    asks the planner again only once room has been freed somewhere since it last asked (a
//    departure or a move): the controller re-plans on a change, not on every retry.
//  * Allocation only: the devices' reported usage (a cluster file's `used`) is dropped; the shares
//    a cluster file already holds stay, and never move.
//  * Measured: the unallocated GPU share (allocated = Σ caps, a whole device its capacity),
//    time-weighted over the arrivals' span (first to last arrival) and sampled at 100 evenly
//    spaced instants of it; the pods that waited and how long; the moves.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model.h"
#include "placement/defrag.h"
#include "sim/inputs.h"

namespace gpupack::sim {

// Which running pods the planner may move: the trace's best-effort class (qos "BE", the default:
// what a cluster would mark evictable first), every pod, or none.
enum class Movability : uint8_t { kBestEffort, kAll, kNone };
// "be", "all", "none".
StatusOr<Movability> ParseMovability(std::string_view text);
std::string_view MovabilityLabel(Movability movable);

struct TimelineOptions {
  bool defrag = false;
  Movability movable = Movability::kBestEffort;
  int max_moves_per_hour = 60;    // per cluster, over the last 3600 s of replay time
  int64_t move_cooldown_s = 600;  // a moved pod may not move again for this long
  // Arrival times are divided by this (the gaps between arrivals this many times shorter),
  // lifetimes kept: this many times the trace's offered load. 1 = the trace as it is.
  double arrival_speedup = 1;
  // The share of the cluster's nodes replayed (0 < share ≤ 1): the first ⌈share × nodes⌉ in the
  // extender's tie-break order (placement::NodeTieBreakRank, a fixed pseudo-random order of the
  // names), so that a trace sized for a larger cluster can load a smaller one. 1 = every node.
  double cluster_share = 1;
  placement::DefragOptions planner;
};

// The planner outcome the replay adds: a plan (or the planner itself) refused by the rate limit.
inline constexpr std::string_view kRateLimitedLabel = "rate_limited";

struct TimelineRun {
  bool defrag = false;
  int pods = 0;
  int waited = 0;          // fitted nowhere when they arrived
  int ran_after_wait = 0;  // of those, placed later
  double wait_mean_s = 0;  // over ran_after_wait
  double wait_p95_s = 0;
  int never_ran = 0;  // left while waiting
  double unallocated_mean_pct = 0;
  std::vector<double> unallocated_sampled_pct;  // 100 instants, evenly over the arrivals' span
  int64_t span_s = 0;                           // first to last arrival, replay seconds
  int nodes = 0;                                // replayed
  int devices = 0;
  int64_t moves = 0;
  double moves_per_hour = 0;                    // over span_s
  std::map<std::string, int> planner_outcomes;  // DefragOutcomeLabel or kRateLimitedLabel → count
  double seconds = 0;                           // wall clock
};

// Replays `pods` (lives[i] is pods[i]'s) on options.cluster_share of `nodes`. InvalidArgument when
// the lists differ in length, two pods share a UID, or the replayed nodes have no device memory.
StatusOr<TimelineRun> RunTimeline(const std::vector<model::Node>& nodes, const std::vector<model::PodRequest>& pods,
                                  const std::vector<PodLifetime>& lives, const TimelineOptions& options);

// One row per run, then each run's planner outcomes.
std::string FormatTimeline(std::span<const TimelineRun> runs, const TimelineOptions& options);

}  // namespace gpupack::sim
