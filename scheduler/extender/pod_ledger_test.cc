#include "scheduler/extender/pod_ledger.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace gpupack::extender {
namespace {

const Clock::TimePoint kT0{std::chrono::seconds(1'800'000'000)};

// A record of `mib` MiB on device 0 of `node` ("GPU-<node>-0", as builders::GpuNode names it).
PodLedger::PodRecord Record(const std::string& node, model::MiB mib, PodLedger::PodState state) {
  PodLedger::PodRecord record;
  record.node = node;
  record.pod_key = "default/p";
  record.allocation.node = node;
  record.allocation.containers.push_back({"main", 0, false, false, false, {{"GPU-" + node + "-0", 0, mib, "", ""}}});
  record.state = state;
  record.since = kT0;
  record.cpu_milli = 1500;
  return record;
}

TEST(PodLedger, ReattachSharesGivesEachNodeItsPodsSharesAndHostRequests) {
  PodLedger ledger;
  ledger.Lock().Put("a", Record("n1", 6000, PodLedger::PodState::kBound));
  ledger.Lock().Put("b", Record("n1", 2000, PodLedger::PodState::kReserved));
  ledger.Lock().Put("c", Record("n2", 4000, PodLedger::PodState::kBound));
  model::Node n1 = builders::GpuNode("n1", 1, 16384);
  n1.devices[0].shares.push_back({});  // what the inventory said is replaced
  ledger.Lock().ReattachShares(n1);
  ASSERT_EQ(n1.devices[0].shares.size(), 2u);
  EXPECT_EQ(n1.devices[0].shares[0].mem_mib + n1.devices[0].shares[1].mem_mib, 8000);  // 6000 + 2000
  EXPECT_EQ(n1.requested_cpu_milli, 3000);                                             // 1500 × 2
  EXPECT_EQ(ledger.PodCount(), 3u);
  EXPECT_EQ(ledger.ReservationCount(), 1u);
}

TEST(PodLedger, PutReplacesAndMovesARecord) {
  PodLedger ledger;
  ledger.Lock().Put("a", Record("n1", 6000, PodLedger::PodState::kReserved));
  ledger.Lock().Put("a", Record("n2", 6000, PodLedger::PodState::kBound));
  EXPECT_EQ(ledger.NodeOf("a"), "n2");
  EXPECT_EQ(ledger.ReservationCount(), 0u) << "the reservation became the bound record";
  model::Node n1 = builders::GpuNode("n1", 1, 16384);
  ledger.Lock().ReattachShares(n1);
  EXPECT_TRUE(n1.devices[0].shares.empty()) << "n1 no longer lists the pod";
}

TEST(PodLedger, EraseOnChecksTheNode) {
  PodLedger ledger;
  ledger.Lock().Put("a", Record("n1", 6000, PodLedger::PodState::kReserved));
  EXPECT_FALSE(ledger.Lock().EraseOn("a", "n2").has_value()) << "moved or gone since the caller looked";
  std::optional<PodLedger::PodRecord> erased = ledger.Lock().EraseOn("a", "n1");
  ASSERT_TRUE(erased.has_value());
  EXPECT_EQ(erased->cpu_milli, 1500);
  EXPECT_EQ(ledger.PodCount(), 0u);
  EXPECT_EQ(ledger.ReservationCount(), 0u);
  EXPECT_FALSE(ledger.NodeOf("a").has_value());
}

TEST(PodLedger, ConfirmAndExpiryTouchOnlyReservations) {
  using State = PodLedger::PodState;
  PodLedger ledger;
  ledger.Lock().Put("r", Record("n1", 1000, State::kReserved));
  ledger.Lock().Put("b", Record("n1", 1000, State::kBound));
  // Both since kT0; 61 s later with a 60 s TTL only the reservation is overdue.
  EXPECT_EQ(ledger.InStateLongerThan(State::kReserved, std::chrono::seconds(60), kT0 + std::chrono::seconds(60)),
            std::vector<std::string>{});
  EXPECT_EQ(ledger.InStateLongerThan(State::kReserved, std::chrono::seconds(60), kT0 + std::chrono::seconds(61)),
            std::vector<std::string>{"r"});
  EXPECT_FALSE(ledger.Confirm("b", kT0)) << "already bound";
  EXPECT_EQ(ledger.StateOf("r"), State::kReserved);
  EXPECT_TRUE(ledger.Confirm("r", kT0 + std::chrono::seconds(61)));
  EXPECT_EQ(ledger.StateOf("r"), State::kBound);
  EXPECT_EQ(ledger.ReservationCount(), 0u);
  EXPECT_TRUE(
      ledger.InStateLongerThan(State::kReserved, std::chrono::seconds(60), kT0 + std::chrono::hours(1)).empty());
}

TEST(PodLedger, HoldsAreCountedApartAndEraseOnlyInTheirState) {
  using State = PodLedger::PodState;
  PodLedger ledger;
  ledger.Lock().Put("h", Record("n1", 1000, State::kHeld));
  ledger.Lock().Put("r", Record("n1", 1000, State::kReserved));
  EXPECT_EQ(ledger.HoldCount(), 1u);
  EXPECT_EQ(ledger.ReservationCount(), 1u);
  EXPECT_EQ(ledger.PodCount(), 2u);
  EXPECT_EQ(ledger.HeldOn("h"), "n1");
  EXPECT_FALSE(ledger.HeldOn("r").has_value()) << "reserved, not held";
  EXPECT_FALSE(ledger.Confirm("h", kT0)) << "a hold is confirmed only after its bind reserves it";
  EXPECT_EQ(ledger.InStateLongerThan(State::kHeld, std::chrono::seconds(1), kT0 + std::chrono::seconds(2)),
            std::vector<std::string>{"h"});
  // A hold that became a reservation is not erased as a hold.
  ledger.Lock().Put("h", Record("n1", 1000, State::kReserved));
  EXPECT_EQ(ledger.HoldCount(), 0u);
  EXPECT_EQ(ledger.ReservationCount(), 2u);
  EXPECT_FALSE(ledger.Lock().EraseOn("h", "n1", State::kHeld).has_value());
  EXPECT_TRUE(ledger.Lock().EraseOn("h", "n1", State::kReserved).has_value());
  EXPECT_EQ(ledger.ReservationCount(), 1u);
  EXPECT_FALSE(ledger.StateOf("h").has_value());
}

}  // namespace
}  // namespace gpupack::extender
