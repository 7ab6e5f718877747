#include "scheduler/extender/cluster_state.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "testing/builders.h"
#include "testing/fake_clock.h"

namespace gpupack::extender {
namespace {

using builders::GpuNode;

// Pod "default/p-<uid>" (uid `uid`) asking for `mib` on each of `gpus` devices (0: whole ones).
model::PodRequest Pod(const std::string& uid, model::MiB mib, int gpus = 1) {
  model::PodRequest pod = builders::NamedPod("p-" + uid, gpus, mib);
  pod.uid = uid;
  return pod;
}

std::shared_ptr<const placement::Policy> Binpack() { return builders::PriorPolicy(model::PolicyKind::kBinpack); }

// Whether a Reserve reserved (a refusal is an OK StatusOr too).
bool Reserved(const StatusOr<ReserveVerdict>& verdict) { return verdict.ok() && verdict->reserved(); }

model::MiB Allocated(const ClusterState& state, const std::string& node) {
  model::MiB total = 0;
  state.ForEachNode([&](const model::Node& n, const placement::NodeSummary&, std::optional<Clock::TimePoint>) {
    if (n.name != node) return;
    for (const auto& d : n.devices)
      for (const auto& s : d.shares) total += s.mem_mib;
  });
  return total;
}

class ClusterStateTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  ClusterState state_{Binpack(), clock_, std::chrono::seconds(120)};
};

TEST_F(ClusterStateTest, ReservationIsVisibleToEvaluateAtOnce) {
  state_.UpsertNode(GpuNode("n1", 1, 16384));
  ASSERT_TRUE(state_.Evaluate("n1", Pod("a", 12000))->verdict.fits());
  StatusOr<ReserveVerdict> r = state_.Reserve(Pod("a", 12000), "n1");
  ASSERT_TRUE(Reserved(r)) << r.status() << (r.ok() ? r->message : "");
  EXPECT_EQ(r->reservation.allocation.node, "n1");
  EXPECT_EQ(state_.ReservationCount(), 1u);
  std::optional<placement::NodeEvaluation> e = state_.Evaluate("n1", Pod("b", 8000));
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->verdict.fits()) << "the in-flight reservation must count";
}

// A node with 8 CPUs: two 3-CPU pods fit (6 ≤ 8), a third does not (9 > 8), whether they hold
// devices or not; releasing one gives its CPU back, and a node refresh keeps the count.
TEST_F(ClusterStateTest, HostRequestsOfEveryReservedPodCount) {
  model::Node node = GpuNode("n1", 2, 16384);
  node.cpu_milli = 8000;
  state_.UpsertNode(node);
  ASSERT_TRUE(state_.TracksHostResources("n1"));
  model::PodRequest gpu = Pod("g", 1024);
  gpu.cpu_milli = 3000;
  model::PodRequest cpu_only = Pod("c", 0);
  cpu_only.containers.clear();
  cpu_only.cpu_milli = 3000;
  ASSERT_TRUE(Reserved(state_.Reserve(gpu, "n1")));
  ASSERT_TRUE(Reserved(state_.Reserve(cpu_only, "n1")));
  model::PodRequest third = Pod("t", 0);
  third.containers.clear();
  third.cpu_milli = 3000;
  EXPECT_EQ(state_.Evaluate("n1", third)->verdict.Message(), "insufficient cpu: pod needs 3000m, node has 2000m free");
  state_.UpsertNode(node);  // the inventory is refreshed: reservations keep their CPU
  EXPECT_FALSE(state_.Evaluate("n1", third)->verdict.fits());
  state_.Release("c");
  EXPECT_TRUE(state_.Evaluate("n1", third)->verdict.fits());
  EXPECT_FALSE(state_.TracksHostResources("n-unknown"));
}

TEST_F(ClusterStateTest, AssessIsMemoisedButNeverStale) {
  state_.UpsertNode(GpuNode("n1", 1, 16384));
  const model::PodRequest pod = Pod("a", 10000);
  const std::string shape = ClusterState::ShapeKey(pod);
  EXPECT_EQ(shape, ClusterState::ShapeKey(Pod("other-uid", 10000))) << "the UID is not part of the shape";
  EXPECT_NE(shape, ClusterState::ShapeKey(Pod("a", 10001)));
  std::optional<ClusterState::Assessment> first = state_.Assess("n1", pod, shape);
  ASSERT_TRUE(first && first->verdict.fits());
  EXPECT_EQ(first->cost, state_.Evaluate("n1", pod)->cost);
  EXPECT_TRUE(state_.Assess("n1", pod, shape)->verdict.fits());
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("b", 8000), "n1")));
  EXPECT_FALSE(state_.Assess("n1", pod, shape)->verdict.fits()) << "the reservation must invalidate the memo";
  state_.Release("b");
  EXPECT_TRUE(state_.Assess("n1", pod, shape)->verdict.fits());
  EXPECT_FALSE(state_.Assess("missing", pod, shape).has_value());
}

// Ranks are memoised with the assessments: a node is ranked once per shape until it changes, and
// afresh under another ranking id. Three nodes; the ranking counts its calls and ranks by cost.
TEST_F(ClusterStateTest, RanksAreMemoisedUntilTheNodeOrTheRankingChanges) {
  for (const char* name : {"r1", "r2", "r3"}) state_.UpsertNode(GpuNode(name, 1, 16384));
  const model::PodRequest pod = Pod("p", 4000);
  const std::string shape = ClusterState::ShapeKey(pod);
  const std::vector<std::string_view> names = {"r1", "r2", "r3"};
  int calls = 0;
  auto ranking = [&](uint64_t id) {
    return ClusterState::Ranking{{1, id}, [&calls, id](const ClusterState::Assessment& a) {
                                   ++calls;
                                   return placement::RankKey{a.cost + static_cast<double>(id), 0};
                                 }};
  };
  ClusterState::Assessments out;
  state_.AssessMany(names, pod, shape, ranking(1), out);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(out.at(0)->rank.cost, out.at(0)->cost + 1);
  state_.AssessMany(names, pod, shape, ranking(1), out);
  EXPECT_EQ(calls, 3) << "every rank from the memo";
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("b", 8000), "r2")));
  state_.AssessMany(names, pod, shape, ranking(1), out);
  EXPECT_EQ(calls, 4) << "r2 changed: ranked afresh, the others not";
  EXPECT_EQ(out.at(1)->rank.cost, state_.Evaluate("r2", pod)->cost + 1);
  EXPECT_EQ(out.at(0)->rank.cost, out.at(0)->cost + 1);
  state_.AssessMany(names, pod, shape, ranking(2), out);
  EXPECT_EQ(calls, 7) << "another ranking: all ranked afresh";
  EXPECT_EQ(out.at(2)->rank.cost, out.at(2)->cost + 2);
}

// A memo evicted while nobody reads it is reused for the next shape's: its old rows must read as
// not assessed, and a memo a caller still holds must never be reused. Eight memos are kept, so
// the ninth shape evicts the first.
TEST_F(ClusterStateTest, AReusedMemoAnswersOnlyForItsOwnShape) {
  for (const char* name : {"r1", "r2", "r3"}) state_.UpsertNode(GpuNode(name, 1, 16384));
  const std::vector<std::string_view> names = {"r1", "r2", "r3"};
  int calls = 0;
  const ClusterState::Ranking counting{{1, 1}, [&calls](const ClusterState::Assessment& a) {
                                         ++calls;
                                         return placement::RankKey{a.cost, 0};
                                       }};
  const model::PodRequest held_pod = Pod("held", 500);
  ClusterState::Assessments held;
  state_.AssessMany(names, held_pod, ClusterState::ShapeKey(held_pod), counting, held);
  const double held_cost = held.at(2)->cost;
  for (int i = 1; i <= 12; ++i) {
    const model::PodRequest pod = Pod("s" + std::to_string(i), 1000 * i);
    ClusterState::Assessments dropped;
    state_.AssessMany(names, pod, ClusterState::ShapeKey(pod), counting, dropped);
  }
  EXPECT_EQ(held.at(2)->cost, held_cost) << "a memo a caller holds was reused";
  const model::PodRequest pod = Pod("new", 15000);
  ClusterState::Assessments out;
  state_.AssessMany({"r1"}, pod, ClusterState::ShapeKey(pod), counting, out);
  calls = 0;
  state_.AssessMany(names, pod, ClusterState::ShapeKey(pod), counting, out);
  EXPECT_EQ(calls, 2) << "r2 and r3 are new to this shape; only r1 is in its memo";
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(out.at(i)->verdict.fits()) << names[i];
    EXPECT_EQ(out.at(i)->cost, state_.Evaluate(names[i], pod)->cost) << names[i];
  }
}

// The name index must agree with the table through growth and removals: every present node is
// found by AssessMany, every removed or unknown one is not.
TEST_F(ClusterStateTest, AssessManyFindsExactlyThePresentNodesThroughGrowthAndRemoval) {
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    names.push_back("node-" + std::to_string(i));
    state_.UpsertNode(GpuNode(names.back(), 1, 16384));
  }
  for (int i = 0; i < 300; i += 3) state_.RemoveNode(names[i]);
  state_.UpsertNode(GpuNode("node-0", 1, 16384));  // back after its removal
  names.push_back("never-added");
  const model::PodRequest pod = Pod("a", 1000);
  ClusterState::Assessments out;
  state_.AssessMany(std::vector<std::string_view>(names.begin(), names.end()), pod, ClusterState::ShapeKey(pod), {},
                    out);
  ASSERT_EQ(out.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const bool present = i == 0 || (i < 300 && i % 3 != 0);
    EXPECT_EQ(out.at(i) != nullptr, present) << names[i];
    if (present) {
      EXPECT_TRUE(out.at(i)->verdict.fits()) << names[i];
    }
  }
  EXPECT_EQ(state_.NodeCount(), 201u);
}

// AssessMany remembers where the names of a list were (the scheduler repeats its list); the
// remembered rows must never answer for a node that left, for a node that took a freed row, or
// for a list of the same length in another order. c and d have 4 GiB GPUs: the 8,000 MiB pod
// fits a and b only.
TEST_F(ClusterStateTest, RememberedRowsNeverAnswerForAnotherNode) {
  state_.UpsertNode(GpuNode("a", 1, 16384));
  state_.UpsertNode(GpuNode("b", 1, 16384));
  state_.UpsertNode(GpuNode("c", 1, 4096));
  const model::PodRequest pod = Pod("p", 8000);
  const std::string shape = ClusterState::ShapeKey(pod);
  ClusterState::Assessments out;
  auto fits = [&](std::vector<std::string_view> names) {
    state_.AssessMany(names, pod, shape, {}, out);
    std::string verdicts;
    for (size_t i = 0; i < out.size(); ++i) {
      const ClusterState::Assessment* a = out.at(i);
      verdicts += a == nullptr ? '-' : (a->verdict.fits() ? 'y' : 'n');
    }
    return verdicts;
  };
  EXPECT_EQ(fits({"a", "b", "c"}), "yyn");
  EXPECT_EQ(fits({"a", "b", "c"}), "yyn");  // from the remembered rows
  EXPECT_EQ(fits({"c", "a", "b"}), "nyy");  // same length, other order
  state_.RemoveNode("b");
  state_.UpsertNode(GpuNode("d", 1, 4096));  // takes b's freed row
  EXPECT_EQ(fits({"c", "a", "b"}), "ny-");
  EXPECT_EQ(fits({"c", "a", "d"}), "nyn");
  EXPECT_EQ(fits({"d", "a", "b"}), "ny-");
  EXPECT_EQ(fits({"a", "b", "c"}), "y-n");
}

// The fixed tie-break rank is computed once per node with the state's salt and handed out with
// every assessment, memoised or not.
TEST(ClusterStateTieBreak, AssessmentsCarryTheNodesSaltedRank) {
  FakeClock clock;
  for (uint64_t salt : {uint64_t{0}, uint64_t{7}}) {
    ClusterState state(Binpack(), clock, std::chrono::seconds(0), salt);
    state.UpsertNode(GpuNode("gpu-a1", 1, 16384));
    const model::PodRequest pod = Pod("a", 1000);
    for (int call = 0; call < 2; ++call) {  // the second call is served by the memo
      EXPECT_EQ(state.Assess("gpu-a1", pod, ClusterState::ShapeKey(pod))->tie_break_rank,
                placement::NodeTieBreakRank("gpu-a1", salt));
    }
    state.UpsertNode(GpuNode("gpu-a1", 2, 16384));  // an inventory change keeps the rank
    EXPECT_EQ(state.Assess("gpu-a1", pod, ClusterState::ShapeKey(pod))->tie_break_rank,
              placement::NodeTieBreakRank("gpu-a1", salt));
  }
}

TEST_F(ClusterStateTest, RepeatedReserveOfABoundPodIsIdempotent) {
  state_.UpsertNode(GpuNode("n1", 2, 16384));
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("a", 8000), "n1")));
  StatusOr<ReserveVerdict> again = state_.Reserve(Pod("a", 8000), "n1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->refusal, ReserveRefusal::kBindInProgress) << "a bind in progress is not yet a success";
  EXPECT_EQ(again->message, "a bind of pod default/p-a to node n1 is already in progress");
  state_.Confirm("a");
  again = state_.Reserve(Pod("a", 8000), "n1");
  ASSERT_TRUE(Reserved(again)) << again.status();
  EXPECT_TRUE(again->reservation.repeated);
  EXPECT_EQ(Allocated(state_, "n1"), 8000);
  state_.UpsertNode(GpuNode("n2", 1, 16384));
  StatusOr<ReserveVerdict> elsewhere = state_.Reserve(Pod("a", 8000), "n2");
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_EQ(elsewhere->refusal, ReserveRefusal::kBoundElsewhere);
  EXPECT_EQ(elsewhere->message, "pod default/p-a (uid a) already holds devices on node n1");
  EXPECT_EQ(Allocated(state_, "n2"), 0);
}

TEST_F(ClusterStateTest, ReleaseUndoesAReservationButNotABinding) {
  state_.UpsertNode(GpuNode("n1", 1, 16384));
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("a", 8000), "n1")));
  state_.Release("a");
  EXPECT_EQ(Allocated(state_, "n1"), 0);
  EXPECT_EQ(state_.ReservationCount(), 0u);
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("b", 8000), "n1")));
  state_.Confirm("b");
  state_.Release("b");
  EXPECT_EQ(Allocated(state_, "n1"), 8000);
}

TEST_F(ClusterStateTest, ErrorsAndRefusalsLeaveTheLedgerUnchanged) {
  state_.UpsertNode(GpuNode("n1", 1, 16384));
  EXPECT_EQ(state_.Reserve(Pod("a", 8000), "missing").status().code(), StatusCode::kNotFound);
  // 20000 MiB asked of a 16384 MiB device: a verdict, not an error.
  StatusOr<ReserveVerdict> big = state_.Reserve(Pod("a", 20000), "n1");
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->refusal, ReserveRefusal::kNoFit);
  EXPECT_NE(big->message.find("pod default/p-a no longer fits on node n1: "), std::string::npos) << big->message;
  EXPECT_EQ(state_.PodCount(), 0u);
  EXPECT_EQ(Allocated(state_, "n1"), 0);
}

TEST_F(ClusterStateTest, ExpiredReservationsAreReleased) {
  state_.UpsertNode(GpuNode("n1", 1, 16384));
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("a", 8000), "n1")));
  clock_.Advance(std::chrono::seconds(30));
  EXPECT_EQ(state_.ExpireReservations(std::chrono::seconds(60)), 0);
  clock_.Advance(std::chrono::seconds(31));
  EXPECT_EQ(state_.ExpireReservations(std::chrono::seconds(60)), 1);
  EXPECT_EQ(Allocated(state_, "n1"), 0);
}

TEST_F(ClusterStateTest, AHoldBecomesTheReservationWithItsDevices) {
  // Binpack on two 16384 MiB devices: the 8000 MiB hold takes one of them.
  state_.UpsertNode(GpuNode("n1", 2, 16384));
  StatusOr<ReserveVerdict> held = state_.Hold(Pod("a", 8000), "n1");
  ASSERT_TRUE(Reserved(held)) << held.status();
  EXPECT_EQ(state_.HoldCount(), 1u);
  EXPECT_EQ(state_.ReservationCount(), 0u);
  EXPECT_EQ(Allocated(state_, "n1"), 8000) << "a hold is a share like a reservation";
  StatusOr<ReserveVerdict> reserved = state_.Reserve(Pod("a", 8000), "n1");
  ASSERT_TRUE(Reserved(reserved)) << reserved.status();
  EXPECT_FALSE(reserved->reservation.repeated) << "the bind must still be written";
  EXPECT_EQ(reserved->reservation.allocation.containers.at(0).devices.at(0).uuid,
            held->reservation.allocation.containers.at(0).devices.at(0).uuid);
  EXPECT_EQ(state_.HoldCount(), 0u);
  EXPECT_EQ(state_.ReservationCount(), 1u);
  EXPECT_EQ(Allocated(state_, "n1"), 8000) << "taken over, not placed twice";
  // Release and ReleaseHold each touch only their own state.
  state_.ReleaseHold("a");
  EXPECT_EQ(state_.ReservationCount(), 1u);
  ASSERT_TRUE(Reserved(state_.Hold(Pod("b", 8000), "n1")));
  state_.Release("b");
  EXPECT_EQ(state_.HoldCount(), 1u);
  state_.ReleaseHold("b");
  EXPECT_EQ(Allocated(state_, "n1"), 8000);
}

TEST_F(ClusterStateTest, AHoldOnANodeThatWentStaleIsDroppedAtItsBind) {
  state_.UpsertNode(GpuNode("n1", 1, 16384), clock_.Now());
  ASSERT_TRUE(Reserved(state_.Hold(Pod("a", 8000), "n1")));
  clock_.Advance(std::chrono::seconds(121));  // > the 120 s heartbeat TTL
  StatusOr<ReserveVerdict> stale = state_.Reserve(Pod("a", 8000), "n1");
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->refusal, ReserveRefusal::kStaleNode);
  EXPECT_EQ(state_.PodCount(), 0u);
  EXPECT_EQ(Allocated(state_, "n1"), 0);
}

TEST_F(ClusterStateTest, HoldsExpireOnTheirOwnTtlAndNeverTakeAReservationWithThem) {
  state_.UpsertNode(GpuNode("n1", 2, 16384));
  ASSERT_TRUE(Reserved(state_.Hold(Pod("h", 4000), "n1")));
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("r", 4000), "n1")));
  clock_.Advance(std::chrono::seconds(31));
  EXPECT_EQ(state_.ExpireHolds(std::chrono::seconds(30)), 1);
  EXPECT_EQ(state_.ReservationCount(), 1u);
  EXPECT_EQ(Allocated(state_, "n1"), 4000);
  EXPECT_EQ(state_.ExpireReservations(std::chrono::seconds(30)), 1);
  EXPECT_EQ(state_.PodCount(), 0u);
}

TEST_F(ClusterStateTest, ASecondHoldOfOneUidIsRefusedAndABindElsewhereMovesIt) {
  state_.UpsertNode(GpuNode("n1", 1, 16384));
  state_.UpsertNode(GpuNode("n2", 1, 16384));
  ASSERT_TRUE(Reserved(state_.Hold(Pod("a", 8000), "n1")));
  StatusOr<ReserveVerdict> again = state_.Hold(Pod("a", 8000), "n2");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->refusal, ReserveRefusal::kBoundElsewhere) << "the filter releases its own hold first";
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("a", 8000), "n2")));
  EXPECT_EQ(Allocated(state_, "n1"), 0);
  EXPECT_EQ(Allocated(state_, "n2"), 8000);
  EXPECT_EQ(state_.NodeOfPod("a"), "n2");
}

TEST_F(ClusterStateTest, AllocationsFromTheClusterSurviveInventoryUpdates) {
  api::Allocation a;
  a.node = "n1";
  a.containers.push_back({"main", 0, false, false, false, {{"GPU-n1-0", 0, 6000, "", ""}}});
  // The pod may be listed before its node's inventory arrives.
  state_.UpsertPodAllocation("a", "default/a", a);
  state_.UpsertNode(GpuNode("n1", 2, 16384));
  EXPECT_EQ(Allocated(state_, "n1"), 6000);
  state_.UpsertNode(GpuNode("n1", 2, 16384));  // a fresh agent report
  EXPECT_EQ(Allocated(state_, "n1"), 6000);
  EXPECT_EQ(state_.NodeOfPod("a"), "n1");
  state_.RemovePod("a");
  EXPECT_EQ(Allocated(state_, "n1"), 0);
  EXPECT_EQ(state_.PodCount(), 0u);
}

TEST_F(ClusterStateTest, StaleNodesAreRejectedWithTheirAge) {
  state_.UpsertNode(GpuNode("n1", 1, 16384), clock_.Now());
  EXPECT_TRUE(state_.Evaluate("n1", Pod("a", 1000))->verdict.fits());
  clock_.Advance(std::chrono::seconds(300));
  placement::Verdict v = state_.Evaluate("n1", Pod("a", 1000))->verdict;
  EXPECT_EQ(v.reason, placement::RejectReason::kNodeStale);
  EXPECT_TRUE(v.unresolvable);
  // 300 s since the heartbeat > the 120 s TTL.
  StatusOr<ReserveVerdict> stale = state_.Reserve(Pod("a", 1000), "n1");
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->refusal, ReserveRefusal::kStaleNode);
  EXPECT_EQ(stale->message, "node n1: node inventory is stale: GPUNode heartbeat 300s old > TTL 120s");
  EXPECT_EQ(state_.PodCount(), 0u);
}

TEST_F(ClusterStateTest, EvaluateWithoutVictimsFreesTheirShares) {
  state_.UpsertNode(GpuNode("n1", 1, 16384));
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("v1", 8000), "n1")));
  ASSERT_TRUE(Reserved(state_.Reserve(Pod("v2", 8000), "n1")));
  EXPECT_FALSE(state_.EvaluateWithout("n1", Pod("p", 12000), {"v1"})->verdict.fits());
  EXPECT_TRUE(state_.EvaluateWithout("n1", Pod("p", 12000), {"v1", "v2"})->verdict.fits());
  EXPECT_EQ(Allocated(state_, "n1"), 16000) << "a dry run changes nothing";
}

TEST_F(ClusterStateTest, ConcurrentReservationsNeverOverbook) {
  state_.UpsertNode(GpuNode("n1", 4, 16384));
  std::vector<std::thread> threads;
  std::atomic<int> won{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if (Reserved(state_.Reserve(Pod(std::to_string(t) + "-" + std::to_string(i), 3000), "n1"))) ++won;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(won.load(), 4 * 5);  // five 3000 MiB shares per 16384 MiB GPU
  state_.ForEachNode([](const model::Node& n, const placement::NodeSummary&, std::optional<Clock::TimePoint>) {
    EXPECT_TRUE(placement::CheckLedgerInvariant(n).ok());
  });
}

// Filters read a snapshot while binds publish new ones. Every answer must be one the ledger gave
// at some moment: with nothing released, a node that once refused the probe never fits it again
// (an older snapshot served after a newer one would), every node is always found, and the ledger
// invariant holds on every snapshot a reader sees. At the end the binds have filled every device
// exactly, and every reader's answer agrees.
TEST_F(ClusterStateTest, ConcurrentFiltersSeeConsistentSnapshotsWhileBindsPublish) {
  constexpr int kNodes = 16;
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) {
    names.push_back("n" + std::to_string(i));
    state_.UpsertNode(GpuNode(names.back(), 2, 16384));
  }
  const std::vector<std::string_view> wanted(names.begin(), names.end());
  const model::PodRequest probe = Pod("probe", 3000);
  const std::string shape = ClusterState::ShapeKey(probe);
  std::atomic<bool> binding_done{false};
  std::atomic<int> won{0}, violations{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      std::vector<bool> refused(kNodes, false);
      ClusterState::Assessments out;
      // At least a few reads after the last bind, so the final state is read too.
      for (int after = 0; after < 3;) {
        if (binding_done.load()) ++after;
        state_.AssessMany(wanted, probe, shape, {}, out);
        for (int i = 0; i < kNodes; ++i) {
          if (out.at(i) == nullptr) {
            ++violations;
            continue;
          }
          const bool fits = out.at(i)->verdict.fits();
          if (refused[i] && fits) ++violations;
          refused[i] = refused[i] || !fits;
        }
        state_.ForEachNode([&](const model::Node& n, const placement::NodeSummary&, std::optional<Clock::TimePoint>) {
          if (!placement::CheckLedgerInvariant(n).ok()) ++violations;
        });
        ++reads;
      }
      for (int i = 0; i < kNodes; ++i) {
        if (!refused[i]) ++violations;  // the final state refuses on every node
      }
    });
  }
  std::vector<std::thread> binders;
  for (int t = 0; t < 2; ++t) {
    binders.emplace_back([&, t] {
      for (int i = 0; i < 25 * kNodes; ++i) {
        if (Reserved(state_.Reserve(Pod(std::to_string(t) + "-" + std::to_string(i), 3000), names[(i + t) % kNodes])))
          ++won;
      }
    });
  }
  for (auto& th : binders) th.join();
  binding_done = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(violations.load(), 0) << "after " << reads.load() << " reads";
  EXPECT_EQ(won.load(), kNodes * 2 * 5);  // five 3000 MiB shares per 16384 MiB GPU, two GPUs a node
  EXPECT_EQ(state_.ReservationCount(), static_cast<size_t>(kNodes * 2 * 5));
}

// A new policy is seen on every node at once, and a memo made under the old one is not served
// under the new.
TEST_F(ClusterStateTest, SetPolicyIsSeenOnEveryNodeAndDropsOldMemos) {
  for (int i = 0; i < 100; ++i) state_.UpsertNode(GpuNode("n" + std::to_string(i), 2, 16384));
  const model::PodRequest pod = Pod("a", 4000);
  const std::string shape = ClusterState::ShapeKey(pod);
  // Binpack's cost is the free memory the node keeps: 2 × 16384 − 4000.
  EXPECT_EQ(state_.Assess("n7", pod, shape)->cost, 28768);
  state_.SetPolicy(builders::PriorPolicy(model::PolicyKind::kSpread));
  EXPECT_EQ(state_.Assess("n7", pod, shape)->cost, -28768) << "spread's cost is the negative";
  int summaries = 0;
  state_.ForEachNode([&](const model::Node& n, const placement::NodeSummary& summary, std::optional<Clock::TimePoint>) {
    EXPECT_EQ(summary.total_free, 2 * 16384) << n.name;
    ++summaries;
  });
  EXPECT_EQ(summaries, 100);
}

}  // namespace
}  // namespace gpupack::extender
