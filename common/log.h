// Minimal structured logging to stderr: one line per event, "time level component: message".
// Thread safety: Log may be called from any thread; lines never interleave.
#pragma once

#include <sstream>
#include <string_view>

namespace gpupack {

enum class LogLevel { kDebug = 0, kInfo, kWarning, kError };

// Messages below this level are dropped. Default kInfo; GPUPACK_LOG_LEVEL=debug|info|warning|error
// in the environment overrides it at start-up.
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void Log(LogLevel level, std::string_view component, std::string_view message);

}  // namespace gpupack

// GPUPACK_LOG(kInfo, "extender") << "bound " << pod;  (the stream is not evaluated when disabled)
#define GPUPACK_LOG(level, component)                                                                 \
  for (bool _gp_once = ::gpupack::LogEnabled(::gpupack::LogLevel::level); _gp_once; _gp_once = false) \
  ::gpupack::LogLine(::gpupack::LogLevel::level, component).stream()

namespace gpupack {
class LogLine {
 public:
  LogLine(LogLevel level, std::string_view component) : level_(level), component_(component) {}
  ~LogLine() { Log(level_, component_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::string_view component_;
  std::ostringstream stream_;
};
}  // namespace gpupack
