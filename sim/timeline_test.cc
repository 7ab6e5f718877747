// The timeline replay (sim/timeline.h) on hand-made clusters of one-GPU nodes of 1000 MiB (the
// trace's modelled GPU), read from the trace's own CSV format, each case's arithmetic written out.
#include "sim/timeline.h"

#include <gtest/gtest.h>

#include "sim/inputs.h"

namespace gpupack::sim {
namespace {

constexpr char kTwoNodes[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "node-a,64000,262144,1,A\n"
    "node-b,64000,262144,1,B\n";

// y and z fill node-b (400 + 600) at t=0; m (best effort, any model) arrives at t=1 and finds only
// node-a; z leaves at t=2 (node-b: 600 free); x takes 400 of node-a at t=3 (100 free there). p
// (500, model A) arrives at t=4: node-a has 100 free, node-b is not its model. q (600, model B)
// arrives at t=10.
constexpr char kScenario[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time\n"
    "y,1000,1024,1,400,B,LS,0,6000\n"
    "z,1000,1024,1,600,B,LS,0,2\n"
    "m,1000,1024,1,500,,BE,1,5000\n"
    "x,1000,1024,1,400,A,LS,3,7000\n"
    "p,1000,1024,1,500,A,LS,4,8\n"
    "q,1000,1024,1,600,B,LS,10,8000\n";

TimelineRun Replay(const char* nodes_csv, const char* pods_csv, const TimelineOptions& options) {
  StatusOr<std::vector<model::Node>> nodes = ParseAlibabaNodes(nodes_csv, "nodes.csv");
  StatusOr<std::vector<model::PodRequest>> pods = ParseAlibabaPods(pods_csv, "pods.csv");
  StatusOr<std::vector<PodLifetime>> lives = ParseAlibabaPodLifetimes(pods_csv, "pods.csv");
  EXPECT_TRUE(nodes.ok() && pods.ok() && lives.ok());
  StatusOr<TimelineRun> run = RunTimeline(*nodes, *pods, *lives, options);
  EXPECT_TRUE(run.ok()) << run.status();
  return *run;
}

// One node. a (600) runs from 0 to 100. b (600) arrives at 10 and waits (400 free); c (600)
// arrives at 20, waits, and leaves at 50 before it ran. At 100 a leaves and b runs: one wait of
// 90 s. Over the arrivals' span [0, 20] 600 of 1000 MiB are held throughout: 40 % unallocated.
TEST(TimelineTest, ADepartureFreesRoomAndTheWaitingPodRuns) {
  constexpr char kNode[] = "sn,cpu_milli,memory_mib,gpu,model\nnode-a,64000,262144,1,A\n";
  constexpr char kPods[] =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time\n"
      "a,1000,1024,1,600,,LS,0,100\n"
      "b,1000,1024,1,600,,LS,10,500\n"
      "c,1000,1024,1,600,,LS,20,50\n";
  const TimelineRun r = Replay(kNode, kPods, TimelineOptions{});
  EXPECT_EQ(r.pods, 3);
  EXPECT_EQ(r.waited, 2);
  EXPECT_EQ(r.ran_after_wait, 1);
  EXPECT_EQ(r.wait_mean_s, 90);
  EXPECT_EQ(r.wait_p95_s, 90);
  EXPECT_EQ(r.never_ran, 1);
  EXPECT_EQ(r.span_s, 20);
  EXPECT_DOUBLE_EQ(r.unallocated_mean_pct, 40);
  ASSERT_EQ(r.unallocated_sampled_pct.size(), 100u);
  for (double s : r.unallocated_sampled_pct) EXPECT_DOUBLE_EQ(s, 40);
  EXPECT_EQ(r.moves, 0);
}

// Without defragmentation p waits at t=4 and leaves at t=8 without having run; q fits on node-b
// (y 400 + q 600). Held MiB over [0, 10]: 1000 (y z) for 1 s, 1500 (+m) 1 s, 900 (−z) 1 s, then
// 1300 (+x) for 7 s: 12500 MiB·s of 2000 MiB × 10 s, 37.5 % unallocated.
TEST(TimelineTest, WithoutDefragmentationThePodWaitsForRoomThatNeverComes) {
  const TimelineRun r = Replay(kTwoNodes, kScenario, TimelineOptions{});
  EXPECT_EQ(r.waited, 1);
  EXPECT_EQ(r.ran_after_wait, 0);
  EXPECT_EQ(r.never_ran, 1);
  EXPECT_DOUBLE_EQ(r.unallocated_mean_pct, 37.5);
  EXPECT_TRUE(r.planner_outcomes.empty());
}

// With it, p runs at t=4: m (best effort) moves from node-a to node-b (600 free there), which
// leaves node-a 600 free for p's 500. Held over [4, 8): 1800 MiB, so 1000 + 1500 + 900 + 1300 +
// 4 × 1800 + 2 × 1300 = 14500 MiB·s: 27.5 % unallocated. At t=10 q (600) finds node-b with y and
// m (100 free); m moved 6 s ago, inside the 600 s cool-down, and y is not movable: q waits until
// m leaves at 5000 (4990 s). The sample at t=10 sees y, m, x held: 1300 of 2000, 35 %.
TEST(TimelineTest, DefragmentationMovesABestEffortPodSoThatTheWaitingPodRunsAtOnce) {
  TimelineOptions options;
  options.defrag = true;
  const TimelineRun r = Replay(kTwoNodes, kScenario, options);
  EXPECT_EQ(r.moves, 1);
  EXPECT_EQ(r.waited, 1) << "q";
  EXPECT_EQ(r.ran_after_wait, 1);
  EXPECT_EQ(r.wait_mean_s, 4990);
  EXPECT_EQ(r.never_ran, 0);
  EXPECT_DOUBLE_EQ(r.unallocated_mean_pct, 27.5);
  EXPECT_DOUBLE_EQ(r.unallocated_sampled_pct.front(), 50) << "y and z at t=0";
  EXPECT_DOUBLE_EQ(r.unallocated_sampled_pct.back(), 35);
  EXPECT_EQ(r.planner_outcomes, (std::map<std::string, int>{{"planned", 1}, {"no_movable_room", 1}}));
  EXPECT_DOUBLE_EQ(r.moves_per_hour, 1 * 3600.0 / 10);
}

// A cool-down of 5 s lets m move again at t=10: back to node-a (x 400, p gone: 600 free), and q
// takes node-b. Two moves, nobody waits; at t=10 everything but p is held: 1900 of 2000, 5 %.
// With at most one move an hour, the second plan is refused: q waits for m to leave, as above.
TEST(TimelineTest, TheCoolDownAndTheRateLimitHoldMovesBack) {
  TimelineOptions options;
  options.defrag = true;
  options.move_cooldown_s = 5;
  TimelineRun r = Replay(kTwoNodes, kScenario, options);
  EXPECT_EQ(r.moves, 2);
  EXPECT_EQ(r.waited, 0);
  EXPECT_DOUBLE_EQ(r.unallocated_sampled_pct.back(), 5);
  EXPECT_EQ(r.planner_outcomes, (std::map<std::string, int>{{"planned", 2}}));

  options.max_moves_per_hour = 1;
  r = Replay(kTwoNodes, kScenario, options);
  EXPECT_EQ(r.moves, 1);
  EXPECT_EQ(r.waited, 1);
  EXPECT_EQ(r.wait_mean_s, 4990);
  EXPECT_EQ(r.planner_outcomes, (std::map<std::string, int>{{"planned", 1}, {std::string(kRateLimitedLabel), 1}}));
}

// No pod may move when none is movable: the planner finds no room, p waits as without it.
TEST(TimelineTest, NothingMovesWhenNothingIsMovable) {
  TimelineOptions options;
  options.defrag = true;
  options.movable = Movability::kNone;
  const TimelineRun r = Replay(kTwoNodes, kScenario, options);
  EXPECT_EQ(r.moves, 0);
  EXPECT_EQ(r.never_ran, 1);
  EXPECT_EQ(r.planner_outcomes.at("no_movable_room"), 1);
}

// The arrival speedup divides the creation times and keeps the lifetimes: a (0 to 100) and b (200
// to 300), 600 each, do not overlap as the trace has them; at speedup 10 b arrives at 20 and
// lives until 120, and waits for a until 100.
TEST(TimelineTest, TheArrivalSpeedupCompressesArrivalsAndKeepsLifetimes) {
  constexpr char kNode[] = "sn,cpu_milli,memory_mib,gpu,model\nnode-a,64000,262144,1,A\n";
  constexpr char kPods[] =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time\n"
      "a,1000,1024,1,600,,LS,0,100\n"
      "b,1000,1024,1,600,,LS,200,300\n";
  TimelineOptions options;
  EXPECT_EQ(Replay(kNode, kPods, options).waited, 0);
  options.arrival_speedup = 10;
  const TimelineRun r = Replay(kNode, kPods, options);
  EXPECT_EQ(r.waited, 1);
  EXPECT_EQ(r.wait_mean_s, 80);
}

TEST(TimelineTest, LifetimesAreReadAndADeletionBeforeTheCreationIsRefused) {
  StatusOr<std::vector<PodLifetime>> lives = ParseAlibabaPodLifetimes(kScenario, "pods.csv");
  ASSERT_TRUE(lives.ok()) << lives.status();
  ASSERT_EQ(lives->size(), 6u);
  EXPECT_EQ((*lives)[2].created_s, 1);
  EXPECT_EQ((*lives)[2].deleted_s, 5000);
  EXPECT_EQ((*lives)[2].qos, "BE");

  constexpr char kBackwards[] =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
      "early,1000,1024,1,500,100,50\n";
  lives = ParseAlibabaPodLifetimes(kBackwards, "pods.csv");
  ASSERT_FALSE(lives.ok());
  EXPECT_EQ(lives.status().message(), "pods.csv:2:27: pod \"early\": deletion_time 50 is before its creation_time 100");
  lives = ParseAlibabaPodLifetimes("name,cpu_milli,creation_time\np,1,0\n", "pods.csv");
  ASSERT_FALSE(lives.ok());
  EXPECT_EQ(lives.status().message(), "pods.csv:1:1: missing column \"deletion_time\"");
  lives = ParseAlibabaPodLifetimes("name,creation_time,deletion_time\np,soon,9\n", "pods.csv");
  ASSERT_FALSE(lives.ok());
  EXPECT_EQ(lives.status().message(), "pods.csv:2:3: creation_time: \"soon\" is not a non-negative integer");
}

TEST(TimelineTest, MismatchedInputIsRefused) {
  StatusOr<std::vector<model::Node>> nodes = ParseAlibabaNodes(kTwoNodes, "nodes.csv");
  StatusOr<std::vector<model::PodRequest>> pods = ParseAlibabaPods(kScenario, "pods.csv");
  ASSERT_TRUE(nodes.ok() && pods.ok());
  StatusOr<TimelineRun> r = RunTimeline(*nodes, *pods, {}, TimelineOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "timeline: 6 pods but 0 lifetimes");
}

}  // namespace
}  // namespace gpupack::sim
