#include "model/model.h"

#include <limits>

namespace gpupack::model {

MiB PodRequest::TotalMemMiB() const {
  MiB total = 0;
  for (const auto& c : containers) {
    if (!c.init) total += static_cast<MiB>(c.device_count) * c.mem_per_device_mib;
  }
  return total;
}

bool PodRequest::WantsCompute() const {
  for (const auto& c : containers) {
    if (c.compute_pct > 0) return true;
  }
  return false;
}

bool PodRequest::Burstable() const {
  for (const auto& c : containers) {
    if (c.burstable()) return true;
  }
  return false;
}

int ProportionalComputePct(MiB mem_mib, MiB capacity_mib) {
  if (capacity_mib <= 0 || mem_mib <= 0) return 0;
  if (mem_mib >= capacity_mib) return kDeviceComputePct;
  return static_cast<int>(mem_mib * kDeviceComputePct / capacity_mib);
}

MiB LargestMemoryWithinComputePct(int compute_pct, MiB capacity_mib) {
  // ⌊100 · mem / capacity⌋ ≤ pct ⟺ 100 · mem < (pct + 1) · capacity ⟺ 100 · mem ≤ (pct + 1) · capacity − 1.
  if (capacity_mib <= 0) return std::numeric_limits<MiB>::max();
  return ((compute_pct + 1) * capacity_mib - 1) / kDeviceComputePct;
}

int AllocatedComputePct(const Device& device) {
  int allocated = 0;
  for (const auto& s : device.shares) {
    if (s.exclusive) return kDeviceComputePct;
    allocated += s.compute_pct;
  }
  return allocated;
}

int ShareComputePct(const ContainerPlacement& cp, size_t i, const Device& device) {
  if (i < cp.compute_pct.size()) return cp.compute_pct[i];
  return cp.exclusive ? kDeviceComputePct : ProportionalComputePct(cp.mem_per_device_mib, device.capacity_mib);
}

namespace {

bool IsWordSeparator(char c) { return c == ' ' || c == '-'; }

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

// The next word of `text` at or after `pos`, advancing `pos` past it; empty at the end.
std::string_view NextWord(std::string_view text, size_t& pos) {
  while (pos < text.size() && IsWordSeparator(text[pos])) ++pos;
  const size_t start = pos;
  while (pos < text.size() && !IsWordSeparator(text[pos])) ++pos;
  return text.substr(start, pos - start);
}

// The words of `wanted`, in order, are the words of `model` from `model_pos` on.
bool WordRunAt(std::string_view wanted, std::string_view model, size_t model_pos) {
  size_t wanted_pos = 0;
  for (;;) {
    const std::string_view want = NextWord(wanted, wanted_pos);
    if (want.empty()) return true;
    if (!EqualsIgnoringCase(want, NextWord(model, model_pos))) return false;
  }
}

// `*` matches any run of characters; everything else one character, case-insensitively.
bool GlobMatches(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && Lower(pattern[p]) == Lower(text[t])) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

bool GpuModelMatches(std::string_view wanted, std::string_view model) {
  if (wanted.find('*') != std::string_view::npos) return GlobMatches(wanted, model);
  size_t probe = 0;
  if (NextWord(wanted, probe).empty()) return false;
  for (size_t pos = 0;;) {
    while (pos < model.size() && IsWordSeparator(model[pos])) ++pos;
    if (pos >= model.size()) return false;
    if (WordRunAt(wanted, model, pos)) return true;
    while (pos < model.size() && !IsWordSeparator(model[pos])) ++pos;
  }
}

}  // namespace gpupack::model
