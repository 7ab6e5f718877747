#include "scheduler/extender/flags.h"

#include <utility>

#include "placement/policy.h"

namespace gpupack::extender {

const char* const kExtenderUsage =
    R"(usage: gpupack-extender [--standalone-cluster FILE | --kubeconfig FILE] [--config FILE]
                        [--listen HOST:PORT] [--metrics-listen HOST:PORT] [--policy fgd|binpack|spread]

  --standalone-cluster FILE  no API server: inventory from a cluster file (docs/cluster-file.md),
                             binds recorded in memory
  --kubeconfig FILE          talk to this cluster (default without either flag: the in-cluster
                             service account)
  --config FILE              YAML config (docs/configuration.md); defaults apply without one
  --listen HOST:PORT         verbs and /healthz /readyz /metrics (overrides the config's listen);
                             port 0 picks a free port. The bound HOST:PORT is printed as the first
                             line on stdout.
  --metrics-listen HOST:PORT a second listener with only /healthz /readyz /metrics
  --policy NAME              overrides the config's policy
Verbs: POST {prefix}/filter, /prioritize, /bind, /preempt (kube-scheduler extender v1).
)";

StatusOr<ExtenderFlags> ParseExtenderFlags(const std::vector<std::string>& args) {
  ExtenderFlags f;
  const std::pair<const char*, std::optional<std::string>*> valued[] = {
      {"--standalone-cluster", &f.standalone_cluster},
      {"--kubeconfig", &f.kubeconfig},
      {"--config", &f.config_path},
      {"--listen", &f.listen},
      {"--metrics-listen", &f.metrics_listen},
      {"--policy", &f.policy},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      f.help = true;
      return f;
    }
    std::optional<std::string>* target = nullptr;
    for (const auto& [name, field] : valued) {
      if (arg == name) target = field;
    }
    if (target == nullptr) return Status::InvalidArgument("unknown flag " + arg + "\n" + kExtenderUsage);
    if (i + 1 >= args.size()) return Status::InvalidArgument(arg + " needs a value");
    *target = args[++i];
  }
  if (f.standalone_cluster && f.kubeconfig) {
    return Status::InvalidArgument("--standalone-cluster and --kubeconfig exclude each other");
  }
  return f;
}

StatusOr<ExtenderConfig> ConfigOf(const ExtenderFlags& flags) {
  ExtenderConfig config;
  if (flags.config_path) {
    GPUPACK_ASSIGN_OR_RETURN(config, LoadExtenderConfig(*flags.config_path));
  }
  if (flags.listen) config.listen = *flags.listen;
  if (flags.metrics_listen) config.metrics_listen = *flags.metrics_listen;
  if (flags.policy) {
    StatusOr<model::PolicyKind> kind = placement::ParsePolicyKind(*flags.policy);
    if (!kind.ok()) {
      return Status::InvalidArgument("--policy: expected fgd, binpack or spread, got \"" + *flags.policy + "\"");
    }
    config.policy = *kind;
  }
  return config;
}

}  // namespace gpupack::extender
