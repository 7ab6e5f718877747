// gpupack-webhook: the mutating admission webhook (docs/webhook.md). Parses flags, loads the
// config, serves until SIGTERM or SIGINT, then drains (in-flight reviews finish, idle keep-alive
// connections close).

#include <cstdio>
#include <iostream>
#include <string>

#include "common/build_info.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "server/http_server.h"
#include "webhook/config.h"
#include "webhook/routes.h"

namespace {

constexpr const char* kUsage =
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

int Fail(const std::string& message) { return gpupack::FailStartup("gpupack-webhook", message); }

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupack;
  std::string listen, cert_file, key_file, config_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string* target = arg == "--listen"          ? &listen
                          : arg == "--tls-cert-file" ? &cert_file
                          : arg == "--tls-key-file"  ? &key_file
                          : arg == "--config"        ? &config_path
                                                     : nullptr;
    if (target == nullptr) return Fail("unknown flag " + arg + "\n" + kUsage);
    if (i + 1 >= argc) return Fail(arg + " needs a value");
    *target = argv[++i];
  }
  if (listen.empty() || cert_file.empty() || key_file.empty()) {
    return Fail(std::string("--listen, --tls-cert-file and --tls-key-file are required\n") + kUsage);
  }
  std::string host;
  int port = 0;
  if (!server::ParseListenAddress(listen, &host, &port).ok())
    return Fail("--listen " + listen + ": expected HOST:PORT");
  webhook::Config config;
  if (!config_path.empty()) {
    StatusOr<webhook::Config> loaded = webhook::LoadConfig(config_path);
    if (!loaded.ok()) return Fail(loaded.status().ToString());
    config = *loaded;
  }

  const StopSignals stop_signals;  // before any thread starts

  webhook::WebhookRoutes routes(config, BuildInfo{GPUPACK_VERSION, GPUPACK_REVISION});
  server::HttpServer http(webhook::WebhookServerOptions(config, cert_file, key_file, SystemClock::Instance()));
  routes.Register(http);
  StatusOr<std::string> address = http.Start(listen);
  if (!address.ok()) return Fail(address.status().ToString());
  std::cout << *address << std::endl;
  GPUPACK_LOG(kInfo, "webhook") << "serving AdmissionReviews on " << *address << ", scheduler " << config.scheduler_name
                                << ", failurePolicy " << webhook::FailurePolicyName(config.failure_policy);

  const int signal_number = stop_signals.Wait();
  GPUPACK_LOG(kInfo, "webhook") << "signal " << signal_number << ": draining";
  http.Drain();
  return 0;
}
