#include "webhook/flags.h"

#include "server/http_server.h"

namespace gpupack::webhook {

const char* const kWebhookUsage =
    R"(usage: gpupack-webhook --listen HOST:PORT --tls-cert-file FILE --tls-key-file FILE [--config FILE]

  --listen HOST:PORT     address to serve HTTPS on (":PORT" = all interfaces); port 0 picks
                         a free port. The bound address (HOST:PORT) is printed as the first
                         line on stdout.
  --tls-cert-file FILE   PEM certificate (leaf first, then any intermediates); re-read when it
                         changes, so a rotated Secret is served without a restart
  --tls-key-file FILE    PEM private key of that certificate
  --config FILE          YAML config (docs/webhook.md); defaults apply without one
Endpoints: POST /mutate (AdmissionReview admission.k8s.io/v1), GET /healthz, /readyz, /metrics.
)";

StatusOr<WebhookFlags> ParseWebhookFlags(const std::vector<std::string>& args) {
  WebhookFlags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      f.help = true;
      return f;
    }
    std::string* target = arg == "--listen"          ? &f.listen
                          : arg == "--tls-cert-file" ? &f.tls_cert_file
                          : arg == "--tls-key-file"  ? &f.tls_key_file
                          : arg == "--config"        ? &f.config_path
                                                     : nullptr;
    if (target == nullptr) return Status::InvalidArgument("unknown flag " + arg + "\n" + kWebhookUsage);
    if (i + 1 >= args.size()) return Status::InvalidArgument(arg + " needs a value");
    *target = args[++i];
  }
  if (f.listen.empty() || f.tls_cert_file.empty() || f.tls_key_file.empty()) {
    return Status::InvalidArgument(std::string("--listen, --tls-cert-file and --tls-key-file are required\n") +
                                   kWebhookUsage);
  }
  std::string host;
  int port = 0;
  if (!server::ParseListenAddress(f.listen, &host, &port).ok()) {
    return Status::InvalidArgument("--listen " + f.listen + ": expected HOST:PORT");
  }
  return f;
}

}  // namespace gpupack::webhook
