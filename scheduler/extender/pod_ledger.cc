#include "scheduler/extender/pod_ledger.h"

#include "translate/allocation_ledger.h"

namespace gpupack::extender {

const PodLedger::PodRecord* PodLedger::Locked::Find(std::string_view uid) const {
  auto it = ledger_.pods_.find(std::string(uid));
  return it == ledger_.pods_.end() ? nullptr : &it->second;
}

void PodLedger::Locked::Put(const std::string& uid, PodRecord record) {
  auto it = ledger_.pods_.find(uid);
  if (it != ledger_.pods_.end()) {
    ledger_.Count(it->second.state, -1);
    if (it->second.node != record.node) {
      auto by_node = ledger_.pods_by_node_.find(it->second.node);
      by_node->second.erase(uid);
      if (by_node->second.empty()) ledger_.pods_by_node_.erase(by_node);
    }
  }
  ledger_.Count(record.state, +1);
  ledger_.pods_by_node_[record.node].insert(uid);
  ledger_.pods_[uid] = std::move(record);
}

std::optional<PodLedger::PodRecord> PodLedger::Locked::EraseOn(const std::string& uid, std::string_view node,
                                                               std::optional<PodState> only) {
  auto it = ledger_.pods_.find(uid);
  if (it == ledger_.pods_.end() || it->second.node != node) return std::nullopt;
  if (only && it->second.state != *only) return std::nullopt;
  ledger_.Count(it->second.state, -1);
  PodRecord record = std::move(it->second);
  ledger_.pods_.erase(it);
  auto by_node = ledger_.pods_by_node_.find(record.node);
  by_node->second.erase(uid);
  if (by_node->second.empty()) ledger_.pods_by_node_.erase(by_node);
  return record;
}

void PodLedger::Locked::ReattachShares(model::Node& node) const {
  std::unordered_map<std::string_view, model::Device*> by_uuid;
  for (model::Device& device : node.devices) {
    device.shares.clear();
    by_uuid.emplace(device.uuid, &device);
  }
  node.requested_cpu_milli = 0;
  node.requested_memory_bytes = 0;
  auto pods = ledger_.pods_by_node_.find(node.name);
  if (pods == ledger_.pods_by_node_.end()) return;
  for (const std::string& uid : pods->second) {
    const PodRecord& record = ledger_.pods_.at(uid);
    node.requested_cpu_milli += record.cpu_milli;
    node.requested_memory_bytes += record.memory_bytes;
    for (auto& [uuid, share] : translate::AllocationShares(record.allocation, uid, record.pod_key, &node)) {
      auto device = by_uuid.find(uuid);
      if (device != by_uuid.end()) device->second->shares.push_back(std::move(share));
    }
  }
}

std::optional<std::string> PodLedger::NodeOf(std::string_view uid) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(std::string(uid));
  if (it == pods_.end()) return std::nullopt;
  return it->second.node;
}

std::optional<PodLedger::PodState> PodLedger::StateOf(std::string_view uid) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(std::string(uid));
  if (it == pods_.end()) return std::nullopt;
  return it->second.state;
}

std::optional<std::string> PodLedger::HeldOn(std::string_view uid) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(std::string(uid));
  if (it == pods_.end() || it->second.state != PodState::kHeld) return std::nullopt;
  return it->second.node;
}

bool PodLedger::Confirm(std::string_view uid, Clock::TimePoint now) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(std::string(uid));
  if (it == pods_.end() || it->second.state != PodState::kReserved) return false;
  it->second.state = PodState::kBound;
  it->second.since = now;
  Count(PodState::kReserved, -1);
  return true;
}

std::vector<std::string> PodLedger::InStateLongerThan(PodState state, std::chrono::nanoseconds ttl,
                                                      Clock::TimePoint now) const {
  std::vector<std::string> uids;
  std::lock_guard lock(mu_);
  for (const auto& [uid, record] : pods_) {
    if (record.state == state && now - record.since > ttl) uids.push_back(uid);
  }
  return uids;
}

size_t PodLedger::ReservationCount() const {
  std::lock_guard lock(mu_);
  return reservations_;
}

size_t PodLedger::HoldCount() const {
  std::lock_guard lock(mu_);
  return holds_;
}

void PodLedger::Count(PodState state, int delta) {
  size_t* counter = state == PodState::kReserved ? &reservations_ : state == PodState::kHeld ? &holds_ : nullptr;
  if (counter != nullptr) *counter = delta > 0 ? *counter + 1 : *counter - 1;
}

size_t PodLedger::PodCount() const {
  std::lock_guard lock(mu_);
  return pods_.size();
}

}  // namespace gpupack::extender
