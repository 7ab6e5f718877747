// The ledger: which pod holds which shares of which node's devices, held (a filter passed the
// pod to exactly this node; its bind has not come yet), reserved (a bind in flight) or bound (the
// cluster records it). The only record of pods the extender keeps; node views are
// rebuilt from it (ReattachShares) whenever a node's inventory is replaced.
//
// Thread safety: one mutex. The self-locking methods take it for their own duration. A caller
// that must decide and write under one hold (a bind checking that its UID is new, then
// reserving) takes a Locked, which holds the mutex for its lifetime. Lock order: a node's writer
// lock before the ledger; nothing in the ledger takes another lock.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/allocation.h"
#include "common/clock.h"
#include "model/model.h"

namespace gpupack::extender {

class PodLedger {
 public:
  enum class PodState { kHeld, kReserved, kBound };
  struct PodRecord {
    std::string node;
    std::string pod_key;
    api::Allocation allocation;
    PodState state = PodState::kReserved;
    Clock::TimePoint since;
    // The pod's host requests, counted into its node's requested CPU / memory (only meaningful
    // where the inventory knows the node's allocatable, i.e. standalone cluster files).
    int64_t cpu_milli = 0;
    int64_t memory_bytes = 0;
  };

  // The ledger's contents under its mutex, held from Lock() until this is destroyed.
  class Locked {
   public:
    // The record of `uid`, or null. Valid while this Locked lives and the record is not erased.
    const PodRecord* Find(std::string_view uid) const;
    // Records `uid` as `record` (replacing any record of it, reserved or bound).
    void Put(const std::string& uid, PodRecord record);
    // Removes `uid`'s record if it is on `node` (it may have moved or gone since the caller
    // looked) and, given `only`, in that state (a hold may have become a reservation, a
    // reservation bound); returns the record removed.
    std::optional<PodRecord> EraseOn(const std::string& uid, std::string_view node,
                                     std::optional<PodState> only = std::nullopt);
    // Replaces `node`'s device shares and requested CPU / memory with the ledger's records for
    // the pods on it, matching devices by UUID (a share whose device is gone stays in the ledger
    // and comes back with the device).
    void ReattachShares(model::Node& node) const;

   private:
    friend class PodLedger;
    explicit Locked(PodLedger& ledger) : ledger_(ledger), lock_(ledger.mu_) {}
    PodLedger& ledger_;
    std::unique_lock<std::mutex> lock_;
  };
  Locked Lock() { return Locked(*this); }

  // The node `uid` is reserved or bound on, if any.
  std::optional<std::string> NodeOf(std::string_view uid) const;
  std::optional<PodState> StateOf(std::string_view uid) const;
  // The node `uid` is held on, if it is held (one lookup for "held, and where").
  std::optional<std::string> HeldOn(std::string_view uid) const;
  // A reservation becomes bound as of `now`; false (and nothing changes) unless `uid` is reserved.
  bool Confirm(std::string_view uid, Clock::TimePoint now);
  // The UIDs in `state` since longer ago than `ttl` before `now`.
  std::vector<std::string> InStateLongerThan(PodState state, std::chrono::nanoseconds ttl, Clock::TimePoint now) const;
  size_t ReservationCount() const;
  size_t HoldCount() const;
  size_t PodCount() const;  // held + reserved + bound

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, PodRecord> pods_;  // by UID
  std::unordered_map<std::string, std::set<std::string>> pods_by_node_;
  size_t reservations_ = 0;
  size_t holds_ = 0;

  // REQUIRES: mu_ held. Keeps reservations_ and holds_ in step with a record in `state` entering
  // (delta +1) or leaving (-1).
  void Count(PodState state, int delta);
};

}  // namespace gpupack::extender
