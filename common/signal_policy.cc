#include "common/signal_policy.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace gpupack {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

// Everything below runs inside a signal handler: only async-signal-safe calls (write,
// clock_gettime, raise), no allocation, no locale, no stdio.
class LineBuffer {
 public:
  void Append(const char* text) {
    while (*text != '\0' && size_ < sizeof data_) data_[size_++] = *text++;
  }
  void AppendNumber(int64_t value, int min_digits) {
    char digits[24];
    int n = 0;
    const bool negative = value < 0;
    uint64_t magnitude = negative ? uint64_t(-(value + 1)) + 1 : uint64_t(value);
    do {
      digits[n++] = char('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude != 0 && n < int(sizeof digits));
    while (n < min_digits && n < int(sizeof digits)) digits[n++] = '0';
    if (negative) Append("-");
    while (n > 0 && size_ < sizeof data_) data_[size_++] = digits[--n];
  }
  void WriteTo(int fd) const {
    size_t written = 0;
    while (written < size_) {
      const ssize_t n = write(fd, data_ + written, size_ - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      written += size_t(n);
    }
  }

 private:
  char data_[256];
  size_t size_ = 0;
};

// Civil date from days since 1970-01-01 (H. Hinnant's algorithm): integer arithmetic only.
void AppendTimestamp(LineBuffer& line) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t seconds = now.tv_sec;
  int64_t days = seconds / 86400;
  int64_t of_day = seconds % 86400;
  if (of_day < 0) {
    of_day += 86400;
    --days;
  }
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t day_of_era = days - era * 146097;
  const int64_t year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const int64_t day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t month_index = (5 * day_of_year + 2) / 153;
  const int64_t day = day_of_year - (153 * month_index + 2) / 5 + 1;
  const int64_t month = month_index < 10 ? month_index + 3 : month_index - 9;
  const int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  line.AppendNumber(year, 4);
  line.Append("-");
  line.AppendNumber(month, 2);
  line.Append("-");
  line.AppendNumber(day, 2);
  line.Append("T");
  line.AppendNumber(of_day / 3600, 2);
  line.Append(":");
  line.AppendNumber(of_day / 60 % 60, 2);
  line.Append(":");
  line.AppendNumber(of_day % 60, 2);
  line.Append(".");
  line.AppendNumber(now.tv_nsec / 1000000, 3);
  line.Append("Z ");
}

void OnFatalSignal(int signal_number) {
  const int saved_errno = errno;
  LineBuffer line;
  AppendTimestamp(line);
  line.Append("ERROR process: ");
  line.Append(program_invocation_short_name);
  line.Append(" died of fatal signal ");
  line.AppendNumber(signal_number, 1);
  line.Append(" (");
  line.Append(FatalSignalName(signal_number));
  line.Append(")\n");
  line.WriteTo(STDERR_FILENO);
  errno = saved_errno;
  // SA_RESETHAND restored the default action; re-raise so the process dies by this signal (exit
  // status, core dump and the kubelet's "Error" reason as without the handler).
  raise(signal_number);
}

}  // namespace

const char* FatalSignalName(int signal_number) {
  switch (signal_number) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
  }
  return "unknown";
}

void InstallSignalPolicy() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);

#if defined(__SANITIZE_ADDRESS__)
  return;  // ASan's SIGSEGV handler prints the stack; replacing it would lose the report
#endif
  struct sigaction fatal {};
  fatal.sa_handler = OnFatalSignal;
  sigemptyset(&fatal.sa_mask);
  fatal.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int signal_number : kFatalSignals) sigaction(signal_number, &fatal, nullptr);
}

}  // namespace gpupack
