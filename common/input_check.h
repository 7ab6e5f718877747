// The checks every gpupack input file shares (the cluster file, the workload file, the extender
// and webhook configs, the agent's file backend), so that each loader refuses the same mistakes
// with the same kind of message: the field path and the line the YAML gives, e.g.
//   line 7: nodes[0].gpus[0].used: 32768 MiB is more than the GPU's memory (16384 MiB)
#pragma once

#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "common/status.h"

namespace gpupack {

// Parses YAML text. InvalidArgument, with the line, for text that is not YAML, for a mapping
// that holds the same key twice (yaml-cpp would keep one of them silently), naming both lines,
// and for a mapping key that is not a scalar (`{}: x`).
StatusOr<YAML::Node> ParseYamlStrict(std::string_view text);

// "line 7: " for a node that came from parsed text, "" for one built in code.
std::string YamlLine(const YAML::Node& at);

// InvalidArgument "line 7: <path>: <message>" (no line when `at` has none).
Status YamlFieldError(const YAML::Node& at, std::string_view path, std::string_view message);

// OK when `name` is a DNS-1123 subdomain, the form of Kubernetes object names (nodes, pods,
// schedulers): at most 253 characters of lowercase letters, digits, '-' and '.', starting and
// ending with a letter or digit. Otherwise InvalidArgument "<path>: \"Bad Name!\" is not ...".
Status CheckDns1123Subdomain(std::string_view name, std::string_view path);

}  // namespace gpupack
