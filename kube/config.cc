#include "kube/config.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include "common/file.h"

namespace gpupack::kube {
namespace {

StatusOr<std::string> Base64Decode(const std::string& in, std::string_view what) {
  std::string clean;
  for (char c : in) {
    if (c != '\n' && c != '\r' && c != ' ') clean.push_back(c);
  }
  if (clean.size() % 4 != 0) return Status::InvalidArgument(std::string(what) + " is not valid base64");
  std::string out(clean.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(clean.data()), static_cast<int>(clean.size()));
  if (n < 0) return Status::InvalidArgument(std::string(what) + " is not valid base64");
  size_t pad = 0;
  if (!clean.empty() && clean.back() == '=') ++pad;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string Resolve(const std::filesystem::path& base_dir, const std::string& p) {
  std::filesystem::path path(p);
  if (path.is_relative()) path = base_dir / path;
  return path.string();
}

// Reads `<key>-data` (base64) or `<key>` (a file path) from `node`; empty when neither is set.
StatusOr<std::string> DataOrFile(const YAML::Node& node, const std::string& key, const std::filesystem::path& base_dir,
                                 const std::string& where) {
  if (const YAML::Node data = node[key + "-data"]; data && data.IsScalar()) {
    return Base64Decode(data.as<std::string>(), where + "." + key + "-data");
  }
  if (const YAML::Node file = node[key]; file && file.IsScalar()) {
    return ReadFileToString(Resolve(base_dir, file.as<std::string>()), where + "." + key);
  }
  return std::string();
}

// The `field` map of the entry called `name` in a kubeconfig list; nullopt when absent.
std::optional<YAML::Node> FindNamed(const YAML::Node& list, const std::string& name, const std::string& field) {
  if (!list || !list.IsSequence()) return std::nullopt;
  for (const YAML::Node& entry : list) {
    if (entry.IsMap() && entry["name"] && entry["name"].as<std::string>() == name) {
      const YAML::Node value = entry[field];
      if (value && value.IsMap()) return value;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

StatusOr<Config> InClusterConfig(std::string_view sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return Status::FailedPrecondition(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
        "(or pass --kubeconfig)");
  }
  Config config;
  std::string h(host);
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6, like net.JoinHostPort
  config.server = "https://" + h + ":" + port;
  const std::string dir(sa_dir);
  config.token_file = dir + "/token";
  GPUPACK_ASSIGN_OR_RETURN(std::string token, ReadFileToString(config.token_file, "service-account token"));
  (void)token;  // the Client reads it (and re-reads it as it rotates)
  GPUPACK_ASSIGN_OR_RETURN(config.ca_pem, ReadFileToString(dir + "/ca.crt", "service-account CA"));
  if (auto ns = ReadFileToString(dir + "/namespace", "namespace file"); ns.ok() && !ns->empty()) {
    config.default_namespace = *ns;
    while (!config.default_namespace.empty() &&
           std::isspace(static_cast<unsigned char>(config.default_namespace.back()))) {
      config.default_namespace.pop_back();
    }
  }
  return config;
}

StatusOr<Config> LoadKubeconfig(const std::string& path, std::string_view context_name) {
  GPUPACK_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path, "kubeconfig"));
  return ParseKubeconfig(text, path, context_name);
}

StatusOr<Config> ParseKubeconfig(std::string_view yaml_text, const std::string& path, std::string_view context_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("kubeconfig " + path + " is not valid YAML: " + e.what());
  }
  try {
    const std::filesystem::path base_dir = std::filesystem::path(path).parent_path();
    std::string ctx_name(context_name);
    if (ctx_name.empty()) {
      if (!root["current-context"] || root["current-context"].as<std::string>().empty()) {
        return Status::InvalidArgument("kubeconfig " + path + " has no current-context");
      }
      ctx_name = root["current-context"].as<std::string>();
    }
    const std::optional<YAML::Node> found_ctx = FindNamed(root["contexts"], ctx_name, "context");
    if (!found_ctx) return Status::InvalidArgument("kubeconfig " + path + ": context \"" + ctx_name + "\" not found");
    const YAML::Node& ctx = *found_ctx;
    const std::string cluster_name = ctx["cluster"] ? ctx["cluster"].as<std::string>() : "";
    const std::string user_name = ctx["user"] ? ctx["user"].as<std::string>() : "";
    const std::optional<YAML::Node> found_cluster = FindNamed(root["clusters"], cluster_name, "cluster");
    if (!found_cluster) {
      return Status::InvalidArgument("kubeconfig " + path + ": cluster \"" + cluster_name + "\" not found");
    }
    const YAML::Node& cluster = *found_cluster;
    Config config;
    if (!cluster["server"] || cluster["server"].as<std::string>().empty()) {
      return Status::InvalidArgument("kubeconfig " + path + ": cluster \"" + cluster_name + "\" has no server");
    }
    config.server = cluster["server"].as<std::string>();
    const std::string where = "kubeconfig " + path + ": cluster \"" + cluster_name + "\"";
    GPUPACK_ASSIGN_OR_RETURN(config.ca_pem, DataOrFile(cluster, "certificate-authority", base_dir, where));
    if (cluster["insecure-skip-tls-verify"]) {
      config.insecure_skip_tls_verify = cluster["insecure-skip-tls-verify"].as<bool>();
    }
    if (ctx["namespace"]) config.default_namespace = ctx["namespace"].as<std::string>();

    const std::optional<YAML::Node> found_user = FindNamed(root["users"], user_name, "user");
    if (user_name.empty()) return config;  // anonymous
    if (!found_user) return Status::InvalidArgument("kubeconfig " + path + ": user \"" + user_name + "\" not found");
    const YAML::Node& user = *found_user;
    const std::string uwhere = "kubeconfig " + path + ": user \"" + user_name + "\"";
    if (user["exec"] || user["auth-provider"]) {
      return Status::InvalidArgument(uwhere +
                                     " uses an exec or auth-provider plugin, which gpupack does "
                                     "not support; use a token, tokenFile or client certificate");
    }
    GPUPACK_ASSIGN_OR_RETURN(config.client_cert_pem, DataOrFile(user, "client-certificate", base_dir, uwhere));
    GPUPACK_ASSIGN_OR_RETURN(config.client_key_pem, DataOrFile(user, "client-key", base_dir, uwhere));
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      return Status::InvalidArgument(uwhere +
                                     " has a client certificate without a key, or a key without a certificate");
    }
    if (user["token"]) config.token = user["token"].as<std::string>();
    if (user["tokenFile"]) config.token_file = Resolve(base_dir, user["tokenFile"].as<std::string>());
    return config;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("kubeconfig " + path + " has an entry of the wrong type: " + e.what());
  }
}

StatusOr<Config> ConfigFromFlagOrCluster(const std::string& kubeconfig_path) {
  if (!kubeconfig_path.empty()) return LoadKubeconfig(kubeconfig_path);
  return InClusterConfig();
}

}  // namespace gpupack::kube
