// Reading a whole file, the one copy every loader (cluster file, configs, certificates, kubeconfig,
// /proc) uses.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace gpupack {

// The bytes of the file at `path`, unchanged. NotFound "cannot read <what> <path>: <reason>" when it
// cannot be opened or read; `what` names the file's role for the user ("cluster file", "config
// file"), so the message says which flag or key to fix.
StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what);

}  // namespace gpupack
