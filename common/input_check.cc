#include "common/input_check.h"

#include <map>

namespace gpupack {
namespace {

// The first mapping, depth first, that holds a key twice or a key that is not a scalar (`{}: x`,
// `[a]: x`: no gpupack file has one, and every loader reads keys as strings, which yaml-cpp
// answers for a non-scalar by throwing).
Status CheckKeys(const YAML::Node& node) {
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) GPUPACK_RETURN_IF_ERROR(CheckKeys(item));
  } else if (node.IsMap()) {
    std::map<std::string, int> first_line;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        return Status::InvalidArgument(YamlLine(kv.first) + "a mapping key must be a plain string, not a " +
                                       (kv.first.IsMap()        ? "mapping"
                                        : kv.first.IsSequence() ? "list"
                                                                : "null"));
      }
      const std::string key = kv.first.Scalar();
      auto [it, fresh] = first_line.emplace(key, kv.first.Mark().line + 1);
      if (!fresh) {
        return Status::InvalidArgument(YamlLine(kv.first) + "key \"" + key +
                                       "\" appears twice in one mapping (first on line " + std::to_string(it->second) +
                                       ")");
      }
      GPUPACK_RETURN_IF_ERROR(CheckKeys(kv.second));
    }
  }
  return Status::Ok();
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

StatusOr<YAML::Node> ParseYamlStrict(std::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("line " + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  GPUPACK_RETURN_IF_ERROR(CheckKeys(root));
  return root;
}

std::string YamlLine(const YAML::Node& at) {
  if (!at.IsDefined()) return "";
  const YAML::Mark mark = at.Mark();
  if (mark.is_null() || mark.line < 0) return "";
  return "line " + std::to_string(mark.line + 1) + ": ";
}

Status YamlFieldError(const YAML::Node& at, std::string_view path, std::string_view message) {
  return Status::InvalidArgument(YamlLine(at) + std::string(path) + ": " + std::string(message));
}

Status CheckDns1123Subdomain(std::string_view name, std::string_view path) {
  bool ok = !name.empty() && name.size() <= 253 && IsLowerAlnum(name.front()) && IsLowerAlnum(name.back());
  for (char c : name) ok = ok && (IsLowerAlnum(c) || c == '-' || c == '.');
  if (ok) return Status::Ok();
  return Status::InvalidArgument(std::string(path) + ": \"" + std::string(name) +
                                 "\" is not a valid Kubernetes name (a DNS-1123 subdomain: at most 253 lowercase "
                                 "letters, digits, '-' and '.', starting and ending with a letter or digit)");
}

}  // namespace gpupack
