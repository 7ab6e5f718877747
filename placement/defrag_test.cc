// The defragmentation planner (placement/defrag.h), each case with its arithmetic written out.
// Every node has one 80 GiB device (81920 MiB) and binpack scores re-placements (cost = the MiB
// a pick leaves free on its device, lowest wins), so where each moved pod lands is worked by hand.
#include "placement/defrag.h"

#include <deque>

#include <gtest/gtest.h>

#include "placement/placement.h"
#include "testing/builders.h"

namespace gpupack::placement {
namespace {

constexpr MiB k80 = 81920, k40 = 40960, k30 = 30720, k20 = 20480, k10 = 10240;

class DefragTest : public ::testing::Test {
 protected:
  DefragTest() : policy_(PolicyKind::kBinpack, TypicalWorkload{{builders::Spec(0, 1, 0, 1)}}, PlacementOptions{}) {}

  // A node with one empty 80 GiB device; returns its index.
  int AddNode(const std::string& name) {
    Node n = builders::NodeOf({builders::Gpu("GPU-" + name, k80)});
    n.name = name;
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
  }
  // Places pod `name` of `mib` on node `node` (its one device); `movable` lists it for the planner.
  PodRequest& Put(int node, const std::string& name, MiB mib, bool movable, int64_t priority = 0) {
    PodRequest& pod = pods_.emplace_back(builders::NamedPod(name, 1, mib));
    pod.priority = priority;
    const NodeEvaluation e = policy_.Evaluate(nodes_[node], pod);
    EXPECT_TRUE(e.verdict.fits()) << name << ": " << e.verdict.Message();
    EXPECT_TRUE(ApplyPlacement(nodes_[node], pod, e.placement, policy_.options()).ok());
    if (movable) movable_.push_back(MovablePod{&pod, node});
    return pod;
  }
  DefragResult Plan(const PodRequest& pending, DefragOptions options = {}, std::vector<uint8_t> pending_nodes = {}) {
    summaries_.clear();
    for (const Node& n : nodes_) summaries_.push_back(policy_.Summarize(n));
    return PlanDefragmentation(policy_, nodes_, summaries_, pending, movable_, options, pending_nodes);
  }
  std::string Message(const DefragResult& r, const PodRequest& pending) const {
    return r.Message(nodes_, movable_, pending);
  }
  std::string MovedName(const DefragMove& m) const { return movable_[m.pod].request->name; }

  Policy policy_;
  std::vector<Node> nodes_;
  std::vector<NodeSummary> summaries_;
  std::deque<PodRequest> pods_;  // stable addresses for MovablePod::request
  std::vector<MovablePod> movable_;
};

// node-a: movable a1 20 + a2 20, fixed 40 → 0 free. node-b, node-c: fixed 60 → 20 free each.
// The 40 GiB pod fits nowhere (largest free 20), though 20 + 20 = 40 GiB is free in all.
TEST_F(DefragTest, MovesTwoTwentyGibPodsToMakeRoomForAFortyGibPod) {
  const int a = AddNode("node-a"), b = AddNode("node-b"), c = AddNode("node-c");
  Put(a, "a1", k20, true);
  Put(a, "a2", k20, true);
  Put(a, "a-fixed", k40, false);
  Put(b, "b-fixed", 61440, false);
  Put(c, "c-fixed", 61440, false);
  const PodRequest pending = builders::NamedPod("train", 1, k40);

  const DefragResult r = Plan(pending);
  ASSERT_EQ(r.outcome, DefragOutcome::kPlanned) << Message(r, pending);
  // Only node-a has movable pods: moving a1 alone leaves 20 free < 40, a2 alone the same;
  // {a1, a2} leaves 40 ≥ 40. One fitting set, simulated once.
  EXPECT_EQ(r.sets_that_fit, 1);
  EXPECT_EQ(r.sets_simulated, 1);
  EXPECT_EQ(r.plan.node, a);
  ASSERT_EQ(r.plan.moves.size(), 2u);
  // Re-placed in order: a1 takes node-b (20 free, leaves 0: binpack's best; node-c ties, higher
  // index); then node-b is full and a2 takes node-c. node-a, after the 40 GiB pod, has 0 free.
  EXPECT_EQ(MovedName(r.plan.moves[0]), "a1");
  EXPECT_EQ(r.plan.moves[0].from_node, a);
  EXPECT_EQ(r.plan.moves[0].to_node, b);
  EXPECT_EQ(MovedName(r.plan.moves[1]), "a2");
  EXPECT_EQ(r.plan.moves[1].to_node, c);
  EXPECT_EQ(r.plan.moved_mib, k40);
  ASSERT_EQ(r.plan.placement.containers.size(), 1u);
  EXPECT_EQ(r.plan.placement.containers[0].mem_per_device_mib, k40);
  EXPECT_EQ(Message(r, pending),
            "evict default/a1 (20480 MiB) from node-a, it fits again on node-b; evict default/a2 (20480 MiB) from "
            "node-a, it fits again on node-c: then default/train fits on node-a (2 moves, 40960 MiB moved)");
}

// As above without node-c: a1 fills node-b's 20 free, and a2 then fits nowhere (node-a holds the
// 40 GiB pod and the fixed 40: 0 free). The only set that makes room is refused.
TEST_F(DefragTest, RefusesAPlanThatEvictsAPodThatFitsNowhere) {
  const int a = AddNode("node-a"), b = AddNode("node-b");
  Put(a, "a1", k20, true);
  Put(a, "a2", k20, true);
  Put(a, "a-fixed", k40, false);
  Put(b, "b-fixed", 61440, false);
  const PodRequest pending = builders::NamedPod("train", 1, k40);

  const DefragResult r = Plan(pending);
  EXPECT_EQ(r.outcome, DefragOutcome::kNoReplacement);
  EXPECT_EQ(r.sets_that_fit, 1);
  EXPECT_EQ(r.sets_simulated, 1);
  EXPECT_EQ(Message(r, pending),
            "1 set of moves makes room for default/train on 1 node, but it evicts a pod that then fits nowhere");
  (void)b;
}

// node-a: a1 20 (priority 100) and a2 20 (priority 0), fixed 40. The waiting pod has priority 10:
// a1 may not move for it, and without a1 node-a frees only 20 < 40. A pod the caller did not list
// (not movable) is never moved either: the same with a1 unlisted. With a1 at priority 10 (equal),
// it may move.
TEST_F(DefragTest, NeverMovesAPodOfHigherPriorityOrOneThatIsNotMovable) {
  const int a = AddNode("node-a");
  AddNode("node-b");
  AddNode("node-c");
  Put(1, "b-fixed", 61440, false);
  Put(2, "c-fixed", 61440, false);
  Put(a, "a1", k20, true, /*priority=*/100);
  Put(a, "a2", k20, true, /*priority=*/0);
  Put(a, "a-fixed", k40, false);
  PodRequest pending = builders::NamedPod("train", 1, k40);
  pending.priority = 10;

  DefragResult r = Plan(pending);
  EXPECT_EQ(r.outcome, DefragOutcome::kNoMovableRoom);
  EXPECT_EQ(Message(r, pending),
            "no node would hold default/train even with every movable pod of priority <= 10 moved away");

  // a1 not movable at all (listed nowhere), at a priority the pending pod would outrank.
  movable_.erase(movable_.begin());
  pods_[2].priority = 0;
  r = Plan(pending);
  EXPECT_EQ(r.outcome, DefragOutcome::kNoMovableRoom);

  // Listed again at priority 10 = the waiting pod's: movable for it.
  pods_[2].priority = 10;
  movable_.insert(movable_.begin(), MovablePod{&pods_[2], a});
  r = Plan(pending);
  ASSERT_EQ(r.outcome, DefragOutcome::kPlanned) << Message(r, pending);
  EXPECT_EQ(r.plan.moved_priority, 10 + 0);
}

// Three ways to make room for 40 GiB:
//   node-a: movable a1 20 + a2 20, fixed 40, 0 free: 2 moves, 40 GiB moved;
//   node-d: movable d1 20, fixed 40, 20 free: 1 move (20 + 20 = 40), 20 GiB moved;
//   node-e: movable e1 10, fixed 40, 30 free: 1 move (30 + 10 = 40), 10 GiB moved.
// Homes: node-b, node-c with 20 free each. Fewest moves first, then least memory: node-e's. Its
// e1 (10) lands where binpack leaves least: node-b, node-c and node-d leave 10 each (20 − 10);
// node-b has the lowest index of them.
TEST_F(DefragTest, ChoosesTheMinimalPlanOverLargerOnes) {
  const int a = AddNode("node-a"), b = AddNode("node-b");
  AddNode("node-c");
  const int d = AddNode("node-d"), e = AddNode("node-e");
  Put(a, "a1", k20, true);
  Put(a, "a2", k20, true);
  Put(a, "a-fixed", k40, false);
  Put(b, "b-fixed", 61440, false);
  Put(2, "c-fixed", 61440, false);
  Put(d, "d1", k20, true);
  Put(d, "d-fixed", k40, false);
  Put(e, "e1", k10, true);
  Put(e, "e-fixed", k40, false);
  const PodRequest pending = builders::NamedPod("train", 1, k40);

  const DefragResult r = Plan(pending);
  ASSERT_EQ(r.outcome, DefragOutcome::kPlanned) << Message(r, pending);
  // Best first: the one-move sets are {e1} (10 GiB) then {d1} (20 GiB); {e1} makes room and
  // plans, so {d1} is never evaluated and node-a's two-move set never proposed.
  EXPECT_EQ(r.sets_that_fit, 1);
  EXPECT_EQ(r.sets_simulated, 1);
  EXPECT_EQ(r.plan.node, e);
  ASSERT_EQ(r.plan.moves.size(), 1u);
  EXPECT_EQ(MovedName(r.plan.moves[0]), "e1");
  EXPECT_EQ(r.plan.moves[0].to_node, b);
  EXPECT_EQ(r.plan.moved_mib, k10);

  // Where kube-scheduler's filters let the waiting pod go only to node-a and node-d, node-e's
  // cheaper plan is out: {d1} (20 GiB) is next; with node-a alone, its two moves.
  EXPECT_EQ(Plan(pending, {}, {1, 0, 0, 1, 0}).plan.node, d);
  const DefragResult only_a = Plan(pending, {}, {1, 0, 0, 0, 0});
  EXPECT_EQ(only_a.plan.node, a);
  EXPECT_EQ(only_a.plan.moves.size(), 2u);
  // At most one move per plan excludes node-a's, not the others.
  EXPECT_EQ(Plan(pending, DefragOptions{.max_moves = 1}).plan.node, e);
  // With no moves allowed, three nodes would have room, none within the limit.
  const DefragResult none = Plan(pending, DefragOptions{.max_moves = 0});
  EXPECT_EQ(none.outcome, DefragOutcome::kTooManyMoves);
  EXPECT_EQ(Message(none, pending),
            "3 nodes would hold default/train, but only with more of its movable pods moved than a plan may move");
}

// node-a holds movable a1 30 and a2 10, and 40 free; the waiting pod asks 44 GiB (45056 MiB).
// a1 alone frees 70, a2 alone 50: both make room, and {a2} (10 GiB moved) goes before {a1} (30).
// With node-b's 30 free, a2 fits there: the plan, and {a1} never evaluated. With node-b full,
// neither re-places (a2 finds 80 − 30 − 44 = 6 free on node-a, a1 finds 80 − 10 − 44 = 26): and
// {a1, a2}, a superset of sets that make room, is never a set of its own, so two sets were found
// and two simulated.
TEST_F(DefragTest, PrefersTheLeastMemoryMovedAndCountsOnlyMinimalSets) {
  const int a = AddNode("node-a"), b = AddNode("node-b");
  Put(a, "a1", k30, true);
  Put(a, "a2", k10, true);
  PodRequest& b_fixed = Put(b, "b-fixed", 40960 + 10240, false);  // 30 free
  const PodRequest pending = builders::NamedPod("train", 1, 45056);

  DefragResult r = Plan(pending);
  ASSERT_EQ(r.outcome, DefragOutcome::kPlanned) << Message(r, pending);
  EXPECT_EQ(r.sets_that_fit, 1);
  EXPECT_EQ(MovedName(r.plan.moves[0]), "a2");
  EXPECT_EQ(r.plan.moves[0].to_node, b);

  RemovePod(nodes_[b], b_fixed.uid);
  b_fixed = builders::NamedPod("b-full", 1, k80);
  ASSERT_TRUE(ApplyPlacement(nodes_[b], b_fixed, policy_.Evaluate(nodes_[b], b_fixed).placement, {}).ok());
  r = Plan(pending);
  EXPECT_EQ(r.outcome, DefragOutcome::kNoReplacement);
  EXPECT_EQ(r.sets_that_fit, 2);
  EXPECT_EQ(r.sets_simulated, 2);
  EXPECT_EQ(r.nodes_with_room, 1);
}

TEST_F(DefragTest, NothingToMoveWhenThePodFitsAndBudgetBoundsTheSimulations) {
  const int a = AddNode("node-a");
  Put(a, "a1", k40, true);
  EXPECT_EQ(Plan(builders::NamedPod("small", 1, k20)).outcome, DefragOutcome::kFitsAlready);
  // 60 GiB: a1 must move, and with one node it fits nowhere else; with no simulation allowed the
  // planner says so rather than simulating.
  const PodRequest big = builders::NamedPod("big", 1, 61440);
  EXPECT_EQ(Plan(big).outcome, DefragOutcome::kNoReplacement);
  const DefragResult capped = Plan(big, DefragOptions{.max_sets_tried = 0});
  EXPECT_EQ(capped.outcome, DefragOutcome::kBudgetExceeded);
  EXPECT_EQ(capped.sets_simulated, 0);
  EXPECT_EQ(DefragOutcomeLabel(capped.outcome), "budget_exceeded");
}

// Live usage: node-a's device reports 70 GiB used (71680 MiB) under 60 GiB of caps (a1 20 + fixed 40),
// so 10 GiB is foreign and 80 − 60 − 10 = 10 GiB free. A 30 GiB pod fits nowhere (node-b has 20).
// Once a1 leaves, what its processes held leaves with it: 70 − 20 = 50 used under 40 of caps, still
// 10 foreign, 80 − 40 − 10 = 30 free: room. (Counting a1's usage as foreign once its share is gone
// would leave 80 − 40 − 30 = 10.)
TEST_F(DefragTest, AnEvictedPodsUsageLeavesWithItAndForeignUsageStays) {
  const int a = AddNode("node-a"), b = AddNode("node-b");
  Put(a, "a1", k20, true);
  Put(a, "a-fixed", k40, false);
  nodes_[a].devices[0].used_mib = 71680;
  Put(b, "b-fixed", 61440, false);
  EXPECT_EQ(DeviceFreeMiB(nodes_[a].devices[0], policy_.options()), k10);
  const PodRequest pending = builders::NamedPod("train", 1, k30);

  const DefragResult r = Plan(pending);
  ASSERT_EQ(r.outcome, DefragOutcome::kPlanned) << Message(r, pending);
  EXPECT_EQ(r.plan.node, a);
  ASSERT_EQ(r.plan.moves.size(), 1u);
  EXPECT_EQ(r.plan.moves[0].to_node, b);
}

// The waiting pod itself, listed as movable (it holds nothing yet, but a caller's list may name
// it), is never one of its own moves.
TEST_F(DefragTest, NeverMovesTheWaitingPod) {
  const int a = AddNode("node-a");
  const PodRequest& pending = Put(a, "train", k80, false);
  movable_.push_back(MovablePod{&pending, a});
  const PodRequest again = builders::NamedPod("train", 1, k80);
  EXPECT_EQ(Plan(again).outcome, DefragOutcome::kNoMovableRoom);
}

}  // namespace
}  // namespace gpupack::placement
