#include "common/quantity.h"

#include <cctype>
#include <limits>

namespace gpupack {
namespace {

using u128 = QuantityUint128;
// Values stay below this bound so that every multiplication below is checked cheaply.
constexpr u128 kLimit = static_cast<u128>(1) << 120;

bool MulChecked(u128 a, u128 b, u128* out) {
  if (a != 0 && b > kLimit / a) return false;
  *out = a * b;
  return true;
}

u128 Pow10(int n) {
  u128 v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

Status Bad(std::string_view text, std::string_view why) {
  return Status::InvalidArgument("invalid quantity \"" + std::string(text) + "\": " + std::string(why));
}

}  // namespace

StatusOr<Quantity> Quantity::Parse(std::string_view text) {
  Quantity q;
  q.text_ = std::string(text);
  size_t i = 0;
  const size_t n = text.size();
  if (n == 0) return Bad(text, "empty");
  if (text[i] == '+' || text[i] == '-') {
    q.negative_ = text[i] == '-';
    ++i;
  }
  u128 mantissa = 0;
  int digits = 0, frac_digits = 0;
  bool seen_point = false;
  for (; i < n; ++i) {
    char c = text[i];
    if (c == '.') {
      if (seen_point) return Bad(text, "more than one decimal point");
      seen_point = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    if (mantissa == 0 && c == '0') {
      // Leading zeros do not count towards the digit limit.
    } else {
      ++digits;
    }
    if (digits > 30) return Bad(text, "too many digits");
    mantissa = mantissa * 10 + static_cast<u128>(c - '0');
    if (seen_point) ++frac_digits;
  }
  // A number needs at least one digit on either side of the point.
  std::string_view number = text.substr(0, i);
  bool has_digit = false;
  for (char c : number) has_digit |= std::isdigit(static_cast<unsigned char>(c)) != 0;
  if (!has_digit) return Bad(text, "no digits");

  std::string_view suffix = text.substr(i);
  int pow2 = 0, pow10 = 0;
  if (suffix.empty()) {
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    switch (suffix[0]) {
      case 'K':
        pow2 = 10;
        break;
      case 'M':
        pow2 = 20;
        break;
      case 'G':
        pow2 = 30;
        break;
      case 'T':
        pow2 = 40;
        break;
      case 'P':
        pow2 = 50;
        break;
      case 'E':
        pow2 = 60;
        break;
      default:
        return Bad(text, "unknown suffix \"" + std::string(suffix) + "\"");
    }
  } else if (suffix.size() == 1 && suffix[0] != 'e' && suffix[0] != 'E') {
    switch (suffix[0]) {
      case 'm':
        pow10 = -3;
        break;
      case 'k':
        pow10 = 3;
        break;
      case 'M':
        pow10 = 6;
        break;
      case 'G':
        pow10 = 9;
        break;
      case 'T':
        pow10 = 12;
        break;
      case 'P':
        pow10 = 15;
        break;
      default:
        return Bad(text, "unknown suffix \"" + std::string(suffix) + "\"");
    }
  } else if (suffix.size() == 1 && suffix[0] == 'E') {
    pow10 = 18;
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    std::string_view exp = suffix.substr(1);
    bool neg = false;
    if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) {
      neg = exp[0] == '-';
      exp.remove_prefix(1);
    }
    if (exp.empty()) return Bad(text, "exponent has no digits");
    int e = 0;
    for (char c : exp) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return Bad(text, "exponent is not an integer");
      e = e * 10 + (c - '0');
      if (e > 40) return Bad(text, "exponent out of range");
    }
    pow10 = neg ? -e : e;
  } else {
    return Bad(text, "unknown suffix \"" + std::string(suffix) + "\"");
  }

  pow10 -= frac_digits;
  u128 num = mantissa, den = 1;
  if (pow10 >= 0) {
    if (!MulChecked(num, Pow10(std::min(pow10, 37)), &num) || pow10 > 37) return Bad(text, "value too large");
  } else {
    if (-pow10 > 37) return Bad(text, "value too small to represent");
    den = Pow10(-pow10);
  }
  if (pow2 > 0 && !MulChecked(num, static_cast<u128>(1) << pow2, &num)) return Bad(text, "value too large");
  // Anything above 2^63 whole units cannot be a Kubernetes resource amount.
  if (num / den > static_cast<u128>(std::numeric_limits<int64_t>::max())) return Bad(text, "value too large");
  q.numerator_ = num;
  q.denominator_ = den;
  if (num == 0) q.negative_ = false;
  return q;
}

StatusOr<int64_t> Quantity::ScaledCeil(int64_t multiplier, int64_t divisor) const {
  GPUPACK_CHECK(multiplier >= 1 && divisor >= 1);
  u128 num;
  if (!MulChecked(numerator_, static_cast<u128>(multiplier), &num)) {
    return Status::InvalidArgument("quantity \"" + text_ + "\" is too large");
  }
  u128 den = denominator_ * static_cast<u128>(divisor);
  u128 whole = num / den;
  bool exact = num % den == 0;
  if (whole > static_cast<u128>(std::numeric_limits<int64_t>::max()) - 1) {
    return Status::InvalidArgument("quantity \"" + text_ + "\" is too large");
  }
  int64_t v = static_cast<int64_t>(whole);
  if (negative_) return -v;  // ceil towards +inf: drop the fraction of a negative value
  return exact ? v : v + 1;
}

namespace {
StatusOr<Quantity> ParseFor(std::string_view text, std::string_view what) {
  auto q = Quantity::Parse(text);
  if (!q.ok()) return q.status().WithContext(what);
  if (q->negative()) {
    return Status::InvalidArgument(std::string(what) + ": quantity \"" + std::string(text) + "\" is negative");
  }
  return q;
}
}  // namespace

StatusOr<int64_t> ParseMemoryMiBCeil(std::string_view text, std::string_view what) {
  GPUPACK_ASSIGN_OR_RETURN(Quantity q, ParseFor(text, what));
  if (q.IsZero())
    return Status::InvalidArgument(std::string(what) + ": quantity \"" + std::string(text) + "\" must be positive");
  auto mib = q.ScaledCeil(1, int64_t{1} << 20);
  if (!mib.ok()) return mib.status().WithContext(what);
  return mib;
}

StatusOr<int64_t> ParseBytes(std::string_view text, std::string_view what) {
  GPUPACK_ASSIGN_OR_RETURN(Quantity q, ParseFor(text, what));
  auto v = q.ScaledCeil(1, 1);
  if (!v.ok()) return v.status().WithContext(what);
  return v;
}

StatusOr<int64_t> ParseMilliValue(std::string_view text, std::string_view what) {
  GPUPACK_ASSIGN_OR_RETURN(Quantity q, ParseFor(text, what));
  auto v = q.ScaledCeil(1000, 1);
  if (!v.ok()) return v.status().WithContext(what);
  return v;
}

StatusOr<int64_t> ParseCount(std::string_view text, std::string_view what) {
  GPUPACK_ASSIGN_OR_RETURN(Quantity q, ParseFor(text, what));
  auto milli = q.ScaledCeil(1000, 1);
  if (!milli.ok()) return milli.status().WithContext(what);
  if (*milli % 1000 != 0) {
    return Status::InvalidArgument(std::string(what) + ": \"" + std::string(text) + "\" is not a whole number");
  }
  return *milli / 1000;
}

std::string FormatMiB(int64_t mib) { return std::to_string(mib) + " MiB"; }

}  // namespace gpupack
