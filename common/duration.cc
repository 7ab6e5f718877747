#include "common/duration.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

namespace gpupack {

StatusOr<std::chrono::nanoseconds> ParseDuration(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("expected a duration such as \"90s\", got \"\"");
  std::chrono::nanoseconds total{0};
  size_t i = 0;
  const std::string whole(text);
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
    size_t k = j;
    while (k < text.size() && std::isalpha(static_cast<unsigned char>(text[k]))) ++k;
    const std::string number(text.substr(i, j - i));
    const std::string unit(text.substr(j, k - j));
    static const std::map<std::string, double> kUnits = {{"h", 3600e9}, {"m", 60e9}, {"s", 1e9},
                                                         {"ms", 1e6},   {"us", 1e3}, {"ns", 1}};
    auto u = kUnits.find(unit);
    char* end = nullptr;
    const double v = number.empty() ? NAN : std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || u == kUnits.end()) {
      return Status::InvalidArgument("expected a duration such as \"90s\", \"5m\" or \"1h30m\", got \"" + whole + "\"");
    }
    const double ns = v * u->second;
    if (ns > 1e18) return Status::InvalidArgument("duration \"" + whole + "\" is too long");
    total += std::chrono::nanoseconds(static_cast<int64_t>(ns));
    i = k;
  }
  return total;
}

}  // namespace gpupack
