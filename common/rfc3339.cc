#include "common/rfc3339.h"

#include <ctime>

namespace gpupack {
namespace {

bool IsDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

int ToInt(std::string_view s) {
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

}  // namespace

std::string FormatRfc3339(Clock::TimePoint t) {
  const std::time_t secs = std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

StatusOr<Clock::TimePoint> ParseRfc3339(std::string_view text) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("invalid RFC 3339 time \"" + std::string(text) + "\": " + why);
  };
  // 2026-11-29T10:18:41 is 19 characters; then an optional fraction and a zone.
  if (text.size() < 20) return bad("too short");
  if (text[4] != '-' || text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return bad("expected YYYY-MM-DDTHH:MM:SS");
  }
  const std::string_view fields[] = {text.substr(0, 4),  text.substr(5, 2),  text.substr(8, 2),
                                     text.substr(11, 2), text.substr(14, 2), text.substr(17, 2)};
  for (auto f : fields) {
    if (!IsDigits(f)) return bad("expected digits");
  }
  std::tm tm{};
  tm.tm_year = ToInt(fields[0]) - 1900;
  tm.tm_mon = ToInt(fields[1]) - 1;
  tm.tm_mday = ToInt(fields[2]);
  tm.tm_hour = ToInt(fields[3]);
  tm.tm_min = ToInt(fields[4]);
  tm.tm_sec = ToInt(fields[5]);
  if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60) {
    return bad("field out of range");
  }
  std::string_view rest = text.substr(19);
  int64_t nanos = 0;
  if (!rest.empty() && rest[0] == '.') {
    size_t n = 1;
    int64_t scale = 100'000'000;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') {
      nanos += (rest[n] - '0') * scale;
      scale /= 10;
      ++n;
    }
    if (n == 1) return bad("empty fraction");
    rest = rest.substr(n);
  }
  int64_t offset_s = 0;
  if (rest == "Z" || rest == "z") {
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' && IsDigits(rest.substr(1, 2)) &&
             IsDigits(rest.substr(4, 2))) {
    offset_s = (ToInt(rest.substr(1, 2)) * 3600 + ToInt(rest.substr(4, 2)) * 60) * (rest[0] == '-' ? -1 : 1);
  } else {
    return bad("expected a zone (Z or ±HH:MM)");
  }
  const int64_t secs = static_cast<int64_t>(timegm(&tm)) - offset_s;
  // Clock::TimePoint counts nanoseconds in 64 bits, about 292 years either side of 1970; RFC 3339
  // allows years to 9999. A time past that range is refused, not wrapped into another one.
  constexpr int64_t kMaxSeconds = std::chrono::duration_cast<std::chrono::seconds>(Clock::Duration::max()).count() - 1;
  if (secs > kMaxSeconds || secs < -kMaxSeconds) return bad("outside the years 1678 to 2262 this clock can represent");
  return Clock::TimePoint(std::chrono::seconds(secs) + std::chrono::nanoseconds(nanos));
}

}  // namespace gpupack
