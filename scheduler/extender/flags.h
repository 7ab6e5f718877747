// gpupack-extender's command line (docs/extender.md, docs/configuration.md): the flags, their
// parser and how they override the config file, apart from the main so that each rule has a unit
// test.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/extender/config.h"

namespace gpupack::extender {

extern const char* const kExtenderUsage;

// A flag not given is nullopt, told apart from one given empty: --config "" is refused when
// read, not taken for the defaults.
struct ExtenderFlags {
  bool help = false;  // --help / -h: print kExtenderUsage, exit 0
  std::optional<std::string> standalone_cluster;
  std::optional<std::string> kubeconfig;
  std::optional<std::string> config_path;
  std::optional<std::string> listen;
  std::optional<std::string> metrics_listen;
  std::optional<std::string> policy;  // checked by ConfigOf, after the config file
};

// `args` without the program name. On failure the status message is what the main prints after
// "gpupack-extender: " (usage included where the flag is unknown).
StatusOr<ExtenderFlags> ParseExtenderFlags(const std::vector<std::string>& args);

// The config --config names (the defaults without one), with --listen, --metrics-listen and
// --policy put over it. Errors are the config file's, or --policy's naming the values it takes.
StatusOr<ExtenderConfig> ConfigOf(const ExtenderFlags& flags);

}  // namespace gpupack::extender
