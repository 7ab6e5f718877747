// Reading a whole file, the one copy every loader (cluster file, configs, certificates, kubeconfig,
// /proc) uses.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace gpupack {

// The bytes of the file at `path`, unchanged. NotFound "cannot read <what> <path>: <reason>" when it
// cannot be opened or read; `what` names the file's role for the user ("cluster file", "config
// file"), so the message says which flag or key to fix.
// InvalidArgument "... larger than 256 MiB" past kMaxFileBytes: every file gpupack reads is far
// smaller, and a path that names a device or a runaway file (/dev/zero, a log) must not grow the
// process until it is killed.
inline constexpr size_t kMaxFileBytes = size_t{256} << 20;
StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what);

}  // namespace gpupack
