// Kubernetes resource quantities ("8Gi", "500m", "1.5e3", "128974848") parsed exactly.
//
// Grammar (k8s.io/apimachinery/pkg/api/resource): [sign] number [suffix], where number is
// digits, digits.digits, digits. or .digits, and suffix is a binary SI suffix (Ki Mi Gi Ti Pi Ei),
// a decimal SI suffix (m, "", k, M, G, T, P, E) or a decimal exponent (e|E followed by a signed
// integer). The value is kept as an exact rational, so conversions round exactly once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace gpupack {

// GCC's 128-bit integer; __extension__ keeps -Wpedantic quiet about it.
__extension__ typedef unsigned __int128 QuantityUint128;

class Quantity {
 public:
  // Parses `text`. Errors name the text and what is wrong with it: garbage, an unknown suffix,
  // too many digits, or a magnitude beyond what any Kubernetes resource can hold (> 2^63 units).
  static StatusOr<Quantity> Parse(std::string_view text);

  bool negative() const { return negative_; }
  bool IsZero() const { return numerator_ == 0; }

  // The value times `multiplier` divided by `divisor`, rounded up (towards +infinity), as used
  // by Kubernetes when it converts a quantity to an integer scale. Fails when the result does not
  // fit an int64. REQUIRES: multiplier >= 1, divisor >= 1.
  StatusOr<int64_t> ScaledCeil(int64_t multiplier, int64_t divisor) const;

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  bool negative_ = false;
  // |value| = numerator_ / denominator_, both positive; denominator_ is a power of ten.
  QuantityUint128 numerator_ = 0;
  QuantityUint128 denominator_ = 1;
};

// Convenience conversions used throughout gpupack. Each fails with a message naming `what`
// (e.g. "gpupack.io/gpu-memory") when the quantity is unparseable, negative or zero (where a
// positive value is required) or too large.
StatusOr<int64_t> ParseMemoryMiBCeil(std::string_view text, std::string_view what);  // bytes → MiB, rounded up; > 0
StatusOr<int64_t> ParseBytes(std::string_view text, std::string_view what);          // bytes, rounded up; >= 0
StatusOr<int64_t> ParseMilliValue(std::string_view text, std::string_view what);     // e.g. CPU "500m" → 500; >= 0
StatusOr<int64_t> ParseCount(std::string_view text, std::string_view what);          // a whole number >= 0

// Formats MiB the way a person reads it: "8192 MiB".
std::string FormatMiB(int64_t mib);

}  // namespace gpupack
