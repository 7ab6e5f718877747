// Where the Kubernetes API server is and how to authenticate to it: from the pod's service
// account (in-cluster) or from a kubeconfig file. Plain values; no I/O after loading except the
// token file, which the Client re-reads because service-account tokens rotate.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace gpupack::kube {

struct Config {
  // "https://host:port" or "http://host:port" (plain HTTP only for test servers).
  std::string server;
  // PEM contents of the CA bundle that signs the server's certificate; empty = system store.
  std::string ca_pem;
  // Client-certificate authentication (PEM contents), used when both are set.
  std::string client_cert_pem;
  std::string client_key_pem;
  // Bearer token given literally (kubeconfig `token`).
  std::string token;
  // Bearer token read from this file (in-cluster, kubeconfig `tokenFile`); re-read about once a
  // minute and after every 401. Takes precedence over `token`.
  std::string token_file;
  // Skip server certificate verification. Only when the kubeconfig explicitly asks for it.
  bool insecure_skip_tls_verify = false;
  // The namespace of the current context (kubeconfig) or of the service account (in-cluster).
  std::string default_namespace = "default";
};

// The in-cluster config (client-go rest.InClusterConfig): host from KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, token, CA and namespace from `sa_dir`. Returns FailedPrecondition
// ("not running in a cluster") when either variable is unset, NotFound naming the file when the
// token or CA file is missing.
StatusOr<Config> InClusterConfig(std::string_view sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// Loads a kubeconfig file (YAML). Uses `context` or, when empty, current-context. Understands
// cluster `server`, `certificate-authority[-data]`, `insecure-skip-tls-verify`, user
// `client-certificate[-data]`, `client-key[-data]`, `token`, `tokenFile`, and the context's
// `namespace`. Relative file paths are relative to the kubeconfig's directory. Errors name the
// file and the missing or malformed entry. Exec and auth-provider plugins are not supported and
// are reported as InvalidArgument.
StatusOr<Config> LoadKubeconfig(const std::string& path, std::string_view context = "");
// The same for a kubeconfig's text; `path` names it in errors, and relative file paths in it are
// relative to `path`'s directory.
StatusOr<Config> ParseKubeconfig(std::string_view yaml_text, const std::string& path, std::string_view context = "");

// `--kubeconfig` when given, otherwise in-cluster.
StatusOr<Config> ConfigFromFlagOrCluster(const std::string& kubeconfig_path);

}  // namespace gpupack::kube
